/* SPDX-License-Identifier: BSD-3-Clause */
/* The runtime (src/rt/): deferred work, ops, connection references,
 * flushing, and the polling fast path. Included by rmx_int.h after the
 * objects it works on. */
#ifndef RMX_RT_H
#define RMX_RT_H

/* ---- the runtime (src/rt/rt.c): deferred work, ops, connection references ---- */
rmx__op_t *rmx__op_get(rmx_ctx_t *ctx, rmx_conn_t *c, rmx__op_kind_t kind);
void rmx__op_put(rmx__op_t *op);
/* The only way a connection's reference count moves: every op, RPC call
 * and answered-to-be request holds one; the last release of a finished,
 * closed connection schedules its free. */
void rmx__conn_hold(rmx_conn_t *c);
void rmx__conn_release(rmx_conn_t *c);
/* The op's kind decides: its class's done (the transport reported it). */
void rmx__op_done(rmx_conn_t *c, rmx__op_t *op, int status);
void rmx__op_fail(rmx__op_t *op, int status);
/* What was posted on c reaches the device or socket (the transport's
 * flush) once per loop turn: flush_later queues c for it; flush_now does it
 * at once (before the transport is closed or finished). */
void rmx__conn_flush_later(rmx_conn_t *c);
void rmx__conn_flush_now(rmx_conn_t *c);
/* From a callback after which no flush follows in the same loop turn (a
 * close callback): keep the loop from blocking until what it posted is out. */
void rmx__flush_kick(rmx_ctx_t *ctx);
void rmx__flush_ctx_init(rmx_ctx_t *ctx);
/* Flush every queued connection now; run the deferred work now (both are
 * what the loop's handles would do: the polling fast path calls them). */
void rmx__flush_all(rmx_ctx_t *ctx);
/* A small send done at its post (RMX_TP_F_SEND_COPY): its on_sent runs at
 * the next flush; a connection going down runs its own first. */
void rmx__early_push(rmx_ctx_t *ctx, rmx__op_t *op);
void rmx__early_conn(rmx_conn_t *c);
/* Anything for rmx__flush_all: connections queued, or sends done early. */
static inline int rmx__flush_pending(const rmx_ctx_t *ctx)
{
  return !rmx_list_empty(&ctx->flushq) || !rmx_list_empty(&ctx->early);
}
void rmx__defer_run(rmx_ctx_t *ctx);

/* ---- the polling fast path (src/rt/progress.c) ---- */
#define RMX__TURN_EVERY 1024 /* passes between two turns of the loop while spinning */
#define RMX__CLOCK_EVERY 256  /* empty passes between two clock reads (adaptive) */
/* One pass: every transport's completions, deferred work, flushes; no loop
 * turn. Returns the completions handled. */
int rmx__progress_pass(rmx_ctx_t *ctx);
/* The pass's sends alone: flushes, and what ended at once reported. */
void rmx__progress_flush(rmx_ctx_t *ctx);
/* One non-blocking turn of the loop (timers, connection events, posts). */
int rmx__progress_turn(rmx_ctx_t *ctx);
/* One turn in the given mode: UV_RUN_ONCE sleeps until an event or timer. */
int rmx__progress_turn_mode(rmx_ctx_t *ctx, uv_run_mode mode);
#define RMX__BUSY_CLOCK_EVERY 16 /* passes with work between two clock reads */
#define RMX__TURN_NS 1000000ull  /* turn at least this often while passes find work */
/* Counts a pass that found work (found > 0) or not: is a turn due after it
 * (every RMX__TURN_EVERY passes, or at once when a transport asked or
 * another thread posted)? Passes with work can each take long (a transport
 * that moves the bytes inside the post, as SoftRoCE does: milliseconds),
 * and a count alone then let timers, keepalives among them, wait for
 * seconds: every RMX__BUSY_CLOCK_EVERY of those the clock is read (cheap
 * beside the work) and a turn is due after RMX__TURN_NS. */
static inline int rmx__progress_turn_due(rmx_ctx_t *ctx, int found)
{
  if (++ctx->passes >= RMX__TURN_EVERY || ctx->turn_due ||
      atomic_load_explicit(&ctx->post_due, memory_order_relaxed))
    return 1;
  return found > 0 && ++ctx->busy % RMX__BUSY_CLOCK_EVERY == 0 &&
         uv_hrtime() - ctx->turned_at >= RMX__TURN_NS;
}
/* rmx_ctx_run in poll and adaptive progress. */
void rmx__progress_spin(rmx_ctx_t *ctx);
/* Traffic on c: in poll and adaptive progress, a transport whose fds wake
 * the loop has it busy-polled (rt.c, "busy-polling the loop"). */
void rmx__spin_touch(rmx_ctx_t *ctx);
static inline void rmx__conn_spin(rmx_conn_t *c)
{
  if (c->ctx->spin_mode && (c->ops->flags & RMX_TP_F_LOOP_SPIN))
    rmx__spin_touch(c->ctx);
}

#endif
