/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reconnect (rmx_connect_opts_t, docs/reliability.md): a client connection
 * that was established and then lost connects again, on the same handle,
 * with a doubling, jittered delay.
 *
 * The loss itself takes the one way down (src/rt/conn.c): everything
 * outstanding fails and on_disconnect runs. Then conn_finish hands the
 * connection here (the conn_retry upcall) instead of leaving it down. An
 * attempt resets what the connection kept of its last transport connection
 * and runs the same resolve and connect as rmx_connect; if it fails, it
 * comes down the same way and back here. Nothing is ever re-sent: the
 * queues are empty when an attempt starts, and an RPC request answered
 * after the loss (its handler still held it) is refused by its epoch.
 */
#include <string.h>

#include "choose.h"

static void recon_timer_cb(uv_timer_t *t);

void rmx__reconnect_ctx_init(rmx_ctx_t *ctx)
{
  uv_timer_init(ctx->loop, &ctx->recon_timer);
  ctx->recon_timer.data = ctx;
  rmx_list_init(&ctx->reconnecting);
}

int rmx__reconnect_opts(rmx_conn_t *c, const rmx_connect_opts_t *o)
{
  if (!o)
    return 0;
  if (o->size < sizeof(*o) || (o->reconnect_min_ms && o->reconnect_max_ms < o->reconnect_min_ms))
    return RMX_EINVAL;
  c->recon.min_ms = o->reconnect_min_ms;
  c->recon.max_ms = o->reconnect_max_ms;
  c->recon.tries = o->reconnect_tries;
  c->recon.cb = o->on_reconnect;
  return 0;
}

/* The soonest attempt decides when the timer fires. */
static void arm(rmx_ctx_t *ctx)
{
  if (rmx_list_empty(&ctx->reconnecting)) {
    uv_timer_stop(&ctx->recon_timer);
    return;
  }
  rmx_conn_t *c = rmx_container_of(ctx->reconnecting.next, rmx_conn_t, recon.link);
  uint64_t now = uv_now(ctx->loop);
  uv_timer_start(&ctx->recon_timer, recon_timer_cb, c->recon.due > now ? c->recon.due - now : 0,
                 0);
}

/* xorshift: jitter needs spread, not secrecy. */
static uint32_t jitter_rand(rmx_ctx_t *ctx)
{
  uint32_t x = ctx->recon_seed ? ctx->recon_seed : (uint32_t)(uintptr_t)ctx ^ 0x9e3779b9u;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return ctx->recon_seed = x;
}

/* Wait before attempt c->recon.attempt: the delay doubles per attempt up to
 * the cap; the wait is drawn between half and all of it. */
static void schedule(rmx_conn_t *c)
{
  rmx_ctx_t *ctx = c->ctx;
  uint64_t d = c->recon.min_ms;
  for (unsigned i = 1; i < c->recon.attempt && d < c->recon.max_ms; i++)
    d *= 2;
  if (d > c->recon.max_ms)
    d = c->recon.max_ms;
  d = d / 2 + jitter_rand(ctx) % (d - d / 2 + 1);
  c->recon.due = uv_now(ctx->loop) + d;
  rmx_list_t *n = ctx->reconnecting.next; /* few wait at once: keep them in order */
  while (n != &ctx->reconnecting &&
         rmx_container_of(n, rmx_conn_t, recon.link)->recon.due <= c->recon.due)
    n = n->next;
  rmx_list_push(n, &c->recon.link); /* before n */
  RMX_LOG(ctx, INFO, "%s peer %s: reconnect attempt %u in %llu ms", c->ops->name,
          c->peer, c->recon.attempt, (unsigned long long)d);
  arm(ctx);
}

/* The conn_retry upcall: a connection has gone all the way down (conn.c,
 * after on_disconnect) and the application has not closed it. */
void rmx__reconnect_lost(rmx_conn_t *c)
{
  if (!c->recon.min_ms || c->passive || c->ctx->dying || c->user_closed)
    return;
  if (c->recon.attempt == 0) {
    if (!c->was_established)
      return; /* the first connect failed: on_connected said so */
  } else {
    unsigned a = c->recon.attempt;
    if (c->recon.cb)
      c->recon.cb(c, a, c->err ? c->err : RMX_ECONNRESET, c->connect_arg);
    if (c->user_closed || (c->recon.tries && a >= c->recon.tries))
      return; /* closed from the callback, or out of tries: stays down */
  }
  c->recon.attempt++;
  schedule(c);
}

void rmx__reconnect_cancel(rmx_conn_t *c)
{
  if (rmx_list_empty(&c->recon.link))
    return;
  rmx_list_del(&c->recon.link);
  rmx_list_init(&c->recon.link);
  arm(c->ctx);
}

/* Forget the last transport connection: every queue is empty (they failed
 * on the way down), so only counters and states go back to a new
 * connection's. The handle, its callbacks, stats and ids stay. */
void rmx__reconnect_reset(rmx_conn_t *c)
{
  c->state = RMX_CS_RESOLVING;
  c->tp_state = RMX_TPS_NONE;
  c->tc = NULL;
  c->was_established = c->finished = c->credit_queued = c->stalled = 0;
  c->err = 0;
  memset(&c->cr, 0, sizeof(c->cr));
  c->eager_max = 0;
  c->max_msg = 0;
  c->rndv_reads = c->rma_window = c->rma_out = 0;
  c->reads_blocked = 0;
  c->rpc_held_bytes = 0;
  rmx_list_del(&c->ka.link); /* out of its liveness queue, if still there */
  memset(&c->ka, 0, sizeof(c->ka));
  rmx_list_init(&c->ka.link);
  rmx_list_init(&c->ka.evict_link); /* a client's: never listed (RMX_EVICT_IDLE) */
  memset(&c->auth, 0, sizeof(c->auth));
  c->epoch++; /* RPC requests of the last connection can no longer be answered */
}

static void recon_timer_cb(uv_timer_t *t)
{
  rmx_ctx_t *ctx = t->data;
  uint64_t now = uv_now(ctx->loop);
  rmx_list_t *n;
  rmx__cb_enter(ctx);
  while ((n = ctx->reconnecting.next) != &ctx->reconnecting) {
    rmx_conn_t *c = rmx_container_of(n, rmx_conn_t, recon.link);
    if (c->recon.due > now)
      break;
    rmx_list_del(n);
    rmx_list_init(n);
    rmx__reconnect_reset(c);
    if (c->auto_n) /* auto:// starts from its best transport again */
      c->auto_i = 0, c->tpi = c->auto_slot[0], c->ops = ctx->tp_ops[c->tpi];
    RMX_LOG(ctx, INFO, "%s peer %s: reconnect attempt %u", c->ops->name, c->peer,
            c->recon.attempt);
    int rc = rmx__conn_resolve(c);
    if (rc)
      rmx__conn_down(c, rc); /* a failed attempt: back through conn_finish */
  }
  arm(ctx);
  ctx->in_cb--;
}
