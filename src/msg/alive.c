/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Liveness: keepalive frames, silence and credit stalls (docs/protocol.md,
 * keepalive; docs/reliability.md).
 *
 * Each side announces in its hello how long it lets the peer stay silent
 * (keepalive_timeout_ms, 0 when keepalive_ms is 0). Each side sends a frame
 * whenever it has sent none for a third of the peer's limit, or for its own
 * keepalive_ms, whichever is shorter: a CREDIT frame if nothing else is due.
 * A peer from which nothing has come for our limit is lost (RMX_ETIMEDOUT),
 * and so is one that leaves our messages waiting for credits that long.
 *
 * One timer per context sweeps the established connections every period
 * (the shortest interval any of them needs); the data path only stamps
 * times (uv_now, no system call) as frames come and go, and no timer is
 * touched per message. A sweep costs one pass over the connections.
 *
 * A sweep that runs more than a period after its time found the loop held
 * (a long callback, a long call between turns, a stalled machine): what
 * the peers sent meanwhile is still unread, since libuv runs timers before
 * it polls. That sweep sends what is due but judges no one; the next one
 * does, once the loop has read what waited.
 */
#include "rmx_int.h"

static void alive_tick(uv_timer_t *t);

void rmx__alive_ctx_init(rmx_ctx_t *ctx)
{
  uv_timer_init(ctx->loop, &ctx->alive_timer);
  ctx->alive_timer.data = ctx;
  uv_unref((uv_handle_t *)&ctx->alive_timer); /* connections keep the loop alive, not this */
}

static uint32_t min_nz(uint32_t a, uint32_t b) { return a == 0 ? b : b == 0 ? a : a < b ? a : b; }

/* This side's silence limit, as announced in its hello; 0: none. */
uint32_t rmx__alive_limit(const rmx_config_t *cfg)
{
  return cfg->keepalive_ms ? cfg->keepalive_timeout_ms : 0;
}

/* The connection is established: its clocks start now, and the context's
 * sweep runs at least as often as this connection needs. */
void rmx__alive_start(rmx_conn_t *c)
{
  rmx_ctx_t *ctx = c->ctx;
  uint64_t now = uv_now(ctx->loop);
  c->ka.last_rx = c->ka.last_tx = c->ka.credit_at = now;
  c->ka.blocked_at = 0;
  /* Never longer than our own interval, so it is also how often we check. */
  uint32_t period = c->ka.send_ms = min_nz(ctx->cfg.keepalive_ms, c->ka.peer_limit / 3);
  if (period == 0)
    return; /* neither side watches */
  if (!uv_is_active((uv_handle_t *)&ctx->alive_timer) || period < ctx->alive_period) {
    ctx->alive_period = period;
    ctx->alive_due = now + period;
    uv_timer_start(&ctx->alive_timer, alive_tick, period, period);
  }
}

/* Messages wait for credits, and no rendezvous of ours is being read at
 * the peer (a large read legitimately holds the credits of what follows). */
static int credit_blocked(const rmx_conn_t *c)
{
  return !rmx_list_empty(&c->sendq) && c->cr.credits < rmx__credit_need(RMX_FR_DATA) &&
         rmx_list_empty(&c->rndv_wait);
}

/* 1 when the connection was declared lost. */
static int watch(rmx_conn_t *c, uint64_t now, uint32_t limit)
{
  if (c->rndv_reads)
    c->ka.last_rx = now; /* reading from the peer: the read's own failure
                            reports a lost peer (verbs: RC retries; TCP: the
                            socket's keepalive and user timeout) */
  if (now - c->ka.last_rx >= limit) {
    RMX_LOG(c->ctx, WARN, "%s peer %s: nothing from it for %llu ms "
            "(RMX_KEEPALIVE_TIMEOUT_MS %u): peer lost", c->ops->name, c->peer,
            (unsigned long long)(now - c->ka.last_rx), limit);
    rmx__conn_down(c, RMX_ETIMEDOUT);
    return 1;
  }
  if (!credit_blocked(c)) {
    c->ka.blocked_at = 0;
    return 0;
  }
  if (c->ka.blocked_at == 0)
    c->ka.blocked_at = now;
  uint64_t since = c->ka.blocked_at > c->ka.credit_at ? c->ka.blocked_at : c->ka.credit_at;
  if (now - since >= limit) {
    RMX_LOG(c->ctx, WARN, "%s peer %s: messages waited %llu ms for credits "
            "it does not return (RMX_KEEPALIVE_TIMEOUT_MS %u): closing", c->ops->name, c->peer,
            (unsigned long long)(now - since), limit);
    rmx__conn_down(c, RMX_ETIMEDOUT);
    return 1;
  }
  return 0;
}

static void alive_tick(uv_timer_t *t)
{
  rmx_ctx_t *ctx = t->data;
  uint64_t now = uv_now(ctx->loop);
  uint32_t limit = rmx__alive_limit(&ctx->cfg);
  rmx_list_t *n, *next;
  int any = 0, held = now > ctx->alive_due + ctx->alive_period;

  ctx->alive_due = now + ctx->alive_period; /* libuv repeats from now */
  ctx->in_cb++;
  for (n = ctx->conns.next; n != &ctx->conns; n = next) {
    next = n->next; /* nothing here frees a connection, but stay safe */
    rmx_conn_t *c = rmx_container_of(n, rmx_conn_t, link);
    if (c->state != RMX_CS_ESTABLISHED)
      continue;
    any = 1;
    if (limit && !held && watch(c, now, limit))
      continue;
    if (c->ka.send_ms && now - c->ka.last_tx >= c->ka.send_ms && !c->ka.due &&
        rmx__credit_frame_ok(&c->cr)) {
      if (rmx__msg_queue_keepalive(c) == 0)
        rmx__msg_progress(c);
    }
  }
  if (!any)
    uv_timer_stop(&ctx->alive_timer); /* restarted by the next connection */
  ctx->in_cb--;
}
