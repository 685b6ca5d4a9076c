/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The connection object: its states, the one path every connection takes
 * down (rmx__conn_down -> transport close -> CLOSED -> conn_finish), so each
 * outcome is reported exactly once, the close deadline, and the free.
 * What the layers above hold is failed through their upcalls; set-up
 * (listen, connect, handshake, close) is src/conn/connect.c.
 */
#include <stdlib.h>

#include "rmx_int.h"

static void conn_finish(rmx_conn_t *c);
static void close_unwatch(rmx_conn_t *c);
static void deferred_finish(rmx__deferred_t *d);
static void deferred_free(rmx__deferred_t *d);

rmx_conn_t *rmx__conn_new(rmx_ctx_t *ctx, int tpi)
{
  rmx_conn_t *c = calloc(1, sizeof(*c));
  if (!c)
    return NULL;
  c->ctx = ctx;
  c->tpi = tpi;
  c->ops = ctx->tp_ops[tpi];
  rmx_list_init(&c->ctrlq);
  rmx_list_init(&c->grants);
  rmx_list_init(&c->xfers);
  rmx_list_init(&c->notifq);
  rmx_list_init(&c->sendq);
  rmx_list_init(&c->rndv_wait);
  rmx_list_init(&c->rxq);
  rmx_list_init(&c->rmaq);
  rmx_list_init(&c->reqq);
  rmx_list_init(&c->reqs_out);
  for (int i = 0; i < RMX_CALL_BUCKETS; i++)
    rmx_list_init(&c->calls[i]);
  rmx_list_init(&c->close_link);
  rmx_list_init(&c->ka.link);
  rmx_list_init(&c->ka.evict_link);
  rmx_list_init(&c->recon.link);
  rmx_list_init(&c->defer_finish.link);
  rmx_list_init(&c->defer_connect.link);
  rmx_list_init(&c->defer_free.link);
  c->defer_finish.fn = deferred_finish;
  c->defer_free.fn = deferred_free;
  rmx_list_push(&ctx->conns, &c->link);
  ctx->nconns++;
  return c;
}

void rmx__listener_unref(rmx_listener_t *l)
{
  if (--l->refs == 0)
    free(l);
}

/* ---- going down: one path for every cause ---- */

void rmx__conn_tp_close(rmx_conn_t *c)
{
  rmx__mem_conn_gone(c);
  rmx__conn_flush_now(c); /* what was posted goes (or fails) with the rest */
  if (c->tp_state == RMX_TPS_OPEN || c->tp_state == RMX_TPS_FINISHING) {
    c->tp_state = RMX_TPS_CLOSING;
    c->ops->close(c->tc);
  }
}

/* BYE is out: the transport delivers what it holds, then reports CLOSED;
 * the close deadline (rmx__conn_close_watch) still applies. */
void rmx__conn_tp_finish(rmx_conn_t *c)
{
  if (c->tp_state != RMX_TPS_OPEN)
    return;
  rmx__mem_conn_gone(c);
  rmx__conn_flush_now(c);
  if (!c->ops->finish) {
    rmx__conn_tp_close(c);
    return;
  }
  c->tp_state = RMX_TPS_FINISHING;
  c->ops->finish(c->tc);
}

static void deferred_finish(rmx__deferred_t *d)
{
  conn_finish(rmx_container_of(d, rmx_conn_t, defer_finish));
}

/*
 * The connection stops carrying traffic: status 0 for an orderly close by
 * the peer. Safe to call more than once; the first cause wins.
 */
void rmx__conn_down(rmx_conn_t *c, int status)
{
  if (c->state == RMX_CS_DOWN) {
    /* Already going down gracefully: a second cause closes at once. */
    rmx__conn_tp_close(c);
    return;
  }
  /* Protocol errors were logged where they were found. */
  if (c->state == RMX_CS_ESTABLISHED && status != 0 && status != RMX_ECANCELED &&
      status != RMX_EPROTO && !c->ka.idle) /* an idle close logged its own line */
    RMX_LOG(c->ctx, WARN, "%s peer %s lost: %s", c->ops->name, c->peer,
            rmx_strerror(status));
  c->was_established = c->state == RMX_CS_ESTABLISHED;
  c->state = RMX_CS_DOWN;
  c->err = status;
  if (c->tp_state == RMX_TPS_OPEN)
    rmx__conn_tp_close(c);
  else if (c->tp_state == RMX_TPS_NONE) {
    c->tp_state = RMX_TPS_CLOSED;
    rmx__defer_once(c->ctx, &c->defer_finish);
  }
}

/* Runs from the loop only: on_closed comes after every other callback. */
static void deferred_free(rmx__deferred_t *d)
{
  rmx_conn_t *c = rmx_container_of(d, rmx_conn_t, defer_free);
  rmx_ctx_t *ctx = c->ctx;
  if (!c->finished || !c->user_closed)
    return;
  if (c->ops_out && ctx->dying && !rmx_list_empty(&c->reqs_out)) {
    /* Destroying: requests their handlers never answered end with the
     * context (what else is out, an RPC call's end already queued, releases
     * the connection when it runs). */
    RMX_LOG(ctx, WARN, "%s peer %s: RPC requests never answered end with the context",
            c->ops->name, c->peer);
    ctx->up.rpc_drop(c); /* the last release schedules this again */
    return;
  }
  if (c->ops_out)
    return; /* an op is still out: its release schedules this again */
  c->freeing = 1; /* on_closed may destroy the context: not again */
  if (c->on_closed)
    c->on_closed(c, c->close_arg);
  ctx->up.conn_gone(c);
  rmx_list_del(&c->ka.evict_link); /* its listener's eviction order, before the unref */
  if (c->from) {
    c->from->nconns--;
    c->from->nevicted -= c->ka.evicted;
    rmx__listener_unref(c->from);
  }
  rmx_list_del(&c->link);
  rmx_list_del(&c->ka.link); /* out of its liveness queue */
  ctx->nconns--;
  rmx__guard_conn_free(&c->guard);
  free(c);
  if (ctx->nconns == 0) /* no keepalive tick trims the pool's spares now */
    rmx__pool_trim(ctx, UINT64_MAX);
  if (ctx->dying)
    ctx->up.conn_freed(ctx);
}

