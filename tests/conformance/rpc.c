/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RPC, written once, run per transport:  rmx-rpc SCHEME [filter]
 * Servers and clients share one loop; where their limits differ they are
 * two contexts in that loop.
 */
#include <rmx/rmx.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include "harness.h"

enum { H_ECHO = 1, H_SLOW = 2, H_FAIL = 3, H_NESTED = 4, H_PULL = 5, H_ZC = 6, H_DIE = 7 };
#define APP_ERROR (-7777)

static rmx_ctx_t *ctx;
static server_t srv, srv_b; /* srv_b: the server a nested handler calls */
static client_t cl;

/* ---- payloads: a tag, then bytes derived from it, so both ends check ---- */

static uint32_t rnd_state = 12345;
static uint32_t rnd(void)
{
  rnd_state ^= rnd_state << 13;
  rnd_state ^= rnd_state >> 17;
  rnd_state ^= rnd_state << 5;
  return rnd_state;
}

/* 0 B .. 4 MiB, mostly small: log-uniform below 64 KiB, 1 in 100 above. */
static size_t rnd_size(void)
{
  uint32_t r = rnd();
  if (r % 100 == 0)
    return (64u << 10) + rnd() % ((4u << 20) - (64u << 10) + 1);
  return (size_t)(rnd() % ((1u << (r % 17)) + 1));
}

static void fill(uint8_t *p, size_t len, uint64_t tag)
{
  if (len >= 8) {
    memcpy(p, &tag, 8);
    pattern(p + 8, len - 8, (uint32_t)(tag * 2654435761u));
  } else {
    pattern(p, len, (uint32_t)len);
  }
}

static int check(const uint8_t *p, size_t len, uint64_t *tag)
{
  uint8_t *want = malloc(len ? len : 1);
  uint64_t t = 0;
  if (len >= 8)
    memcpy(&t, p, 8);
  fill(want, len, t);
  int ok = memcmp(want, p, len) == 0;
  free(want);
  if (tag)
    *tag = t;
  return ok;
}

static size_t reply_size(size_t req) { return (req * 7 + 3) % (req < 65536 ? 65536 : (4u << 20)); }

/* ---- handlers ---- */

static int bad_requests;

static void h_echo(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  uint64_t tag;
  if (!check(data, len, &tag))
    bad_requests++;
  size_t rl = reply_size(len);
  uint8_t *r = malloc(rl ? rl : 1);
  fill(r, rl, ~tag);
  assert_int_equal(rmx_rpc_reply(req, r, rl), 0);
  free(r); /* copied */
}

static rmx_rpc_req_t *held[2048];
static int nheld, max_held;

static void h_slow(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  held[nheld++] = req;
  if (nheld > max_held)
    max_held = nheld;
}

/* Answer the requests held now; answering may start waiting ones, which
 * are held anew for the next release. */
static void release_held(void)
{
  rmx_rpc_req_t *now[2048];
  int n = nheld;
  memcpy(now, held, sizeof(now[0]) * (size_t)n);
  nheld = 0;
  for (int i = 0; i < n; i++)
    rmx_rpc_reply(now[i], "late", 4);
}

static void h_fail(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  assert_int_equal(rmx_rpc_reply_error(req, 0), RMX_EINVAL); /* 0 is not an error */
  assert_int_equal(rmx_rpc_reply_error(req, APP_ERROR), 0);
}

static void h_zc(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  rmx_buf_t *b;
  assert_int_equal(rmx_buf_get(ctx, 3u << 20, &b), 0);
  fill(rmx_buf_data(b), 3u << 20, 99);
  assert_int_equal(rmx_rpc_reply_buf(req, b, 3u << 20), 0);
}

/* ---- a client's view ---- */

typedef struct call {
  int done, status;
  size_t req_len;
  uint8_t *req;
  uint64_t tag;
  int bad;
} call_t;

static int calls_done, calls_bad, calls_failed;

static void on_reply(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  call_t *k = arg;
  k->done++;
  k->status = status;
  calls_done++;
  if (status) {
    calls_failed++;
    return;
  }
  uint64_t tag;
  if (k->req && (len != reply_size(k->req_len) || !check(data, len, &tag) ||
                 (len >= 8 && k->req_len >= 8 && tag != ~k->tag)))
    calls_bad++;
}

