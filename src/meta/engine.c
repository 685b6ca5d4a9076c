/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libcurl's multi interface driven by the context's loop: a uv_poll_t per
 * socket libcurl names, a uv_timer_t for its timeout, never a blocking
 * call. Requests end here: the transfer's outcome becomes an rmx code
 * (etcd unreachable is logged with its endpoint), then the request's done
 * runs its callback. Callbacks never run inside libcurl's own callbacks:
 * the write callback only keeps the bytes, and what a stream brought is
 * handed on once curl_multi_socket_action has returned.
 *
 * The handle's end lives here too: after rmx_meta_close() every request
 * ends (RMX_ECANCELED) from the deferred runner, then the multi handle and
 * the uv handles go, and on_closed runs from the last close callback.
 */
#include <stdlib.h>
#include <string.h>

#include "meta/meta.h"

#define META_TIMEOUT_MS 5000         /* a request's whole life */
#define META_CONNECT_TIMEOUT_MS 2000 /* etcd's TCP connect */
#define META_RESP_MAX (4u << 20)     /* an answer, or one object of a stream */

typedef struct meta_sock {
  uv_poll_t poll;
  rmx_list_t link; /* m->socks */
  rmx_meta_t *m;
} meta_sock_t;

static void defer_run(rmx__deferred_t *d);
static void teardown(rmx_meta_t *m);

static void handle_closed(uv_handle_t *h)
{
  rmx_meta_t *m = h->data;
  if (h->type == UV_POLL)
    free(rmx_container_of((uv_poll_t *)h, meta_sock_t, poll));
  if (--m->handles > 0)
    return;
  /* The last one: the handle is gone. */
  rmx_meta_cb cb = m->on_closed;
  void *arg = m->closed_arg;
  int status = m->closed_status;
  rmx_ctx_t *ctx = m->ctx;
  ctx->nmetas--; /* the context may be destroyed from inside the callback */
  if (cb)
    RMX__META_USER(m, cb(m, status, arg));
  free(m->endpoint);
  free(m->prefix);
  free(m->agent);
  free(m);
}

static void sock_close(meta_sock_t *s)
{
  uv_poll_stop(&s->poll);
  rmx_list_del(&s->link);
  uv_close((uv_handle_t *)&s->poll, handle_closed);
}

/* libcurl's timeout as errno-style codes: etcd unreachable, or slow. */
static int curl_status(CURLcode cc, long oserr)
{
  switch (cc) {
  case CURLE_OK:
    return 0;
  case CURLE_COULDNT_CONNECT:
    if (oserr == EHOSTUNREACH || oserr == ENETUNREACH)
      return RMX_EHOSTUNREACH;
    return oserr == ETIMEDOUT ? RMX_ETIMEDOUT : RMX_ECONNREFUSED;
  case CURLE_OPERATION_TIMEDOUT:
    return RMX_ETIMEDOUT;
  case CURLE_COULDNT_RESOLVE_HOST:
    return RMX_ENORESOLVE;
  case CURLE_OUT_OF_MEMORY:
    return RMX_ENOMEM;
  case CURLE_GOT_NOTHING:
  case CURLE_SEND_ERROR:
  case CURLE_RECV_ERROR:
  case CURLE_PARTIAL_FILE:
    return RMX_ECONNRESET;
  case CURLE_WEIRD_SERVER_REPLY:
  case CURLE_UNSUPPORTED_PROTOCOL:
  case CURLE_WRITE_ERROR: /* an answer past META_RESP_MAX */
    return RMX_EPROTO;
  default:
    return RMX_EIO;
  }
}

/* etcd refused the request: its gRPC code in the JSON error. */
static int etcd_status(rmx__meta_req_t *r, long http)
{
  json_object *o = r->resp ? json_tokener_parse(r->resp) : NULL, *msg = NULL;
  int64_t code = rmx__meta_int(o, "code", -1);
  if (o)
    json_object_object_get_ex(o, "message", &msg);
  RMX_LOG_LIMITED(r->m->ctx, &r->m->rl, ERROR, "meta: etcd at %s refused %s: HTTP %ld: %s",
                  r->m->endpoint, r->what, http, msg ? json_object_get_string(msg) : "(no text)");
  json_object_put(o);
  switch (code) {
  case 4: /* DEADLINE_EXCEEDED */
    return RMX_ETIMEDOUT;
  case 5: /* NOT_FOUND: a lease that ran out */
    return RMX_ENOENT;
  case 14: /* UNAVAILABLE: no leader */
    return RMX_EAGAIN;
  default:
    return RMX_EPROTO;
  }
}