/* ---- close deadlines: an orderly close never waits on a peer forever ---- */

static void close_expired(rmx_ctx_t *ctx);

static void close_timer_cb(uv_timer_t *t)
{
  rmx_ctx_t *ctx = t->data;
  rmx__cb_enter(ctx);
  close_expired(ctx);
  ctx->in_cb--;
}

void rmx__conn_close_watch(rmx_conn_t *c)
{
  rmx_ctx_t *ctx = c->ctx;
  c->close_deadline = uv_now(ctx->loop) + ctx->cfg.close_timeout_ms;
  if (rmx_list_empty(&ctx->closing))
    uv_timer_start(&ctx->close_timer, close_timer_cb,
                   ctx->cfg.close_timeout_ms, 0);
  rmx_list_push(&ctx->closing, &c->close_link); /* one timeout: the list stays in order */
}

static void close_unwatch(rmx_conn_t *c)
{
  if (!rmx_list_empty(&c->close_link)) {
    rmx_list_del(&c->close_link);
    rmx_list_init(&c->close_link);
  }
}

static void close_expired(rmx_ctx_t *ctx)
{
  uint64_t now = uv_now(ctx->loop);
  rmx_list_t *n;
  while ((n = ctx->closing.next) != &ctx->closing) {
    rmx_conn_t *c = rmx_container_of(n, rmx_conn_t, close_link);
    if (c->close_deadline > now) {
      uv_timer_start(&ctx->close_timer, close_timer_cb,
                     c->close_deadline - now, 0);
      return;
    }
    close_unwatch(c);
    RMX_LOG(ctx, WARN, "%s peer %s did not finish the close within %u ms "
            "(RMX_CLOSE_TIMEOUT_MS): cutting it", c->ops->name, c->peer,
            ctx->cfg.close_timeout_ms);
    rmx__conn_tp_close(c); /* what is outstanding fails when the transport reports CLOSED */
  }
}

/* Pause the transport's listener while its handshake slots are full;
 * resume it when one frees. */
void rmx__listener_slots(rmx_listener_t *l)
{
  const rmx_tp_ops_t *ops = l->ctx->tp_ops[l->tpi];
  int full = l->naccepting >= l->ctx->cfg.max_handshakes;
  if (!ops->listen_pause || l->closed || full == l->paused)
    return;
  l->paused = (uint8_t)full;
  ops->listen_pause(l->tl, full);
}

/* The transport is closed: fail what is left, report once, maybe free. */
static void conn_finish(rmx_conn_t *c)
{
  int op_status = c->user_closed ? RMX_ECANCELED : (c->err ? c->err : RMX_ECONNRESET);
  /* auto://: a first connect's transport failed, the next is tried */
  if (c->auto_n && !c->reported && c->ctx->up.conn_fallback(c, op_status))
    return;
  c->finished = 1;
  c->ctx->up.msg_fail(c, op_status); /* request sends first: their calls then end */
  c->ctx->up.rpc_fail(c, op_status);
  c->ctx->up.auth_end(c); /* while c->listener still names where it came in */
  if (c->listener) {
    c->listener->naccepting--;
    rmx__listener_slots(c->listener);
    rmx__listener_unref(c->listener);
    c->listener = NULL;
  }
  close_unwatch(c);
  /* Losses were logged (warn) where they were found. */
  if (c->was_established && (c->user_closed || c->err == 0))
    RMX_LOG(c->ctx, INFO, "%s peer %s: closed%s", c->ops->name, c->peer,
            c->user_closed ? "" : " by the peer");
  if (!c->reported) {
    c->reported = 1;
    if (c->on_connected && !c->user_closed) /* an active connect that never got through */
      RMX_LOG(c->ctx, WARN, "%s peer %s: connect failed: %s", c->ops->name,
              c->peer, rmx_strerror(op_status));
    if (c->on_connected)
      c->on_connected(c, c->user_closed ? RMX_ECANCELED : op_status, c->connect_arg);
  } else if (c->was_established && !c->user_closed && c->cbs.on_disconnect) {
    c->cbs.on_disconnect(c, c->err, c->cbs_arg);
  }
  c->ctx->up.rails_down(c); /* a rail lost closes; a connection's rails go with it */
  if (c->user_closed && (c->ops_out == 0 || c->ctx->dying))
    rmx__defer_once(c->ctx, &c->defer_free);
  else if (!c->user_closed)
    c->ctx->up.conn_retry(c); /* a client with reconnect connects again */
}

/* The transport reported CLOSED: it holds nothing of the connection now. */
void rmx__conn_closed(rmx_conn_t *c)
{
  rmx__mem_conn_gone(c); /* none left: a grant needs an open transport */
  c->tp_state = RMX_TPS_CLOSED;
  c->tc = NULL;
  conn_finish(c);
}

void rmx_conn_set_cbs(rmx_conn_t *c, const rmx_conn_cbs_t *cbs, void *arg)
{
  c->cbs = *cbs;
  c->cbs_arg = arg;
}

const char *rmx_conn_transport(const rmx_conn_t *c) { return c->ops->name; }

void rmx_conn_stats(const rmx_conn_t *c, rmx_conn_stats_t *st) { *st = c->st; }
