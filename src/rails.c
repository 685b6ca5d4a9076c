/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rails: more connections of a connection's transport, to the same peer
 * (another device's address, or the same one for more queue pairs), that
 * carry the parts of its transfer requests (src/xfer/xfer.c stripes them).
 *
 * The connecting side asks for a rail over the connection with an RPC on
 * rmx's reserved id OFFER; the peer answers with the rail's number (1 ..
 * RMX_RAILS_MAX, never reused on that connection) and a random 64-bit token
 * it keeps on offer for a while. The rail's hello carries the token
 * (RMX_HELLO_F_RAIL, docs/protocol.md): the peer takes it through any of
 * its listeners, checks the token, attaches it to the connection instead
 * of calling on_accept, and says so over the connection (one-way UP, the
 * rail's number): the rail is up for the connecting side once it has both
 * its transport's establishment and UP, so a key the peer packs after
 * anything asked after that holds one for the rail. A rail is the core's, never the
 * application's: it carries no messages (one is a protocol error), and it
 * goes when its connection goes; a rail lost alone leaves its connection
 * up, and the transfers that had parts on it post them again elsewhere.
 *
 * Keys for a rail: a key packed for the connection (rmx_mem_pack_for, or
 * found by name) after a rail is attached also holds one for that rail,
 * made for the rail's connection alone (src/mem/reg.c).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "names.h"
#include "rails.h"

#define OFFER_ID (RMX_RPC_ID_RESERVED + 2)
#define UP_ID (RMX_RPC_ID_RESERVED + 3)
#define OFFER_LEN 16 /* u8 rail, 7 zero bytes, u64 token */

typedef struct rail_add {
  rmx_conn_t *c;  /* held until cb has run */
  char *uri;
  rmx_rail_cb cb;
  void *arg;
  unsigned lane;  /* its number, once offered */
  uint8_t connected, told; /* the rail's transport is up; the peer said UP */
  uv_timer_t *late; /* from the rail's connect until UP: the peer's UP is due */
  int status;
  rmx__deferred_t defer; /* cb runs from here */
} rail_add_t;

static struct rmx__rails *table_of(rmx_conn_t *c)
{
  if (!c->rails) {
    struct rmx__rails *t = calloc(1, sizeof(*t));
    if (!t)
      return NULL;
    t->lane[0] = c;
    t->refs = 1;
    c->rails = t;
  }
  return c->rails;
}

static void join(struct rmx__rails *t, rmx_conn_t *r, unsigned l)
{
  t->lane[l] = r;
  t->refs++;
  r->rails = t;
  r->lane = (uint8_t)l;
}

/* A rail's own callbacks: it carries no messages (recv.c refuses them). */
static void rail_lost(rmx_conn_t *r, int status, void *arg)
{
  (void)r;
  (void)status;
  (void)arg; /* rmx__rails_down logs it and closes the rail */
}

static const rmx_conn_cbs_t rail_cbs = {.on_disconnect = rail_lost};

/* ---- the accepting side ---- */

static void offer_serve(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  rmx_ctx_t *ctx = arg;
  rmx_conn_t *c = rmx_rpc_req_conn(req);
  (void)data;
  if (len || !c->passive || c->lane) {
    /* A rail of a rail, or one towards a connecting side: this side has no
     * listener the peer could open it to. */
    rmx_rpc_reply_error(req, RMX_EINVAL);
    return;
  }
  struct rmx__rails *t = table_of(c);
  if (!t) {
    rmx_rpc_reply_error(req, RMX_ENOMEM);
    return;
  }
  if (t->given >= RMX_RAILS_MAX) {
    rmx_rpc_reply_error(req, RMX_ENOMEM); /* a limit: RMX_RAILS_MAX given */
    return;
  }
  uint64_t token = 0;
  while (!token)
    if (getrandom(&token, sizeof(token), 0) != sizeof(token)) {
      rmx_rpc_reply_error(req, RMX_EIO);
      return;
    }
  unsigned l = ++t->given;
  t->token[l] = token;
  t->due[l] = uv_now(ctx->loop) + ctx->cfg.connect_timeout_ms + ctx->cfg.handshake_timeout_ms;
  uint8_t out[OFFER_LEN] = {(uint8_t)l};
  rmx_put64(out + 8, token);
  rmx_rpc_reply(req, out, sizeof(out));
}

/* The table with token on offer (its rail's number in *lane), or NULL;
 * lapsed offers are withdrawn as they are passed. */
static struct rmx__rails *offer_find(rmx_ctx_t *ctx, uint64_t token, unsigned *lane)
{
  uint64_t now = uv_now(ctx->loop);
  rmx_list_t *n;
  rmx_list_foreach(n, &ctx->conns) {
    rmx_conn_t *c = rmx_container_of(n, rmx_conn_t, link);
    struct rmx__rails *t = c->rails;
    if (!t || c->lane || t->lane[0] != c)
      continue;
    for (unsigned l = 1; l <= t->given; l++) {
      if (t->token[l] && t->due[l] <= now)
        t->token[l] = 0;
      if (t->token[l] && t->token[l] == token) {
        *lane = l;
        return t;
      }
    }
  }
  return NULL;
}

int rmx__rail_offered(rmx_ctx_t *ctx, uint64_t token)
{
  unsigned l;
  return offer_find(ctx, token, &l) != NULL;
}

void rmx__rail_attach(rmx_conn_t *r)
{
  unsigned l = 0;
  struct rmx__rails *t = offer_find(r->ctx, r->rail_token, &l);
  rmx_conn_t *c = t ? t->lane[0] : NULL;
  r->rail_token = 0;
  rmx_conn_set_cbs(r, &rail_cbs, NULL);
  if (!c || c->state != RMX_CS_ESTABLISHED || c->tpi != r->tpi) {
    /* Its connection went, its offer lapsed, or another rail took its
     * token (both presented it at once), during the handshake. */
    RMX_LOG_LIMITED(r->ctx, &r->ctx->rl_refused, WARN, "%s peer %s: a rail whose token is no "
                    "longer on offer (taken, lapsed, or its connection gone): closed",
                    r->ops->name, r->peer);
    r->lane = 1; /* not the application's: nothing reaches it */
    rmx_conn_close(r, NULL, NULL);
    return;
  }
  t->token[l] = 0;
  join(t, r, l);
  t->ready |= (uint8_t)(1u << l);
  uint8_t up = (uint8_t)l;
  if (rmx__rpc_notify(c, UP_ID, &up, 1) != 0) { /* the connecting side waits for it */
    rmx_conn_close(r, NULL, NULL);
    return;
  }
  RMX_LOG(r->ctx, INFO, "%s peer %s: rail %u up, from %s", c->ops->name, c->peer, l, r->peer);
}

/* ---- the connecting side ---- */

static void add_deliver(rmx__deferred_t *d)
{
  rail_add_t *a = rmx_container_of(d, rail_add_t, defer);
  a->cb(a->c, a->status, a->status ? 0 : a->lane, a->arg);
  rmx__conn_release(a->c);
  free(a->uri);
  free(a);
}

static void late_closed(uv_handle_t *h) { free(h); }

/* The add is over: its callback runs from the loop. */
static void add_end(rail_add_t *a, int status)
{
  struct rmx__rails *t = a->c->rails;
  if (a->late) {
    uv_close((uv_handle_t *)a->late, late_closed);
    a->late = NULL;
  }
  if (t && a->lane && t->add[a->lane] == a)
    t->add[a->lane] = NULL;
  a->status = status;
  rmx__defer(a->c->ctx, &a->defer);
}

/* Established here and attached there: the rail carries parts from now. */
static void rail_ready(rail_add_t *a, rmx_conn_t *r)
{
  rmx_conn_t *c = a->c;
  c->rails->ready |= (uint8_t)(1u << a->lane);
  /* Keys found by name before hold none for this rail: look them up again. */
  rmx__names_conn_gone(c);
  RMX_LOG(c->ctx, INFO, "%s peer %s: rail %u up, to %s", c->ops->name, c->peer, a->lane,
          r->peer);
  add_end(a, 0);
}

/* The rail is established here but the peer never said UP: it goes. */
static void up_late(uv_timer_t *tm)
{
  rail_add_t *a = tm->data;
  rmx_conn_t *c = a->c, *r = c->rails ? c->rails->lane[a->lane] : NULL;
  RMX_LOG_LIMITED(c->ctx, &c->ctx->rl_proto, WARN, "%s peer %s: rail %u established but not "
                  "attached within %u ms (RMX_HANDSHAKE_TIMEOUT_MS): closed", c->ops->name,
                  c->peer, a->lane, c->ctx->cfg.handshake_timeout_ms);
  add_end(a, RMX_ETIMEDOUT);
  if (r && !r->user_closed)
    rmx_conn_close(r, NULL, NULL);
}

static void rail_connected(rmx_conn_t *r, int status, void *arg)
{
  struct rmx__rails *t = r->rails;
  rail_add_t *a = t ? t->add[r->lane] : NULL;
  (void)arg;
  if (!a) { /* its add ended (its connection went): this rail goes too */
    rmx_conn_close(r, NULL, NULL);
    return;
  }
  if (status == 0 && a->c->state != RMX_CS_ESTABLISHED)
    status = a->c->user_closed ? RMX_ECANCELED : RMX_ENOTCONN;
  if (status) {
    add_end(a, status); /* first: the close below finds no add to end */
    rmx_conn_close(r, NULL, NULL); /* freed with no more calls */
    return;
  }
  rmx_conn_set_cbs(r, &rail_cbs, NULL);
  a->connected = 1;
  if (a->told) {
    rail_ready(a, r);
    return;
  }
  /* UP comes on the connection once the peer attached the rail: due within
   * its handshake's time, or the add ends */
  if ((a->late = malloc(sizeof(*a->late))) == NULL) {
    add_end(a, RMX_ENOMEM); /* first: the close below finds no add to end */
    rmx_conn_close(r, NULL, NULL);
    return;
  }
  uv_timer_init(r->ctx->loop, a->late);
  a->late->data = a;
  uv_timer_start(a->late, up_late, r->ctx->cfg.handshake_timeout_ms, 0);
}

/* The accepting side attached rail l (one-way, on the connection). */
static void up_serve(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  rmx_conn_t *c = rmx_rpc_req_conn(req);
  const uint8_t *p = data;
  unsigned l = len == 1 ? p[0] : 0;
  struct rmx__rails *t = c->rails;
  rail_add_t *a = t && !c->lane && l && l <= RMX_RAILS_MAX ? t->add[l] : NULL;
  (void)arg;
  if (!a || a->told) {
    RMX_LOG_LIMITED(c->ctx, &c->ctx->rl_proto, WARN, "%s peer %s said a rail is up that "
                    "this side did not ask for (%zu bytes)", c->ops->name, c->peer, len);
    rmx_rpc_reply(req, NULL, 0);
    return;
  }
  a->told = 1;
  if (a->connected)
    rail_ready(a, t->lane[l]);
  rmx_rpc_reply(req, NULL, 0);
}

static void offer_reply(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  rail_add_t *a = arg;
  const uint8_t *p = data;
  unsigned l = 0;
  uint64_t token = 0;
  if (status == RMX_ENOHANDLER)
    status = RMX_ENOTSUP; /* a peer without rails */
  if (status == 0) {
    int pad = 0;
    for (size_t i = 1; len == OFFER_LEN && i < 8; i++)
      pad |= p[i];
    if (len == OFFER_LEN) {
      l = p[0];
      token = rmx_get64(p + 8);
    }
    if (len != OFFER_LEN || pad || !l || l > RMX_RAILS_MAX || !token ||
        (c->rails && c->rails->lane[l])) {
      RMX_LOG_LIMITED(c->ctx, &c->ctx->rl_proto, ERROR, "%s peer %s answered a rail's offer "
                      "with a malformed one (%zu bytes)", c->ops->name, c->peer, len);
      status = RMX_EPROTO;
    }
  }
  if (status == 0 && c->state != RMX_CS_ESTABLISHED)
    status = c->user_closed ? RMX_ECANCELED : RMX_ENOTCONN;
  struct rmx__rails *t = status ? NULL : table_of(c);
  if (status == 0 && !t)
    status = RMX_ENOMEM;
  rmx_conn_t *r = NULL;
  if (status == 0 && (status = rmx_connect(c->ctx, a->uri, rail_connected, NULL, &r)) == 0) {
    /* Resolving: its hello, with the token, is built once resolved. */
    join(t, r, l);
    r->rail_token = token;
    t->given = (uint8_t)(l > t->given ? l : t->given);
    t->add[l] = a;
    a->lane = l;
    return;
  }
  add_end(a, status);
}

int rmx_rail_add(rmx_conn_t *c, const char *uri, rmx_rail_cb cb, void *arg)
{
  rmx__uri_t u;
  int tpi, rc;
  if (!c || !uri || !cb || c->passive || c->lane)
    return RMX_EINVAL;
  if (c->state != RMX_CS_ESTABLISHED)
    return RMX_ENOTCONN;
  if ((rc = rmx__uri_open(c->ctx, uri, &u, &tpi)) != 0)
    return rc;
  if (tpi != c->tpi)
    return RMX_EINVAL; /* a rail is of its connection's transport */
  rail_add_t *a = calloc(1, sizeof(*a));
  if (!a || !(a->uri = strdup(uri))) {
    free(a);
    return RMX_ENOMEM;
  }
  a->c = c;
  a->cb = cb;
  a->arg = arg;
  rmx_list_init(&a->defer.link);
  a->defer.fn = add_deliver;
  if ((rc = rmx_rpc_call(c, OFFER_ID, NULL, 0, c->ctx->cfg.connect_timeout_ms, offer_reply, a,
                         NULL)) != 0) {
    free(a->uri);
    free(a);
    return rc;
  }
  rmx__conn_hold(c); /* its on_closed waits for cb */
  return 0;
}

unsigned rmx_conn_rails(const rmx_conn_t *c)
{
  unsigned n = 0;
  if (!c || !c->rails || c->lane)
    return 0;
  for (unsigned l = 1; l < RMX__LANES; l++)
    n += rmx__rail_up(c->rails, l) != NULL;
  return n;
}

int rmx_rail_info(const rmx_conn_t *c, unsigned rail, rmx_rail_info_t *out)
{
  if (!c || !out || c->lane || rail > RMX_RAILS_MAX)
    return RMX_EINVAL;
  const struct rmx__rails *t = c->rails;
  if (rail && (!t || rail > t->given))
    return RMX_ENOENT;
  *out = (rmx_rail_info_t){.up = rail ? rmx__rail_up(t, rail) != NULL
                                      : c->state == RMX_CS_ESTABLISHED};
  if (t) {
    out->parts = t->parts[rail];
    out->bytes = t->bytes[rail];
  }
  return 0;
}

int rmx_rail_close(rmx_conn_t *c, unsigned rail)
{
  if (!c || c->lane || !rail || rail > RMX_RAILS_MAX)
    return RMX_EINVAL;
  rmx_conn_t *r = c->rails ? c->rails->lane[rail] : NULL;
  if (!r || r->user_closed)
    return RMX_ENOENT;
  RMX_LOG(c->ctx, INFO, "%s peer %s: closing rail %u", c->ops->name, c->peer, rail);
  return rmx_conn_close(r, NULL, NULL);
}

/* ---- going ---- */

void rmx__rails_down(rmx_conn_t *c)
{
  struct rmx__rails *t = c->rails;
  if (!t)
    return;
  if (c->lane) { /* one rail: its connection carries on */
    rmx_conn_t *p = t->lane[0];
    rail_add_t *a = t->add[c->lane];
    if (a && t->lane[c->lane] == c) /* gone before the peer said UP: its add ends */
      add_end(a, c->user_closed ? RMX_ECANCELED : c->err ? c->err : RMX_ENOTCONN);
    if (!c->user_closed && p && p->state == RMX_CS_ESTABLISHED && c->err)
      /* a peer can lose 7 rails of each connection at will */
      RMX_LOG_LIMITED(c->ctx, &c->ctx->rl_proto, WARN, "%s peer %s: rail %u lost (%s); "
                      "transfers go on without it", c->ops->name, p->peer, c->lane,
                      rmx_strerror(c->err));
    else if (!c->user_closed && p && p->state == RMX_CS_ESTABLISHED)
      RMX_LOG(c->ctx, INFO, "%s peer %s: rail %u closed by the peer", c->ops->name, p->peer,
              c->lane);
    if (!c->user_closed)
      rmx_conn_close(c, NULL, NULL);
    return;
  }
  for (unsigned l = 1; l < RMX__LANES; l++) { /* the connection: its rails go with it */
    if (t->add[l])
      add_end(t->add[l], c->user_closed ? RMX_ECANCELED : RMX_ENOTCONN);
    if (t->lane[l] && !t->lane[l]->user_closed)
      rmx_conn_close(t->lane[l], NULL, NULL);
  }
}

void rmx__rails_conn_gone(rmx_conn_t *c)
{
  struct rmx__rails *t = c->rails;
  if (!t)
    return;
  if (t->lane[c->lane] == c)
    t->lane[c->lane] = NULL;
  c->rails = NULL;
  if (--t->refs == 0)
    free(t);
}

int rmx__rails_ctx_init(rmx_ctx_t *ctx)
{
  int rc = rmx__rpc_serve(ctx, OFFER_ID, offer_serve, ctx);
  return rc ? rc : rmx__rpc_serve(ctx, UP_ID, up_serve, ctx);
}