static void req_free(rmx__meta_req_t *r)
{
  if (r->easy)
    curl_easy_cleanup(r->easy);
  curl_slist_free_all(r->hdrs);
  free(r->resp);
  free(r);
}

/* What went wrong, in etcd's terms rather than libcurl's: the log says what
 * happened at the endpoint, and then what rmx does about it. */
static const char *what_happened(const rmx__meta_req_t *r, CURLcode cc, long oserr, char *buf,
                                 size_t len)
{
  switch (cc) {
  case CURLE_COULDNT_CONNECT:
    if (oserr == EHOSTUNREACH || oserr == ENETUNREACH)
      return "its host is unreachable";
    if (oserr == ETIMEDOUT)
      return "it did not answer the connect";
    return "nothing listens there (etcd stopped, or not started)";
  case CURLE_OPERATION_TIMEDOUT:
    if (r->stream)
      snprintf(buf, len, "no connection within %u ms", META_CONNECT_TIMEOUT_MS);
    else
      snprintf(buf, len, "no answer within %u ms (%u ms to connect)", META_TIMEOUT_MS,
               META_CONNECT_TIMEOUT_MS);
    return buf;
  case CURLE_COULDNT_RESOLVE_HOST:
    return "its host name does not resolve";
  case CURLE_GOT_NOTHING:
  case CURLE_SEND_ERROR:
  case CURLE_RECV_ERROR:
  case CURLE_PARTIAL_FILE:
    return r->stream ? "etcd closed the stream (it stopped, restarted or dropped the connection)"
                     : "etcd closed the connection before it answered (it stopped or restarted)";
  case CURLE_WRITE_ERROR:
    snprintf(buf, len, "its answer is larger than %u bytes", META_RESP_MAX);
    return buf;
  case CURLE_WEIRD_SERVER_REPLY:
  case CURLE_UNSUPPORTED_PROTOCOL:
    return "its answer is not etcd's HTTP";
  default:
    snprintf(buf, len, "libcurl: %s", curl_easy_strerror(cc));
    return buf;
  }
}

/* The transfer of r finished with cc: its status, logged where it failed. */
static int req_status(rmx__meta_req_t *r, CURLcode cc)
{
  long oserr = 0, http = 0;
  curl_easy_getinfo(r->easy, CURLINFO_OS_ERRNO, &oserr);
  curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &http);
  int st = curl_status(cc, oserr);
  if (st) {
    char buf[96];
    RMX_LOG_LIMITED(r->m->ctx, &r->m->rl, ERROR, "meta: etcd at %s: %s failed: %s; %s (%s)",
                    r->m->endpoint, r->what, what_happened(r, cc, oserr, buf, sizeof(buf)),
                    r->then ? r->then : "the call fails", rmx_err_name(st));
    return st;
  }
  if (http != 200)
    return etcd_status(r, http);
  return 0;
}

/* Every transfer libcurl finished, each ended here (from the loop). */
static void check_done(rmx_meta_t *m)
{
  CURLMsg *msg;
  int left;
  while (!m->tearing && (msg = curl_multi_info_read(m->multi, &left)) != NULL) {
    if (msg->msg != CURLMSG_DONE)
      continue;
    rmx__meta_req_t *r = NULL;
    CURLcode cc = msg->data.result;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
    if (r->ended)
      continue; /* ended by a callback already (removing it drops its message too) */
    curl_multi_remove_handle(m->multi, r->easy);
    rmx_list_del(&r->link);
    r->ended = 1;
    r->status = req_status(r, cc);
    r->done(r);
    req_free(r);
  }
}

/* A stream's bytes, handed on outside libcurl's callbacks. A callback may
 * end any request: look again from the start each time. */
