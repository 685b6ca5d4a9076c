/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The settings table (src/config.c) from the inside: its parser against
 * octal, hexadecimal, overflow of the number and of the suffix product,
 * and ranges, with the exact messages; the table against rmx_config_t and
 * against docs/tuning.md's reference, which it generates:
 *   test_settings --markdown   prints the reference table
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "config.h"

/* Parses @p text as @p env's value: the value, or UINT64_MAX and @p msg. */
static uint64_t parse(const char *env, const char *text, char *msg)
{
  const rmx__setting_t *s = rmx__setting_find(env);
  uint64_t x = 0;
  assert_non_null(s);
  msg[0] = '\0';
  if (rmx__setting_parse(s, text, &x, msg, 256) != 0) {
    assert_true(msg[0] != '\0');
    return UINT64_MAX;
  }
  assert_true(msg[0] == '\0');
  return x;
}

#define REFUSED(env, text, want)                          \
  do {                                                    \
    char m_[256];                                         \
    assert_true(parse(env, text, m_) == UINT64_MAX);      \
    assert_string_equal(m_, want);                        \
  } while (0)

/* A leading zero is decimal, never octal; 0x and other notations are refused. */
static void numbers_are_decimal(void **state)
{
  char m[256];
  assert_int_equal(parse("RMX_RX_DEPTH", "010", m), 10);
  assert_int_equal(parse("RMX_RX_DEPTH", "0008", m), 8);
  assert_int_equal(parse("RMX_RNR_RETRY", "0", m), 0);
  assert_int_equal(parse("RMX_EAGER_SIZE", "0400", m), 400);
  REFUSED("RMX_RX_DEPTH", "0x10", "RMX_RX_DEPTH=0x10 is not a decimal number");
  REFUSED("RMX_RX_DEPTH", "+16", "RMX_RX_DEPTH=+16 is not a decimal number");
  REFUSED("RMX_RX_DEPTH", " 16", "RMX_RX_DEPTH= 16 is not a decimal number");
  REFUSED("RMX_RX_DEPTH", "16 ", "RMX_RX_DEPTH=16  is not a decimal number");
  REFUSED("RMX_RX_DEPTH", "1e3", "RMX_RX_DEPTH=1e3 is not a decimal number");
  REFUSED("RMX_RX_DEPTH", "-", "RMX_RX_DEPTH=- is not a decimal number");
  /* Suffixes are for byte sizes only. */
  REFUSED("RMX_RX_DEPTH", "1K", "RMX_RX_DEPTH=1K is not a decimal number");
  REFUSED("RMX_EAGER_SIZE", "0x100",
          "RMX_EAGER_SIZE=0x100 is not a decimal number (a K, M, G or T suffix may follow it)");
  /* A space after a size is no suffix (' ' & ~0x20 is the NUL strchr finds). */
  REFUSED("RMX_MAX_MSG_SIZE", "64 ",
          "RMX_MAX_MSG_SIZE=64  is not a decimal number (a K, M, G or T suffix may follow it)");
  REFUSED("RMX_EAGER_SIZE", "1K ",
          "RMX_EAGER_SIZE=1K  is not a decimal number (a K, M, G or T suffix may follow it)");
  REFUSED("RMX_EAGER_SIZE", "4KB",
          "RMX_EAGER_SIZE=4KB is not a decimal number (a K, M, G or T suffix may follow it)");
}

static void suffixes_multiply(void **state)
{
  char m[256];
  assert_int_equal(parse("RMX_EAGER_SIZE", "4k", m), 4096);
  assert_int_equal(parse("RMX_EAGER_SIZE", "1M", m), 1u << 20);
  assert_int_equal(parse("RMX_MAX_MSG_SIZE", "3G", m), 3ull << 30);
  assert_int_equal(parse("RMX_MAX_MSG_SIZE", "1T", m), 1ull << 40);
  assert_int_equal(parse("RMX_MAX_MSG_SIZE", "1024G", m), 1ull << 40);
}

/* Past 64 bits, by the digits or by the suffix: out of range, never wrapped
 * (17179869185G wrapped is 1 GiB, which would be in range). */
static void overflow_is_out_of_range(void **state)
{
  REFUSED("RMX_MAX_MSG_SIZE", "17179869185G",
          "RMX_MAX_MSG_SIZE=17179869185G is out of range: 1 .. 1099511627776");
  REFUSED("RMX_MAX_MSG_SIZE", "17179869184G", /* exactly 2^64: wraps to 0 */
          "RMX_MAX_MSG_SIZE=17179869184G is out of range: 1 .. 1099511627776");
  REFUSED("RMX_MAX_MSG_SIZE", "16777217T",
          "RMX_MAX_MSG_SIZE=16777217T is out of range: 1 .. 1099511627776");
  REFUSED("RMX_MAX_MSG_SIZE", "18446744073709551616", /* 2^64 */
          "RMX_MAX_MSG_SIZE=18446744073709551616 is out of range: 1 .. 1099511627776");
  REFUSED("RMX_MAX_MSG_SIZE", "18446744073709551621", /* 2^64 + 5: wrapped, 5 */
          "RMX_MAX_MSG_SIZE=18446744073709551621 is out of range: 1 .. 1099511627776");
  REFUSED("RMX_MAX_MSG_SIZE", "36893488147419103233", /* 2^65 + 1: wrapped, 1 */
          "RMX_MAX_MSG_SIZE=36893488147419103233 is out of range: 1 .. 1099511627776");
  REFUSED("RMX_MAX_MSG_SIZE", "99999999999999999999999999",
          "RMX_MAX_MSG_SIZE=99999999999999999999999999 is out of range: 1 .. 1099511627776");
  /* 4-byte fields: a value past 32 bits is out of range, not truncated. */
  REFUSED("RMX_RX_DEPTH", "4294967360", "RMX_RX_DEPTH=4294967360 is out of range: 4 .. 16384");
  REFUSED("RMX_EAGER_SIZE", "4194304K", "RMX_EAGER_SIZE=4194304K is out of range: 256 .. 1048576");
}

