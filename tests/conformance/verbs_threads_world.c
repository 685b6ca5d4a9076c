/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The two-thread verbs test's worlds: one context each, on its own thread,
 * with a listener and clients carrying traffic; every callback checked to
 * run on that thread and never after on_closed (verbs_threads.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include <uv.h>

#include "verbs_threads.h"

/* ---- bookkeeping (worker threads record; the main thread asserts) ---- */

static void bad(world_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bad(world_t *w, const char *fmt, ...)
{
  va_list ap;
  if (w->errors++ == 0) {
    va_start(ap, fmt);
    vsnprintf(w->why, sizeof(w->why), fmt, ap);
    va_end(ap);
  }
}

/* Every callback: on the context's thread, and never after on_closed. */
static void on_thread(peer_t *p, const char *what)
{
  world_t *w = p->w;
  if (!pthread_equal(pthread_self(), w->thread)) {
    __atomic_fetch_add(&w->wrong_thread, 1, __ATOMIC_RELAXED);
    return;
  }
  if (p->closed) {
    p->after_closed++;
    bad(w, "%s: %s after on_closed", w->name, what);
  }
}

void gate_init(gate_t *g)
{
  pthread_mutex_init(&g->m, NULL);
  pthread_cond_init(&g->cv, NULL);
  g->n = 0;
}

void gate_open(gate_t *g)
{
  pthread_mutex_lock(&g->m);
  g->n++;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->m);
}

int gate_wait(gate_t *g, int want, unsigned ms)
{
  struct timespec ts;
  int rc = 0;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  pthread_mutex_lock(&g->m);
  while (g->n < want && rc == 0)
    rc = pthread_cond_timedwait(&g->cv, &g->m, &ts);
  int ok = g->n >= want;
  pthread_mutex_unlock(&g->m);
  return ok ? 0 : -1;
}

/* ---- callbacks ---- */

typedef struct sendrec {
  peer_t *p;
  uint8_t data[];
} sendrec_t;

static size_t msg_len(int i) { return i % 6 == 5 ? BIG : 100 + (size_t)i * 7; }

static void sent(rmx_conn_t *c, int status, void *arg)
{
  sendrec_t *r = arg;
  peer_t *p = r->p;
  on_thread(p, "on_sent");
  p->sends_out--;
  if (status && p->client)
    p->send_errors++;
  free(r);
}

static int send_copy(peer_t *p, const void *data, size_t len)
{
  sendrec_t *r = malloc(sizeof(*r) + (len ? len : 1));
  if (!r)
    return RMX_ENOMEM;
  r->p = p;
  memcpy(r->data, data, len);
  int rc = rmx_send(p->c, r->data, len, sent, r);
  if (rc)
    free(r);
  else
    p->sends_out++;
  return rc;
}

static void recv_msg(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  peer_t *p = arg;
  on_thread(p, "on_recv");
  if (!p->client) { /* echo */
    if (send_copy(p, data, len))
      bad(p->w, "%s: echo failed", p->w->name);
    return;
  }
  int i = p->echoes++ % NMSG;
  uint8_t want[BIG];
  pattern(want, msg_len(i), (uint32_t)i);
  if (len != msg_len(i) || memcmp(data, want, len) != 0)
    p->bad_echoes++;
}

static void disconnected(rmx_conn_t *c, int status, void *arg)
{
  peer_t *p = arg;
  on_thread(p, "on_disconnect");
  p->disconnects++;
  p->disconnect_status = status;
  if (p->calls_out || p->sends_out)
    bad(p->w, "%s: on_disconnect with %d calls and %d sends still outstanding", p->w->name,
        p->calls_out, p->sends_out);
}

static void closed(rmx_conn_t *c, void *arg)
{
  peer_t *p = arg;
  on_thread(p, "on_closed");
  p->closed++;
}

static void connected(rmx_conn_t *c, int status, void *arg)
{
  peer_t *p = arg;
  on_thread(p, "on_connected");
  p->connected++;
  p->connect_status = status;
}

static void accepted(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  world_t *w = arg;
  static const rmx_conn_cbs_t cbs = {.on_recv = recv_msg, .on_disconnect = disconnected};
  if (w->nsv >= NCL) {
    bad(w, "%s: more connections accepted than made", w->name);
    return;
  }
  peer_t *p = &w->sv[w->nsv++];
  p->c = c;
  on_thread(p, "on_accept");
  rmx_conn_set_cbs(c, &cbs, p);
}

static peer_t *server_peer(world_t *w, rmx_conn_t *c)
{
  for (int i = 0; i < w->nsv; i++)
    if (w->sv[i].c == c)
      return &w->sv[i];
  return NULL;
}

static void hold_handler(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  world_t *w = arg;
  peer_t *p = server_peer(w, rmx_rpc_req_conn(req));
  if (!p) {
    bad(w, "%s: a request on an unknown connection", w->name);
    rmx_rpc_reply_error(req, RMX_EINVAL);
    return;
  }
  on_thread(p, "rpc handler");
  p->held = req;
}

static void replied(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  peer_t *p = arg;
  on_thread(p, "on_reply");
  p->calls_out--;
  p->replies++;
  p->reply_status = status;
}

/* ---- running a context on its thread ---- */

static void noop_timer(uv_timer_t *t) {}

/* Run the loop until done(w) or ms pass; 0, or -1 on time out. */
static int run_for(world_t *w, int (*done)(world_t *), unsigned ms)
{
  uv_loop_t *loop = rmx_ctx_loop(w->ctx);
  uv_timer_t t;
  uv_update_time(loop);
  uint64_t end = uv_now(loop) + ms;
  uv_timer_init(loop, &t);
  uv_timer_start(&t, noop_timer, ms, 0); /* keeps uv_run from returning at once */
  while (!done(w) && uv_now(loop) < end)
    uv_run(loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
  return done(w) ? 0 : -1;
}

static int never(world_t *w) { return 0; }

static int all_connected(world_t *w)
{
  for (int i = 0; i < NCL; i++)
    if (!w->cl[i].connected)
      return 0;
  return w->nsv == NCL;
}

static int traffic_done(world_t *w)
{
  for (int i = 0; i < NCL; i++)
    if (w->cl[i].echoes < w->cl[i].want_echoes || w->cl[i].sends_out || w->sv[i].sends_out)
      return 0;
  return 1;
}

static int requests_held(world_t *w)
{
  for (int i = 0; i < NCL; i++)
    if (!w->sv[i].held)
      return 0;
  return 1;
}

static int all_disconnected(world_t *w)
{
  for (int i = 0; i < NCL; i++)
    if (!w->cl[i].disconnects || !w->sv[i].disconnects)
      return 0;
  return 1;
}

static int all_closed(world_t *w)
{
  for (int i = 0; i < NCL; i++)
    if (!w->cl[i].closed || !w->sv[i].closed)
      return 0;
  return 1;
}

int world_setup(world_t *w)
{
  rmx_config_t cfg;
  char uri[160];
  static const rmx_conn_cbs_t cbs = {.on_recv = recv_msg, .on_disconnect = disconnected};
  if (rmx_config_init(&cfg) || rmx_ctx_create(&w->ctx, NULL, &cfg)) {
    bad(w, "%s: no context", w->name);
    return -1;
  }
  uri_for(uri, sizeof(uri), 0);
  if (rmx_listen(w->ctx, uri, accepted, w, &w->l) ||
      rmx_listener_uri(w->l, w->uri, sizeof(w->uri)) ||
      rmx_rpc_register(w->ctx, RPC_HOLD, hold_handler, w)) {
    bad(w, "%s: cannot listen on %s", w->name, uri);
    return -1;
  }
  for (int i = 0; i < NCL; i++) {
    peer_t *p = &w->cl[i];
    p->client = 1;
    if (rmx_connect(w->ctx, w->uri, connected, p, &p->c)) {
      bad(w, "%s: rmx_connect failed", w->name);
      return -1;
    }
    rmx_conn_set_cbs(p->c, &cbs, p);
  }
  if (run_for(w, all_connected, 15000)) {
    bad(w, "%s: connections not up in time", w->name);
    return -1;
  }
  for (int i = 0; i < NCL; i++)
    if (w->cl[i].connect_status) {
      bad(w, "%s: connect: %s", w->name, rmx_strerror(w->cl[i].connect_status));
      return -1;
    }
  return 0;
}

int traffic(world_t *w)
{
  uint8_t buf[BIG];
  for (int i = 0; i < NCL; i++)
    for (int m = 0; m < NMSG; m++, w->cl[i].want_echoes++) {
      pattern(buf, msg_len(m), (uint32_t)m);
      if (send_copy(&w->cl[i], buf, msg_len(m))) {
        bad(w, "%s: send failed", w->name);
        return -1;
      }
    }
  if (run_for(w, traffic_done, 15000)) {
    bad(w, "%s: traffic did not complete", w->name);
    return -1;
  }
  for (int i = 0; i < NCL; i++)
    if (w->cl[i].bad_echoes || w->cl[i].send_errors) {
      bad(w, "%s: %d bad echoes, %d send errors", w->name, w->cl[i].bad_echoes,
          w->cl[i].send_errors);
      return -1;
    }
  return 0;
}

int hold_calls(world_t *w)
{
  for (int i = 0; i < NCL; i++) {
    peer_t *p = &w->cl[i];
    if (rmx_rpc_call(p->c, RPC_HOLD, "x", 1, 0, replied, p, NULL)) {
      bad(w, "%s: rpc call failed", w->name);
      return -1;
    }
    p->calls_out++;
  }
  if (run_for(w, requests_held, 15000)) {
    bad(w, "%s: requests did not reach the handler", w->name);
    return -1;
  }
  return 0;
}

void world_teardown(world_t *w)
{
  for (int i = 0; i < NCL; i++) {
    if (w->sv[i].held) {
      rmx_rpc_reply(w->sv[i].held, "y", 1); /* only releases it now */
      w->sv[i].held = NULL;
    }
    if (w->cl[i].c && rmx_conn_close(w->cl[i].c, closed, &w->cl[i]))
      bad(w, "%s: close failed", w->name);
    if (w->sv[i].c && rmx_conn_close(w->sv[i].c, closed, &w->sv[i]))
      bad(w, "%s: close failed", w->name);
  }
  if (w->l)
    rmx_listener_close(w->l);
  w->l = NULL;
  if (run_for(w, all_closed, 15000))
    bad(w, "%s: connections not closed in time", w->name);
  run_for(w, never, 300);
  if (rmx_ctx_destroy(w->ctx))
    bad(w, "%s: rmx_ctx_destroy failed", w->name);
  w->ctx = NULL;
}

void await_fault(world_t *w)
{
  if (run_for(w, all_disconnected, FAULT_MS)) {
    bad(w, "%s: the port went down, and not every connection heard of it within %d ms",
        w->name, FAULT_MS);
    return;
  }
  run_for(w, never, 200); /* a second report would come now */
  for (int i = 0; i < NCL; i++) {
    peer_t *ends[2] = {&w->cl[i], &w->sv[i]};
    for (int k = 0; k < 2; k++) {
      peer_t *p = ends[k];
      if (p->disconnects != 1 || p->disconnect_status != RMX_ENETUNREACH)
        bad(w, "%s: %s %d: %d disconnects, status %s", w->name, k ? "server" : "client", i,
            p->disconnects, rmx_err_name(p->disconnect_status));
    }
    if (w->cl[i].replies != 1 || w->cl[i].reply_status == 0)
      bad(w, "%s: client %d: %d replies, status %s", w->name, i, w->cl[i].replies,
          rmx_err_name(w->cl[i].reply_status));
  }
}

static void *worker(void *arg)
{
  world_t *w = arg;
  w->thread = pthread_self();
  w->script(w);
  return NULL;
}

void world_start(world_t *w, const char *name, void (*script)(world_t *))
{
  memset(w, 0, sizeof(*w));
  w->name = name;
  w->script = script;
  gate_init(&w->ready);
  gate_init(&w->go);
  for (int i = 0; i < NCL; i++)
    w->cl[i].w = w->sv[i].w = w;
  assert_int_equal(pthread_create(&w->th, NULL, worker, w), 0);
}

void world_check(world_t *w)
{
  if (w->errors)
    print_error("%s: %d problems, the first: %s\n", w->name, w->errors, w->why);
  assert_int_equal(w->wrong_thread, 0);
  assert_int_equal(w->errors, 0);
  for (int i = 0; i < NCL; i++) {
    assert_int_equal(w->cl[i].closed, 1);
    assert_int_equal(w->sv[i].closed, 1);
    assert_int_equal(w->cl[i].after_closed + w->sv[i].after_closed, 0);
  }
}

