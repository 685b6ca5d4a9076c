/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The runtime under every core layer: deferred work (it runs from the
 * loop, never inside an API call), the op freelist (no allocation per
 * message in steady state), and the one place a connection's reference
 * count moves.
 */
#include <stdlib.h>
#include <string.h>

#include "rmx_int.h"

/* ---- deferred work ---- */

void rmx__defer_run(rmx_ctx_t *ctx)
{
  rmx_list_t *n;
  rmx__cb_enter(ctx);
  /* Take one at a time: a callback may queue more or free neighbours. */
  while ((n = rmx_list_pop(&ctx->deferred)) != NULL) {
    rmx__deferred_t *d = rmx_container_of(n, rmx__deferred_t, link);
    ctx->ran++;
    d->fn(d);
  }
  uv_idle_stop(&ctx->idle);
  ctx->in_cb--;
}

static void idle_cb(uv_idle_t *h) { rmx__defer_run(h->data); }

void rmx__defer(rmx_ctx_t *ctx, rmx__deferred_t *d)
{
  if (rmx_list_empty(&ctx->deferred))
    uv_idle_start(&ctx->idle, idle_cb);
  rmx_list_push(&ctx->deferred, &d->link);
}

/* ---- flushing ----
 *
 * Posting hands a frame to the transport; flushing hands what was posted to
 * the device (one doorbell) or the socket (one write). A connection flushes
 * once per loop turn, not once per call: the sends an application makes in
 * one turn, and everything a batch of completions answers, go together.
 * Each phase of the loop that runs callbacks is followed by a flush: the
 * check handle flushes what the I/O callbacks posted, the prepare handle
 * what idle handlers posted (poll-mode completions) just before the loop
 * polls (and what timers and pending callbacks posted, as the phases run
 * timers, pending, idle, prepare, poll, check, closing). The check and
 * prepare handles stay started (unreferenced: they keep no loop alive) and
 * look at an empty queue when there is nothing.
 *
 * What is posted where no flush follows in the same turn, by code outside
 * the loop's callbacks (ctx->in_cb == 0: the application's own code or
 * handles) and by close callbacks (the closing phase comes after check),
 * starts the idle handle: it keeps the loop from blocking, and
 * rmx_ctx_timeout at 0, until the flush. Inside rmx's callbacks, where the
 * check or prepare handle follows, it is not started: in steady state no
 * handle is started or stopped per message.
 */

static void early_run(rmx_ctx_t *ctx);

void rmx__flush_all(rmx_ctx_t *ctx)
{
  rmx_list_t *n;
  do {
    while ((n = rmx_list_pop(&ctx->flushq)) != NULL) {
      rmx_conn_t *c = rmx_container_of(n, rmx_conn_t, flush_link);
      c->flush_queued = 0;
      if (c->tp_state == RMX_TPS_OPEN)
        c->ops->flush(c->tc);
    }
    early_run(ctx); /* their callbacks may post again */
  } while (!rmx_list_empty(&ctx->flushq));
  uv_idle_stop(&ctx->flush_idle);
}

static void flush_idle_cb(uv_idle_t *h) { rmx__flush_all(h->data); }

static void flush_prepare_cb(uv_prepare_t *h)
{
  rmx_ctx_t *ctx = h->data;
  if (rmx__flush_pending(ctx))
    rmx__flush_all(ctx);
}

static void flush_check_cb(uv_check_t *h)
{
  rmx_ctx_t *ctx = h->data;
  if (rmx__flush_pending(ctx))
    rmx__flush_all(ctx);
}

/* ---- sends done at their post ----
 *
 * A small message built in its op, on a transport that copies such frames
 * at the call (RMX_TP_F_SEND_COPY: verbs), is done once posted: no
 * signaled completion, no event. Its op waits on ctx->early, and its
 * on_sent runs with the flush that follows (after the callback or the
 * call that posted it, never inside it), as a completion would have run
 * it. Status 0 says what it says for TCP: the bytes are the transport's,
 * the caller's memory is free; a loss after it shows as the connection's
 * on_disconnect. A connection that goes down first completes its own
 * (rmx__early_conn), so none runs after its on_disconnect.
 */
void rmx__early_push(rmx_ctx_t *ctx, rmx__op_t *op)
{
  if (!ctx->in_cb)
    uv_idle_start(&ctx->flush_idle, flush_idle_cb);
  rmx_list_push(&ctx->early, &op->link);
}

static void early_done(rmx_ctx_t *ctx, rmx__op_t *op)
{
  rmx__cb_enter(ctx);
  ctx->opc[op->kind]->done(op->conn, op, 0);
  ctx->in_cb--;
}

static void early_run(rmx_ctx_t *ctx)
{
  rmx_list_t *n;
  while ((n = rmx_list_pop(&ctx->early)) != NULL)
    early_done(ctx, rmx_container_of(n, rmx__op_t, link));
}

void rmx__early_conn(rmx_conn_t *c)
{
  rmx_list_t *n, *next;
  for (n = c->ctx->early.next; n != &c->ctx->early; n = next) {
    next = n->next;
    rmx__op_t *op = rmx_container_of(n, rmx__op_t, link);
    if (op->conn != c)
      continue;
    rmx_list_del(n);
    early_done(c->ctx, op);
    next = c->ctx->early.next; /* its callback may have run others */
  }
}

