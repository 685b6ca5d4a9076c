/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rails and call order: rmx_rail_add, rmx_rail_close, rmx_rail_info and
 * rmx_conn_rails called from inside callbacks and in the same loop turn as
 * other calls, each callback checked to run once, never inside an API
 * call, never after on_closed:
 *   rmx-rails-order SCHEME [filter]
 * An owner context O (a listener, a published region) and an initiator R
 * whose connection A opens the rails, both in this process.
 */
#include <rmx/rmx.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include "harness.h"

#define BLOCK (64u << 10)
#define NBLK 256 /* 16 MiB: more than lane 0 takes at once, so the rails get parts */
#define WAIT_MS 30000

enum { M_NONE, M_ADD_AGAIN, M_CLOSE_CONN, M_ADD_IN_XFER, M_RAIL_CLOSE_IN_XFER };

static struct {
  rmx_ctx_t *o, *r;
  server_t s;
  rmx_conn_t *a;
  int connected, connect_status, closed, disconnects;
  int mode;
  int rails, rail_st[8];
  unsigned rail_no[8];
  int in_api;
  uint8_t *region, *src;
  rmx_mem_t *m;
  rmx_rkey_t *rk;
  uv_loop_t *loop; /* R's, where it lives on the caller's loop */
} W;

typedef struct done {
  int calls, status, rc;
} done_t;

/* What every callback checks first: not inside a call, not after on_closed;
 * and that the rail queries answer from inside it. */
static void cb_enter(rmx_conn_t *c, const char *what)
{
  if (W.in_api)
    fail_msg("%s ran inside an API call", what);
  if (W.closed)
    fail_msg("%s ran after on_closed", what);
  if (c != W.a)
    fail_msg("%s named another connection", what);
  rmx_rail_info_t in;
  unsigned n = rmx_conn_rails(c);
  assert_true(n <= RMX_RAILS_MAX);
  assert_int_equal(rmx_rail_info(c, 0, &in), 0);
  for (unsigned l = 1; l <= RMX_RAILS_MAX; l++) {
    int rc = rmx_rail_info(c, l, &in);
    assert_true(rc == 0 || rc == RMX_ENOENT);
  }
}

static void pump(const int *n, int want)
{
  uint64_t end = uv_hrtime() + WAIT_MS * 1000000ull;
  while (*n < want) {
    assert_true(W.r == NULL || rmx_ctx_progress(W.r) >= 0);
    assert_true(rmx_ctx_progress(W.o) >= 0);
    if (W.loop)
      uv_run(W.loop, UV_RUN_NOWAIT);
    if (uv_hrtime() > end)
      fail_msg("timed out: %d of %d", *n, want);
  }
}

static void a_closed(rmx_conn_t *c, void *arg)
{
  (void)arg;
  if (W.closed++)
    fail_msg("on_closed ran twice");
  if (c != W.a)
    fail_msg("on_closed named another connection");
}

static void a_close(void)
{
  W.in_api = 1;
  assert_int_equal(rmx_conn_close(W.a, a_closed, NULL), 0);
  W.in_api = 0;
}

static void rail_cb(rmx_conn_t *c, int status, unsigned rail, void *arg);

static void rail_add(const char *why)
{
  W.in_api = 1;
  int rc = rmx_rail_add(W.a, W.s.uri, rail_cb, NULL);
  W.in_api = 0;
  if (rc)
    fail_msg("rmx_rail_add %s: %s", why, rmx_strerror(rc));
}

static void rail_cb(rmx_conn_t *c, int status, unsigned rail, void *arg)
{
  (void)arg;
  cb_enter(c, "a rail's callback");
  assert_true(W.rails < 8);
  W.rail_no[W.rails] = rail;
  W.rail_st[W.rails++] = status;
  assert_true(status ? rail == 0 : rail >= 1 && rail <= RMX_RAILS_MAX);
  if (status == 0) {
    rmx_rail_info_t in;
    assert_int_equal(rmx_rail_info(c, rail, &in), 0);
    assert_int_equal(in.up, 1);
  }
  if (W.mode == M_ADD_AGAIN && W.rails == 1)
    rail_add("inside the rail's callback");
  else if (W.mode == M_CLOSE_CONN)
    a_close();
}

static void a_connected(rmx_conn_t *c, int status, void *arg)
{
  (void)arg;
  cb_enter(c, "on_connected");
  W.connected++;
  W.connect_status = status;
  if (status == 0 && W.mode == M_ADD_AGAIN)
    rail_add("inside on_connected");
}

static void a_disconnect(rmx_conn_t *c, int status, void *arg)
{
  (void)status;
  (void)arg;
  cb_enter(c, "on_disconnect");
  W.disconnects++;
}

