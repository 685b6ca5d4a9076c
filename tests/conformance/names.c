/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory by name (rmx_mem_publish, rmx_mem_lookup, rmx_mem_unpublish),
 * written once, run per transport:
 *   rmx-names SCHEME [filter]
 * Two contexts in this process, each on its own loop: the owner O
 * publishes, the asker R looks names up over its connection A to O (and a
 * second connection B where a case needs one). A case pumps O's loop only
 * when O must answer: a lookup that completes while O stands still was
 * answered from R's cache.
 */
#include <rmx/rmx.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include "harness.h"

#define AREA 8192
#define PING 7     /* R's handler: an answer to it orders everything O sent before */
#define LOOKUP_ID RMX_RPC_ID_RESERVED /* docs/protocol.md, "Memory by name" */
#define FORGET_ID (RMX_RPC_ID_RESERVED + 1)
#define WAIT_MS 10000

static struct {
  rmx_ctx_t *o, *r;
  server_t s;     /* O's listener and accepted ends */
  client_t a, b;  /* R's connections */
  rmx_conn_t *ta; /* O's end of A */
  uint8_t *area;
  rmx_mem_t *m;
} W;

/* One lookup's outcome; a callback that comes twice is counted. */
typedef struct got {
  int calls, status;
  rmx_rkey_t *rk;
} got_t;

static int in_api; /* inside a call of the API: no callback may run now */

static void got_cb(rmx_conn_t *c, int status, rmx_rkey_t *rk, void *arg)
{
  got_t *g = arg;
  if (in_api)
    fail_msg("a lookup called back from inside an API call");
  if (g->calls++) /* exactly once */
    fail_msg("a lookup called back twice");
  g->status = status;
  g->rk = rk;
  if ((status == 0) != (rk != NULL))
    fail_msg("status %d with key %p", status, (void *)rk);
}

static int lookup(rmx_conn_t *c, const char *name, uint32_t timeout_ms, got_t *g)
{
  memset(g, 0, sizeof(*g));
  in_api = 1;
  int rc = rmx_mem_lookup(c, name, timeout_ms, got_cb, g);
  in_api = 0;
  assert_int_equal(g->calls, 0);
  return rc;
}

/* Turn R's loop, and O's too where owner is set, until *n reaches want. */
static void pump_until(const int *n, int want, int owner)
{
  uint64_t end = uv_hrtime() + (uint64_t)WAIT_MS * 1000000u;
  while (*n < want) {
    assert_true(rmx_ctx_progress(W.r) >= 0);
    if (owner)
      assert_true(rmx_ctx_progress(W.o) >= 0);
    if (uv_hrtime() > end)
      fail_msg("timed out: %d of %d", *n, want);
  }
}

static void pump_ms(uint64_t ms, int owner)
{
  uint64_t end = uv_hrtime() + ms * 1000000u;
  while (uv_hrtime() < end) {
    assert_true(rmx_ctx_progress(W.r) >= 0);
    if (owner)
      assert_true(rmx_ctx_progress(W.o) >= 0);
  }
}

/* A lookup of name on c, answered by O: its outcome. */
static got_t *ask(rmx_conn_t *c, const char *name, got_t *g)
{
  assert_int_equal(lookup(c, name, 0, g), 0);
  pump_until(&g->calls, 1, 1);
  return g;
}

/* A lookup that must come from R's cache: it completes while O stands still. */
static got_t *ask_cached(rmx_conn_t *c, const char *name, got_t *g)
{
  assert_int_equal(lookup(c, name, 0, g), 0);
  pump_until(&g->calls, 1, 0);
  return g;
}

/* A lookup that must go to O: nothing comes while O stands still. */
static got_t *ask_owner(rmx_conn_t *c, const char *name, got_t *g)
{
  assert_int_equal(lookup(c, name, 0, g), 0);
  pump_ms(50, 0);
  if (g->calls)
    fail_msg("\"%s\" was answered without the owner (status %d)", name, g->status);
  pump_until(&g->calls, 1, 1);
  return g;
}

static void ping_serve(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  assert_int_equal(rmx_rpc_reply(req, NULL, 0), 0);
}