static int setup_world(rmx_ctx_t *c)
{
  ctx = c;
  server_start(ctx, &srv, 0);
  client_connect(ctx, &cl, srv.uri);
  run_until(ctx, &cl.connected, 1);
  assert_int_equal(cl.connect_status, 0);
  calls_done = calls_bad = calls_failed = bad_requests = nheld = max_held = 0;
  alarm(600);
  return 0;
}

static void register_all(rmx_ctx_t *c);

static int setup(void **state)
{
  rmx_ctx_t *c = ctx_new(0);
  register_all(c);
  return setup_world(c);
}

static void limits_cleanup(void);

static int teardown(void **state)
{
  limits_cleanup();
  while (nheld)
    release_held();
  if (!cl.closed) {
    if (cl.disconnects)
      assert_int_equal(rmx_conn_close(cl.c, cl_closed, &cl), 0), run_until(ctx, &cl.closed, 1);
    else
      client_close(ctx, &cl);
  }
  server_stop(ctx, &srv);
  ctx_done(ctx);
  return 0;
}

/* ---- tests ---- */

/* 100,000 calls unless RMX_TEST_RPC_CALLS says (ctest gives the SoftRoCE VM
 * fewer: one in a hundred moves 64 KiB .. 4 MiB each way, and under
 * emulation those dominate the suite's time). */
static void random_calls(void **state)
{
  enum { WINDOW = 64 };
  const char *env = getenv("RMX_TEST_RPC_CALLS");
  const long N = env ? atol(env) : 100000;
  static call_t k[WINDOW];
  long issued = 0;
  int live = 0;
  for (int i = 0; i < WINDOW; i++)
    k[i].done = 1;
  while (issued < N || live) {
    for (int i = 0; i < WINDOW; i++) {
      if (!k[i].done)
        continue;
      if (k[i].req) { /* a finished call: its buffer may go now */
        free(k[i].req);
        k[i].req = NULL;
        live--;
      }
      if (issued == N)
        continue;
      k[i] = (call_t){.req_len = rnd_size(), .tag = (uint64_t)issued * 0x9e3779b97f4a7c15ull};
      k[i].req = malloc(k[i].req_len ? k[i].req_len : 1);
      fill(k[i].req, k[i].req_len, k[i].tag);
      assert_int_equal(rmx_rpc_call(cl.c, H_ECHO, k[i].req, k[i].req_len, 0, on_reply, &k[i], NULL),
                       0);
      issued++;
      live++;
    }
    uv_run(rmx_ctx_loop(ctx), UV_RUN_ONCE);
  }
  assert_int_equal(calls_done, N);
  assert_int_equal(calls_failed, 0);
  assert_int_equal(calls_bad, 0);
  assert_int_equal(bad_requests, 0);
}

static void thousand_in_flight(void **state)
{
  enum { N = 1000 };
  static call_t k[N];
  for (int i = 0; i < N; i++) {
    k[i] = (call_t){.req_len = 100, .tag = (uint64_t)i + 1};
    k[i].req = malloc(100);
    fill(k[i].req, 100, k[i].tag);
    assert_int_equal(rmx_rpc_call(cl.c, H_ECHO, k[i].req, 100, 0, on_reply, &k[i], NULL), 0);
  }
  run_until(ctx, &calls_done, N);
  assert_int_equal(calls_bad, 0);
  assert_int_equal(calls_failed, 0);
  for (int i = 0; i < N; i++) {
    assert_int_equal(k[i].done, 1);
    free(k[i].req);
  }
}

/* The limits test's own contexts, for teardown to end if it fails midway. */
static rmx_ctx_t *cctx, *sctx;
static server_t lim_s;
static client_t lim_c;

static void limits_cleanup(void)
{
  if (!cctx)
    return;
  while (nheld)
    release_held();
  if (!lim_c.closed)
    assert_int_equal(rmx_conn_close(lim_c.c, cl_closed, &lim_c), 0), run_until(ctx, &lim_c.closed, 1);
  server_stop(sctx, &lim_s);
  ctx_done(cctx);
  ctx_done(sctx);
  cctx = sctx = NULL;
}

