/*
 * Connection manager: listen, connect, accept, handshake, close, and the one
 * path every connection takes down (rmx__conn_down -> transport close ->
 * CLOSED -> conn_finish), so each outcome is reported exactly once.
 */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rmx_int.h"

static void conn_finish(rmx_conn_t *c);
static void close_unwatch(rmx_conn_t *c);
static void tp_close(rmx_conn_t *c);
static void deferred_finish(rmx__deferred_t *d);
static void deferred_free(rmx__deferred_t *d);

static rmx_conn_t *conn_new(rmx_ctx_t *ctx, int tpi)
{
  rmx_conn_t *c = calloc(1, sizeof(*c));
  if (!c)
    return NULL;
  c->ctx = ctx;
  c->tpi = tpi;
  c->ops = ctx->tp_ops[tpi];
  rmx_list_init(&c->ctrlq);
  rmx_list_init(&c->sendq);
  rmx_list_init(&c->rndv_wait);
  rmx_list_init(&c->rxq);
  rmx_list_init(&c->rmaq);
  rmx_list_init(&c->reqq);
  rmx_list_init(&c->reqs_out);
  for (int i = 0; i < RMX_CALL_BUCKETS; i++)
    rmx_list_init(&c->calls[i]);
  rmx_list_init(&c->close_link);
  rmx_list_init(&c->defer_finish.link);
  rmx_list_init(&c->defer_free.link);
  c->defer_finish.fn = deferred_finish;
  c->defer_free.fn = deferred_free;
  rmx_list_push(&ctx->conns, &c->link);
  return c;
}

static void listener_unref(rmx_listener_t *l)
{
  if (--l->refs == 0)
    free(l);
}

void rmx__hello_local(rmx_ctx_t *ctx, uint8_t out[RMX_WIRE_HELLO_LEN])
{
  rmx_wire_hello_t h = {
    .magic = RMX_WIRE_MAGIC,
    .version = RMX_WIRE_VERSION,
    .eager_size = ctx->cfg.eager_size,
    .rx_depth = ctx->cfg.rx_depth,
    .max_msg = ctx->cfg.max_msg_size,
    .rndv_depth = ctx->cfg.rndv_depth,
    .rma_window = ctx->cfg.rma_window,
  };
  rmx_wire_hello_encode(&h, out);
}

/* Decode and sanity-check a peer's hello; logs why it is refused. */
static int hello_check(rmx_ctx_t *ctx, const char *who, const void *data, size_t len,
                       rmx_wire_hello_t *h)
{
  int rc = rmx_wire_hello_decode(data, len, h);
  if (rc == RMX_EVERSION) {
    RMX_LOG(ctx, ERROR, "%s speaks rmx protocol version %u, this side speaks %u: refused", who,
            h->version, RMX_WIRE_VERSION);
    return rc;
  }
  if (rc) {
    RMX_LOG(ctx, ERROR, "%s sent a handshake that is not rmx's (%zu bytes): refused", who, len);
    return rc;
  }
  if (h->eager_size < RMX_EAGER_MIN || h->eager_size > RMX_EAGER_MAX ||
      h->rx_depth < RMX_DEPTH_MIN || h->rx_depth > RMX_DEPTH_MAX || h->max_msg == 0 ||
      h->rma_window == 0 || h->rma_window > RMX_RMA_WINDOW_MAX) {
    RMX_LOG(ctx, ERROR, "%s announced impossible limits (eager %u B, depth %u, largest message "
            "%llu B, remote window %u): refused", who, h->eager_size, h->rx_depth,
            (unsigned long long)h->max_msg, h->rma_window);
    return RMX_EPROTO;
  }
  if (h->flags & ~RMX_HELLO_F_AUTH) {
    RMX_LOG(ctx, ERROR, "%s set handshake flags 0x%x that this version does not know: refused",
            who, h->flags);
    return RMX_EPROTO;
  }
  return 0;
}