static void call_done(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  int *st = arg;
  st[0]++;
  st[1] = status;
}

/* What O sent on t before this has been handled at R: a call from O to R,
 * answered, follows it on the same connection. */
static void barrier(rmx_conn_t *t)
{
  int st[2] = {0, 0};
  assert_int_equal(rmx_rpc_call(t, PING, NULL, 0, 0, call_done, st, NULL), 0);
  pump_until(&st[0], 1, 1);
  assert_int_equal(st[1], 0);
}

/* A raw request to rmx's handler id on R's connection c: the status O answers with. */
static int raw_call(rmx_conn_t *c, uint32_t id, const void *data, size_t len)
{
  int st[2] = {0, 0};
  assert_int_equal(rmx_rpc_call(c, id, data, len, 0, call_done, st, NULL), 0);
  pump_until(&st[0], 1, 1);
  return st[1];
}

static void op_done(rmx_conn_t *c, int status, void *arg)
{
  int *st = arg;
  st[0]++;
  st[1] = status;
}

/* Read or write len bytes at offset 0 of the key's memory on c: the status. */
static int xfer(int write, rmx_conn_t *c, rmx_rkey_t *rk, void *buf, size_t len)
{
  int st[2] = {0, 0};
  rmx_iov_t v = {buf, len, NULL};
  int rc = write ? rmx_write(c, &v, 1, rk, 0, op_done, st) : rmx_read(c, &v, 1, rk, 0, op_done, st);
  if (rc)
    return rc;
  pump_until(&st[0], 1, 1);
  return st[1];
}

/* The key reads what the area holds, and a write through it lands there. */
static void key_works(rmx_conn_t *c, rmx_rkey_t *rk, uint8_t *area, uint32_t seed)
{
  static uint8_t buf[AREA], want[AREA];
  assert_int_equal(rmx_rkey_size(rk), AREA);
  assert_int_equal(xfer(0, c, rk, buf, AREA), 0);
  assert_memory_equal(buf, area, AREA);
  pattern(want, AREA, seed);
  memcpy(buf, want, AREA);
  assert_int_equal(xfer(1, c, rk, buf, AREA), 0);
  assert_memory_equal(area, want, AREA);
}

/* A new connection of R to O: O's end of it. */
static rmx_conn_t *connect_to_o(client_t *cl)
{
  int accepted = W.s.accepted;
  client_connect(W.r, cl, W.s.uri);
  pump_until(&cl->connected, 1, 1);
  assert_int_equal(cl->connect_status, 0);
  pump_until(&W.s.accepted, accepted + 1, 1);
  return W.s.conns[W.s.nconns - 1];
}

/* O's end t is closed by the case, not by the server's callbacks. */
static void srv_forget(rmx_conn_t *t)
{
  for (int i = 0; i < W.s.nconns; i++)
    if (W.s.conns[i] == t) {
      W.s.conns[i] = W.s.conns[--W.s.nconns];
      return;
    }
  fail_msg("no such connection at the server");
}

static int setup(void **state)
{
  memset(&W, 0, sizeof(W));
  W.o = ctx_new(0);
  W.r = ctx_new(0);
  server_start(W.o, &W.s, SRV_SINK);
  assert_int_equal(rmx_rpc_register(W.r, PING, ping_serve, NULL), 0);
  W.ta = connect_to_o(&W.a);
  W.area = calloc(1, AREA);
  assert_non_null(W.area);
  pattern(W.area, AREA, 1);
  assert_int_equal(rmx_mem_reg(W.o, W.area, AREA, RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE, &W.m),
                   0);
  alarm(60);
  return 0;
}

static void close_client(client_t *cl)
{
  if (!cl->c || cl->closed)
    return;
  assert_int_equal(rmx_conn_close(cl->c, cl_closed, cl), 0);
  pump_until(&cl->closed, 1, 1);
}