static void limits_on_both_sides(void **state)
{
  /* a client limited to 10 calls; a server that serves 8 at a time */
  rmx_config_t cfg;
  static call_t k[300];
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.rpc_max_inflight = 8;
  assert_int_equal(rmx_ctx_create(&sctx, rmx_ctx_loop(ctx), &cfg), 0);
  register_all(sctx);
  cfg.rpc_max_inflight = 10;
  assert_int_equal(rmx_ctx_create(&cctx, rmx_ctx_loop(ctx), &cfg), 0);
  server_start(sctx, &lim_s, 0);
  client_connect(cctx, &lim_c, lim_s.uri);
  run_until(ctx, &lim_c.connected, 1);
  for (int i = 0; i < 10; i++)
    assert_int_equal(rmx_rpc_call(lim_c.c, H_SLOW, "x", 1, 0, on_reply, &k[i], NULL), 0);
  assert_int_equal(rmx_rpc_call(lim_c.c, H_SLOW, "x", 1, 0, on_reply, &k[10], NULL), RMX_EAGAIN);
  for (int i = 0; i < 50; i++)
    uv_run(rmx_ctx_loop(ctx), UV_RUN_NOWAIT);
  run_until(ctx, &nheld, 8);
  assert_int_equal(max_held, 8); /* two wait at the server, unhandled */
  release_held();
  run_until(ctx, &calls_done, 2); /* the released ones answered */
  run_until(ctx, &nheld, 2);      /* then the two that waited */
  release_held();
  run_until(ctx, &calls_done, 10);
  assert_int_equal(calls_failed, 0);
  assert_true(max_held <= 8);
  limits_cleanup();
}

static void timeout_then_late_reply_dropped(void **state)
{
  call_t k = {0};
  assert_int_equal(rmx_rpc_call(cl.c, H_SLOW, "abc", 3, 50, on_reply, &k, NULL), 0);
  run_until(ctx, &k.done, 1);
  assert_int_equal(k.status, RMX_ETIMEDOUT);
  run_until(ctx, &nheld, 1);
  release_held(); /* the answer comes too late */
  for (int i = 0; i < 20; i++)
    uv_run(rmx_ctx_loop(ctx), UV_RUN_NOWAIT);
  /* a normal call still works, and the old one never called back again */
  call_t k2 = {.req_len = 10, .tag = 5};
  k2.req = malloc(10);
  fill(k2.req, 10, 5);
  assert_int_equal(rmx_rpc_call(cl.c, H_ECHO, k2.req, 10, 1000, on_reply, &k2, NULL), 0);
  run_until(ctx, &k2.done, 1);
  assert_int_equal(k2.status, 0);
  assert_int_equal(k.done, 1);
  free(k2.req);
}

static void cancel_once(void **state)
{
  call_t k = {0};
  uint64_t id;
  assert_int_equal(rmx_rpc_call(cl.c, H_SLOW, "abc", 3, 0, on_reply, &k, &id), 0);
  run_until(ctx, &nheld, 1);
  assert_int_equal(rmx_rpc_cancel(cl.c, id), 0);
  assert_int_equal(k.done, 0); /* not from inside the call */
  assert_int_equal(rmx_rpc_cancel(cl.c, id), RMX_ENOENT);
  run_until(ctx, &k.done, 1);
  assert_int_equal(k.status, RMX_ECANCELED);
  release_held();
  for (int i = 0; i < 20; i++)
    uv_run(rmx_ctx_loop(ctx), UV_RUN_NOWAIT);
  assert_int_equal(k.done, 1);
  assert_int_equal(rmx_rpc_cancel(cl.c, id), RMX_ENOENT);
}

static void statuses_travel(void **state)
{
  call_t a = {0}, b = {0};
  assert_int_equal(rmx_rpc_call(cl.c, 4242, "q", 1, 0, on_reply, &a, NULL), 0);
  assert_int_equal(rmx_rpc_call(cl.c, H_FAIL, "q", 1, 0, on_reply, &b, NULL), 0);
  run_until(ctx, &calls_done, 2);
  assert_int_equal(a.status, RMX_ENOHANDLER);
  assert_int_equal(b.status, APP_ERROR);
  assert_int_equal(rmx_rpc_register(ctx, H_ECHO, h_echo, NULL), RMX_EALREADY);
}

static void large_both_ways_zero_copy(void **state)
{
  call_t k = {.req_len = 4u << 20, .tag = 42};
  k.req = malloc(k.req_len);
  fill(k.req, k.req_len, 42);
  assert_int_equal(rmx_rpc_call(cl.c, H_ECHO, k.req, k.req_len, 0, on_reply, &k, NULL), 0);
  run_until(ctx, &k.done, 1);
  assert_int_equal(k.status, 0);
  assert_int_equal(calls_bad, 0);
  free(k.req);
  call_t z = {0};
  assert_int_equal(rmx_rpc_call(cl.c, H_ZC, NULL, 0, 0, on_reply, &z, NULL), 0);
  run_until(ctx, &z.done, 1);
  assert_int_equal(z.status, 0);
}

