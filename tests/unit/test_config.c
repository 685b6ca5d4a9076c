/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Configuration as callers meet it: the size rule of rmx_config_t, every
 * environment value validated with a message that says what is accepted,
 * a configuration set in code checked with a line naming the field(s),
 * unknown RMX_* variables warned about (not under RMX_LOG=none), log lines
 * routed to the application's handler, and rmx_config_print. Public API
 * only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <rmx/rmx.h>

#define NSETTINGS 33 /* src/config.c's table */

/* Log lines caught by the handler. */
static char lines[16][512];
static int nlines, nerrors;

static void catch_line(rmx_log_level_t level, const char *line, void *arg)
{
  if (nlines < 16)
    snprintf(lines[nlines++], sizeof(lines[0]), "%s", line);
  nerrors += level == RMX_LOG_ERROR;
  *(int *)arg += 1;
}

static int caught(const char *needle)
{
  for (int i = 0; i < nlines; i++)
    if (strstr(lines[i], needle))
      return 1;
  return 0;
}

static int calls;

static int catch_logs(void **state)
{
  nlines = nerrors = calls = 0;
  rmx_log_set_handler(catch_line, &calls);
  return 0;
}

static int stderr_logs(void **state)
{
  rmx_log_set_handler(NULL, NULL);
  return 0;
}

/* The caller's struct carries its size; the library takes what it knows. */
static void size_is_checked(void **state)
{
  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  assert_int_equal(rmx_config_init(&cfg), 0);
  assert_int_equal(cfg.size, sizeof(cfg));
  assert_int_equal(cfg.regcache, 1);
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), 0);
  assert_int_equal(rmx_ctx_destroy(ctx), 0);

  rmx_config_t zeroed;
  memset(&zeroed, 0, sizeof(zeroed)); /* never through rmx_config_init */
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &zeroed), RMX_EINVAL);
  assert_true(caught("not filled by rmx_config_init"));

  cfg.size = sizeof(cfg) + 8; /* a newer header than this library */
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), RMX_EINVAL);
  assert_true(caught("newer rmx"));
  cfg.size = sizeof(cfg);
  cfg.regcache = 2;
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), RMX_EINVAL);
  cfg.regcache = 1;
  cfg.spin_us = 0;
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), RMX_EINVAL);

  /* A caller built before spin_us existed: its garbage there is not read. */
  cfg.size = offsetof(rmx_config_t, spin_us);
  cfg.progress = RMX_PROGRESS_ADAPTIVE;
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), 0);
  assert_int_equal(rmx_ctx_destroy(ctx), 0);
}

/* A word variable lists what it accepts; RMX_REGCACHE is 0 or 1. */
static void env_values_are_validated(void **state)
{
  rmx_config_t cfg;
  setenv("RMX_LOG", "loud", 1);
  assert_int_equal(rmx_config_init(&cfg), RMX_EINVAL);
  unsetenv("RMX_LOG");
  assert_true(caught("RMX_LOG=loud is not one of: none, error, warn, info, debug, trace"));

  setenv("RMX_REGCACHE", "maybe", 1);
  assert_int_equal(rmx_config_init(&cfg), RMX_EINVAL);
  assert_true(caught("RMX_REGCACHE=maybe"));
  setenv("RMX_REGCACHE", "0", 1);
  assert_int_equal(rmx_config_init(&cfg), 0);
  assert_int_equal(cfg.regcache, 0);
  unsetenv("RMX_REGCACHE");

  setenv("RMX_EAGER_SIZE", "-5", 1);
  assert_int_equal(rmx_config_init(&cfg), RMX_EINVAL);
  unsetenv("RMX_EAGER_SIZE");
  assert_true(caught("RMX_EAGER_SIZE=-5 is out of range: 256 .. 1048576"));

  setenv("RMX_PROGRESS", "adaptive", 1);
  setenv("RMX_SPIN_US", "250", 1);
  assert_int_equal(rmx_config_init(&cfg), 0);
  assert_int_equal(cfg.progress, RMX_PROGRESS_ADAPTIVE);
  assert_int_equal(cfg.spin_us, 250);
  setenv("RMX_SPIN_US", "0", 1);
  assert_int_equal(rmx_config_init(&cfg), RMX_EINVAL);
  assert_true(caught("RMX_SPIN_US=0 is out of range: 1 .. 1000000"));
  unsetenv("RMX_SPIN_US");
  unsetenv("RMX_PROGRESS");

  assert_int_equal(cfg.key_scope, RMX_KEY_SCOPE_AUTO);
  setenv("RMX_KEY_SCOPE", "pd", 1);
  assert_int_equal(rmx_config_init(&cfg), 0);
  assert_int_equal(cfg.key_scope, RMX_KEY_SCOPE_PD);
  setenv("RMX_KEY_SCOPE", "window", 1);
  assert_int_equal(rmx_config_init(&cfg), RMX_EINVAL);
  assert_true(caught("RMX_KEY_SCOPE=window"));
  unsetenv("RMX_KEY_SCOPE");
  assert_int_equal(nerrors, 5); /* one line each, at error level */
}

