/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The metadata service's API (include/rmx/rmx_meta.h, docs/metadata.md):
 * the lease (granted at open, kept alive every ttl / 3, revoked at close)
 * and the entries under the prefix:
 *
 *   <prefix>agents/<agent>       the agent's URI            (its lease)
 *   <prefix>mem/<agent>/<name>   {"len":N,"access":A}       (its lease)
 *
 * Each call is one POST to etcd's v3 JSON gateway (engine.c).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "meta/meta.h"

#define META_TTL_MIN 2u /* etcd's own floor with its default timing */
#define META_TTL_MAX 3600u

/* ---- the lease ---- */

static int kv_req(rmx_meta_t *m, const char *path, const char *what, char *key, const char *val,
                  int leased, void (*done)(rmx__meta_req_t *), void *cb, void *arg);
static void cb_done(rmx__meta_req_t *r);
static void ka_tick(uv_timer_t *t);

/* The lease is in place: keep it alive every third of its TTL. */
static void lease_held(rmx_meta_t *m, int64_t id)
{
  uint64_t every = m->ttl_s * 1000u / 3;
  m->lease = id;
  m->lease_lost = 0;
  uv_timer_start(&m->ka_timer, ka_tick, every, every);
  RMX_LOG(m->ctx, INFO, "meta: agent %s holds lease %" PRId64 " (%u s) at %s", m->agent, m->lease,
          m->ttl_s, m->endpoint);
}

/* The granted lease's ID, or 0 with *st set. */
static int64_t granted(rmx__meta_req_t *r, int *st)
{
  int64_t id = 0;
  *st = r->status;
  if (!*st) {
    json_object *o = rmx__meta_parse(r);
    id = rmx__meta_int(o, "ID", 0);
    json_object_put(o);
    if (id <= 0)
      *st = RMX_EPROTO;
  }
  return *st ? 0 : id;
}

/* A new lease after the last one ran out (the agent was cut off from etcd
 * for longer than its TTL, or stopped): write the entries again under it.
 * Watchers saw them deleted; now they see them put. */
static void regrant_done(rmx__meta_req_t *r)
{
  rmx_meta_t *m = r->m;
  int st;
  int64_t id = granted(r, &st);
  m->ka_busy = 0;
  if (st)
    return; /* logged; the next tick asks again */
  lease_held(m, id);
  int n = 0;
  rmx_list_t *it;
  if (m->uri)
    n += kv_req(m, "/v3/kv/put", "put of the agent's URI again",
                rmx__meta_key(m, "agents/", m->agent, NULL, NULL), m->uri, 1, cb_done, NULL,
                NULL) == 0;
  rmx_list_foreach(it, &m->pubs) {
    rmx__meta_pub_t *p = rmx_container_of(it, rmx__meta_pub_t, link);
    char val[64];
    snprintf(val, sizeof(val), "{\"len\":%" PRIu64 ",\"access\":%u}", p->len, p->access);
    n += kv_req(m, "/v3/kv/put", "put of a name again",
                rmx__meta_key(m, "mem/", m->agent, "/", p->name), val, 1, cb_done, NULL,
                NULL) == 0;
  }
  RMX_LOG(m->ctx, WARN, "meta: etcd at %s: agent %s has a new lease; %d entries written again",
          m->endpoint, m->agent, n);
}

static void ka_done(rmx__meta_req_t *r)
{
  rmx_meta_t *m = r->m;
  m->ka_busy = 0;
  if (r->status)
    return; /* logged; the next tick tries again while the lease lasts */
  json_object *o = rmx__meta_parse(r), *res;
  /* One answer of the stream: {"result": {"ID": .., "TTL": ..}}. */
  if (o && json_object_object_get_ex(o, "result", &res) && rmx__meta_int(res, "TTL", 0) <= 0) {
    /* Once per loss: the next tick asks for a new lease. */
    RMX_LOG(m->ctx, ERROR,
            "meta: etcd at %s: the lease of agent %s ran out: its entries are gone; writes "
            "fail with RMX_ENOTCONN until a new lease is granted",
            m->endpoint, m->agent);
    m->lease_lost = 1;
  }
  json_object_put(o);
}

static char *lease_body(const rmx_meta_t *m)
{
  char b[64];
  snprintf(b, sizeof(b), "{\"ID\":\"%" PRId64 "\"}", m->lease);
  return strdup(b);
}

static char *grant_body(const rmx_meta_t *m)
{
  char b[64];
  snprintf(b, sizeof(b), "{\"TTL\":\"%u\"}", m->ttl_s);
  return strdup(b);
}

