/* SPDX-License-Identifier: BSD-3-Clause */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "rmx_int.h"

static void parses_valid(void **state)
{
  rmx__uri_t u;
  assert_int_equal(rmx__uri_parse("tcp://127.0.0.1:7471", &u), 0);
  assert_string_equal(u.scheme, "tcp");
  assert_string_equal(u.host, "127.0.0.1");
  assert_string_equal(u.port, "7471");

  assert_int_equal(rmx__uri_parse("rdma://node-7.example", &u), 0);
  assert_string_equal(u.scheme, "rdma");
  assert_string_equal(u.host, "node-7.example");
  assert_string_equal(u.port, "7471"); /* the default */

  assert_int_equal(rmx__uri_parse("auto://[::1]:0", &u), 0);
  assert_string_equal(u.scheme, "auto");
  assert_string_equal(u.host, "::1");
  assert_string_equal(u.port, "0");

  assert_int_equal(rmx__uri_parse("tcp://[fe80::1%eth0]:65535", &u), 0);
  assert_string_equal(u.host, "fe80::1%eth0");
  assert_string_equal(u.port, "65535");
}

static void rejects_invalid(void **state)
{
  static const char *const bad[] = {
    "", "127.0.0.1:7471", "tcp:/127.0.0.1:1", "://h:1", "TCP://h:1", "t-p://h:1",
    "averyveryverylongscheme://h:1",
    "tcp://", "tcp://:7471", "tcp://h:", "tcp://h:65536", "tcp://h:99999999",
    "tcp://h:12a", "tcp://h:1/path", "tcp://[::1", "tcp://[::1]x", "tcp://h]:1",
    "tcp://[]:1", "tcp://h:-1",
  };
  rmx__uri_t u;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if (rmx__uri_parse(bad[i], &u) != RMX_EINVAL)
      fail_msg("accepted '%s'", bad[i]);
  }
  assert_int_equal(rmx__uri_parse(NULL, &u), RMX_EINVAL);

  char longhost[400] = "tcp://";
  memset(longhost + 6, 'a', 300);
  assert_int_equal(rmx__uri_parse(longhost, &u), RMX_EINVAL);
  assert_string_equal(u.why, "the host is longer than 255 bytes");
}

/* A refusal says which part is wrong. */
static void says_which_part(void **state)
{
  static const struct {
    const char *uri, *why;
  } cases[] = {
    {"127.0.0.1:7471", "no \"://\" after the scheme"},
    {"://h:1", "no scheme before \"://\""},
    {"TCP://h:1", "the scheme is not lower-case letters and digits (at most 15)"},
    {"tcp://:7471", "no host"},
    {"tcp://[::1", "an IPv6 address without its closing ']'"},
    {"tcp://h]:1", "a ']' in the host without its '['"},
    {"tcp://h:", "the port is not a number"},
    {"tcp://h:12a", "the port is not a number"},
    {"tcp://h:99999", "the port is over 65535"},
    {"tcp://h:1/path", "a path after the port: rmx URIs end at the port"},
    {"tcp://h/path", "something after the host that is not \":PORT\""},
  };
  rmx__uri_t u;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    assert_int_equal(rmx__uri_parse(cases[i].uri, &u), RMX_EINVAL);
    if (strcmp(u.why, cases[i].why) != 0)
      fail_msg("'%s': \"%s\", not \"%s\"", cases[i].uri, u.why, cases[i].why);
  }
  assert_int_equal(rmx__uri_parse("tcp://h:1", &u), 0);
  assert_null(u.why);
}