static int teardown(void **state)
{
  rmx_ctx_stats_t st;
  if (W.m)
    rmx_mem_dereg(W.m);
  close_client(&W.a);
  close_client(&W.b);
  if (W.s.l)
    rmx_listener_close(W.s.l);
  int want = W.s.accepted;
  while (W.s.nconns)
    assert_int_equal(rmx_conn_close(W.s.conns[--W.s.nconns], srv_conn_closed, &W.s), 0);
  pump_until(&W.s.closed, want, 1);
  assert_int_equal(rmx_ctx_stats_get(W.o, &st, sizeof(st)), 0);
  assert_int_equal(st.mem_regs, 0);
  ctx_done(W.r);
  ctx_done(W.o);
  free(W.area);
  alarm(0);
  return 0;
}

/* ---- the cases ---- */

/* Published, looked up, used both ways; the second lookup is the cache's. */
static void lookup_reads_and_writes(void **state)
{
  got_t g, h;
  assert_int_equal(rmx_mem_publish(W.m, "area/one"), 0);
  ask(W.a.c, "area/one", &g);
  assert_int_equal(g.status, 0);
  key_works(W.a.c, g.rk, W.area, 2);
  ask_cached(W.a.c, "area/one", &h);
  assert_int_equal(h.status, 0);
  key_works(W.a.c, h.rk, W.area, 3);
  rmx_rkey_release(g.rk);
  rmx_rkey_release(h.rk);
}

/* The case: looked up, deregistered by its owner, looked up again:
 * refused (the owner told R to forget, so the refusal is O's). */
static void dereg_then_lookup_refused(void **state)
{
  got_t g;
  assert_int_equal(rmx_mem_publish(W.m, "gone"), 0);
  ask(W.a.c, "gone", &g);
  assert_int_equal(g.status, 0);
  rmx_rkey_release(g.rk);
  rmx_mem_dereg(W.m);
  W.m = NULL;
  barrier(W.ta);
  ask_owner(W.a.c, "gone", &g);
  assert_int_equal(g.status, RMX_ENOENT);
}

/* Unpublished: lookups refused, the key already out still works; the name
 * published again over other memory leads there. */
static void unpublish_then_republish(void **state)
{
  got_t g, h;
  rmx_mem_t *m2;
  uint8_t *area2 = calloc(1, AREA);
  assert_non_null(area2);
  pattern(area2, AREA, 9);
  assert_int_equal(rmx_mem_publish(W.m, "x"), 0);
  ask(W.a.c, "x", &g);
  assert_int_equal(g.status, 0);
  assert_int_equal(rmx_mem_unpublish(W.m), 0);
  assert_int_equal(rmx_mem_unpublish(W.m), RMX_ENOENT);
  barrier(W.ta);
  ask_owner(W.a.c, "x", &h);
  assert_int_equal(h.status, RMX_ENOENT);
  key_works(W.a.c, g.rk, W.area, 4);
  rmx_rkey_release(g.rk);

  assert_int_equal(rmx_mem_reg(W.o, area2, AREA, RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE, &m2), 0);
  assert_int_equal(rmx_mem_publish(m2, "x"), 0);
  ask_owner(W.a.c, "x", &h);
  assert_int_equal(h.status, 0);
  key_works(W.a.c, h.rk, area2, 5);
  rmx_rkey_release(h.rk);
  rmx_mem_dereg(m2);
  free(area2);
}

/* rmx_mem_revoke of A's key: R forgets it, the next lookup gets a new one. */
static void revoke_makes_the_peer_ask_again(void **state)
{
  got_t g, h;
  assert_int_equal(rmx_mem_publish(W.m, "rv"), 0);
  ask(W.a.c, "rv", &g);
  assert_int_equal(g.status, 0);
  assert_int_equal(rmx_mem_revoke(W.m, W.ta), 0);
  barrier(W.ta);
  ask_owner(W.a.c, "rv", &h);
  assert_int_equal(h.status, 0);
  key_works(W.a.c, h.rk, W.area, 6);
  rmx_rkey_release(g.rk);
  rmx_rkey_release(h.rk);
}

/* A key found on A is A's alone: B gets its own, and A's used on B is
 * refused (TCP, shm: RMX_EACCES, B stays; RDMA: the device refuses, B ends). */