/* Every third of the TTL: a keepalive, or a new lease once it ran out. */
static void ka_tick(uv_timer_t *t)
{
  rmx_meta_t *m = t->data;
  if (m->ka_busy || m->closing)
    return;
  char *body = m->lease_lost ? grant_body(m) : lease_body(m);
  rmx__meta_req_t *r =
      m->lease_lost ? rmx__meta_req_new(m, "/v3/lease/grant", body, "new lease grant")
                    : rmx__meta_req_new(m, "/v3/lease/keepalive", body, "lease keepalive");
  free(body);
  if (!r)
    return;
  r->done = m->lease_lost ? regrant_done : ka_done;
  r->then = m->lease_lost ? "the next tick asks again; writes fail with RMX_ENOTCONN until then"
                          : "the next keepalive tries again while the lease lasts";
  if (rmx__meta_req_start(r) == 0)
    m->ka_busy = 1;
}

static void grant_done(rmx__meta_req_t *r)
{
  rmx_meta_t *m = r->m;
  int st;
  int64_t id = granted(r, &st);
  if (!st)
    lease_held(m, id);
  if (m->on_open)
    RMX__META_USER(m, m->on_open(m, st, m->open_arg));
}

static void revoke_done(rmx__meta_req_t *r)
{
  if (r->status != RMX_ECANCELED)
    r->m->closed_status = r->status;
}

static int endpoint_ok(const char *e)
{
  return (strncmp(e, "http://", 7) == 0 && e[7]) || (strncmp(e, "https://", 8) == 0 && e[8]);
}

static int prefix_ok(const char *p)
{
  size_t n = strlen(p);
  for (size_t i = 0; i < n; i++)
    if (p[i] < 0x20 || p[i] > 0x7e)
      return 0;
  return n > 0 && n < 256;
}

static void curl_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

int rmx_meta_open(rmx_ctx_t *ctx, const char *endpoint, const char *prefix, const char *agent,
                  unsigned ttl_s, rmx_meta_cb on_open, void *arg, rmx_meta_t **out)
{
  static uv_once_t once = UV_ONCE_INIT;
  if (!prefix)
    prefix = "/rmx/";
  if (!ctx || !endpoint || !out || !endpoint_ok(endpoint) || !prefix_ok(prefix) ||
      !rmx__meta_agent_ok(agent) || ttl_s < META_TTL_MIN || ttl_s > META_TTL_MAX)
    return RMX_EINVAL;
  if (ctx->dying)
    return RMX_EINVAL;
  uv_once(&once, curl_once);
  rmx_meta_t *m = calloc(1, sizeof(*m));
  if (!m)
    return RMX_ENOMEM;
  m->ctx = ctx;
  m->ttl_s = ttl_s;
  m->on_open = on_open;
  m->open_arg = arg;
  m->endpoint = strdup(endpoint);
  m->prefix = strdup(prefix);
  m->agent = strdup(agent);
  if (m->endpoint) /* "http://h:p/" and "http://h:p" alike */
    for (size_t n = strlen(m->endpoint); n > 8 && m->endpoint[n - 1] == '/'; n--)
      m->endpoint[n - 1] = '\0';
  rmx_list_init(&m->pubs);
  if (!m->endpoint || !m->prefix || !m->agent || rmx__meta_engine_init(m) != 0) {
    if (m->multi)
      curl_multi_cleanup(m->multi);
    free(m->endpoint);
    free(m->prefix);
    free(m->agent);
    free(m);
    return RMX_ENOMEM;
  }
  /* From here the handle has uv handles: it goes as a closed one does. */
  ctx->nmetas++;
  char *body = grant_body(m);
  rmx__meta_req_t *r = body ? rmx__meta_req_new(m, "/v3/lease/grant", body, "lease grant") : NULL;
  free(body);
  if (!r) {
    m->on_open = NULL;
    rmx_meta_close(m, NULL, NULL);
    return RMX_ENOMEM;
  }
  r->done = grant_done;
  if (rmx__meta_req_start(r) != 0) {
    m->on_open = NULL;
    rmx_meta_close(m, NULL, NULL);
    return RMX_ENOMEM;
  }
  *out = m;
  return 0;
}