static void connect_a(void)
{
  static const rmx_conn_cbs_t cbs = {.on_disconnect = a_disconnect};
  W.in_api = 1;
  assert_int_equal(rmx_connect(W.r, W.s.uri, a_connected, NULL, &W.a), 0);
  rmx_conn_set_cbs(W.a, &cbs, NULL);
  W.in_api = 0;
}

static void lookup_cb(rmx_conn_t *c, int status, rmx_rkey_t *rk, void *arg)
{
  (void)arg;
  cb_enter(c, "a lookup's callback");
  assert_int_equal(status, 0);
  if (W.rk)
    rmx_rkey_release(W.rk);
  W.rk = rk;
}

/* A key that covers the rails up now. */
static void lookup(void)
{
  if (W.rk)
    rmx_rkey_release(W.rk);
  W.rk = NULL;
  assert_int_equal(rmx_mem_lookup(W.a, "order/region", 0, lookup_cb, NULL), 0);
  uint64_t end = uv_hrtime() + WAIT_MS * 1000000ull;
  while (!W.rk) {
    assert_true(rmx_ctx_progress(W.r) >= 0 && rmx_ctx_progress(W.o) >= 0);
    assert_true(uv_hrtime() < end);
  }
}

/* A write of NBLK blocks of src to region + at, in reverse order: blocks
 * that do not merge (a contiguous request is one part, which one lane takes
 * whole). */
static rmx_xfer_t *prep(size_t at)
{
  rmx_xfer_entry_t e[NBLK];
  for (size_t i = 0; i < NBLK; i++)
    e[i] = (rmx_xfer_entry_t){.addr = W.src + at + i * BLOCK, .len = BLOCK, .rkey = W.rk,
                              .offset = at + (NBLK - 1 - i) * BLOCK};
  rmx_xfer_t *x = NULL;
  assert_int_equal(rmx_xfer_prep(W.a, RMX_XFER_WRITE, e, NBLK, &x), 0);
  return x;
}

static void xfer_cb(rmx_xfer_t *x, int status, size_t failed, void *arg)
{
  done_t *d = arg;
  (void)x;
  (void)failed;
  cb_enter(W.a, "a transfer's callback");
  if (d->calls++)
    fail_msg("a transfer ended twice");
  d->status = status;
  if (W.mode == M_ADD_IN_XFER)
    rail_add("inside a transfer's completion");
  if (W.mode == M_RAIL_CLOSE_IN_XFER) {
    W.mode = M_NONE;
    W.in_api = 1;
    d->rc = rmx_rail_close(W.a, 1);
    W.in_api = 0;
  }
}

static void post(rmx_xfer_t *x, done_t *d)
{
  memset(d, 0, sizeof(*d));
  W.in_api = 1;
  assert_int_equal(rmx_xfer_post(x, NULL, 0, xfer_cb, d), 0);
  W.in_api = 0;
}

static void check_bytes(size_t at)
{
  for (size_t i = 0; i < NBLK; i++)
    if (memcmp(W.region + at + (NBLK - 1 - i) * BLOCK, W.src + at + i * BLOCK, BLOCK) != 0)
      fail_msg("block %zu of a request at %zu is not in place", i, at);
  memset(W.region + at, 0, NBLK * BLOCK);
}

static int setup(void **state)
{
  (void)state;
  memset(&W, 0, sizeof(W));
  W.o = ctx_new(0);
  W.r = ctx_new(0);
  server_start(W.o, &W.s, SRV_SINK);
  W.region = calloc(1, 2 * NBLK * BLOCK);
  W.src = malloc(2 * NBLK * BLOCK);
  assert_true(W.region && W.src);
  pattern(W.src, 2 * NBLK * BLOCK, 11);
  assert_int_equal(rmx_mem_reg(W.o, W.region, 2 * NBLK * BLOCK,
                               RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE, &W.m), 0);
  assert_int_equal(rmx_mem_publish(W.m, "order/region"), 0);
  alarm(120);
  return 0;
}

static int teardown(void **state)
{
  (void)state;
  if (W.rk)
    rmx_rkey_release(W.rk);
  if (W.a && !W.closed) {
    if (!W.in_api && W.r)
      a_close();
    if (W.r)
      pump(&W.closed, 1);
  }
  rmx_mem_dereg(W.m);
  rmx_listener_close(W.s.l);
  int want = W.s.accepted;
  while (W.s.nconns)
    assert_int_equal(rmx_conn_close(W.s.conns[--W.s.nconns], srv_conn_closed, &W.s), 0);
  pump(&W.s.closed, want);
  assert_int_equal(W.s.accepted, W.connected ? 1 : 0); /* rails never reach on_accept */
  if (W.r)
    ctx_done(W.r);
  ctx_done(W.o);
  free(W.region);
  free(W.src);
  alarm(0);
  return 0;
}