/* main() set RMX_EAGERSIZE, RMX_BOGUS and RMX_TEST_ANYTHING before the
 * first rmx_config_init of the process: two warnings, once, with a
 * suggestion for the typo; RMX_TEST_* is the tests' own. */
static void unknown_variables_are_named(void **state)
{
  rmx_config_t cfg;
  assert_int_equal(rmx_config_init(&cfg), 0);
  assert_true(caught("RMX_EAGERSIZE is not an rmx setting (did you mean RMX_EAGER_SIZE?)"));
  assert_true(caught("RMX_BOGUS is not an rmx setting"));
  assert_false(caught("RMX_TEST_ANYTHING"));
  int before = nlines;
  assert_int_equal(rmx_config_init(&cfg), 0);
  assert_int_equal(nlines, before); /* once per process */
}

/* The environment as rmx_config_init reads it: decimal, no wrap-around,
 * rules between settings, RMX_DEVICE whole or refused. */
static void env_exact_messages(void **state)
{
  rmx_config_t cfg;
  setenv("RMX_RX_DEPTH", "010", 1);
  assert_int_equal(rmx_config_init(&cfg), 0);
  assert_int_equal(cfg.rx_depth, 10); /* not octal 8 */
  unsetenv("RMX_RX_DEPTH");

  setenv("RMX_MAX_MSG_SIZE", "17179869185G", 1);
  assert_int_equal(rmx_config_init(&cfg), RMX_EINVAL);
  assert_int_equal(cfg.max_msg_size, 64u << 20); /* not 1 GiB wrapped */
  unsetenv("RMX_MAX_MSG_SIZE");
  assert_true(caught("RMX_MAX_MSG_SIZE=17179869185G is out of range: 1 .. 1099511627776"));

  setenv("RMX_KEEPALIVE_MS", "20000", 1);
  assert_int_equal(rmx_config_init(&cfg), RMX_EINVAL);
  assert_true(caught("RMX_KEEPALIVE_TIMEOUT_MS=10000 (keepalive_timeout_ms) is less than "
                     "RMX_KEEPALIVE_MS=20000 (keepalive_ms): the peer would be declared lost "
                     "between two keepalives (RMX_KEEPALIVE_MS=0 turns the checks off)"));
  setenv("RMX_KEEPALIVE_TIMEOUT_MS", "20000", 1);
  assert_int_equal(rmx_config_init(&cfg), 0);
  unsetenv("RMX_KEEPALIVE_TIMEOUT_MS");
  unsetenv("RMX_KEEPALIVE_MS");

  char dev[80];
  memset(dev, 'd', 64);
  dev[64] = '\0';
  setenv("RMX_DEVICE", dev, 1);
  assert_int_equal(rmx_config_init(&cfg), RMX_EINVAL);
  assert_string_equal(cfg.device, ""); /* not its first 63 bytes */
  char want[160];
  snprintf(want, sizeof(want), "RMX_DEVICE=%s is 64 bytes long: at most 63", dev);
  assert_true(caught(want));
  dev[63] = '\0';
  setenv("RMX_DEVICE", dev, 1);
  assert_int_equal(rmx_config_init(&cfg), 0);
  assert_string_equal(cfg.device, dev);
  unsetenv("RMX_DEVICE");
  assert_int_equal(nerrors, 3);
}

/* A configuration set in code: rmx_ctx_create names the field(s). */
static void code_config_is_checked(void **state)
{
  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.eager_size = 7;
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), RMX_EINVAL);
  assert_true(caught("rmx_config_t.eager_size (RMX_EAGER_SIZE) = 7 is out of range: "
                     "256 .. 1048576"));
  cfg.eager_size = 8192;
  cfg.keepalive_ms = 20000;
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), RMX_EINVAL);
  assert_true(caught("RMX_KEEPALIVE_TIMEOUT_MS=10000 (keepalive_timeout_ms) is less than "
                     "RMX_KEEPALIVE_MS=20000 (keepalive_ms)"));
  cfg.keepalive_ms = 1000;
  memset(cfg.device, 'x', sizeof(cfg.device));
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), RMX_EINVAL);
  assert_true(caught("rmx_config_t.device (RMX_DEVICE) has no NUL in its 64 bytes"));
  cfg.device[0] = '\0';
  cfg.progress = (rmx_progress_t)3;
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), RMX_EINVAL);
  assert_true(caught("rmx_config_t.progress (RMX_PROGRESS) = 3 is out of range: 0 .. 2"));
  assert_int_equal(nerrors, 4);
  /* At RMX_LOG=none the same refusal logs nothing. */
  cfg.log_level = RMX_LOG_NONE;
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), RMX_EINVAL);
  assert_int_equal(nerrors, 4);
}

