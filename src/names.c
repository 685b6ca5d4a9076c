/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory by name (docs/one-sided.md, "Memory by name"; the wire is
 * docs/protocol.md's "Memory by name").
 *
 * The owner's context keeps a table name -> registration. A peer asks over
 * a connection with an RPC on rmx's reserved id LOOKUP; the answer is a key
 * packed for that connection alone (rmx_mem_pack_for), which the asking
 * side keeps in a cache on the connection, so the next lookup of the name
 * makes no round trip. When the owner withdraws the name (unpublish,
 * dereg), it sends a one-way FORGET with the name on every connection that
 * holds a key to the registration (its grants); when it revokes one
 * connection's key, on that connection alone. The peer drops its entry,
 * and its next lookup asks the owner again.
 *
 * Both requests are a peer's input: the name is checked (length, bytes)
 * before anything else, and a bad one is answered with RMX_EINVAL.
 */
#include <stdlib.h>
#include <string.h>

#include "names.h"

#define LOOKUP_ID (RMX_RPC_ID_RESERVED + 0)
#define FORGET_ID (RMX_RPC_ID_RESERVED + 1)
#define BUCKETS 64
#define CACHE_MAX 64 /* names cached per connection: the one used longest ago goes */

/* A request carries the name alone, so it always goes in one DATA frame. */
_Static_assert(RMX_NAME_MAX - 1 + RMX_WIRE_RPC_LEN <= RMX_EAGER_MIN - RMX_WIRE_HDR_LEN,
               "a name's request fits the smallest eager size");
_Static_assert(RMX_NAME_MAX <= 256, "a name's length fits a byte");

struct rmx__name { /* a published name: in the context's table, m->name */
  rmx_list_t link;
  rmx_mem_t *m;
  uint8_t len;
  char name[RMX_NAME_MAX];
};

struct rmx__names {
  rmx_list_t table[BUCKETS];
  rmx__ratelimit_t rl_bad;     /* malformed requests or replies */
  rmx__ratelimit_t rl_unknown; /* lookups of names not published */
};

typedef struct cached { /* a key found by name, on one connection */
  rmx_list_t link;      /* in its cache, most recently used first */
  uint8_t len, blob_len;
  char name[RMX_NAME_MAX];
  uint8_t blob[RMX_RKEY_MAX];
} cached_t;

struct rmx__names_conn {
  rmx_list_t cache;
  uint32_t n;
  uint32_t epoch; /* the transport connection its keys were made for */
};

typedef struct lookup {
  rmx__deferred_t defer; /* answered from the cache */
  rmx_conn_t *c;
  rmx_lookup_cb cb;
  void *arg;
  rmx_rkey_t *rk;
  uint32_t epoch;
  uint8_t len;
  char name[RMX_NAME_MAX];
} lookup_t;

/* ---- names ---- */

/* 1 when p[0 .. len) is a name: 1 .. RMX_NAME_MAX - 1 printable ASCII bytes. */
static int name_ok(const void *p, size_t len)
{
  const uint8_t *s = p;
  if (len == 0 || len >= RMX_NAME_MAX)
    return 0;
  for (size_t i = 0; i < len; i++)
    if (s[i] < 0x20 || s[i] > 0x7e)
      return 0;
  return 1;
}

/* The length of the string s when it is a name, else 0. */
static size_t name_len(const char *s)
{
  size_t n = 0;
  while (n < RMX_NAME_MAX && s[n])
    n++;
  return name_ok(s, n) ? n : 0;
}

static rmx_list_t *bucket(struct rmx__names *t, const void *name, size_t len)
{
  const uint8_t *p = name;
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < len; i++)
    h = (h ^ p[i]) * 16777619u;
  return &t->table[h % BUCKETS];
}

static struct rmx__name *table_find(struct rmx__names *t, const void *name, size_t len)
{
  rmx_list_t *n, *b = bucket(t, name, len);
  rmx_list_foreach(n, b) {
    struct rmx__name *e = rmx_container_of(n, struct rmx__name, link);
    if (e->len == len && memcmp(e->name, name, len) == 0)
      return e;
  }
  return NULL;
}

/* ---- the owner: publishing, and telling peers to forget ---- */

int rmx_mem_publish(rmx_mem_t *m, const char *name)
{
  size_t len;
  if (!m || !name || !(len = name_len(name)) ||
      !(m->access & (RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE | RMX_MEM_REMOTE_ATOMIC)))
    return RMX_EINVAL;
  struct rmx__names *t = m->ctx->names;
  if (m->name || table_find(t, name, len))
    return RMX_EALREADY;
  struct rmx__name *e = malloc(sizeof(*e));
  if (!e)
    return RMX_ENOMEM;
  e->m = m;
  e->len = (uint8_t)len;
  memcpy(e->name, name, len);
  e->name[len] = 0;
  rmx_list_push(bucket(t, name, len), &e->link);
  m->name = e;
  return 0;
}