/* ---- the cases ---- */

/* rmx_rail_add inside on_connected, and again inside that rail's callback. */
static void add_in_connected_and_in_rail_cb(void **state)
{
  (void)state;
  W.mode = M_ADD_AGAIN;
  connect_a();
  pump(&W.rails, 2);
  assert_int_equal(W.connect_status, 0);
  assert_int_equal(W.rail_st[0], 0);
  assert_int_equal(W.rail_st[1], 0);
  assert_int_not_equal(W.rail_no[0], W.rail_no[1]);
  assert_int_equal(rmx_conn_rails(W.a), 2);
  /* a request over all three lanes, then close inside nothing */
  W.mode = M_NONE;
  lookup();
  done_t d;
  rmx_xfer_t *x = prep(0);
  post(x, &d);
  pump(&d.calls, 1);
  assert_int_equal(d.status, 0);
  check_bytes(0);
  rmx_rail_info_t in;
  for (unsigned i = 0; i < 2; i++) {
    assert_int_equal(rmx_rail_info(W.a, W.rail_no[i], &in), 0);
    assert_true(in.bytes > 0);
  }
  rmx_xfer_release(x);
}

/* rmx_rail_add inside a transfer's completion; the next request uses it. */
static void add_in_xfer_completion(void **state)
{
  (void)state;
  connect_a();
  pump(&W.connected, 1);
  lookup();
  rmx_xfer_t *x = prep(0);
  done_t d;
  W.mode = M_ADD_IN_XFER;
  post(x, &d);
  pump(&d.calls, 1);
  W.mode = M_NONE;
  assert_int_equal(d.status, 0);
  check_bytes(0);
  pump(&W.rails, 1);
  assert_int_equal(W.rail_st[0], 0);
  assert_int_equal(rmx_conn_rails(W.a), 1);
  rmx_xfer_release(x);
  lookup(); /* covers the rail now */
  x = prep(NBLK * BLOCK);
  post(x, &d);
  pump(&d.calls, 1);
  assert_int_equal(d.status, 0);
  check_bytes(NBLK * BLOCK);
  rmx_rail_info_t in;
  assert_int_equal(rmx_rail_info(W.a, W.rail_no[0], &in), 0);
  assert_true(in.bytes > 0);
  rmx_xfer_release(x);
}

/* rmx_conn_close inside the rail's callback: on_closed once, after it. */
static void close_in_rail_cb(void **state)
{
  (void)state;
  connect_a();
  pump(&W.connected, 1);
  W.mode = M_CLOSE_CONN;
  rail_add("after on_connected");
  pump(&W.closed, 1);
  assert_int_equal(W.rails, 1);
  assert_int_equal(W.rail_st[0], 0);
  for (int i = 0; i < 20; i++) /* nothing more comes */
    assert_true(rmx_ctx_progress(W.r) >= 0 && rmx_ctx_progress(W.o) >= 0);
  assert_int_equal(W.rails, 1);
  assert_int_equal(W.closed, 1);
}

/* The connection closed and its context destroyed while an add is in
 * flight, on the caller's loop (destroy returns at once): the add ends
 * RMX_ECANCELED, once, from the loop, before on_closed. Stage 0: in the
 * turn of the add (its OFFER unanswered); 1: the OFFER answered here, the
 * rail connecting (O has not seen its hello). */
static void destroy_with_add_in_flight_at(int stage)
{
  uv_loop_t loop;
  rmx_config_t cfg;
  rmx_rail_info_t in;
  ctx_done(W.r);
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(rmx_config_init(&cfg), 0);
  assert_int_equal(rmx_ctx_create(&W.r, &loop, &cfg), 0);
  W.loop = &loop;
  connect_a();
  pump(&W.connected, 1);
  rail_add("before the destroy");
  for (int i = 0; stage && rmx_rail_info(W.a, 1, &in) != 0; i++) {
    assert_true(i < 1000000);
    assert_true(rmx_ctx_progress(W.o) >= 0);
    assert_true(rmx_ctx_progress(W.r) >= 0);
    uv_run(&loop, UV_RUN_NOWAIT);
  }
  assert_int_equal(W.rails, 0);
  a_close();
  W.in_api = 1;
  assert_int_equal(rmx_ctx_destroy(W.r), 0);
  W.in_api = 0;
  W.r = NULL;
  assert_int_equal(W.rails, 0);
  pump(&W.closed, 1);
  assert_int_equal(W.rails, 1);
  assert_int_equal(W.rail_st[0], RMX_ECANCELED);
  for (int i = 0; i < 100000 && uv_loop_alive(&loop); i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    assert_true(rmx_ctx_progress(W.o) >= 0);
  }
  assert_int_equal(uv_loop_close(&loop), 0);
  W.loop = NULL;
  assert_int_equal(W.rails, 1);
  assert_int_equal(W.closed, 1);
}