static void streams_run(rmx_meta_t *m)
{
  for (int again = 1; again;) {
    again = 0;
    rmx_list_t *n;
    rmx_list_foreach(n, &m->reqs) {
      rmx__meta_req_t *r = rmx_container_of(n, rmx__meta_req_t, link);
      if (!r->pending)
        continue;
      r->pending = 0;
      int st = r->data(r);
      r->len = 0;
      if (st)
        rmx__meta_req_end(r, st);
      again = 1;
      break;
    }
  }
}

static void after_action(rmx_meta_t *m)
{
  streams_run(m);
  check_done(m);
  if (m->closing && rmx_list_empty(&m->reqs))
    rmx__defer_once(m->ctx, &m->defer);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
  meta_sock_t *s = rmx_container_of(h, meta_sock_t, poll);
  rmx_meta_t *m = s->m;
  int flags = status < 0 ? CURL_CSELECT_ERR : 0, running;
  if (events & UV_READABLE)
    flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE)
    flags |= CURL_CSELECT_OUT;
  int fd = -1;
  uv_fileno((uv_handle_t *)h, &fd);
  curl_multi_socket_action(m->multi, fd, flags, &running);
  after_action(m);
}

static void on_curl_timer(uv_timer_t *t)
{
  rmx_meta_t *m = t->data;
  int running;
  curl_multi_socket_action(m->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  after_action(m);
}

static int socket_cb(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
{
  rmx_meta_t *m = userp;
  meta_sock_t *s = socketp;
  if (what == CURL_POLL_REMOVE) {
    if (s) {
      if (!m->tearing)
        curl_multi_assign(m->multi, fd, NULL);
      sock_close(s);
    }
    return 0;
  }
  if (!s) {
    s = calloc(1, sizeof(*s));
    if (!s || uv_poll_init_socket(m->ctx->loop, &s->poll, fd) != 0) {
      free(s);
      return -1;
    }
    s->m = m;
    s->poll.data = m;
    m->handles++;
    rmx_list_push(&m->socks, &s->link);
    curl_multi_assign(m->multi, fd, s);
  }
  int ev = (what & CURL_POLL_IN ? UV_READABLE : 0) | (what & CURL_POLL_OUT ? UV_WRITABLE : 0);
  uv_poll_start(&s->poll, ev, on_poll);
  return 0;
}

/* Never drive libcurl from inside it: a due timeout fires from the loop. */
static int timer_cb(CURLM *multi, long ms, void *userp)
{
  rmx_meta_t *m = userp;
  if (ms < 0)
    uv_timer_stop(&m->curl_timer);
  else
    uv_timer_start(&m->curl_timer, on_curl_timer, (uint64_t)ms, 0);
  return 0;
}

int rmx__meta_engine_init(rmx_meta_t *m)
{
  rmx_list_init(&m->reqs);
  rmx_list_init(&m->doneq);
  rmx_list_init(&m->socks);
  rmx_list_init(&m->defer.link);
  m->defer.fn = defer_run;
  m->multi = curl_multi_init();
  if (!m->multi)
    return RMX_ENOMEM;
  curl_multi_setopt(m->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
  curl_multi_setopt(m->multi, CURLMOPT_SOCKETDATA, m);
  curl_multi_setopt(m->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
  curl_multi_setopt(m->multi, CURLMOPT_TIMERDATA, m);
  uv_timer_init(m->ctx->loop, &m->curl_timer);
  uv_timer_init(m->ctx->loop, &m->ka_timer);
  m->curl_timer.data = m->ka_timer.data = m;
  uv_unref((uv_handle_t *)&m->ka_timer); /* an open handle keeps no loop alive */
  m->handles = 2;
  return 0;
}

static size_t write_cb(char *p, size_t size, size_t n, void *arg)
{
  rmx__meta_req_t *r = arg;
  size_t len = size * n;
  if (r->len + len > META_RESP_MAX)
    return 0; /* CURLE_WRITE_ERROR: RMX_EPROTO */
  if (r->len + len + 1 > r->cap) {
    size_t cap = r->cap ? r->cap : 1024;
    while (cap < r->len + len + 1)
      cap *= 2;
    char *b = realloc(r->resp, cap);
    if (!b)
      return 0;
    r->resp = b;
    r->cap = cap;
  }
  memcpy(r->resp + r->len, p, len);
  r->len += len;
  r->resp[r->len] = '\0';
  r->pending = r->data != NULL;
  return len;
}

rmx__meta_req_t *rmx__meta_req_new(rmx_meta_t *m, const char *path, const char *body,
                                   const char *what)
{
  rmx__meta_req_t *r = calloc(1, sizeof(*r));
  if (!r)
    return NULL;
  rmx_list_init(&r->link);
  r->m = m;
  r->what = what;
  size_t ulen = strlen(m->endpoint) + strlen(path) + 1;
  char *url = malloc(ulen);
  r->easy = curl_easy_init();
  r->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
  struct curl_slist *h = r->hdrs ? curl_slist_append(r->hdrs, "Expect:") : NULL;
  if (h) /* no 100-continue round trip before a longer body */
    r->hdrs = h;
  if (!url || !r->easy || !h || !body) {
    free(url);
    req_free(r);
    return NULL;
  }
  snprintf(url, ulen, "%s%s", m->endpoint, path);
  CURLcode cc = curl_easy_setopt(r->easy, CURLOPT_URL, url);
  free(url);
  cc |= curl_easy_setopt(r->easy, CURLOPT_COPYPOSTFIELDS, body);
  cc |= curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->hdrs);
  cc |= curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, write_cb);
  cc |= curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
  cc |= curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r);
  cc |= curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
  cc |= curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)META_CONNECT_TIMEOUT_MS);
  cc |= curl_easy_setopt(r->easy, CURLOPT_PROTOCOLS_STR, "http,https");
  if (cc != CURLE_OK) {
    req_free(r);
    return NULL;
  }
  return r;
}