void rmx__flush_ctx_init(rmx_ctx_t *ctx)
{
  rmx_list_init(&ctx->flushq);
  rmx_list_init(&ctx->early);
  uv_idle_init(ctx->loop, &ctx->flush_idle);
  uv_prepare_init(ctx->loop, &ctx->flush_prepare);
  uv_check_init(ctx->loop, &ctx->flush_check);
  ctx->flush_idle.data = ctx->flush_prepare.data = ctx->flush_check.data = ctx;
  uv_prepare_start(&ctx->flush_prepare, flush_prepare_cb);
  uv_check_start(&ctx->flush_check, flush_check_cb);
  uv_unref((uv_handle_t *)&ctx->flush_prepare);
  uv_unref((uv_handle_t *)&ctx->flush_check);
  uv_idle_init(ctx->loop, &ctx->spin_idle);
  ctx->spin_idle.data = ctx;
  uv_unref((uv_handle_t *)&ctx->spin_idle);
  ctx->spin_mode = ctx->cfg.progress != RMX_PROGRESS_EVENT;
  ctx->spin_ns = ctx->cfg.progress == RMX_PROGRESS_ADAPTIVE ? (uint64_t)ctx->cfg.spin_us * 1000 : 0;
}

/* ---- busy-polling the loop ----
 *
 * Poll and adaptive progress for a transport whose sockets wake the loop
 * (TCP): while the spin idle handle is started, libuv polls the fds with a
 * zero timeout every turn instead of sleeping, so what arrives is read
 * without a wake-up, by the same callbacks and in the same order as in
 * event mode. Poll mode starts it at the first traffic and keeps it;
 * adaptive stops it once nothing has happened for spin_us. Unreferenced:
 * it keeps no loop alive. (Verbs polls its CQs itself, verbs/verbs.c.)
 */

static void spin_cb(uv_idle_t *h)
{
  rmx_ctx_t *ctx = h->data;
  for (int i = 0; i < RMX_TP_COUNT; i++)
    if (ctx->tp[i] && ctx->tp_ops[i]->spin && ctx->tp_ops[i]->spin(ctx->tp[i]))
      ctx->spin_active = 1;
  if (!ctx->spin_ns)
    return;
  if (ctx->spin_active) {
    ctx->spin_active = 0;
    ctx->spin_quiet = 0;
    return;
  }
  uint64_t now = uv_hrtime();
  if (!ctx->spin_quiet) {
    ctx->spin_quiet = now;
  } else if (now - ctx->spin_quiet >= ctx->spin_ns) {
    ctx->spin_on = 0;
    uv_idle_stop(h);
  }
}

void rmx__spin_touch(rmx_ctx_t *ctx)
{
  ctx->spin_active = 1;
  if (ctx->spin_on || ctx->torn_down)
    return;
  ctx->spin_on = 1;
  ctx->spin_quiet = 0;
  uv_idle_start(&ctx->spin_idle, spin_cb);
}

void rmx__conn_flush_later(rmx_conn_t *c)
{
  rmx_ctx_t *ctx = c->ctx;
  rmx__conn_spin(c);
  /* Only an open transport connection is queued; it leaves the queue
   * (rmx__conn_flush_now) before it is closed or finished. */
  if (c->flush_queued || c->tp_state != RMX_TPS_OPEN)
    return;
  if (!ctx->in_cb && rmx_list_empty(&ctx->flushq))
    uv_idle_start(&ctx->flush_idle, flush_idle_cb);
  c->flush_queued = 1;
  rmx_list_push(&ctx->flushq, &c->flush_link);
}

void rmx__flush_kick(rmx_ctx_t *ctx)
{
  if (!rmx_list_empty(&ctx->flushq))
    uv_idle_start(&ctx->flush_idle, flush_idle_cb);
}

void rmx__conn_flush_now(rmx_conn_t *c)
{
  if (!c->flush_queued)
    return;
  c->flush_queued = 0;
  rmx_list_del(&c->flush_link);
  if (c->tp_state == RMX_TPS_OPEN)
    c->ops->flush(c->tc);
}

/* ---- connection references ---- */

void rmx__conn_hold(rmx_conn_t *c) { c->ops_out++; }

void rmx__conn_release(rmx_conn_t *c)
{
  if (--c->ops_out == 0 && c->finished && c->user_closed)
    rmx__defer_once(c->ctx, &c->defer_free);
}

/* ---- ops ---- */

rmx__op_t *rmx__op_get(rmx_ctx_t *ctx, rmx_conn_t *c, rmx__op_kind_t kind)
{
  rmx_list_t *n = rmx_list_pop(&ctx->free_ops);
  rmx__op_t *op;
  if (n) {
    op = rmx_container_of(n, rmx__op_t, link);
    ctx->nfree_ops--;
  } else {
    op = malloc(sizeof(*op));
    if (!op)
      return NULL;
    ctx->ops_allocated++;
  }
  memset(op, 0, offsetof(rmx__op_t, frame));
  rmx_list_init(&op->link);
  op->conn = c;
  op->kind = (uint8_t)kind;
  rmx__conn_hold(c);
  return op;
}

/* Ops are reused, but only so many are kept: the ops of a burst over
 * thousands of connections do not stay allocated after it. */
#define RMX__OPS_KEEP 1024

void rmx__op_put(rmx__op_t *op)
{
  rmx_conn_t *c = op->conn;
  rmx_ctx_t *ctx = c->ctx;
  if (ctx->nfree_ops < RMX__OPS_KEEP) {
    rmx_list_push(&ctx->free_ops, &op->link);
    ctx->nfree_ops++;
  } else {
    free(op);
  }
  rmx__conn_release(c);
}

void rmx__op_done(rmx_conn_t *c, rmx__op_t *op, int status)
{
  c->ctx->opc[op->kind]->done(c, op, status);
}

void rmx__op_fail(rmx__op_t *op, int status)
{
  op->conn->ctx->opc[op->kind]->fail(op, status);
}
