/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Connection set-up and close from the API: listen, connect, accept, the
 * handshake (hello checks, authentication's place in it), the hand-over
 * to the application, and the orderly close. The connection object and
 * its way down are src/rt/conn.c.
 */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "choose.h"
#include "group.h"
#include "hello.h"

/* ---- transports ---- */

static int tp_open(rmx_ctx_t *ctx, int i)
{
  if (ctx->tp[i])
    return 0;
  return ctx->tp_ops[i]->init(&ctx->tp_env, &ctx->tp[i]);
}

/* The transport instance for a URI scheme, opened on first use. */
static int ctx_tp(rmx_ctx_t *ctx, const char *scheme, int *tpi)
{
  const char *why = "";
  int slots[RMX_TP_COUNT], rc;
  if (strcmp(scheme, "auto") == 0) {
    /* The first of RMX_TRANSPORTS that opens here (verbs: a device) and
     * has addresses of its own; a connect then chooses per peer. */
    int n = rmx__choose_slots(ctx, slots);
    if (n < 0)
      return n;
    *tpi = slots[0]; /* shm alone: a listener answers at its alias only */
    for (int k = n - 1; k >= 0; k--)
      if (!(ctx->tp_ops[slots[k]]->flags & RMX_TP_F_LOCAL_NAME))
        *tpi = slots[k];
    return 0;
  }
  if ((rc = rmx__tp_lookup(scheme, tpi, &why)) != 0) {
    if (rc == RMX_ENOTSUP)
      RMX_LOG(ctx, ERROR, "%s:// is not available: %s", scheme, why);
    else
      RMX_LOG(ctx, ERROR, "%s:// names no transport rmx has", scheme);
    return rc;
  }
  return tp_open(ctx, *tpi);
}

/* Parse a URI and open its transport. */
int rmx__uri_open(rmx_ctx_t *ctx, const char *uri, rmx__uri_t *u, int *tpi)
{
  int rc = rmx__uri_parse(uri, u);
  if (rc) {
    RMX_LOG(ctx, ERROR, "'%s' is not a valid URI (scheme://host[:port]): %s",
            uri ? uri : "(null)", u->why);
    return rc;
  }
  return ctx_tp(ctx, u->scheme, tpi);
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
  if ((rc = rmx__uri_open(ctx, uri, &u, &tpi)) != 0)
    return rc;
  if (ctx->tp_ops[tpi]->flags & RMX_TP_F_LOCAL_NAME) { /* a socket name: nothing to resolve */
    struct sockaddr_storage ss;
    if ((rc = rmx__uri_unix(u.host, &ss)) != 0)
      return rc;
    return rmx__listener_open(ctx, tpi, (struct sockaddr *)&ss, on_accept, arg, out);
  }
  if ((rc = resolve_now(ctx, &u, &res)) != 0)
    return rc;
  rc = rmx__listener_open(ctx, tpi, res->ai_addr, on_accept, arg, out);
  freeaddrinfo(res);
  if (rc == 0) /* the same listener over shm (and, for auto://, the others) */
    rmx__choose_aliases(*out, strcmp(u.scheme, "auto") == 0);
  return rc;
}


void rmx__tp_incoming(void *owner, rmx_tp_conn_t *tc, const void *hello, size_t len)
{
  rmx_listener_t *l = owner;
  rmx_ctx_t *ctx = l->ctx;
  const rmx_tp_ops_t *ops = ctx->tp_ops[l->tpi];
  rmx_wire_hello_t h;
  rmx__hello_terms_t t;
  uint8_t mine[RMX_AUTH_HELLO_MAX];
  size_t mlen = RMX_WIRE_HELLO_LEN;
  uint64_t token = 0;
  int rc;

  if (l->closed) {
    ops->reject(tc, RMX_ECONNREFUSED);
    return;
  }
  /* Logs name an incoming peer by its address. */
  struct sockaddr_storage ss = {0};
  char addr[96] = "(unknown)", who[128];
  if (ops->peer_addr(tc, &ss) == 0)
    rmx__sa_str((struct sockaddr *)&ss, addr, sizeof(addr));
  /* Where the transport can pause its listener, peers past the handshake
   * limit wait for a slot (rmx__listener_slots) instead of a refusal; the
   * ones it had taken already are let in. A full listener may make room
   * by closing its idlest connection (RMX_EVICT_IDLE), once the newcomer
   * has passed every check here: it is let in at once, before the evicted
   * one is freed, so nconns passes max_conns by the evicted connections
   * still closing, at most max_conns of them (twice max_conns in all). */
  rmx_conn_t *victim = NULL;
  if (l->nconns >= ctx->cfg.max_conns && ctx->cfg.evict_idle &&
      l->nevicted < ctx->cfg.max_conns)
    victim = rmx__alive_idlest(l);
  if ((l->nconns >= ctx->cfg.max_conns && !victim) ||
      (!ops->listen_pause && l->naccepting >= ctx->cfg.max_handshakes)) {
    RMX_LOG_LIMITED(ctx, &l->rl_full, WARN, "listener full (%u connections, %u in their "
                    "handshake; RMX_MAX_CONNS %u, RMX_MAX_HANDSHAKES %u): refusing %s peer %s",
                    l->nconns, l->naccepting, ctx->cfg.max_conns, ctx->cfg.max_handshakes,
                    ops->name, addr);
    ops->reject(tc, RMX_ECONNREFUSED);
    return;
  }
  uint64_t ban = ss.ss_family ? rmx__guard_banned(ctx, (struct sockaddr *)&ss) : 0;
  if (ban) {
    RMX_LOG_LIMITED(ctx, &ctx->guard.rl, WARN, "guard: refusing %s peer %s: banned for %llu ms "
                    "more for its refused remote accesses (RMX_GUARD_BAN_MS)", ops->name, addr,
                    (unsigned long long)ban);
    ops->reject(tc, RMX_ECONNREFUSED);
    return;
  }
  snprintf(who, sizeof(who), "incoming %s peer %s", ops->name, addr);
  if ((rc = rmx__hello_check(ctx, &ctx->rl_refused, who, hello, len,
                        RMX_HELLO_F_AUTH | RMX_HELLO_F_RAIL, 0, &h, &t)) != 0 ||
      (rc = rmx__hello_rail_token(ctx, who, hello, len, &h, &token)) != 0) {
    ops->reject(tc, rc);
    return;
  }
  rmx_conn_t *c = rmx__conn_new(ctx, l->tpi);
  if (!c) {
    ops->reject(tc, RMX_ENOMEM);
    return;
  }
  snprintf(c->peer, sizeof(c->peer), "%s", addr);
  c->rail_token = token;
  /* Owned by the core until on_accept hands it over. */
  c->passive = 1;
  c->user_closed = 1;
  c->state = RMX_CS_ACCEPTING;
  rmx__msg_init(c, &h);
  rmx__hello_terms_keep(c, &t);
  rmx__hello_local(ctx, mine);
  /* Our range goes after the proof, and the proof covers it where the
   * peer sent one too. */
  rmx__hello_range_local(c->auth.srange);
  if (t.range) {
    memcpy(c->auth.crange, t.range, RMX_WIRE_RANGE_LEN);
    c->auth.ranged = 1;
  }
  if ((rc = rmx__auth_accept(c, l, hello, len, &h, mine, &mlen)) == 0) {
    memcpy(mine + mlen, c->auth.srange, RMX_WIRE_RANGE_LEN);
    mlen += RMX_WIRE_RANGE_LEN;
  }
  if (rc || (rc = ops->accept(tc, c, mine, mlen)) != 0) {
    ops->reject(tc, rc);
    rmx_list_del(&c->link);
    ctx->nconns--;
    free(c);
    return;
  }
  c->listener = c->from = l;
  l->refs += 2; /* one while accepting, one until the connection is freed */
  l->nconns++;
  l->naccepting++;
  c->tc = tc;
  c->tp_state = RMX_TPS_OPEN;
  rmx__listener_slots(l);
  if (victim)
    rmx__alive_evict(victim, addr);
}

/* ---- connecting ---- */

static void connect_start(rmx_conn_t *c, const struct sockaddr *sa)
{
  rmx_ctx_t *ctx = c->ctx;
  uint8_t hello[RMX_AUTH_HELLO_MAX];
  rmx__hello_local(ctx, hello);
  if (c->rail_token) /* before the nonce: the flag is part of what AUTH proves */
    rmx_put16(hello + 6, rmx_get16(hello + 6) | RMX_HELLO_F_RAIL);
  size_t hlen = rmx__auth_hello(c, hello);
  c->auth.ranged = 0;
  if (c->rail_token) { /* a rail sends its token where the range would go */
    rmx_put64(hello + hlen, c->rail_token);
    hlen += RMX_WIRE_RAIL_TOKEN_LEN;
  } else {
    rmx__hello_range_local(c->auth.crange);
    memcpy(hello + hlen, c->auth.crange, RMX_WIRE_RANGE_LEN);
    hlen += RMX_WIRE_RANGE_LEN;
  }
  int rc;
  while ((rc = c->ops->connect(ctx->tp[c->tpi], sa, hello, hlen, c, &c->tc)) != 0 &&
         rmx__choose_next(c, rc))
    ; /* auto://: the next transport */
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
  rmx__cb_enter(ctx);
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

/* A transport whose addresses are socket names (RMX_TP_F_LOCAL_NAME):
 * the connect starts from the loop, as after a resolve. */
static void name_connect(rmx__deferred_t *d)
{
  rmx_conn_t *c = rmx_container_of(d, rmx_conn_t, defer_connect);
  struct sockaddr_storage ss;
  c->gai_active = 0;
  if (c->user_closed)
    rmx__conn_down(c, RMX_ECANCELED);
  else if (rmx__uri_unix(c->host, &ss) != 0)
    rmx__conn_down(c, RMX_EINVAL);
  else
    connect_start(c, (struct sockaddr *)&ss);
}

int rmx__conn_fallback(rmx_conn_t *c, int status)
{
  if (!rmx__choose_fallback(c, status))
    return 0;
  uint8_t tpi = (uint8_t)c->tpi; /* the reset leaves the transport chosen */
  rmx__reconnect_reset(c);
  c->tpi = tpi;
  int rc = rmx__conn_resolve(c);
  if (rc)
    rmx__conn_down(c, rc);
  return 1;
}

/* Resolve the connection's host, then connect (gai_cb): the first connect
 * and every reconnect attempt. */
int rmx__conn_resolve(rmx_conn_t *c)
{
  if (c->by_name) {
    c->defer_connect.fn = name_connect;
    rmx__defer_once(c->ctx, &c->defer_connect);
    c->gai_active = 1;
    return 0;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_NUMERICSERV};
  int rc = uv_getaddrinfo(c->ctx->loop, &c->gai, gai_cb, c->host, c->port, &hints);
  if (rc)
    return rmx__uv_err(rc);
  c->gai_active = 1;
  return 0;
}

int rmx_connect_opts(rmx_ctx_t *ctx, const char *uri, const rmx_connect_opts_t *opts,
                     rmx_connect_cb on_connected, void *arg, rmx_conn_t **out)
{
  rmx__uri_t u;
  int tpi, rc;

  if (!ctx || !on_connected || !out)
    return RMX_EINVAL;
  if ((rc = rmx__uri_open(ctx, uri, &u, &tpi)) != 0)
    return rc;
  rmx_conn_t *c = rmx__conn_new(ctx, tpi);
  if (!c)
    return RMX_ENOMEM;
  c->on_connected = on_connected;
  c->connect_arg = arg;
  c->state = RMX_CS_RESOLVING;
  c->by_name = strcmp(u.scheme, "auto") != 0 && (c->ops->flags & RMX_TP_F_LOCAL_NAME);
  if (strcmp(u.scheme, "auto") == 0 && (rc = rmx__choose_auto(c)) != 0) {
    rmx_list_del(&c->link);
    ctx->nconns--;
    free(c);
    return rc;
  }
  memcpy(c->host, u.host, sizeof(c->host));
  memcpy(c->port, u.port, sizeof(c->port));
  if (c->by_name)
    snprintf(c->peer, sizeof(c->peer), "%s", c->host);
  else
    snprintf(c->peer, sizeof(c->peer), "%s:%s", c->host, c->port);
  if ((rc = rmx__reconnect_opts(c, opts)) != 0 || (rc = rmx__conn_resolve(c)) != 0) {
    rmx_list_del(&c->link);
    ctx->nconns--;
    free(c);
    return rc;
  }
  *out = c;
  return 0;
}

int rmx_connect(rmx_ctx_t *ctx, const char *uri, rmx_connect_cb on_connected, void *arg,
                rmx_conn_t **out)
{
  return rmx_connect_opts(ctx, uri, NULL, on_connected, arg, out);
}

/* ---- the handshake's end ---- */

/* Logs name a connection by the peer's address and, where the transport
 * has one, its own name for it: "192.0.2.1:7471 QP 0x15 on rxe0". */
static void conn_label(rmx_conn_t *c)
{
  char label[96];
  if (!c->ops->conn_label || c->ops->conn_label(c->tc, label, sizeof(label)) != 0)
    return;
  c->peer[strcspn(c->peer, " ")] = '\0'; /* a reconnect's new label replaces the old */
  size_t n = strlen(c->peer);
  snprintf(c->peer + n, sizeof(c->peer) - n, " %s", label);
}

/* Both ends' addresses, kept for rmx_conn_peer_addr / rmx_conn_local_addr
 * (still valid after the transport lets go), and the info line that says
 * the connection is up. */
static void conn_addrs(rmx_conn_t *c)
{
  char pa[96] = "?", la[96] = "?";
  struct sockaddr_storage ss;
  /* Each as the transport tells it; a reconnect that cannot read one
   * keeps what the last connection had. */
  c->addrs_taken = 1;
  if (c->ops->peer_addr(c->tc, &ss) == 0)
    c->peer_ss = ss, c->has_peer_ss = 1;
  if (c->ops->local_addr && c->ops->local_addr(c->tc, &ss) == 0)
    c->local_ss = ss, c->has_local_ss = 1;
  if (c->ctx->cfg.log_level < RMX_LOG_INFO)
    return;
  if (c->has_peer_ss)
    rmx__sa_str((struct sockaddr *)&c->peer_ss, pa, sizeof(pa));
  if (c->has_local_ss)
    rmx__sa_str((struct sockaddr *)&c->local_ss, la, sizeof(la));
  if (c->passive)
    rmx__log(RMX_LOG_INFO, "%s peer %s: accepted on %s, protocol version %u", c->ops->name,
             c->peer, la, c->wire_version);
  else
    rmx__log(RMX_LOG_INFO, "%s peer %s: connected (%s from %s)%s, protocol version %u",
             c->ops->name, c->peer, pa, la, c->recon.attempt ? " again" : "", c->wire_version);
}

int rmx_conn_peer_addr(const rmx_conn_t *c, struct sockaddr_storage *out)
{
  if (!c || !out)
    return RMX_EINVAL;
  /* Established, but the peer was gone before its address could be read:
   * not connected to anyone this side can name. */
  if (!c->addrs_taken || !c->has_peer_ss)
    return RMX_ENOTCONN;
  *out = c->peer_ss;
  return 0;
}

int rmx_conn_local_addr(const rmx_conn_t *c, struct sockaddr_storage *out)
{
  if (!c || !out)
    return RMX_EINVAL;
  if (!c->addrs_taken)
    return RMX_ENOTCONN;
  if (!c->has_local_ss)
    return RMX_ENOTSUP;
  *out = c->local_ss;
  return 0;
}

/* The handshake, authentication included, is over: the application gets
 * the connection (on_connected or on_accept). */
void rmx__conn_ready(rmx_conn_t *c)
{
  c->ops->ready(c->tc); /* the peer's remote requests are served from here */
  conn_label(c);
  conn_addrs(c);
  rmx__alive_start(c);  /* keepalive and silence clocks */
  if (!c->passive) {
    unsigned attempt = c->recon.attempt; /* 0: the first connect */
    c->state = RMX_CS_ESTABLISHED;
    c->recon.attempt = 0;
    if (attempt == 0) {
      c->reported = 1;
      c->on_connected(c, 0, c->connect_arg);
    } else {
      RMX_LOG(c->ctx, INFO, "%s peer %s: reconnected at attempt %u",
              c->ops->name, c->peer, attempt);
      if (c->recon.cb)
        c->recon.cb(c, attempt, 0, c->connect_arg);
    }
  } else {
    rmx_listener_t *l = c->listener;
    c->listener = NULL;
    l->naccepting--;
    rmx__listener_slots(l);
    if (l->closed) {
      rmx__listener_unref(l);
      rmx__conn_down(c, RMX_ECONNREFUSED);
      return;
    }
    c->state = RMX_CS_ESTABLISHED;
    c->user_closed = 0;
    c->reported = 1; /* from here the user owns it */
    rmx__alive_listed(c, l);
    if (c->rail_token) /* a rail: the core's, never the application's */
      c->ctx->up.rail_attach(c);
    else
      l->on_accept(l->parent ? l->parent : l, c, l->arg); /* an alias: the listener made */
    rmx__listener_unref(l);
  }
  /* Data that arrived with the handshake, or sends queued in on_accept. */
  if (c->state == RMX_CS_ESTABLISHED)
    rmx__msg_progress(c);
}

void rmx__conn_established(rmx_conn_t *c, const rmx_tp_ev_t *ev)
{
  rmx_wire_hello_t h;
  rmx__hello_terms_t t;
  int rc;

  if (c->state == RMX_CS_CONNECTING) {
    char who[320];
    snprintf(who, sizeof(who), "%s server %s", c->ops->name, c->peer);
    if ((rc = rmx__hello_check(c->ctx, NULL, who, ev->data, ev->len, RMX_HELLO_F_AUTH, 1, &h,
                               &t)) != 0) {
      rmx__conn_down(c, rc);
      return;
    }
    /* The transcript covers both ranges only when both were sent: a rail
     * sent none. */
    if (t.range && !c->rail_token) {
      memcpy(c->auth.srange, t.range, RMX_WIRE_RANGE_LEN);
      c->auth.ranged = 1;
    }
    if ((rc = rmx__auth_check_server(c, &h, ev->data, ev->len)) < 0) {
      rmx__conn_down(c, rc);
      return;
    }
    rmx__hello_terms_keep(c, &t);
    rmx__msg_init(c, &h);
  } else if (c->state != RMX_CS_ACCEPTING) {
    return;
  }
  if (c->auth.on) /* AUTH (connecting) or its wait (accepting) comes first */
    rmx__auth_begin(c);
  else
    rmx__conn_ready(c);
}

/* ---- closing ---- */

int rmx_conn_close(rmx_conn_t *c, rmx_close_cb on_closed, void *arg)
{
  if (!c)
    return RMX_EINVAL;
  if (c->user_closed)
    return RMX_EALREADY;
  c->user_closed = 1;
  c->on_closed = on_closed;
  c->close_arg = arg;
  /* Keys for this peer alone end once BYE is out (on RDMA: acknowledged),
   * with the transport's close: a read or write the peer has in flight is
   * served meanwhile, so it hears the close before any refusal and does
   * not take the end of its keys for a bad key of its own (rmx_ops.h). */
  c->ctx->up.rails_down(c); /* its rails close with it */
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
      rmx__conn_tp_close(c);
    else if (c->tp_state == RMX_TPS_OPEN)
      rmx__conn_close_watch(c);
    break;
  case RMX_CS_DOWN:
    rmx__reconnect_cancel(c); /* no more attempts */
    if (c->finished)
      rmx__defer_once(c->ctx, &c->defer_free);
    break;
  default:
    rmx__conn_down(c, RMX_ECANCELED);
    break;
  }
  return 0;
}