/* ---- listening ---- */

static int resolve_now(rmx_ctx_t *ctx, const rmx__uri_t *u, struct addrinfo **res)
{
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  int rc = getaddrinfo(u->host, u->port, &hints, res);
  if (rc) {
    RMX_LOG(ctx, ERROR, "cannot resolve '%s': %s", u->host, gai_strerror(rc));
    return RMX_ENORESOLVE;
  }
  return 0;
}

int rmx_listen(rmx_ctx_t *ctx, const char *uri, rmx_accept_cb on_accept, void *arg,
               rmx_listener_t **out)
{
  rmx__uri_t u;
  struct addrinfo *res;
  int tpi, rc;

  if (!ctx || !on_accept || !out)
    return RMX_EINVAL;
  if ((rc = rmx__uri_parse(uri, &u)) != 0) {
    RMX_LOG(ctx, ERROR, "'%s' is not a valid URI (scheme://host:port)", uri ? uri : "(null)");
    return rc;
  }
  if ((rc = rmx__ctx_tp(ctx, u.scheme, &tpi)) != 0)
    return rc;
  if ((rc = resolve_now(ctx, &u, &res)) != 0)
    return rc;
  rmx_listener_t *l = calloc(1, sizeof(*l));
  if (!l) {
    rc = RMX_ENOMEM;
    goto out_res;
  }
  l->ctx = ctx;
  l->tpi = tpi;
  l->on_accept = on_accept;
  l->arg = arg;
  l->refs = 1;
  rc = ctx->tp_ops[tpi]->listen(ctx->tp[tpi], res->ai_addr, l, &l->tl);
  if (rc) {
    free(l);
    goto out_res;
  }
  rmx_list_push(&ctx->listeners, &l->link);
  *out = l;
out_res:
  freeaddrinfo(res);
  return rc;
}

int rmx_listener_uri(rmx_listener_t *l, char *buf, size_t len)
{
  struct sockaddr_storage ss;
  char addr[80];
  int rc = l->ctx->tp_ops[l->tpi]->listen_addr(l->tl, &ss);
  if (rc)
    return rc;
  rmx__sa_str((struct sockaddr *)&ss, addr, sizeof(addr));
  int n = snprintf(buf, len, "%s://%s", l->ctx->tp_ops[l->tpi]->name, addr);
  return n < 0 || (size_t)n >= len ? RMX_EINVAL : 0;
}

void rmx_listener_close(rmx_listener_t *l)
{
  if (!l || l->closed)
    return;
  l->closed = 1;
  rmx_list_del(&l->link);
  l->ctx->tp_ops[l->tpi]->listen_close(l->tl);
  listener_unref(l);
}

void rmx__tp_incoming(void *owner, rmx_tp_conn_t *tc, const void *hello, size_t len)
{
  rmx_listener_t *l = owner;
  rmx_ctx_t *ctx = l->ctx;
  const rmx_tp_ops_t *ops = ctx->tp_ops[l->tpi];
  rmx_wire_hello_t h;
  uint8_t mine[RMX_AUTH_HELLO_MAX];
  size_t mlen = RMX_WIRE_HELLO_LEN;
  int rc;

  if (l->closed) {
    ops->reject(tc, RMX_ECONNREFUSED);
    return;
  }
  if (l->nconns >= ctx->cfg.max_conns || l->naccepting >= ctx->cfg.max_handshakes) {
    uint32_t held;
    if (ctx->cfg.log_level >= RMX_LOG_WARN && rmx__ratelimit(&l->rl_full, uv_now(ctx->loop), &held))
      rmx__log(RMX_LOG_WARN, "listener full (%u connections, %u in their handshake; "
               "RMX_MAX_CONNS %u, RMX_MAX_HANDSHAKES %u): refusing a peer (%u more not logged)",
               l->nconns, l->naccepting, ctx->cfg.max_conns, ctx->cfg.max_handshakes, held);
    ops->reject(tc, RMX_ECONNREFUSED);
    return;
  }
  if ((rc = hello_check(ctx, "incoming peer", hello, len, &h)) != 0) {
    ops->reject(tc, rc);
    return;
  }
  rmx_conn_t *c = conn_new(ctx, l->tpi);
  if (!c) {
    ops->reject(tc, RMX_ENOMEM);
    return;
  }
  /* Owned by the core until on_accept hands it over. */
  c->passive = 1;
  c->user_closed = 1;
  c->state = RMX_CS_ACCEPTING;
  rmx__msg_init(c, &h);
  rmx__hello_local(ctx, mine);
  if ((rc = rmx__auth_accept(c, l, hello, len, &h, mine, &mlen)) != 0 ||
      (rc = ops->accept(tc, c, mine, mlen)) != 0) {
    ops->reject(tc, rc);
    rmx_list_del(&c->link);
    free(c);
    return;
  }
  c->listener = c->from = l;
  l->refs += 2; /* one while accepting, one until the connection is freed */
  l->nconns++;
  l->naccepting++;
  c->tc = tc;
  c->tp_state = RMX_TPS_OPEN;
}