static void destroy_with_offer_in_flight(void **state)
{
  (void)state;
  destroy_with_add_in_flight_at(0);
}

static void destroy_with_rail_connecting(void **state)
{
  (void)state;
  destroy_with_add_in_flight_at(1);
}

/* rmx_rail_close inside a request's completion while another request has
 * parts on that rail: the other completes with every byte. */
static void rail_close_in_xfer_completion(void **state)
{
  (void)state;
  connect_a();
  pump(&W.connected, 1);
  rail_add("after on_connected");
  pump(&W.rails, 1);
  assert_int_equal(W.rail_no[0], 1);
  lookup();
  rmx_xfer_t *x1 = prep(0), *x2 = prep(NBLK * BLOCK), *x3 = prep(0);
  done_t d1, d2, d3;
  W.mode = M_RAIL_CLOSE_IN_XFER;
  post(x1, &d1);
  post(x2, &d2); /* the same turn: its parts go over the rail too */
  pump(&d1.calls, 1);
  assert_int_equal(d1.status, 0);
  assert_int_equal(d1.rc, 0);
  rmx_rail_info_t in;
  assert_int_equal(rmx_rail_info(W.a, 1, &in), 0);
  assert_true(in.bytes > 0); /* the rail closed had carried parts */
  pump(&d2.calls, 1);
  assert_int_equal(d2.status, 0);
  check_bytes(0);
  check_bytes(NBLK * BLOCK);
  assert_int_equal(rmx_rail_info(W.a, 1, &in), 0);
  assert_int_equal(in.up, 0);
  assert_int_equal(rmx_rail_close(W.a, 1), RMX_ENOENT);
  /* the same turn as a close: posted, it completes */
  rail_add("again");
  pump(&W.rails, 2);
  assert_int_equal(W.rail_st[1], 0);
  lookup();
  rmx_xfer_release(x3);
  x3 = prep(0);
  assert_int_equal(rmx_rail_close(W.a, W.rail_no[1]), 0);
  post(x3, &d3);
  pump(&d3.calls, 1);
  assert_int_equal(d3.status, 0);
  check_bytes(0);
  rmx_xfer_release(x1);
  rmx_xfer_release(x2);
  rmx_xfer_release(x3);
}

/* rmx_rail_close of a rail being added (its OFFER answered, the rail
 * connecting): the add ends RMX_ECANCELED, once; A carries on and a later
 * add gets the next number. */
static void rail_close_while_adding(void **state)
{
  (void)state;
  rmx_rail_info_t in;
  connect_a();
  pump(&W.connected, 1);
  rail_add("to close");
  assert_int_equal(rmx_rail_close(W.a, 1), RMX_ENOENT); /* not open yet */
  for (int i = 0; rmx_rail_info(W.a, 1, &in) != 0; i++) {
    assert_true(i < 1000000);
    assert_true(rmx_ctx_progress(W.o) >= 0);
    assert_true(rmx_ctx_progress(W.r) >= 0);
  }
  assert_int_equal(W.rails, 0);
  W.in_api = 1;
  assert_int_equal(rmx_rail_close(W.a, 1), 0);
  W.in_api = 0;
  pump(&W.rails, 1);
  assert_int_equal(W.rail_st[0], RMX_ECANCELED);
  assert_int_equal(rmx_rail_close(W.a, 1), RMX_ENOENT);
  rail_add("after the close");
  pump(&W.rails, 2);
  assert_int_equal(W.rail_st[1], 0);
  assert_int_equal(W.rail_no[1], 2);
  assert_int_equal(rmx_conn_rails(W.a), 1);
}

/* A request posted in the turn a rail is asked for completes. */
static void xfer_posted_while_adding(void **state)
{
  (void)state;
  connect_a();
  pump(&W.connected, 1);
  lookup();
  rmx_xfer_t *x = prep(0);
  done_t d;
  rail_add("with a request");
  post(x, &d);
  pump(&d.calls, 1);
  assert_int_equal(d.status, 0);
  check_bytes(0);
  pump(&W.rails, 1);
  assert_int_equal(W.rail_st[0], 0);
  rmx_xfer_release(x);
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
    T(add_in_connected_and_in_rail_cb), T(add_in_xfer_completion), T(close_in_rail_cb),
    T(destroy_with_offer_in_flight), T(destroy_with_rail_connecting),
    T(rail_close_in_xfer_completion),
    T(rail_close_while_adding), T(xfer_posted_while_adding),
  };
  char name[64];
  snprintf(name, sizeof(name), "rails-order/%s", scheme);
  return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