static void key_is_scoped_to_its_connection(void **state)
{
  static uint8_t buf[AREA], before[AREA];
  got_t ga, gb;
  int tcp = strcmp(scheme, "rdma") != 0; /* tcp, shm: the target checks the key */
  assert_int_equal(rmx_mem_publish(W.m, "scoped"), 0);
  connect_to_o(&W.b);
  ask(W.a.c, "scoped", &ga);
  ask(W.b.c, "scoped", &gb);
  assert_int_equal(ga.status, 0);
  assert_int_equal(gb.status, 0);
  key_works(W.b.c, gb.rk, W.area, 7);
  memcpy(before, W.area, AREA);
  memset(buf, 0xe7, AREA);
  int rc = xfer(1, W.b.c, ga.rk, buf, AREA);
  if (tcp)
    assert_int_equal(rc, RMX_EACCES);
  else
    assert_int_not_equal(rc, 0);
  assert_memory_equal(W.area, before, AREA);
  key_works(W.a.c, ga.rk, W.area, 8); /* and still A's */
  if (!tcp)
    pump_until(&W.b.disconnects, 1, 1);
  rmx_rkey_release(ga.rk);
  rmx_rkey_release(gb.rk);
}

/* No such name: RMX_ENOENT, at a context that publishes and at one that
 * publishes nothing (R, asked from O's end of A). */
static void unknown_names(void **state)
{
  got_t g;
  assert_int_equal(rmx_mem_publish(W.m, "known"), 0);
  ask(W.a.c, "unknown", &g);
  assert_int_equal(g.status, RMX_ENOENT);
  ask(W.a.c, "known ", &g); /* a name is its bytes */
  assert_int_equal(g.status, RMX_ENOENT);
  ask(W.ta, "known", &g);
  assert_int_equal(g.status, RMX_ENOENT);
  ask(W.a.c, "known", &g);
  assert_int_equal(g.status, 0);
  rmx_rkey_release(g.rk);
}

/* What is refused locally, and with which code. */
static void argument_errors(void **state)
{
  char longest[RMX_NAME_MAX], over[RMX_NAME_MAX + 1];
  got_t g;
  rmx_mem_t *local, *m2;
  const char *bad[] = {"", "tab\there", "new\nline", "\x7f", "caf\xc3\xa9", "\x01"};
  memset(longest, 'n', sizeof(longest) - 1);
  longest[sizeof(longest) - 1] = 0;
  memset(over, 'o', sizeof(over) - 1);
  over[sizeof(over) - 1] = 0;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(rmx_mem_publish(W.m, bad[i]), RMX_EINVAL);
    assert_int_equal(rmx_mem_lookup(W.a.c, bad[i], 0, got_cb, &g), RMX_EINVAL);
  }
  assert_int_equal(rmx_mem_publish(W.m, over), RMX_EINVAL);
  assert_int_equal(rmx_mem_lookup(W.a.c, over, 0, got_cb, &g), RMX_EINVAL);
  assert_int_equal(rmx_mem_publish(NULL, "n"), RMX_EINVAL);
  assert_int_equal(rmx_mem_publish(W.m, NULL), RMX_EINVAL);
  assert_int_equal(rmx_mem_unpublish(NULL), RMX_EINVAL);
  assert_int_equal(rmx_mem_unpublish(W.m), RMX_ENOENT);
  assert_int_equal(rmx_mem_lookup(NULL, "n", 0, got_cb, &g), RMX_EINVAL);
  assert_int_equal(rmx_mem_lookup(W.a.c, NULL, 0, got_cb, &g), RMX_EINVAL);
  assert_int_equal(rmx_mem_lookup(W.a.c, "n", 0, NULL, &g), RMX_EINVAL);
  assert_int_equal(rmx_mem_reg(W.o, W.area, AREA, RMX_MEM_LOCAL, &local), 0);
  assert_int_equal(rmx_mem_publish(local, "local"), RMX_EINVAL); /* no remote right */
  rmx_mem_dereg(local);

  assert_int_equal(rmx_mem_publish(W.m, longest), 0); /* 127 bytes: the longest */
  assert_int_equal(rmx_mem_publish(W.m, "second"), RMX_EALREADY); /* one name each */
  assert_int_equal(rmx_mem_reg(W.o, W.area, AREA, RMX_MEM_REMOTE_READ, &m2), 0);
  assert_int_equal(rmx_mem_publish(m2, longest), RMX_EALREADY); /* names are unique */
  assert_int_equal(rmx_mem_publish(m2, " ~"), 0);
  ask(W.a.c, longest, &g);
  assert_int_equal(g.status, 0);
  rmx_rkey_release(g.rk);
  ask(W.a.c, " ~", &g);
  assert_int_equal(g.status, 0);
  assert_int_equal(rmx_rkey_size(g.rk), AREA);
  rmx_rkey_release(g.rk);
  rmx_mem_dereg(m2); /* its name goes with it */
  barrier(W.ta);
  ask_owner(W.a.c, " ~", &g);
  assert_int_equal(g.status, RMX_ENOENT);

  client_connect(W.r, &W.b, W.s.uri); /* not established yet */
  assert_int_equal(rmx_mem_lookup(W.b.c, longest, 0, got_cb, &g), RMX_ENOTCONN);
  pump_until(&W.b.connected, 1, 1);

  /* rmx's own RPC ids are not the application's */
  assert_int_equal(rmx_rpc_register(W.o, RMX_RPC_ID_RESERVED, ping_serve, NULL), RMX_EINVAL);
  assert_int_equal(rmx_rpc_register(W.o, 0xFFFFFFFFu, ping_serve, NULL), RMX_EINVAL);
  assert_int_equal(rmx_rpc_register(W.o, RMX_RPC_ID_RESERVED - 1, ping_serve, NULL), 0);
}