static void tell_forget(rmx_conn_t *c, const struct rmx__name *e)
{
  int rc = rmx__rpc_notify(c, FORGET_ID, e->name, e->len);
  if (rc && rc != RMX_ENOTCONN) /* its cache keeps the name: say so */
    RMX_LOG(c->ctx, WARN, "names: cannot tell %s peer %s to forget \"%s\": %s", c->ops->name,
            c->peer, e->name, rmx_strerror(rc));
}

void rmx__names_forget(rmx_mem_t *m, rmx_conn_t *c)
{
  struct rmx__name *e = m->name;
  rmx_list_t *n;
  if (c) {
    tell_forget(c, e);
    return;
  }
  rmx_list_foreach(n, &m->grants)
    tell_forget(rmx_container_of(n, rmx__grant_t, mem_link)->c, e);
  rmx_list_del(&e->link);
  free(e);
  m->name = NULL;
}

int rmx_mem_unpublish(rmx_mem_t *m)
{
  if (!m)
    return RMX_EINVAL;
  if (!m->name)
    return RMX_ENOENT;
  rmx__names_forget(m, NULL);
  return 0;
}

/* A request whose name is no name: refused, the connection stays. */
static void refuse_bad(rmx_rpc_req_t *req, const char *what, size_t len)
{
  rmx_conn_t *c = rmx_rpc_req_conn(req);
  RMX_LOG_LIMITED(c->ctx, &c->ctx->names->rl_bad, WARN,
                  "names: %s peer %s sent a %s of a malformed name (%zu bytes): refused",
                  c->ops->name, c->peer, what, len);
  rmx_rpc_reply_error(req, RMX_EINVAL);
}

/* LOOKUP: the key to the registration published under the name, made for
 * the connection the request came on. */
static void lookup_serve(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  rmx_ctx_t *ctx = arg;
  rmx_conn_t *c = rmx_rpc_req_conn(req);
  uint8_t blob[RMX_RKEY_MAX];
  size_t blen = sizeof(blob);
  if (!name_ok(data, len)) {
    refuse_bad(req, "lookup", len);
    return;
  }
  struct rmx__name *e = table_find(ctx->names, data, len);
  if (!e) {
    RMX_LOG_LIMITED(ctx, &ctx->names->rl_unknown, DEBUG,
                    "names: %s peer %s looked up \"%.*s\": no such name", c->ops->name, c->peer,
                    (int)len, (const char *)data);
    rmx_rpc_reply_error(req, RMX_ENOENT);
    return;
  }
  int rc = rmx_mem_pack_for(e->m, c, blob, &blen);
  if (rc)
    rmx_rpc_reply_error(req, rc);
  else
    rmx_rpc_reply(req, blob, blen);
}

/* ---- the asking side: the cache of one connection ---- */

static void cache_clear(struct rmx__names_conn *nc)
{
  rmx_list_t *n;
  while ((n = rmx_list_pop(&nc->cache)) != NULL)
    free(rmx_container_of(n, cached_t, link));
  nc->n = 0;
}

/* c's cache, emptied if its keys were made for an earlier transport
 * connection (reconnect); made when asked for and missing (or NULL). */
static struct rmx__names_conn *cache_of(rmx_conn_t *c, int make)
{
  struct rmx__names_conn *nc = c->names;
  if (nc && nc->epoch != c->epoch) {
    cache_clear(nc);
    nc->epoch = c->epoch;
  }
  if (!nc && make && (nc = malloc(sizeof(*nc))) != NULL) {
    rmx_list_init(&nc->cache);
    nc->n = 0;
    nc->epoch = c->epoch;
    c->names = nc;
  }
  return nc;
}

static cached_t *cache_find(struct rmx__names_conn *nc, const void *name, size_t len)
{
  rmx_list_t *n;
  rmx_list_foreach(n, &nc->cache) {
    cached_t *e = rmx_container_of(n, cached_t, link);
    if (e->len == len && memcmp(e->name, name, len) == 0)
      return e;
  }
  return NULL;
}

/* Keep the key found for a name (nothing kept when there is no memory). */
static void cache_put(rmx_conn_t *c, const lookup_t *lk, const void *blob, size_t blen)
{
  struct rmx__names_conn *nc = cache_of(c, 1);
  cached_t *e;
  if (!nc)
    return;
  if ((e = cache_find(nc, lk->name, lk->len)) != NULL) {
    rmx_list_del(&e->link);
  } else if (nc->n >= CACHE_MAX) { /* the one used longest ago makes room */
    e = rmx_container_of(nc->cache.prev, cached_t, link);
    rmx_list_del(&e->link);
  } else if ((e = malloc(sizeof(*e))) != NULL) {
    nc->n++;
  } else {
    return;
  }
  e->len = lk->len;
  memcpy(e->name, lk->name, lk->len);
  e->blob_len = (uint8_t)blen;
  memcpy(e->blob, blob, blen);
  rmx_list_push_front(&nc->cache, &e->link);
}

