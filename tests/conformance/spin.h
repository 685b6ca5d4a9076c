/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Driving a context by spinning on rmx_ctx_progress(), the way an
 * application polls (public API only). The loop helpers of the suites
 * (run_until, run_for_ms, PUMP_UNTIL, turn) spin here instead of running
 * uv_run when RMX_PROGRESS=poll is in the environment.
 *
 * rmx_ctx_progress() returns the completions it handled (>= 0), a negative
 * RMX_E* code on misuse, and RMX_ECANCELED when a callback it ran destroyed
 * the context. Until that contract lands it returns 0, or 1 when the
 * context was destroyed from a callback, and refuses a context on the
 * caller's loop (RMX_EINVAL): both are accepted here, see the TODOs.
 */
#ifndef RMX_TEST_SPIN_H
#define RMX_TEST_SPIN_H

#include <rmx/rmx.h>
#include <uv.h>

/* 1 when RMX_PROGRESS=poll: the helpers spin on rmx_ctx_progress. */
int spin_mode(void);

/* Set (to 1) by a test's callback right after it called rmx_ctx_destroy()
 * on the context being spun; spin_once clears it when it reports the
 * context gone. */
extern int spin_destroy_called;

#define SPIN_GONE (-1)

/* One non-blocking turn: rmx_ctx_progress(ctx), then, for a context on the
 * caller's loop (callers_loop not NULL), uv_run(callers_loop, UV_RUN_NOWAIT),
 * which the caller owes that loop. Returns what progress handled (>= 0), or
 * SPIN_GONE when the context is gone (do not use it again). Any other
 * negative return fails the test, as does a destroy from a callback that
 * the same call does not report. */
int spin_once(rmx_ctx_t *ctx, uv_loop_t *callers_loop);

/* The caller's loop of ctx, or NULL when it has a private one. */
uv_loop_t *spin_callers_loop(rmx_ctx_t *ctx);

#endif
