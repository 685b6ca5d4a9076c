/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The metadata service's codec (src/meta/codec.c): base64 as etcd's JSON
 * gateway writes it, agent and memory names, keys under the prefix, and
 * int64 members written as strings or numbers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "meta/meta.h"

static void base64_round_trips(void **state)
{
  static const struct {
    const char *plain, *enc;
  } v[] = {{"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},
           {"foo", "Zm9v"},  {"foob", "Zm9vYg=="},  {"fooba", "Zm9vYmE="},
           {"foobar", "Zm9vYmFy"}, {"/rmx/mem/a/b", "L3JteC9tZW0vYS9i"}};
  for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
    char *e = rmx__b64_enc(v[i].plain, strlen(v[i].plain));
    assert_string_equal(e, v[i].enc);
    size_t n = 99;
    char *d = rmx__b64_dec(e, &n);
    assert_non_null(d);
    assert_int_equal(n, strlen(v[i].plain));
    assert_memory_equal(d, v[i].plain, n);
    assert_int_equal(d[n], '\0');
    free(e);
    free(d);
  }
  /* Every byte value, through every padding. */
  unsigned char all[256];
  for (int i = 0; i < 256; i++)
    all[i] = (unsigned char)i;
  for (size_t len = 250; len <= 256; len++) {
    char *e = rmx__b64_enc(all, len);
    size_t n;
    char *d = rmx__b64_dec(e, &n);
    assert_int_equal(n, len);
    assert_memory_equal(d, all, len);
    free(e);
    free(d);
  }
}

static void base64_refuses_garbage(void **state)
{
  size_t n;
  static const char *const bad[] = {"Z", "Zm9v!", "Zm 9v", "Zm9vY", "Zm-v", "\xff\xfe"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_null(rmx__b64_dec(bad[i], &n));
}

/* max - 1 bytes pass (the NUL makes max), max bytes do not. */
static void at_limit(int (*ok)(const char *), size_t max)
{
  char s[RMX_NAME_MAX + RMX_META_AGENT_MAX];
  memset(s, 'a', max + 1);
  s[max - 1] = '\0';
  assert_true(ok(s));
  s[max - 1] = 'a';
  s[max] = '\0';
  assert_false(ok(s));
}

static void names(void **state)
{
  assert_true(rmx__meta_agent_ok("kv0"));
  assert_true(rmx__meta_agent_ok("node-7.rack_2"));
  assert_false(rmx__meta_agent_ok(""));
  assert_false(rmx__meta_agent_ok(NULL));
  assert_false(rmx__meta_agent_ok("a/b"));
  assert_false(rmx__meta_agent_ok("a b"));
  assert_false(rmx__meta_agent_ok("a\tb"));
  assert_false(rmx__meta_agent_ok("caf\xc3\xa9"));
  at_limit(rmx__meta_agent_ok, RMX_META_AGENT_MAX);
  assert_true(rmx__meta_name_ok("layer3/kv"));
  assert_true(rmx__meta_name_ok("a name"));
  assert_false(rmx__meta_name_ok(""));
  assert_false(rmx__meta_name_ok("a\nb"));
  at_limit(rmx__meta_name_ok, RMX_NAME_MAX);
}

static void keys_and_ints(void **state)
{
  rmx_meta_t m = {.prefix = "/rmx/"};
  char *k = rmx__meta_key(&m, "mem/", "kv0", "/", "layer3/kv");
  assert_string_equal(k, "/rmx/mem/kv0/layer3/kv");
  free(k);
  k = rmx__meta_key(&m, "agents/", "kv0", NULL, NULL);
  assert_string_equal(k, "/rmx/agents/kv0");
  free(k);
  json_object *o = json_tokener_parse(
      "{\"ID\":\"7587861234567890123\",\"TTL\":5,\"bad\":\"12x\",\"f\":1.5}");
  assert_true(rmx__meta_int(o, "ID", 0) == INT64_C(7587861234567890123));
  assert_int_equal(rmx__meta_int(o, "TTL", 0), 5);
  assert_int_equal(rmx__meta_int(o, "bad", -1), -1);
  assert_int_equal(rmx__meta_int(o, "f", -1), -1);
  assert_int_equal(rmx__meta_int(o, "none", -2), -2);
  assert_int_equal(rmx__meta_int(NULL, "ID", -3), -3);
  json_object_put(o);
  o = json_object_new_object();
  assert_int_equal(rmx__meta_add_b64(o, "key", "foo"), 0);
  char *t = rmx__meta_text(o);
  assert_string_equal(t, "{\"key\":\"Zm9v\"}");
  free(t);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(base64_round_trips),
    cmocka_unit_test(base64_refuses_garbage),
    cmocka_unit_test(names),
    cmocka_unit_test(keys_and_ints),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
