/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Configuration as callers meet it: the size rule of rmx_config_t, every
 * environment value validated with a message that says what is accepted,
 * unknown RMX_* variables warned about, and log lines routed to the
 * application's handler. Public API only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <rmx/rmx.h>

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
  assert_true(caught("RMX_EAGER_SIZE=-5 is not a number in"));

  setenv("RMX_PROGRESS", "adaptive", 1);
  setenv("RMX_SPIN_US", "250", 1);
  assert_int_equal(rmx_config_init(&cfg), 0);
  assert_int_equal(cfg.progress, RMX_PROGRESS_ADAPTIVE);
  assert_int_equal(cfg.spin_us, 250);
  setenv("RMX_SPIN_US", "0", 1);
  assert_int_equal(rmx_config_init(&cfg), RMX_EINVAL);
  assert_true(caught("RMX_SPIN_US=0 is not a number in [1, 1000000]"));
  unsetenv("RMX_SPIN_US");
  unsetenv("RMX_PROGRESS");
  assert_int_equal(nerrors, 4); /* one line each, at error level */
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

int main(void)
{
  setenv("RMX_EAGERSIZE", "4096", 1);
  setenv("RMX_BOGUS", "1", 1);
  setenv("RMX_TEST_ANYTHING", "1", 1);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(unknown_variables_are_named, catch_logs, stderr_logs),
    cmocka_unit_test_setup_teardown(size_is_checked, catch_logs, stderr_logs),
    cmocka_unit_test_setup_teardown(env_values_are_validated, catch_logs, stderr_logs),
    cmocka_unit_test_setup(handler_can_be_removed, catch_logs),
  };
  return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