/* ---- connecting ---- */

static void connect_start(rmx_conn_t *c, const struct sockaddr *sa)
{
  rmx_ctx_t *ctx = c->ctx;
  uint8_t hello[RMX_AUTH_HELLO_MAX];
  rmx__hello_local(ctx, hello);
  size_t hlen = rmx__auth_hello(c, hello);
  int rc = c->ops->connect(ctx->tp[c->tpi], sa, hello, hlen, c, &c->tc);
  if (rc) {
    rmx__conn_down(c, rc);
    return;
  }
  c->tp_state = RMX_TPS_OPEN;
  c->state = RMX_CS_CONNECTING;
}

static void gai_cb(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
  rmx_conn_t *c = rmx_container_of(req, rmx_conn_t, gai);
  rmx_ctx_t *ctx = c->ctx;
  ctx->in_cb++;
  c->gai_active = 0;
  if (c->user_closed)
    rmx__conn_down(c, RMX_ECANCELED);
  else if (status) {
    RMX_LOG(c->ctx, ERROR, "cannot resolve '%s': %s", c->host, uv_strerror(status));
    rmx__conn_down(c, rmx__uv_err(status) == RMX_ECANCELED ? RMX_ECANCELED : RMX_ENORESOLVE);
  } else
    connect_start(c, res->ai_addr);
  uv_freeaddrinfo(res);
  ctx->in_cb--;
}

int rmx_connect(rmx_ctx_t *ctx, const char *uri, rmx_connect_cb on_connected, void *arg,
                rmx_conn_t **out)
{
  rmx__uri_t u;
  int tpi, rc;

  if (!ctx || !on_connected || !out)
    return RMX_EINVAL;
  if ((rc = rmx__uri_parse(uri, &u)) != 0) {
    RMX_LOG(ctx, ERROR, "'%s' is not a valid URI (scheme://host:port)", uri ? uri : "(null)");
    return rc;
  }
  if ((rc = rmx__ctx_tp(ctx, u.scheme, &tpi)) != 0)
    return rc;
  rmx_conn_t *c = conn_new(ctx, tpi);
  if (!c)
    return RMX_ENOMEM;
  c->on_connected = on_connected;
  c->connect_arg = arg;
  c->state = RMX_CS_RESOLVING;
  memcpy(c->host, u.host, sizeof(c->host));
  memcpy(c->port, u.port, sizeof(c->port));
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_NUMERICSERV};
  rc = uv_getaddrinfo(ctx->loop, &c->gai, gai_cb, c->host, c->port, &hints);
  if (rc) {
    rmx_list_del(&c->link);
    free(c);
    return rmx__uv_err(rc);
  }
  c->gai_active = 1;
  *out = c;
  return 0;
}

