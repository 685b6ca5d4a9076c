/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The polling fast path: one pass asks every transport for what is ready
 * (verbs polls its CQs, TCP reads its hot socket) and runs the callbacks,
 * then hands over what they and the application posted, all without a
 * turn of libuv's loop. The loop still does what it is good at (timers,
 * connection events, other sockets, cross-thread posts, the event mode);
 * a spinning caller turns it once every RMX__TURN_EVERY passes.
 *
 * Why a count and not the next timer's deadline: knowing whether a timer
 * is due means reading the clock every pass, and a clock read costs more
 * than a pass where the clock source is slow (an emulated HPET: about
 * 9 us); libuv's own deadline (uv_backend_timeout) is only true after it
 * read the clock. A pass that finds nothing costs a CQ poll or a recv, so
 * the count bounds how late a timer, a connection event or a post can be
 * to a few hundred empty polls (microseconds on hardware). Passes that find
 * work are another matter: each may take long, so every so many of them
 * the clock is read after all (rmx__progress_turn_due).
 */
#include "rmx_int.h"

int rmx__progress_pass(rmx_ctx_t *ctx)
{
  int found = 0;
  /* RPC deadlines that are due end before what the pass finds (as the
   * loop runs timers before I/O); only then is the clock read. */
  if (!rmx_list_empty(&ctx->deadlines)) {
    ctx->up.rpc_due(ctx);
    if (ctx->dying)
      return 0;
  }
  /* What the application posted since the last pass goes first. */
  if (rmx__flush_pending(ctx)) {
    rmx__flush_all(ctx);
    if (ctx->dying)
      return 0;
  }
  for (int i = 0; i < RMX_TP_COUNT; i++) {
    if (!ctx->tp[i])
      continue;
    found += ctx->tp_ops[i]->poll(ctx->tp[i], &ctx->turn_due);
    if (ctx->dying)
      return found; /* a callback destroyed the context: leave it be */
  }
  if (!rmx_list_empty(&ctx->deferred)) {
    rmx__defer_run(ctx);
    if (ctx->dying)
      return found;
  }
  if (rmx__flush_pending(ctx))
    rmx__flush_all(ctx);
  return found;
}

/* The send half of a pass (rmx_ctx_flush): what was posted goes out, and
 * the sends that ended at once are reported (each transport's reap), so
 * nothing of theirs is left for the loop; nothing is read. */
void rmx__progress_flush(rmx_ctx_t *ctx)
{
  if (rmx__flush_pending(ctx)) {
    rmx__flush_all(ctx);
    if (ctx->dying)
      return;
  }
  int reaped = 0;
  for (int i = 0; i < RMX_TP_COUNT; i++) {
    if (!ctx->tp[i] || !ctx->tp_ops[i]->reap)
      continue;
    reaped += ctx->tp_ops[i]->reap(ctx->tp[i]);
    if (ctx->dying)
      return;
  }
  if (reaped && rmx__flush_pending(ctx)) /* their callbacks sent again */
    rmx__flush_all(ctx);
}

/* One turn of the loop without blocking, posts included (the wake-up of
 * rmx_ctx_post keeps no loop alive: hold it for the turn). Returns what
 * uv_run does: nonzero while something keeps the loop alive. */
int rmx__progress_turn(rmx_ctx_t *ctx) { return rmx__progress_turn_mode(ctx, UV_RUN_NOWAIT); }

int rmx__progress_turn_mode(rmx_ctx_t *ctx, uv_run_mode mode)
{
  ctx->passes = ctx->busy = 0;
  ctx->turn_due = 0;
  atomic_store_explicit(&ctx->post_due, 0, memory_order_relaxed); /* the turn runs them */
  uv_ref((uv_handle_t *)&ctx->async);
  int alive = uv_run(ctx->loop, mode);
  uv_unref((uv_handle_t *)&ctx->async);
  ctx->turned_at = uv_hrtime();
  return alive;
}

/*
 * rmx_ctx_run with RMX_PROGRESS=poll or adaptive: spin on passes, turning
 * the loop every RMX__TURN_EVERY of them. Adaptive blocks in the loop
 * (uv_run once) after spin_us without a completion; poll never blocks.
 * Returns when rmx_ctx_stop is called, the context is destroyed from a
 * callback, or nothing keeps the loop alive.
 */
void rmx__progress_spin(rmx_ctx_t *ctx)
{
  uint64_t spin_ns = ctx->cfg.progress == RMX_PROGRESS_ADAPTIVE ? ctx->spin_ns : 0;
  uint64_t quiet = 0;
  unsigned empty = 0;
  ctx->stop = 0;
  while (!ctx->stop && !ctx->dying) {
    int found = rmx__progress_pass(ctx);
    if (found) {
      quiet = 0;
      empty = 0;
    } else if (spin_ns && ++empty % RMX__CLOCK_EVERY == 0) {
      /* The clock once per many empty passes: where it is slow to read,
       * reading it every pass would be most of the spin. */
      uint64_t now = uv_hrtime();
      if (!quiet) {
        quiet = now;
      } else if (now - quiet >= spin_ns) {
        if (!uv_run(ctx->loop, UV_RUN_ONCE))
          break; /* nothing keeps the loop alive */
        ctx->passes = 0;
        quiet = 0;
        continue;
      }
    }
    if (ctx->stop || ctx->dying)
      break;
    if (rmx__progress_turn_due(ctx, found) && !rmx__progress_turn(ctx))
      break;
  }
  ctx->stop = 0;
}