/* RMX_LOG=none: no warning or error from the configuration, though the
 * result is the same. Runs first: the unknown-variable warning, not yet
 * shown, must still come afterwards. */
static void log_none_silences_config(void **state)
{
  rmx_config_t cfg;
  setenv("RMX_LOG", "none", 1);
  assert_int_equal(rmx_config_init(&cfg), 0); /* RMX_EAGERSIZE, RMX_BOGUS are set */
  setenv("RMX_RX_DEPTH", "abc", 1);
  setenv("RMX_KEEPALIVE_MS", "20000", 1);
  assert_int_equal(rmx_config_init(&cfg), RMX_EINVAL);
  unsetenv("RMX_RX_DEPTH");
  assert_int_equal(rmx_config_init(&cfg), RMX_EINVAL); /* the rule between settings */
  unsetenv("RMX_KEEPALIVE_MS");
  unsetenv("RMX_LOG");
  assert_int_equal(calls, 0);
}

/* Reads what rmx_config_print wrote. */
static char *print_to_string(const rmx_config_t *cfg, unsigned flags, int *rc)
{
  static char text[32768];
  FILE *f = tmpfile();
  assert_non_null(f);
  *rc = rmx_config_print(cfg, f, flags);
  rewind(f);
  size_t n = fread(text, 1, sizeof(text) - 1, f);
  text[n] = '\0';
  fclose(f);
  return text;
}

static int count(const char *text, const char *needle)
{
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
    n++;
  return n;
}

/* Every setting, with value, default, source and meaning; never the secret. */
static void config_print(void **state)
{
  rmx_config_t cfg;
  int rc;
  setenv("RMX_RX_DEPTH", "010", 1);
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.eager_size = 4096;
  snprintf(cfg.auth_secret, sizeof(cfg.auth_secret), "hunter2");
  char *t = print_to_string(&cfg, 0, &rc);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(t, "RMX_RX_DEPTH=10  (environment; default 64)\n    rx_depth: "));
  assert_non_null(strstr(t, "RMX_EAGER_SIZE=4096  (code; default 8192)\n    eager_size: Bytes"));
  assert_non_null(strstr(t, "RMX_SPIN_US=100  (default)\n    spin_us: "));
  assert_non_null(strstr(t, "Accepts 256 .. 1048576 (K, M, G, T suffixes)."));
  assert_non_null(strstr(t, "RMX_LOG=warn  (default)\n"));
  assert_non_null(strstr(t, "RMX_AUTH_SECRET_FILE=(set in code)  (code; default empty)"));
  assert_null(strstr(t, "hunter2"));
  assert_int_equal(count(t, "\nRMX_") + 1, NSETTINGS); /* every setting */
  assert_int_equal(count(t, "\n    "), NSETTINGS);    /* each with its meaning */

  t = print_to_string(&cfg, RMX_CONFIG_PRINT_BRIEF, &rc);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(t, "RMX_RX_DEPTH=10  (environment; default 64)\nRMX_MAX_MSG_SIZE="));
  assert_int_equal(count(t, "\n"), NSETTINGS);

  t = print_to_string(&cfg, RMX_CONFIG_PRINT_JSON, &rc);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(t, "{\"name\": \"RMX_EAGER_SIZE\", \"field\": \"eager_size\", "
                            "\"value\": 4096, \"default\": 8192, \"source\": \"code\", "
                            "\"min\": 256, \"max\": 1048576, \"description\": \"Bytes"));
  assert_non_null(strstr(t, "\"value\": 10, \"default\": 64, \"source\": \"environment\""));
  assert_non_null(strstr(t, "\"name\": \"RMX_LOG\", \"field\": \"log_level\", \"value\": "
                            "\"warn\", \"default\": \"warn\", \"source\": \"default\", "
                            "\"values\": [\"none\", \"error\", \"warn\", \"info\", "
                            "\"debug\", \"trace\"]"));
  assert_int_equal(count(t, "{\"name\": "), NSETTINGS);
  assert_null(strstr(t, "hunter2"));

  /* A value the environment gives but that was refused. */
  setenv("RMX_RX_DEPTH", "0x10", 1);
  t = print_to_string(NULL, 0, &rc);
  unsetenv("RMX_RX_DEPTH");
  assert_int_equal(rc, 0);
  assert_non_null(strstr(t, "RMX_RX_DEPTH=64  (default: RMX_RX_DEPTH=0x10 in the environment "
                            "was refused)\n"));
  assert_int_equal(calls, 0); /* cfg NULL logs nothing */

  /* A secret file the environment names but rmx refuses: "refused", also
   * for a configuration rmx_config_init filled without it (not "code"),
   * and nothing logged. */
  setenv("RMX_AUTH_SECRET_FILE", "/nonexistent/rmx-secret", 1);
  rmx_config_t nosecret;
  rmx_log_level_t keep_level = cfg.log_level;
  setenv("RMX_LOG", "none", 1);
  assert_int_equal(rmx_config_init(&nosecret), RMX_EINVAL);
  unsetenv("RMX_LOG");
  nosecret.log_level = keep_level;
  t = print_to_string(&nosecret, RMX_CONFIG_PRINT_JSON, &rc);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(t, "\"name\": \"RMX_AUTH_SECRET_FILE\", \"field\": \"auth_secret\", "
                            "\"value\": \"\", \"default\": \"\", \"source\": \"refused\""));
  t = print_to_string(NULL, 0, &rc);
  assert_non_null(strstr(t, "RMX_AUTH_SECRET_FILE=  (default: RMX_AUTH_SECRET_FILE="
                            "/nonexistent/rmx-secret in the environment was refused)\n"));
  unsetenv("RMX_AUTH_SECRET_FILE");
  assert_int_equal(calls, 0);

  assert_int_equal(rmx_config_print(&cfg, NULL, 0), RMX_EINVAL);
  print_to_string(&cfg, 4, &rc);
  assert_int_equal(rc, RMX_EINVAL);
  cfg.size = 4;
  print_to_string(&cfg, 0, &rc);
  assert_int_equal(rc, RMX_EINVAL);
  memset(&cfg, 0, sizeof(cfg));
}