static void ranges_are_worded_as_ranges(void **state)
{
  char m[256];
  REFUSED("RMX_EAGER_SIZE", "100", "RMX_EAGER_SIZE=100 is out of range: 256 .. 1048576");
  REFUSED("RMX_EAGER_SIZE", "-5", "RMX_EAGER_SIZE=-5 is out of range: 256 .. 1048576");
  REFUSED("RMX_RC_RETRY", "7", "RMX_RC_RETRY=7 is out of range: 0 .. 6");
  REFUSED("RMX_KEEPALIVE_TIMEOUT_MS", "99",
          "RMX_KEEPALIVE_TIMEOUT_MS=99 is out of range: 100 .. 86400000");
  assert_int_equal(parse("RMX_EAGER_SIZE", "256", m), 256);
  assert_int_equal(parse("RMX_EAGER_SIZE", "1048576", m), 1048576);
  assert_int_equal(parse("RMX_LOG", "DeBuG", m), RMX_LOG_DEBUG);
  REFUSED("RMX_PROGRESS", "busy", "RMX_PROGRESS=busy is not one of: event, poll, adaptive");
}

/* The rules between fields name both settings. */
static void rules_between_fields(void **state)
{
  rmx_config_t cfg;
  assert_int_equal(rmx__config_env(&cfg, NULL, 1), 0);
  assert_int_equal(rmx__config_check(&cfg), 0);
  cfg.log_level = RMX_LOG_NONE; /* nothing logged, the result the same */
  cfg.keepalive_ms = 20000;
  assert_int_equal(rmx__config_check(&cfg), RMX_EINVAL);
  cfg.keepalive_timeout_ms = 20000;
  assert_int_equal(rmx__config_check(&cfg), 0);
  cfg.keepalive_ms = 0; /* no checks: any timeout */
  cfg.keepalive_timeout_ms = 100;
  assert_int_equal(rmx__config_check(&cfg), 0);
}

/* Every field of rmx_config_t but size is in the table, once, with a
 * default in its range; the variables are the RMX_ names. */
static void table_covers_the_struct(void **state)
{
  unsigned char covered[sizeof(rmx_config_t)] = {0};
  size_t n = 0;
  for (size_t i = 0; i < rmx__nsettings; i++) {
    const rmx__setting_t *s = &rmx__settings[i];
    assert_true(strncmp(s->env, "RMX_", 4) == 0);
    assert_ptr_equal(rmx__setting_find(s->env), s);
    assert_true(strlen(s->desc) > 20);
    assert_true(s->offset + s->width <= sizeof(rmx_config_t));
    for (unsigned b = 0; b < s->width; b++) {
      assert_int_equal(covered[s->offset + b], 0);
      covered[s->offset + b] = 1;
      n++;
    }
    if (s->type <= RMX__SET_WORD)
      assert_true(s->min <= s->def && s->def <= s->max);
  }
  /* size, and the 4 bytes of padding before max_msg_size: nothing else up
   * to the last field (shm_copy); after it, only the struct's tail
   * padding. */
  size_t end = offsetof(rmx_config_t, shm_copy) + sizeof(((rmx_config_t *)0)->shm_copy);
  assert_int_equal(n + sizeof(uint32_t) + 4, end);
  assert_true(sizeof(rmx_config_t) - end < 8);
}

/* docs/tuning.md holds the reference table this code generates. */
static void tuning_md_matches_the_table(void **state)
{
  static const char begin[] = "<!-- settings table: begin", end[] = "<!-- settings table: end -->";
  FILE *f = fopen(RMX_SOURCE_DIR "/docs/tuning.md", "r");
  assert_non_null(f);
  static char doc[65536];
  size_t len = fread(doc, 1, sizeof(doc) - 1, f);
  fclose(f);
  doc[len] = '\0';
  char *a = strstr(doc, begin), *b = strstr(doc, end);
  assert_non_null(a);
  assert_non_null(b);
  a = strchr(a, '\n') + 1;
  *b = '\0';

  char *gen = NULL;
  size_t glen = 0;
  FILE *m = open_memstream(&gen, &glen);
  rmx__config_markdown(m);
  fclose(m);
  if (strcmp(a, gen) != 0)
    print_error("docs/tuning.md's settings table differs from src/config.c: regenerate it "
                "with 'test_settings --markdown'\n");
  assert_string_equal(a, gen);
  free(gen);
}

int main(int argc, char **argv)
{
  if (argc == 2 && strcmp(argv[1], "--markdown") == 0) {
    rmx__config_markdown(stdout);
    return 0;
  }
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(numbers_are_decimal),
    cmocka_unit_test(suffixes_multiply),
    cmocka_unit_test(overflow_is_out_of_range),
    cmocka_unit_test(ranges_are_worded_as_ranges),
    cmocka_unit_test(rules_between_fields),
    cmocka_unit_test(table_covers_the_struct),
    cmocka_unit_test(tuning_md_matches_the_table),
  };
  return cmocka_run_group_tests_name("settings", tests, NULL, NULL);
}