int rmx__meta_req_start(rmx__meta_req_t *r)
{
  if (!r->stream) {
    curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, (long)META_TIMEOUT_MS);
  } else {
    /* No end to wait for: TCP keepalives find an etcd host that vanished. */
    curl_easy_setopt(r->easy, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(r->easy, CURLOPT_TCP_KEEPIDLE, 10L);
    curl_easy_setopt(r->easy, CURLOPT_TCP_KEEPINTVL, 5L);
  }
  if (curl_multi_add_handle(r->m->multi, r->easy) != CURLM_OK) {
    req_free(r);
    return RMX_ENOMEM;
  }
  rmx_list_push(&r->m->reqs, &r->link);
  return 0;
}

void rmx__meta_req_end(rmx__meta_req_t *r, int status)
{
  if (r->ended)
    return;
  r->ended = 1;
  r->pending = 0;
  r->status = status;
  curl_multi_remove_handle(r->m->multi, r->easy);
  rmx_list_del(&r->link);
  rmx_list_push(&r->m->doneq, &r->link);
  rmx__defer_once(r->m->ctx, &r->m->defer);
}

void rmx__meta_cancel_all(rmx_meta_t *m)
{
  rmx_list_t *n;
  while ((n = m->reqs.next) != &m->reqs)
    rmx__meta_req_end(rmx_container_of(n, rmx__meta_req_t, link), RMX_ECANCELED);
  rmx__defer_once(m->ctx, &m->defer);
}

/* From the loop: the ends that are due, then, closing with nothing left in
 * flight, the teardown. */
static void defer_run(rmx__deferred_t *d)
{
  rmx_meta_t *m = rmx_container_of(d, rmx_meta_t, defer);
  rmx_list_t *n;
  while ((n = rmx_list_pop(&m->doneq)) != NULL) {
    rmx__meta_req_t *r = rmx_container_of(n, rmx__meta_req_t, link);
    r->done(r);
    req_free(r);
  }
  if (m->closing && !m->tearing && rmx_list_empty(&m->reqs))
    teardown(m);
}

static void teardown(rmx_meta_t *m)
{
  rmx_list_t *n;
  m->tearing = 1;
  curl_multi_cleanup(m->multi); /* may remove sockets through socket_cb */
  m->multi = NULL;
  while ((n = m->socks.next) != &m->socks)
    sock_close(rmx_container_of(n, meta_sock_t, link));
  uv_timer_stop(&m->curl_timer);
  uv_timer_stop(&m->ka_timer);
  uv_close((uv_handle_t *)&m->curl_timer, handle_closed);
  uv_close((uv_handle_t *)&m->ka_timer, handle_closed);
}