/* ---- a handler that calls another server, and one that pulls bulk data ---- */

typedef struct nested {
  rmx_rpc_req_t *req;
} nested_t;

static void nested_reply(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  nested_t *n = arg;
  char out[64];
  int m = snprintf(out, sizeof(out), "A(%.*s)", (int)len, (const char *)data);
  assert_int_equal(status, 0);
  assert_int_equal(rmx_rpc_reply(n->req, out, (size_t)m), 0);
  free(n);
}

static rmx_conn_t *to_b; /* server A's connection to server B */

static void h_nested(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  nested_t *n = malloc(sizeof(*n));
  n->req = req;
  assert_int_equal(rmx_rpc_call(to_b, H_SLOW + 100, data, len, 5000, nested_reply, n, NULL), 0);
}

static void h_b(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  char out[64];
  int m = snprintf(out, sizeof(out), "B(%.*s)", (int)len, (const char *)data);
  assert_int_equal(rmx_rpc_reply(req, out, (size_t)m), 0);
}

static void got_reply_text(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  call_t *k = arg;
  k->done++;
  k->status = status;
  k->bad = !(len == 10 && memcmp(data, "A(B(ping))", 10) == 0);
}

static void nested_calls(void **state)
{
  client_t cb;
  server_start(ctx, &srv_b, 0);
  client_connect(ctx, &cb, srv_b.uri);
  run_until(ctx, &cb.connected, 1);
  to_b = cb.c;
  call_t k = {0};
  assert_int_equal(rmx_rpc_call(cl.c, H_NESTED, "ping", 4, 5000, got_reply_text, &k, NULL), 0);
  run_until(ctx, &k.done, 1);
  assert_int_equal(k.status, 0);
  assert_int_equal(k.bad, 0);
  client_close(ctx, &cb);
  server_stop(ctx, &srv_b);
}

typedef struct pull {
  rmx_rpc_req_t *req;
  rmx_rkey_t *rk;
  uint8_t *buf;
  size_t len;
} pull_t;

static void pulled(rmx_conn_t *c, int status, void *arg)
{
  pull_t *p = arg;
  uint64_t sum = 0;
  for (size_t i = 0; i < p->len; i++)
    sum = sum * 31 + p->buf[i];
  assert_int_equal(status, 0);
  assert_int_equal(rmx_rpc_reply(p->req, &sum, sizeof(sum)), 0);
  rmx_rkey_release(p->rk);
  free(p->buf);
  free(p);
}

/* The request carries a packed key; the handler reads the caller's memory. */
static void h_pull(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  pull_t *p = calloc(1, sizeof(*p));
  p->req = req;
  assert_int_equal(rmx_rkey_unpack(rmx_rpc_req_conn(req), data, len, &p->rk), 0);
  p->len = rmx_rkey_size(p->rk);
  p->buf = malloc(p->len);
  rmx_iov_t v = {p->buf, p->len, NULL};
  assert_int_equal(rmx_read(rmx_rpc_req_conn(req), &v, 1, p->rk, 0, pulled, p), 0);
}

static uint64_t pull_sum;
static void got_sum(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  call_t *k = arg;
  k->done++;
  k->status = status;
  if (len == 8)
    memcpy(&pull_sum, data, 8);
}

static void handler_pulls_with_a_key(void **state)
{
  size_t len = 3u << 20;
  uint8_t *bulk = malloc(len), blob[RMX_RKEY_MAX];
  size_t blen = sizeof(blob);
  rmx_mem_t *m;
  pattern(bulk, len, 5);
  uint64_t want = 0;
  for (size_t i = 0; i < len; i++)
    want = want * 31 + bulk[i];
  assert_int_equal(rmx_mem_reg(ctx, bulk, len, RMX_MEM_REMOTE_READ, &m), 0);
  assert_int_equal(rmx_mem_pack(m, blob, &blen), 0);
  call_t k = {0};
  assert_int_equal(rmx_rpc_call(cl.c, H_PULL, blob, blen, 0, got_sum, &k, NULL), 0);
  run_until(ctx, &k.done, 1);
  assert_int_equal(k.status, 0);
  assert_true(pull_sum == want);
  rmx_mem_dereg(m);
  free(bulk);
}