/* FORGET (one-way): the owner withdrew the name, or our key to it. */
static void forget_serve(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  rmx_conn_t *c = rmx_rpc_req_conn(req);
  (void)arg;
  if (!name_ok(data, len)) {
    refuse_bad(req, "forget", len);
    return;
  }
  struct rmx__names_conn *nc = cache_of(c, 0);
  cached_t *e = nc ? cache_find(nc, data, len) : NULL;
  if (e) {
    rmx_list_del(&e->link);
    nc->n--;
    free(e);
  }
  rmx_rpc_reply(req, NULL, 0);
}

/* ---- lookups ---- */

/* The owner's answer, or why there is none (the RPC layer ends each call
 * exactly once: reply, timeout, the connection's end). */
static void lookup_reply(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  lookup_t *lk = arg;
  rmx_rkey_t *rk = NULL;
  if (status == RMX_ENOHANDLER)
    status = RMX_ENOTSUP; /* a peer that does not serve names */
  if (status == 0) {
    status = len <= RMX_RKEY_MAX ? rmx_rkey_unpack(c, data, len, &rk) : RMX_EINVAL;
    if (status == 0) {
      cache_put(c, lk, data, len);
    } else if (status != RMX_ENOMEM) {
      RMX_LOG_LIMITED(c->ctx, &c->ctx->names->rl_bad, WARN,
                      "names: %s peer %s answered the lookup of \"%s\" with a malformed key "
                      "(%zu bytes): %s", c->ops->name, c->peer, lk->name, len,
                      rmx_strerror(status));
      status = RMX_EPROTO;
    }
  }
  lk->cb(c, status, rk, lk->arg);
  free(lk);
}

/* A lookup answered from the cache, from the loop. */
static void lookup_hit(rmx__deferred_t *d)
{
  lookup_t *lk = rmx_container_of(d, lookup_t, defer);
  rmx_conn_t *c = lk->c;
  rmx_rkey_t *rk = lk->rk;
  int status = 0;
  if (c->state != RMX_CS_ESTABLISHED || c->epoch != lk->epoch) { /* gone since: as a call */
    status = c->user_closed ? RMX_ECANCELED : (c->err ? c->err : RMX_ECONNRESET);
    rmx_rkey_release(rk);
    rk = NULL;
  }
  lk->cb(c, status, rk, lk->arg);
  free(lk);
  rmx__conn_release(c);
}

int rmx_mem_lookup(rmx_conn_t *c, const char *name, uint32_t timeout_ms, rmx_lookup_cb cb,
                   void *arg)
{
  size_t len;
  int rc;
  if (!c || !name || !cb || !(len = name_len(name)))
    return RMX_EINVAL;
  if (c->state != RMX_CS_ESTABLISHED)
    return RMX_ENOTCONN;
  lookup_t *lk = calloc(1, sizeof(*lk));
  if (!lk)
    return RMX_ENOMEM;
  lk->c = c;
  lk->cb = cb;
  lk->arg = arg;
  lk->epoch = c->epoch;
  lk->len = (uint8_t)len;
  memcpy(lk->name, name, len);
  struct rmx__names_conn *nc = cache_of(c, 0);
  cached_t *e = nc ? cache_find(nc, name, len) : NULL;
  if (e) {
    if ((rc = rmx_rkey_unpack(c, e->blob, e->blob_len, &lk->rk)) != 0) {
      free(lk);
      return rc;
    }
    rmx_list_del(&e->link);
    rmx_list_push_front(&nc->cache, &e->link);
    rmx_list_init(&lk->defer.link);
    lk->defer.fn = lookup_hit;
    rmx__conn_hold(c); /* the answer keeps the connection, as a call does */
    rmx__defer(c->ctx, &lk->defer);
    return 0;
  }
  if ((rc = rmx_rpc_call(c, LOOKUP_ID, name, len, timeout_ms, lookup_reply, lk, NULL)) != 0)
    free(lk);
  return rc;
}

/* ---- the context and its connections ---- */

int rmx__names_ctx_init(rmx_ctx_t *ctx)
{
  struct rmx__names *t = calloc(1, sizeof(*t));
  int rc;
  if (!t)
    return RMX_ENOMEM;
  for (int i = 0; i < BUCKETS; i++)
    rmx_list_init(&t->table[i]);
  ctx->names = t;
  /* Every context answers: one that publishes nothing says RMX_ENOENT. */
  if ((rc = rmx__rpc_serve(ctx, LOOKUP_ID, lookup_serve, ctx)) == 0)
    rc = rmx__rpc_serve(ctx, FORGET_ID, forget_serve, ctx);
  return rc;
}

void rmx__names_ctx_fini(rmx_ctx_t *ctx)
{
  struct rmx__names *t = ctx->names;
  rmx_list_t *n;
  if (!t)
    return;
  /* Empty: a context with registrations is not destroyed (RMX_EBUSY). */
  for (int i = 0; i < BUCKETS; i++)
    while ((n = rmx_list_pop(&t->table[i])) != NULL) {
      struct rmx__name *e = rmx_container_of(n, struct rmx__name, link);
      e->m->name = NULL;
      free(e);
    }
  free(t);
  ctx->names = NULL;
}

void rmx__names_conn_gone(rmx_conn_t *c)
{
  if (!c->names)
    return;
  cache_clear(c->names);
  free(c->names);
  c->names = NULL;
}