int rmx_meta_close(rmx_meta_t *m, rmx_meta_cb on_closed, void *arg)
{
  if (!m)
    return RMX_EINVAL;
  if (m->closing)
    return RMX_EALREADY;
  m->closing = 1;
  m->on_closed = on_closed;
  m->closed_arg = arg;
  uv_timer_stop(&m->ka_timer);
  rmx__meta_cancel_all(m);
  rmx_list_t *it;
  while ((it = rmx_list_pop(&m->pubs)) != NULL)
    free(rmx_container_of(it, rmx__meta_pub_t, link));
  free(m->uri);
  m->uri = NULL;
  if (m->lease > 0 && !m->lease_lost) {
    /* In flight past the cancel: the teardown waits for it. */
    char *body = lease_body(m);
    rmx__meta_req_t *r = rmx__meta_req_new(m, "/v3/lease/revoke", body, "lease revoke");
    free(body);
    if (r) {
      r->done = revoke_done;
      r->then = "etcd drops the lease and the agent's entries when its TTL runs out";
      if (rmx__meta_req_start(r) != 0)
        m->closed_status = RMX_ENOMEM;
    } else {
      m->closed_status = RMX_ENOMEM;
    }
  }
  return 0;
}

/* ---- entries ---- */

static void cb_done(rmx__meta_req_t *r)
{
  if (r->u.cb)
    RMX__META_USER(r->m, r->u.cb(r->m, r->status, r->arg));
}

/* withdraw: a delete that found nothing is RMX_ENOENT. */
static void del_done(rmx__meta_req_t *r)
{
  if (!r->status) {
    json_object *o = rmx__meta_parse(r);
    r->status = !o ? RMX_EPROTO : rmx__meta_int(o, "deleted", 0) > 0 ? 0 : RMX_ENOENT;
    json_object_put(o);
  }
  cb_done(r);
}

/* The value of a range answer's only entry (malloc'd), or NULL with *st. */
static char *range_value(rmx__meta_req_t *r, int *st)
{
  *st = r->status;
  if (*st)
    return NULL;
  json_object *o = rmx__meta_parse(r), *kvs, *kv, *v;
  char *val = NULL;
  size_t n;
  if (!o) {
    *st = RMX_EPROTO;
  } else if (!json_object_object_get_ex(o, "kvs", &kvs) || json_object_array_length(kvs) == 0) {
    *st = RMX_ENOENT; /* an empty answer omits "kvs" */
  } else if (!(kv = json_object_array_get_idx(kvs, 0)) ||
             !json_object_object_get_ex(kv, "value", &v) ||
             !(val = rmx__b64_dec(json_object_get_string(v), &n)) || strlen(val) != n) {
    *st = RMX_EPROTO;
  }
  json_object_put(o);
  if (*st) {
    free(val);
    val = NULL;
  }
  return val;
}

static void resolve_done(rmx__meta_req_t *r)
{
  int st;
  char *uri = range_value(r, &st);
  RMX__META_USER(r->m, r->u.resolve(r->m, st, uri, r->arg));
  free(uri);
}

static void find_done(rmx__meta_req_t *r)
{
  int st;
  char *val = range_value(r, &st);
  int64_t len = 0, access = 0;
  if (val) {
    json_object *o = json_tokener_parse(val);
    len = rmx__meta_int(o, "len", -1);
    access = rmx__meta_int(o, "access", -1);
    if (len < 0 || access < 0 || access > 15) {
      RMX_LOG_LIMITED(r->m->ctx, &r->m->rl, WARN, "meta: etcd at %s: %s: not an entry rmx wrote",
                      r->m->endpoint, r->what);
      st = RMX_EPROTO;
      len = access = 0;
    }
    json_object_put(o);
    free(val);
  }
  RMX__META_USER(r->m, r->u.find(r->m, st, (uint64_t)len, (unsigned)access, r->arg));
}

/* POST {"key": k, ["value": v], ["lease": ID]} to path, ended by done. */
static int kv_req(rmx_meta_t *m, const char *path, const char *what, char *key, const char *val,
                  int leased, void (*done)(rmx__meta_req_t *), void *cb, void *arg)
{
  if (!key)
    return RMX_ENOMEM;
  json_object *o = json_object_new_object();
  int rc = o ? rmx__meta_add_b64(o, "key", key) : RMX_ENOMEM;
  free(key);
  if (!rc && val)
    rc = rmx__meta_add_b64(o, "value", val);
  if (!rc && leased) {
    char id[32];
    snprintf(id, sizeof(id), "%" PRId64, m->lease);
    json_object *s = json_object_new_string(id);
    if (!s || json_object_object_add(o, "lease", s) != 0) {
      json_object_put(s);
      rc = RMX_ENOMEM;
    }
  }
  if (rc) {
    json_object_put(o);
    return rc;
  }
  char *body = rmx__meta_text(o);
  rmx__meta_req_t *r = body ? rmx__meta_req_new(m, path, body, what) : NULL;
  free(body);
  if (!r)
    return RMX_ENOMEM;
  r->done = done;
  r->u.cb = (rmx_meta_cb)cb; /* done reads the member of its own type */
  r->arg = arg;
  return rmx__meta_req_start(r);
}