static void close_with_calls_outstanding(void **state)
{
  static call_t k[20];
  memset(k, 0, sizeof(k));
  for (int i = 0; i < 20; i++)
    assert_int_equal(rmx_rpc_call(cl.c, H_SLOW, "x", 1, 0, on_reply, &k[i], NULL), 0);
  assert_int_equal(rmx_conn_close(cl.c, cl_closed, &cl), 0);
  assert_int_equal(calls_done, 0);
  assert_int_equal(rmx_rpc_call(cl.c, H_ECHO, "x", 1, 0, on_reply, &k[0], NULL), RMX_ENOTCONN);
  run_until(ctx, &cl.closed, 1); /* the handle is gone after this */
  assert_int_equal(calls_done, 20); /* every call ended before on_closed */
  for (int i = 0; i < 20; i++) {
    assert_int_equal(k[i].done, 1);
    assert_int_equal(k[i].status, RMX_ECANCELED);
  }
}

/* ---- a server that dies inside a call ---- */

static void h_die(rmx_rpc_req_t *req, const void *d, size_t l, void *a) { kill(getpid(), SIGKILL); }

static void die_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg) {}

static int role_dying_server(void)
{
  rmx_ctx_t *c;
  rmx_listener_t *l;
  char u[128];
  uri_for(u, sizeof(u), 0);
  if (rmx_ctx_create(&c, NULL, NULL) || rmx_rpc_register(c, H_DIE, h_die, NULL) ||
      rmx_listen(c, u, die_accept, NULL, &l) || rmx_listener_uri(l, u, sizeof(u)))
    return 3;
  printf("%s\n", u);
  fflush(stdout);
  rmx_ctx_run(c);
  return 0;
}

static void server_killed_mid_call(void **state)
{
  char uri[128];
  int fd, st;
  pid_t pid = spawn("--rpc-dying-server", NULL, &fd);
  read_line(fd, uri, sizeof(uri));
  close(fd);
  client_t c;
  client_connect(ctx, &c, uri);
  run_until(ctx, &c.connected, 1);
  assert_int_equal(c.connect_status, 0);
  static call_t k[3];
  memset(k, 0, sizeof(k));
  assert_int_equal(rmx_rpc_call(c.c, H_DIE, "x", 1, 0, on_reply, &k[0], NULL), 0);
  assert_int_equal(rmx_rpc_call(c.c, H_DIE, "y", 1, 10000, on_reply, &k[1], NULL), 0);
  run_until(ctx, &c.disconnects, 1);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(k[i].done, 1); /* ended before on_disconnect ran */
    assert_int_not_equal(k[i].status, 0);
    assert_int_not_equal(k[i].status, RMX_ETIMEDOUT);
  }
  assert_int_equal(rmx_rpc_call(c.c, H_DIE, "z", 1, 0, on_reply, &k[2], NULL), RMX_ENOTCONN);
  assert_int_equal(rmx_conn_close(c.c, cl_closed, &c), 0);
  run_until(ctx, &c.closed, 1);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFSIGNALED(st));
}

static void register_all(rmx_ctx_t *c)
{
  assert_int_equal(rmx_rpc_register(c, H_ECHO, h_echo, NULL), 0);
  assert_int_equal(rmx_rpc_register(c, H_SLOW, h_slow, NULL), 0);
  assert_int_equal(rmx_rpc_register(c, H_FAIL, h_fail, NULL), 0);
  assert_int_equal(rmx_rpc_register(c, H_NESTED, h_nested, NULL), 0);
  assert_int_equal(rmx_rpc_register(c, H_SLOW + 100, h_b, NULL), 0);
  assert_int_equal(rmx_rpc_register(c, H_PULL, h_pull, NULL), 0);
  assert_int_equal(rmx_rpc_register(c, H_ZC, h_zc, NULL), 0);
}

int main(int argc, char **argv)
{
  if (harness_args(argc, argv) != 0)
    return 2;
  if (argc > 2 && strcmp(argv[2], "--rpc-dying-server") == 0)
    return role_dying_server();
  if (argc > 2)
    cmocka_set_test_filter(argv[2]);
  signal(SIGPIPE, SIG_IGN);
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
    T(random_calls), T(thousand_in_flight), T(limits_on_both_sides),
    T(timeout_then_late_reply_dropped), T(cancel_once), T(statuses_travel),
    T(large_both_ways_zero_copy), T(nested_calls), T(handler_pulls_with_a_key),
    T(close_with_calls_outstanding), T(server_killed_mid_call),
  };
  char name[64];
  snprintf(name, sizeof(name), "rpc/%s", scheme);
  return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
