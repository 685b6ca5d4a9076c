/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The metadata service's insides (docs/metadata.md). Three files, calls
 * one way: meta.c (the API, the lease) and watch.c (watches) call
 * engine.c (libcurl's multi interface on the context's loop, the life of
 * a request and of the handle) and codec.c (base64, keys, JSON); engine.c
 * reaches them back only through each request's done/data pointers.
 */
#ifndef RMX_META_META_H
#define RMX_META_META_H

#include <curl/curl.h>
#include <json-c/json.h>

#include "rmx_int.h"

typedef struct rmx__meta_req rmx__meta_req_t;

/* One HTTP request to etcd, from its start to its callback. */
struct rmx__meta_req {
  rmx_list_t link; /* m->reqs while in flight, m->doneq once its end is due */
  rmx_meta_t *m;
  CURL *easy;
  struct curl_slist *hdrs;
  const char *what; /* for the log: "lease grant", "put", ... */
  const char *then; /* for the log: what rmx does when it fails (NULL: the call fails) */
  char *resp;       /* the answer so far (NUL-terminated), or a stream's unread bytes */
  size_t len, cap;
  int status;  /* the outcome, once ended */
  int ended;   /* on m->doneq or being delivered */
  int pending; /* a stream has unread bytes */
  int stream;  /* no total timeout, no size cap on the whole answer */
  /* Ends it, from the loop: status set, resp holds the body on 0. Runs
   * the caller's callback; the engine frees r afterwards. */
  void (*done)(rmx__meta_req_t *r);
  /* A stream's new bytes (resp, len): 0, or an error that ends it. */
  int (*data)(rmx__meta_req_t *r);
  union {
    rmx_meta_cb cb;
    rmx_meta_resolve_cb resolve;
    rmx_meta_find_cb find;
  } u;
  void *arg;
  void *ext; /* the watch, for watch requests */
};

/* A name this agent published, written again under a new lease. */
typedef struct rmx__meta_pub {
  rmx_list_t link; /* m->pubs */
  uint64_t len;
  unsigned access;
  char name[];
} rmx__meta_pub_t;

struct rmx_meta {
  rmx_ctx_t *ctx;
  CURLM *multi;
  uv_timer_t curl_timer; /* libcurl's timeout */
  uv_timer_t ka_timer;   /* the lease's keepalive, every ttl / 3 */
  rmx_list_t reqs;       /* requests in flight */
  rmx_list_t doneq;      /* requests whose end is due from the deferred runner */
  rmx_list_t socks;      /* one uv_poll_t per socket libcurl watches */
  rmx__deferred_t defer;
  rmx__ratelimit_t rl;   /* errors etcd can make us repeat */
  char *endpoint, *prefix, *agent;
  unsigned ttl_s;
  int64_t lease;         /* 0 until granted */
  int lease_lost;        /* a keepalive found it gone: granting another */
  int ka_busy;           /* a keepalive (or that grant) is in flight */
  char *uri;             /* what set_uri wrote last, or NULL */
  rmx_list_t pubs;       /* rmx__meta_pub_t: what publish wrote, to write again */
  int closing, tearing;
  int handles;           /* uv handles not yet closed */
  rmx_meta_cb on_open, on_closed;
  void *open_arg, *closed_arg;
  int closed_status;
};

/* ---- engine.c ---- */
int rmx__meta_engine_init(rmx_meta_t *m);
/* A POST of body (JSON, copied) to endpoint + path; NULL when out of memory. */
rmx__meta_req_t *rmx__meta_req_new(rmx_meta_t *m, const char *path, const char *body,
                                   const char *what);
/* Hand it to libcurl: 0, or RMX_ENOMEM (r is freed). */
int rmx__meta_req_start(rmx__meta_req_t *r);
/* End r with status from the deferred runner, unless its end is due already. */
void rmx__meta_req_end(rmx__meta_req_t *r, int status);
/* Closing: every request ends with RMX_ECANCELED; once none is left the
 * handle is torn down and m->on_closed runs. */
void rmx__meta_cancel_all(rmx_meta_t *m);
/* Run a user callback as rmx runs its own (ctx->in_cb). */
#define RMX__META_USER(m, call) \
  do {                          \
    rmx__cb_enter((m)->ctx);    \
    call;                       \
    (m)->ctx->in_cb--;          \
  } while (0)

/* ---- codec.c ---- */
char *rmx__b64_enc(const void *p, size_t n);
/* Decoded bytes plus a NUL, *n their count; NULL when not base64. */
char *rmx__b64_dec(const char *s, size_t *n);
/* An agent name is 1..RMX_META_AGENT_MAX-1 printable ASCII without space
 * or '/'; a memory name as rmx_mem_publish's (printable ASCII). */
int rmx__meta_agent_ok(const char *s);
int rmx__meta_name_ok(const char *s);
/* "<prefix><a><b><c><d>" in a malloc'd string (b, c, d may be NULL). */
char *rmx__meta_key(const rmx_meta_t *m, const char *a, const char *b, const char *c,
                    const char *d);
/* Add member k = base64(v) to o: 0 or RMX_ENOMEM. */
int rmx__meta_add_b64(json_object *o, const char *k, const char *v);
/* o as text (malloc'd), o released; NULL when out of memory. */
char *rmx__meta_text(json_object *o);
/* The answer's JSON object, or NULL (logged) when it is not one. */
json_object *rmx__meta_parse(rmx__meta_req_t *r);
/* A JSON member that is an int64 (etcd writes them as strings); def if absent. */
int64_t rmx__meta_int(json_object *o, const char *key, int64_t def);

#endif