/* Writes need the lease: granted and still alive. */
static int may_write(rmx_meta_t *m)
{
  if (!m)
    return RMX_EINVAL;
  if (m->closing)
    return RMX_EALREADY;
  return m->lease > 0 && !m->lease_lost ? 0 : RMX_ENOTCONN;
}

/* What this agent wrote, kept to write again under a new lease. */
static rmx__meta_pub_t *pub_find(rmx_meta_t *m, const char *name)
{
  rmx_list_t *it;
  rmx_list_foreach(it, &m->pubs) {
    rmx__meta_pub_t *p = rmx_container_of(it, rmx__meta_pub_t, link);
    if (strcmp(p->name, name) == 0)
      return p;
  }
  return NULL;
}

static void kept_short(rmx_meta_t *m, const char *what)
{
  RMX_LOG(m->ctx, WARN, "meta: out of memory: %s of agent %s will not be written again "
          "should its lease run out", what, m->agent);
}

int rmx_meta_set_uri(rmx_meta_t *m, const char *uri, rmx_meta_cb cb, void *arg)
{
  int rc = may_write(m);
  if (rc || !uri)
    return rc ? rc : RMX_EINVAL;
  rc = kv_req(m, "/v3/kv/put", "put of the agent's URI",
              rmx__meta_key(m, "agents/", m->agent, NULL, NULL), uri, 1, cb_done, (void *)cb, arg);
  if (!rc) {
    free(m->uri);
    if (!(m->uri = strdup(uri)))
      kept_short(m, "the URI");
  }
  return rc;
}

int rmx_meta_resolve(rmx_meta_t *m, const char *agent, rmx_meta_resolve_cb cb, void *arg)
{
  if (!m || !cb || !rmx__meta_agent_ok(agent))
    return RMX_EINVAL;
  if (m->closing)
    return RMX_EALREADY;
  return kv_req(m, "/v3/kv/range", "range of an agent's URI",
                rmx__meta_key(m, "agents/", agent, NULL, NULL), NULL, 0, resolve_done, (void *)cb, arg);
}

int rmx_meta_publish(rmx_meta_t *m, const char *name, rmx_mem_t *mem, rmx_meta_cb cb, void *arg)
{
  int rc = may_write(m);
  if (rc)
    return rc;
  if (!mem || mem->ctx != m->ctx || !rmx__meta_name_ok(name))
    return RMX_EINVAL;
  char val[64];
  snprintf(val, sizeof(val), "{\"len\":%zu,\"access\":%u}", mem->len, mem->access);
  rc = kv_req(m, "/v3/kv/put", "put of a name", rmx__meta_key(m, "mem/", m->agent, "/", name),
              val, 1, cb_done, (void *)cb, arg);
  rmx__meta_pub_t *p = rc ? NULL : pub_find(m, name);
  if (!rc && !p && (p = malloc(sizeof(*p) + strlen(name) + 1)) != NULL) {
    strcpy(p->name, name);
    rmx_list_push(&m->pubs, &p->link);
  }
  if (p) {
    p->len = mem->len;
    p->access = mem->access;
  } else if (!rc) {
    kept_short(m, name);
  }
  return rc;
}

int rmx_meta_withdraw(rmx_meta_t *m, const char *name, rmx_meta_cb cb, void *arg)
{
  int rc = may_write(m);
  if (rc)
    return rc;
  if (!rmx__meta_name_ok(name))
    return RMX_EINVAL;
  rc = kv_req(m, "/v3/kv/deleterange", "delete of a name",
              rmx__meta_key(m, "mem/", m->agent, "/", name), NULL, 0, del_done, (void *)cb, arg);
  rmx__meta_pub_t *p = rc ? NULL : pub_find(m, name);
  if (p) {
    rmx_list_del(&p->link);
    free(p);
  }
  return rc;
}

int rmx_meta_find(rmx_meta_t *m, const char *agent, const char *name, rmx_meta_find_cb cb,
                  void *arg)
{
  if (!m || !cb || !rmx__meta_agent_ok(agent) || !rmx__meta_name_ok(name))
    return RMX_EINVAL;
  if (m->closing)
    return RMX_EALREADY;
  return kv_req(m, "/v3/kv/range", "range of a name", rmx__meta_key(m, "mem/", agent, "/", name),
                NULL, 0, find_done, (void *)cb, arg);
}