/* Hostile requests on rmx's ids, sent raw: each refused with RMX_EINVAL,
 * none takes the connection down, and lookups go on working. */
static void hostile_requests_refused(void **state)
{
  static const uint8_t garbage[] = {0x01, 0xff, 0x00, 0x80, 0x7f};
  uint8_t over[300], nul[8] = {'a', 'b', 'c', 0};
  got_t g;
  memset(over, 'a', sizeof(over));
  assert_int_equal(rmx_mem_publish(W.m, "abc"), 0);
  for (uint32_t id = LOOKUP_ID; id <= FORGET_ID; id++) {
    assert_int_equal(raw_call(W.a.c, id, NULL, 0), RMX_EINVAL);
    assert_int_equal(raw_call(W.a.c, id, garbage, sizeof(garbage)), RMX_EINVAL);
    assert_int_equal(raw_call(W.a.c, id, over, RMX_NAME_MAX), RMX_EINVAL); /* one too long */
    assert_int_equal(raw_call(W.a.c, id, over, sizeof(over)), RMX_EINVAL);
    assert_int_equal(raw_call(W.a.c, id, nul, 4), RMX_EINVAL); /* the NUL is not sent */
    assert_int_equal(raw_call(W.a.c, id, nul, sizeof(nul)), RMX_EINVAL);
  }
  assert_int_equal(raw_call(W.a.c, FORGET_ID, "abc", 3), 0); /* O has nothing to forget */
  assert_int_equal(raw_call(W.a.c, RMX_RPC_ID_RESERVED + 0x7f, "abc", 3), RMX_ENOHANDLER);
  assert_int_equal(raw_call(W.a.c, LOOKUP_ID, over, RMX_NAME_MAX - 1), RMX_ENOENT);
  assert_int_equal(W.a.disconnects, 0);
  assert_int_equal(W.s.disconnects, 0);
  ask(W.a.c, "abc", &g);
  assert_int_equal(g.status, 0);
  key_works(W.a.c, g.rk, W.area, 10);
  rmx_rkey_release(g.rk);
}

/* Lookups in flight, or answered from the cache and not yet called back,
 * when the connection is closed here: each callback once, RMX_ECANCELED.
 * Then the owner's end goes: R's lookups on B end with the connection's
 * error. */