/* Which schemes exist is the registry's: the URI only has to be well formed. */
static void schemes_come_from_the_registry(void **state)
{
  rmx__uri_t u;
  int slot;
  const char *why = NULL;
  assert_int_equal(rmx__uri_parse("udp://127.0.0.1:1", &u), 0);
  assert_int_equal(rmx__tp_lookup(u.scheme, &slot, &why), RMX_EINVAL);
  assert_int_equal(rmx__tp_lookup("tcp", &slot, &why), 0);
  assert_string_equal(rmx__tp_ops(slot)->name, "tcp");
  int rc = rmx__tp_lookup("rdma", &slot, &why);
  if (rc == 0)
    assert_string_equal(rmx__tp_ops(slot)->name, "rdma");
  else
    assert_true(rc == RMX_ENOTSUP && why != NULL);
  assert_int_equal(rmx__tp_lookup("auto", &slot, &why), RMX_EINVAL); /* not a slot */
  /* RMX_TRANSPORTS: the default order, a chosen one, one required, and
   * what is refused */
  int slots[RMX_TP_COUNT], req = -1;
  assert_int_equal(rmx__tp_order("", slots, &req, &why), 3);
  assert_string_equal(rmx__tp_ops(slots[0])->name, "shm");
  assert_int_equal(req, 0);
  assert_string_equal(rmx__tp_ops(slots[2])->name, "tcp"); /* the fallback */
  assert_int_equal(rmx__tp_order("tcp,shm", slots, &req, &why), 2);
  assert_string_equal(rmx__tp_ops(slots[0])->name, "tcp");
  assert_string_equal(rmx__tp_ops(slots[1])->name, "shm");
  assert_int_equal(rmx__tp_order("tcp!", slots, &req, &why), 1);
  assert_int_equal(req, 1);
  static const char *const bad[] = {"tcp,tcp", "udp", "tcp,", "rdma!,tcp", "tcp,shm!", ",tcp",
                                    "tcp;shm"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    why = NULL;
    assert_int_equal(rmx__tp_order(bad[i], slots, &req, &why), RMX_EINVAL);
    assert_non_null(why);
  }
}

/* shm://NAME: a path or an abstract name, no port */
static void socket_names(void **state)
{
  rmx__uri_t u;
  struct sockaddr_storage ss;
  assert_int_equal(rmx__uri_parse("shm://@svc", &u), 0);
  assert_string_equal(u.host, "@svc");
  assert_string_equal(u.port, "");
  assert_int_equal(rmx__uri_unix(u.host, &ss), 0);
  assert_int_equal(ss.ss_family, AF_UNIX);
  assert_int_equal(((struct sockaddr_un *)&ss)->sun_path[0], '\0');
  assert_string_equal(((struct sockaddr_un *)&ss)->sun_path + 1, "svc");
  assert_int_equal(rmx__uri_parse("shm:///run/a:b/sock", &u), 0); /* colons are the name's */
  assert_string_equal(u.host, "/run/a:b/sock");
  assert_int_equal(rmx__uri_unix(u.host, &ss), 0);
  assert_string_equal(((struct sockaddr_un *)&ss)->sun_path, "/run/a:b/sock");
  char buf[64];
  assert_string_equal(rmx__sa_str((struct sockaddr *)&ss, buf, sizeof(buf)), "/run/a:b/sock");
  /* HOST:PORT is not a name (it would be a file of that name in the
   * working directory); a relative path that has a colon says ./ */
  assert_int_equal(rmx__uri_parse("shm://127.0.0.1:7471", &u), RMX_EINVAL);
  assert_int_equal(rmx__uri_parse("shm://[::1]:0", &u), RMX_EINVAL);
  assert_int_equal(rmx__uri_parse("shm://./a:b", &u), 0);
  assert_int_equal(rmx__uri_parse("shm://sock", &u), 0);
  assert_int_equal(rmx__uri_parse("shm://", &u), RMX_EINVAL);
  assert_int_equal(rmx__uri_parse("shm://@", &u), RMX_EINVAL);
  char longname[200] = "shm://@";
  memset(longname + 7, 'x', 107);
  assert_int_equal(rmx__uri_parse(longname, &u), RMX_EINVAL); /* 108 bytes with the @ */
  longname[7 + 106] = '\0';
  assert_int_equal(rmx__uri_parse(longname, &u), 0);
}

static void errors_have_names(void **state)
{
  assert_string_equal(rmx_err_name(RMX_ECONNRESET), "RMX_ECONNRESET");
  assert_string_equal(rmx_err_name(RMX_EVERSION), "RMX_EVERSION");
  assert_string_equal(rmx_err_name(0), "RMX_OK");
  assert_string_equal(rmx_strerror(RMX_EMSGSIZE), "message larger than the configured maximum");
  assert_string_equal(rmx_strerror(-12345), "unknown error");
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(parses_valid),
    cmocka_unit_test(rejects_invalid),
    cmocka_unit_test(says_which_part),
    cmocka_unit_test(schemes_come_from_the_registry),
    cmocka_unit_test(socket_names),
    cmocka_unit_test(errors_have_names),
  };
  return cmocka_run_group_tests_name("uri", tests, NULL, NULL);
}
