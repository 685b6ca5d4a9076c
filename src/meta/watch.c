/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Watches: one streaming POST /v3/watch per watch, over the whole prefix.
 * etcd answers with a JSON object per message, {"result": {...}}: first
 * one with "created", then one per batch of events, each event a "kv"
 * whose key says whose entry it is and a "type" ("DELETE", or none for a
 * put: proto3's JSON leaves out the default). A watch of one agent filters
 * the others out here.
 */
#include <stdlib.h>
#include <string.h>

#include "meta/meta.h"

struct rmx_meta_watch {
  rmx__meta_req_t *r; /* NULL once its end is delivered */
  rmx_meta_watch_cb cb;
  void *arg;
  char *agent; /* NULL: every agent */
  json_tokener *tok;
};

/* One event's key: whose entry, and which. */
static void event(rmx_meta_watch_t *w, rmx_meta_t *m, json_object *ev)
{
  json_object *kv, *key, *type;
  if (!json_object_object_get_ex(ev, "kv", &kv) || !json_object_object_get_ex(kv, "key", &key))
    return;
  int kind = RMX_META_PUT;
  if (json_object_object_get_ex(ev, "type", &type) &&
      strcmp(json_object_get_string(type), "DELETE") == 0)
    kind = RMX_META_DELETE;
  size_t n, plen = strlen(m->prefix);
  char *k = rmx__b64_dec(json_object_get_string(key), &n);
  if (!k || strlen(k) != n || strncmp(k, m->prefix, plen) != 0) {
    free(k);
    return;
  }
  char *agent = k + plen, *name = NULL;
  if (strncmp(agent, "agents/", 7) == 0) {
    agent += 7;
  } else if (strncmp(agent, "mem/", 4) == 0) {
    agent += 4;
    name = strchr(agent, '/');
    if (!name) {
      free(k);
      return;
    }
    *name++ = '\0';
  } else {
    free(k); /* not rmx's */
    return;
  }
  if (rmx__meta_agent_ok(agent) && (!name || rmx__meta_name_ok(name)) &&
      (!w->agent || strcmp(w->agent, agent) == 0))
    RMX__META_USER(m, w->cb(w, kind, 0, agent, name, w->arg));
  free(k);
}

/* One message of the stream: 0, or why the watch ends. A callback may
 * end the watch: stop at once when it did. */
static int message(rmx_meta_watch_t *w, rmx__meta_req_t *r, json_object *o)
{
  json_object *res, *v;
  if (!json_object_object_get_ex(o, "result", &res)) {
    RMX_LOG_LIMITED(r->m->ctx, &r->m->rl, ERROR, "meta: etcd at %s ended a watch with an error: %s; the watch ends (RMX_META_END)",
                    r->m->endpoint, json_object_to_json_string(o));
    return RMX_EPROTO;
  }
  if (json_object_object_get_ex(res, "canceled", &v) && json_object_get_boolean(v)) {
    json_object *why = NULL;
    json_object_object_get_ex(res, "cancel_reason", &why);
    RMX_LOG_LIMITED(r->m->ctx, &r->m->rl, ERROR,
                    "meta: etcd at %s canceled a watch (%s); the watch ends (RMX_META_END); "
                    "rmx does not watch again",
                    r->m->endpoint, why ? json_object_get_string(why) : "no reason given");
    return RMX_ECONNRESET;
  }
  if (json_object_object_get_ex(res, "created", &v) && json_object_get_boolean(v))
    RMX__META_USER(r->m, w->cb(w, RMX_META_READY, 0, NULL, NULL, w->arg));
  if (json_object_object_get_ex(res, "events", &v) && json_object_is_type(v, json_type_array))
    for (size_t i = 0; i < json_object_array_length(v) && !r->ended; i++)
      event(w, r->m, json_object_array_get_idx(v, i));
  return 0;
}

/* New bytes of the stream: every whole object in them. */
static int watch_data(rmx__meta_req_t *r)
{
  rmx_meta_watch_t *w = r->ext;
  const char *p = r->resp;
  size_t left = r->len;
  while (left > 0 && !r->ended) {
    json_object *o = json_tokener_parse_ex(w->tok, p, (int)left);
    enum json_tokener_error e = json_tokener_get_error(w->tok);
    if (e == json_tokener_continue)
      return 0; /* the tokener keeps the partial object */
    if (!o) {
      RMX_LOG_LIMITED(r->m->ctx, &r->m->rl, ERROR, "meta: etcd at %s: a watch: not JSON (%s)",
                      r->m->endpoint, json_tokener_error_desc(e));
      return RMX_EPROTO;
    }
    size_t used = json_tokener_get_parse_end(w->tok);
    json_tokener_reset(w->tok);
    p += used;
    left -= used;
    while (left > 0 && (*p == '\n' || *p == '\r' || *p == ' '))
      p++, left--;
    int st = message(w, r, o);
    json_object_put(o);
    if (st)
      return st;
  }
  return 0;
}

static void watch_done(rmx__meta_req_t *r)
{
  rmx_meta_watch_t *w = r->ext;
  /* A stream that ends on its own was cut: etcd went away. */
  int st = r->status ? r->status : RMX_ECONNRESET;
  w->r = NULL;
  RMX__META_USER(r->m, w->cb(w, RMX_META_END, st, NULL, NULL, w->arg));
  json_tokener_free(w->tok);
  free(w->agent);
  free(w);
}

int rmx_meta_watch(rmx_meta_t *m, const char *agent, rmx_meta_watch_cb cb, void *arg,
                   rmx_meta_watch_t **out)
{
  if (!m || !cb || !out || (agent && !rmx__meta_agent_ok(agent)))
    return RMX_EINVAL;
  if (m->closing)
    return RMX_EALREADY;
  rmx_meta_watch_t *w = calloc(1, sizeof(*w));
  char *end = strdup(m->prefix); /* the range: every key that starts with the prefix */
  json_object *o = json_object_new_object(), *cr = json_object_new_object();
  char *body = NULL;
  int ok = w && end && o && cr && (w->tok = json_tokener_new()) != NULL &&
           (!agent || (w->agent = strdup(agent)) != NULL);
  if (ok) {
    end[strlen(end) - 1]++;
    ok = rmx__meta_add_b64(cr, "key", m->prefix) == 0 && rmx__meta_add_b64(cr, "range_end", end) == 0 &&
         json_object_object_add(o, "create_request", cr) == 0;
    if (ok)
      cr = NULL; /* o holds it */
    body = ok ? rmx__meta_text(o) : NULL;
    o = NULL;
  }
  json_object_put(o);
  json_object_put(cr);
  free(end);
  rmx__meta_req_t *r = body ? rmx__meta_req_new(m, "/v3/watch", body, "watch") : NULL;
  free(body);
  if (!r) {
    if (w) {
      if (w->tok)
        json_tokener_free(w->tok);
      free(w->agent);
    }
    free(w);
    return RMX_ENOMEM;
  }
  w->r = r;
  w->cb = cb;
  w->arg = arg;
  r->stream = 1;
  r->then = "the watch ends (RMX_META_END); rmx does not watch again: call rmx_meta_watch once etcd "
            "answers";
  r->ext = w;
  r->data = watch_data;
  r->done = watch_done;
  int rc = rmx__meta_req_start(r);
  if (rc) {
    json_tokener_free(w->tok);
    free(w->agent);
    free(w);
    return rc;
  }
  *out = w;
  return 0;
}

int rmx_meta_unwatch(rmx_meta_watch_t *w)
{
  if (!w)
    return RMX_EINVAL;
  if (!w->r || w->r->ended)
    return RMX_EALREADY;
  rmx__meta_req_end(w->r, RMX_ECANCELED);
  return 0;
}