static void close_with_lookups_in_flight(void **state)
{
  enum { N = 8 };
  got_t g[N], hit, warm, on_b[N];
  char name[32];
  assert_int_equal(rmx_mem_publish(W.m, "inflight"), 0);
  ask(W.a.c, "inflight", &warm);
  rmx_rkey_release(warm.rk);
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof(name), "n%d", i);
    assert_int_equal(lookup(W.a.c, i % 2 ? name : "inflight", 0, &g[i]), 0);
  }
  assert_int_equal(lookup(W.a.c, "inflight", 0, &hit), 0); /* from the cache, not called back yet */
  assert_int_equal(rmx_conn_close(W.a.c, cl_closed, &W.a), 0);
  pump_until(&W.a.closed, 1, 1);
  for (int i = 0; i < N; i++) {
    assert_int_equal(g[i].calls, 1);
    assert_int_equal(g[i].status, RMX_ECANCELED);
  }
  assert_int_equal(hit.calls, 1);
  assert_int_equal(hit.status, RMX_ECANCELED);

  rmx_conn_t *tb = connect_to_o(&W.b);
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof(name), "b%d", i);
    assert_int_equal(lookup(W.b.c, name, 0, &on_b[i]), 0);
  }
  srv_forget(tb); /* O closes its end, unread */
  assert_int_equal(rmx_conn_close(tb, srv_conn_closed, &W.s), 0);
  pump_until(&W.b.disconnects, 1, 1);
  pump_ms(20, 1);
  for (int i = 0; i < N; i++) {
    assert_int_equal(on_b[i].calls, 1);
    assert_true(on_b[i].status < 0);
    assert_null(on_b[i].rk);
  }
}

/* A lookup O does not answer in time: RMX_ETIMEDOUT, and the answer that
 * comes later is dropped (no second callback, nothing cached). */
static void lookup_times_out(void **state)
{
  got_t g, h;
  assert_int_equal(rmx_mem_publish(W.m, "slow"), 0);
  assert_int_equal(lookup(W.a.c, "slow", 30, &g), 0);
  pump_until(&g.calls, 1, 0); /* O stands still */
  assert_int_equal(g.status, RMX_ETIMEDOUT);
  pump_ms(50, 1);
  assert_int_equal(g.calls, 1);
  ask_owner(W.a.c, "slow", &h);
  assert_int_equal(h.status, 0);
  rmx_rkey_release(h.rk);
}

/* The cache holds a bounded number of names: after many more lookups, the
 * first one goes to the owner again, and every one still works. */
static void cache_is_bounded(void **state)
{
  enum { N = 100 };
  rmx_mem_t *m[N];
  char name[32];
  got_t g;
  for (int i = 0; i < N; i++) {
    assert_int_equal(rmx_mem_reg(W.o, W.area + i, 64, RMX_MEM_REMOTE_READ, &m[i]), 0);
    snprintf(name, sizeof(name), "many/%d", i);
    assert_int_equal(rmx_mem_publish(m[i], name), 0);
    ask(W.a.c, name, &g);
    assert_int_equal(g.status, 0);
    rmx_rkey_release(g.rk);
  }
  ask_cached(W.a.c, "many/99", &g);
  assert_int_equal(g.status, 0);
  rmx_rkey_release(g.rk);
  ask_owner(W.a.c, "many/0", &g);
  assert_int_equal(g.status, 0);
  rmx_rkey_release(g.rk);
  for (int i = 0; i < N; i++)
    rmx_mem_dereg(m[i]);
}

int main(int argc, char **argv)
{
  if (harness_args(argc, argv) != 0)
    return 2;
  if (argc > 2)
    cmocka_set_test_filter(argv[2]);
  signal(SIGPIPE, SIG_IGN);
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
    T(lookup_reads_and_writes), T(dereg_then_lookup_refused), T(unpublish_then_republish),
    T(revoke_makes_the_peer_ask_again), T(key_is_scoped_to_its_connection), T(unknown_names),
    T(argument_errors), T(hostile_requests_refused), T(close_with_lookups_in_flight),
    T(lookup_times_out), T(cache_is_bounded),
  };
  char name[64];
  snprintf(name, sizeof(name), "names/%s", scheme);
  return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