/* ---- events from the transport ---- */

/* The handshake, authentication included, is over: the application gets
 * the connection (on_connected or on_accept). */
void rmx__conn_ready(rmx_conn_t *c)
{
  c->ops->ready(c->tc); /* the peer's remote requests are served from here */
  if (!c->passive) {
    c->state = RMX_CS_ESTABLISHED;
    c->reported = 1;
    c->on_connected(c, 0, c->connect_arg);
  } else {
    rmx_listener_t *l = c->listener;
    c->listener = NULL;
    l->naccepting--;
    if (l->closed) {
      listener_unref(l);
      rmx__conn_down(c, RMX_ECONNREFUSED);
      return;
    }
    c->state = RMX_CS_ESTABLISHED;
    c->user_closed = 0;
    c->reported = 1; /* from here the user owns it */
    l->on_accept(l, c, l->arg);
    listener_unref(l);
  }
  /* Data that arrived with the handshake, or sends queued in on_accept. */
  if (c->state == RMX_CS_ESTABLISHED)
    rmx__msg_progress(c);
}

static void on_established(rmx_conn_t *c, const rmx_tp_ev_t *ev)
{
  rmx_wire_hello_t h;
  int rc;

  if (c->state == RMX_CS_CONNECTING) {
    if ((rc = hello_check(c->ctx, "server", ev->data, ev->len, &h)) != 0 ||
        (rc = rmx__auth_check_server(c, &h, ev->data, ev->len)) < 0) {
      rmx__conn_down(c, rc);
      return;
    }
    rmx__msg_init(c, &h);
  } else if (c->state != RMX_CS_ACCEPTING) {
    return;
  }
  if (c->auth.on) /* AUTH (connecting) or its wait (accepting) comes first */
    rmx__auth_begin(c);
  else
    rmx__conn_ready(c);
}

void rmx__conn_on_event(rmx_conn_t *c, const rmx_tp_ev_t *ev)
{
  switch (ev->type) {
  case RMX_TP_EV_ESTABLISHED:
    on_established(c, ev);
    break;
  case RMX_TP_EV_DISCONNECTED:
    rmx__conn_down(c, ev->status ? ev->status : RMX_ECONNRESET);
    break;
  case RMX_TP_EV_CLOSED:
    c->tp_state = RMX_TPS_CLOSED;
    c->tc = NULL;
    conn_finish(c);
    break;
  default:
    break;
  }
}

/* ---- going down: one path for every cause ---- */

static void tp_close(rmx_conn_t *c)
{
  if (c->tp_state == RMX_TPS_OPEN) {
    c->tp_state = RMX_TPS_CLOSING;
    c->ops->close(c->tc);
  }
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
    tp_close(c);
    return;
  }
  /* Protocol errors were logged where they were found. */
  if (c->state == RMX_CS_ESTABLISHED && status != 0 && status != RMX_ECANCELED &&
      status != RMX_EPROTO)
    RMX_LOG(c->ctx, WARN, "connection %p (%s) lost: %s", (void *)c, c->ops->name,
            rmx_strerror(status));
  c->was_established = c->state == RMX_CS_ESTABLISHED;
  c->state = RMX_CS_DOWN;
  c->err = status;
  if (c->tp_state == RMX_TPS_OPEN)
    tp_close(c);
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
    RMX_LOG(ctx, WARN, "connection %p: RPC requests never answered end with the context",
            (void *)c);
    rmx__rpc_drop_unanswered(c);
  }
  if (c->ops_out)
    return; /* an op is still out: its release schedules this again */
  c->freeing = 1; /* on_closed may destroy the context: not again */
  if (c->on_closed)
    c->on_closed(c, c->close_arg);
  if (c->from) {
    c->from->nconns--;
    listener_unref(c->from);
  }
  rmx_list_del(&c->link);
  free(c);
  if (ctx->dying)
    rmx__ctx_conn_freed(ctx);
}