/* With no handler the lines go back to stderr: the handler is not called. */
static void handler_can_be_removed(void **state)
{
  rmx_config_t cfg;
  rmx_log_set_handler(NULL, NULL);
  setenv("RMX_LOG", "loud", 1);
  assert_int_equal(rmx_config_init(&cfg), RMX_EINVAL);
  unsetenv("RMX_LOG");
  assert_int_equal(calls, 0);
}

/* Under the default settings a server with 1,000 verbs connections pins
 * at most 20 KiB of receive buffers per connection: the first
 * RMX_SRQ_AUTO_OWN connections' own queues and the device's shared queue,
 * over all of them. With the roughly 12 KiB an idle connection on the
 * shared queue costs besides (docs/scaling.md), that keeps it within
 * 32 KiB; 64 own queues (528 KiB each) would pin 43 KiB a connection. */
static void srq_auto_bounds_receive_memory(void **state)
{
  (void)state;
  rmx_config_t cfg;
  assert_int_equal(rmx_config_init(&cfg), 0);
  assert_int_equal(cfg.srq, RMX_SRQ_AUTO);
  const uint64_t conns = 1000, own = RMX_SRQ_AUTO_OWN;
  uint64_t pinned = own * (cfg.rx_depth + 2) * cfg.eager_size +
                    (uint64_t)cfg.srq_depth * cfg.eager_size;
  printf("receive buffers at %llu connections under RMX_SRQ=auto: %llu B each\n",
         (unsigned long long)conns, (unsigned long long)(pinned / conns));
  assert_true(pinned / conns <= 20 * 1024);
}

int main(void)
{
  setenv("RMX_EAGERSIZE", "4096", 1);
  setenv("RMX_BOGUS", "1", 1);
  setenv("RMX_TEST_ANYTHING", "1", 1);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(log_none_silences_config, catch_logs, stderr_logs),
    cmocka_unit_test_setup_teardown(unknown_variables_are_named, catch_logs, stderr_logs),
    cmocka_unit_test_setup_teardown(size_is_checked, catch_logs, stderr_logs),
    cmocka_unit_test_setup_teardown(env_values_are_validated, catch_logs, stderr_logs),
    cmocka_unit_test_setup_teardown(env_exact_messages, catch_logs, stderr_logs),
    cmocka_unit_test_setup_teardown(code_config_is_checked, catch_logs, stderr_logs),
    cmocka_unit_test_setup_teardown(config_print, catch_logs, stderr_logs),
    cmocka_unit_test_setup(handler_can_be_removed, catch_logs),
    cmocka_unit_test(srq_auto_bounds_receive_memory),
  };
  return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
