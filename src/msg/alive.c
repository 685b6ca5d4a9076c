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
 * Each established connection is looked at every period of its own (its
 * send interval) and only then: it waits in a queue of the context,
 * ordered by when it is due (ka.check_at), one queue per period, so that
 * appending at now + period keeps the order and costs nothing to find.
 * One timer per context fires at the earliest head; a tick looks at the
 * connections that are due, and idle ones cost nothing between their own
 * checks, however many there are and however short another's period. The
 * data path only stamps times (uv_now, no system call) as frames come and
 * go; no timer or queue is touched per message (but with RMX_EVICT_IDLE
 * an accepted connection moves to its listener's tail: below). A
 * connection that leaves the established state drops out when it comes
 * up; one freed is unlinked (rt/conn.c).
 *
 * RMX_IDLE_TIMEOUT_MS: a connection that has carried no message (ka.last_msg:
 * anything but CREDIT and BYE frames, either way) for that long is closed
 * at a check: its period is then at most the limit.
 *
 * A check that comes more than a period after its time found the loop
 * held (a long callback, a long call between turns, a stalled machine):
 * what the peer sent meanwhile is still unread, since libuv runs timers
 * before it polls. That check sends what is due but judges no one; the
 * next one does, once the loop has read what waited.
 */
#include "rmx_int.h"

static void alive_tick(uv_timer_t *t);

void rmx__alive_ctx_init(rmx_ctx_t *ctx)
{
  uv_timer_init(ctx->loop, &ctx->alive_timer);
  ctx->alive_timer.data = ctx;
  uv_unref((uv_handle_t *)&ctx->alive_timer); /* connections keep the loop alive, not this */
  for (int i = 0; i < RMX_ALIVE_QS; i++) {
    ctx->alive_q[i].period = 0;
    rmx_list_init(&ctx->alive_q[i].q);
  }
}

#define KA_OF(n) rmx_container_of(n, rmx_conn_t, ka.link)

/* The queue for a period: its own, else an empty one, else the one of the
 * nearest period (RMX_ALIVE_QS different periods at once are rare: a
 * context's own keepalive_ms and its peers' limits). */
static rmx_list_t *queue_for(rmx_ctx_t *ctx, uint32_t period)
{
  int pick = -1;
  uint32_t best = UINT32_MAX;
  for (int i = 0; i < RMX_ALIVE_QS; i++) {
    uint32_t p = ctx->alive_q[i].period;
    if (p == period)
      return &ctx->alive_q[i].q;
    uint32_t d = rmx_list_empty(&ctx->alive_q[i].q) ? 0 : p > period ? p - period : period - p;
    if (d < best)
      best = d, pick = i;
  }
  if (best == 0)
    ctx->alive_q[pick].period = period;
  return &ctx->alive_q[pick].q;
}

/* In order of check_at, from the tail: at once when it is the latest, as
 * in a queue of its own period it always is. */
static void enqueue(rmx_ctx_t *ctx, rmx_conn_t *c, uint64_t at)
{
  rmx_list_t *q = queue_for(ctx, c->ka.every), *n = q->prev;
  c->ka.check_at = at;
  while (n != q && KA_OF(n)->ka.check_at > at)
    n = n->prev;
  rmx_list_push_front(n, &c->ka.link);
}

/* The timer fires at the earliest head, or stops when nothing is queued. */
static void arm(rmx_ctx_t *ctx, uint64_t now)
{
  uint64_t first = UINT64_MAX;
  for (int i = 0; i < RMX_ALIVE_QS; i++)
    if (!rmx_list_empty(&ctx->alive_q[i].q) &&
        KA_OF(ctx->alive_q[i].q.next)->ka.check_at < first)
      first = KA_OF(ctx->alive_q[i].q.next)->ka.check_at;
  if (first == UINT64_MAX)
    uv_timer_stop(&ctx->alive_timer);
  else
    uv_timer_start(&ctx->alive_timer, alive_tick, first > now ? first - now : 0, 0);
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
  c->ka.last_rx = c->ka.last_tx = c->ka.credit_at = c->ka.last_msg = now;
  c->ka.blocked_at = c->ka.stuck_at = 0;
  /* Never longer than our own interval, so it is also how often we check. */
  c->ka.send_ms = min_nz(ctx->cfg.keepalive_ms, c->ka.peer_limit / 3);
  c->ka.every = min_nz(c->ka.send_ms, ctx->cfg.idle_timeout_ms);
  rmx_list_del(&c->ka.link); /* established again (a reconnect) */
  if (c->ka.every == 0)
    return; /* neither side watches */
  enqueue(ctx, c, now + c->ka.every);
  arm(ctx, now);
}

/* Messages wait for credits, and no rendezvous of ours is being read at
 * the peer (a large read legitimately holds the credits of what follows). */
static int credit_blocked(const rmx_conn_t *c)
{
  return !rmx_list_empty(&c->sendq) && c->cr.credits < rmx__credit_need(RMX_FR_DATA) &&
         rmx_list_empty(&c->rndv_wait);
}

/* RMX_IDLE_TIMEOUT_MS: no message for that long (keepalives and credit
 * returns do not count). The peer gets BYE; on_disconnect here gets
 * RMX_ETIMEDOUT. 1 when it was closed. */
static int idle_check(rmx_conn_t *c, uint64_t now)
{
  uint32_t idle = c->ctx->cfg.idle_timeout_ms;
  if (!idle || now - c->ka.last_msg < idle)
    return 0;
  RMX_LOG(c->ctx, INFO, "%s peer %s: no message for %llu ms (RMX_IDLE_TIMEOUT_MS %u): closing",
          c->ops->name, c->peer, (unsigned long long)(now - c->ka.last_msg), idle);
  rmx__msg_queue_bye(c);
  c->ka.idle = 1;
  rmx__conn_down(c, RMX_ETIMEDOUT);
  return 1;
}

/* A condition that ends the connection once it has held for limit: *at
 * is when it was first seen (0: it does not hold), counted from no earlier
 * than floor. 1 when the connection was ended, its log line naming what. */
static int held_too_long(rmx_conn_t *c, int holds, uint64_t *at, uint64_t floor, uint64_t now,
                         uint32_t limit, const char *what)
{
  if (!holds) {
    *at = 0;
    return 0;
  }
  if (*at == 0)
    *at = now;
  uint64_t since = *at > floor ? *at : floor;
  if (now - since < limit)
    return 0;
  RMX_LOG(c->ctx, WARN, "%s peer %s: %s for %llu ms (RMX_KEEPALIVE_TIMEOUT_MS %u): closing",
          c->ops->name, c->peer, what, (unsigned long long)(now - since), limit);
  rmx__conn_down(c, RMX_ETIMEDOUT);
  return 1;
}

/* 1 when the connection was declared lost. */
static int watch(rmx_conn_t *c, uint64_t now, uint32_t limit)
{
  /* Reading from the peer, whose answer brings no frame until it is whole:
   * on verbs its device answers, and the read's own failure (RC retries)
   * reports a lost peer; where its process answers (TCP, shm), the answer's
   * bytes coming say it is there, and a stopped one is silent. */
  if (c->rndv_reads && (!c->ops->heard || c->ops->heard(c->tc)))
    c->ka.last_rx = now;
  if (now - c->ka.last_rx >= limit) {
    RMX_LOG(c->ctx, WARN, "%s peer %s: nothing from it for %llu ms "
            "(RMX_KEEPALIVE_TIMEOUT_MS %u): peer lost", c->ops->name, c->peer,
            (unsigned long long)(now - c->ka.last_rx), limit);
    rmx__conn_down(c, RMX_ETIMEDOUT);
    return 1;
  }
  if (held_too_long(c, c->ops->stuck && c->ops->stuck(c->tc), &c->ka.stuck_at, 0, now, limit,
                    "took none of our bytes, though it talks,"))
    return 1;
  /* the wait counts from the last credit return that let a message go */
  return held_too_long(c, credit_blocked(c), &c->ka.blocked_at, c->ka.credit_at, now, limit,
                       "messages waited for credits it does not return");
}

static void alive_tick(uv_timer_t *t)
{
  rmx_ctx_t *ctx = t->data;
  uint64_t now = uv_now(ctx->loop);
  uint32_t limit = rmx__alive_limit(&ctx->cfg);

  rmx__cb_enter(ctx);
  rmx__pool_trim(ctx, now);
  for (int i = 0; i < RMX_ALIVE_QS; i++) {
    rmx_list_t *q = &ctx->alive_q[i].q;
    /* Those looked at go back at now + period: behind the due ones. */
    while (!rmx_list_empty(q) && KA_OF(q->next)->ka.check_at <= now) {
      rmx_conn_t *c = KA_OF(q->next);
      int held = now > c->ka.check_at + c->ka.every;
      rmx_list_del(&c->ka.link);
      if (c->state != RMX_CS_ESTABLISHED)
        continue; /* alive_start puts it back if it is established again */
      if ((limit && !held && watch(c, now, limit)) || (!held && idle_check(c, now)))
        continue; /* down: callbacks ran, but frees are deferred */
      if (c->ka.send_ms && now - c->ka.last_tx >= c->ka.send_ms && !c->ka.due &&
          rmx__credit_frame_ok(&c->cr)) {
        if (rmx__msg_queue_keepalive(c) == 0)
          rmx__msg_progress(c);
      }
      if (c->state == RMX_CS_ESTABLISHED && rmx_list_empty(&c->ka.link))
        enqueue(ctx, c, now + c->ka.every);
    }
  }
  arm(ctx, now);
  ctx->in_cb--;
}

/*
 * RMX_EVICT_IDLE. A listener keeps its established connections in a list
 * (l->evict) in order of ka.last_msg: listed last when established, moved
 * last by each message (rmx__alive_msg, O(1): no walk, here or there).
 * Those that left the established state stay until freed or until they
 * reach the head, where they are dropped for good (each once), so the
 * longest-idle established connection is found in O(1) amortized.
 */
void rmx__alive_listed(rmx_conn_t *c, rmx_listener_t *l)
{
  if (c->ctx->cfg.evict_idle)
    rmx_list_push(&l->evict, &c->ka.evict_link);
}

rmx_conn_t *rmx__alive_idlest(rmx_listener_t *l)
{
  while (!rmx_list_empty(&l->evict)) {
    rmx_conn_t *c = rmx_container_of(l->evict.next, rmx_conn_t, ka.evict_link);
    if (c->state == RMX_CS_ESTABLISHED)
      return c;
    rmx_list_del(&c->ka.evict_link); /* closing: not established again */
  }
  return NULL;
}

/* As an idle close (idle_check): BYE to the peer, whose on_disconnect gets
 * 0; on_disconnect here gets RMX_ECANCELED (this side closed it). */
void rmx__alive_evict(rmx_conn_t *c, const char *addr)
{
  rmx_ctx_t *ctx = c->ctx;
  uint64_t now = uv_now(ctx->loop);
  RMX_LOG_LIMITED(ctx, &c->from->rl_full, WARN, "listener full (RMX_MAX_CONNS %u): closing %s "
                  "peer %s, which carried no message for %llu ms, for the new peer %s "
                  "(RMX_EVICT_IDLE)", ctx->cfg.max_conns, c->ops->name, c->peer,
                  (unsigned long long)(now - c->ka.last_msg), addr);
  rmx_list_del(&c->ka.evict_link);
  c->ka.evicted = 1;
  c->from->nevicted++;
  rmx__cb_enter(ctx); /* the transport's I/O callback: a flush follows (rt.c) */
  rmx__msg_queue_bye(c);
  rmx__conn_down(c, RMX_ECANCELED);
  ctx->in_cb--;
}