/* ---- close deadlines: an orderly close never waits on a peer forever ---- */

static void close_timer_cb(uv_timer_t *t)
{
  rmx_ctx_t *ctx = t->data;
  ctx->in_cb++;
  rmx__conn_close_expired(ctx);
  ctx->in_cb--;
}

static void close_watch(rmx_conn_t *c)
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

void rmx__conn_close_expired(rmx_ctx_t *ctx)
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
    RMX_LOG(ctx, WARN, "connection %p (%s): the peer did not finish the close within %u ms "
            "(RMX_CLOSE_TIMEOUT_MS): cutting it", (void *)c, c->ops->name,
            ctx->cfg.close_timeout_ms);
    tp_close(c); /* what is outstanding fails when the transport reports CLOSED */
  }
}

static void schedule_free(rmx_conn_t *c) { rmx__defer_once(c->ctx, &c->defer_free); }

/* The transport is closed: fail what is left, report once, maybe free. */
static void conn_finish(rmx_conn_t *c)
{
  int op_status = c->user_closed ? RMX_ECANCELED : (c->err ? c->err : RMX_ECONNRESET);
  c->finished = 1;
  rmx__msg_fail_all(c, op_status); /* request sends first: their calls then end */
  rmx__rpc_fail_all(c, op_status);
  rmx__auth_end(c); /* while c->listener still names where it came in */
  if (c->listener) {
    c->listener->naccepting--;
    listener_unref(c->listener);
    c->listener = NULL;
  }
  close_unwatch(c);
  if (!c->reported) {
    c->reported = 1;
    if (c->on_connected) /* an active connect that never got through */
      c->on_connected(c, c->user_closed ? RMX_ECANCELED : op_status, c->connect_arg);
  } else if (c->was_established && !c->user_closed && c->cbs.on_disconnect) {
    c->cbs.on_disconnect(c, c->err, c->cbs_arg);
  }
  if (c->user_closed && (c->ops_out == 0 || c->ctx->dying))
    schedule_free(c);
}

void rmx__conn_unref_op(rmx_conn_t *c)
{
  if (--c->ops_out == 0 && c->finished && c->user_closed)
    schedule_free(c);
}

/* ---- public ---- */

int rmx_conn_close(rmx_conn_t *c, rmx_close_cb on_closed, void *arg)
{
  if (!c)
    return RMX_EINVAL;
  if (c->user_closed)
    return RMX_EALREADY;
  c->user_closed = 1;
  c->on_closed = on_closed;
  c->close_arg = arg;
  switch (c->state) {
  case RMX_CS_RESOLVING:
    uv_cancel((uv_req_t *)&c->gai); /* gai_cb sees user_closed */
    break;
  case RMX_CS_ESTABLISHED:
    c->was_established = 1;
    c->state = RMX_CS_DOWN;
    c->err = RMX_ECANCELED;
    /* Orderly: what was handed to the transport goes first, then BYE, then
     * the transport closes when BYE's send completes, or at the deadline. */
    if (rmx__msg_queue_bye(c) != 0)
      tp_close(c);
    else if (c->tp_state == RMX_TPS_OPEN)
      close_watch(c);
    break;
  case RMX_CS_DOWN:
    if (c->finished)
      schedule_free(c);
    break;
  default:
    rmx__conn_down(c, RMX_ECANCELED);
    break;
  }
  return 0;
}

void rmx__conn_bye_sent(rmx_conn_t *c) { tp_close(c); }

void rmx_conn_set_cbs(rmx_conn_t *c, const rmx_conn_cbs_t *cbs, void *arg)
{
  c->cbs = *cbs;
  c->cbs_arg = arg;
}

const char *rmx_conn_transport(const rmx_conn_t *c) { return c->ops->name; }

void rmx_conn_stats(const rmx_conn_t *c, rmx_conn_stats_t *st) { *st = c->st; }
