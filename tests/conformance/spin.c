/* SPDX-License-Identifier: BSD-3-Clause */
/* Spinning on rmx_ctx_progress (spin.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "spin.h"

int spin_destroy_called;

int spin_mode(void)
{
  static int mode = -1;
  if (mode < 0) {
    const char *p = getenv("RMX_PROGRESS");
    mode = p && strcmp(p, "poll") == 0;
  }
  return mode;
}

uv_loop_t *spin_callers_loop(rmx_ctx_t *ctx)
{
  /* rmx_ctx_fd() is refused exactly for a context on the caller's loop. */
  return rmx_ctx_fd(ctx) == RMX_EINVAL ? rmx_ctx_loop(ctx) : NULL;
}

int spin_once(rmx_ctx_t *ctx, uv_loop_t *callers_loop)
{
  if (callers_loop && spin_destroy_called) {
    /* Destroyed on the caller's loop: the context finishes as that loop
     * runs and must not be called again. */
    spin_destroy_called = 0;
    uv_run(callers_loop, UV_RUN_NOWAIT);
    return SPIN_GONE;
  }
  int rc = rmx_ctx_progress(ctx);
  int destroyed = spin_destroy_called;
  spin_destroy_called = 0;
  if (callers_loop) {
    if (rc < 0 && rc != RMX_ECANCELED)
      fail_msg("rmx_ctx_progress returned %d (%s)", rc, rmx_strerror(rc));
    uv_run(callers_loop, UV_RUN_NOWAIT);
    return destroyed || rc == RMX_ECANCELED ? SPIN_GONE : rc;
  }
  if (rc == RMX_ECANCELED)
    return SPIN_GONE;
  if (rc < 0)
    fail_msg("rmx_ctx_progress returned %d (%s)", rc, rmx_strerror(rc));
  /* A private context destroyed from a callback is gone when the call that
   * ran the callback returns, and that call says so. */
  if (destroyed)
    fail_msg("rmx_ctx_destroy ran from a callback, rmx_ctx_progress returned %d", rc);
  return rc;
}
