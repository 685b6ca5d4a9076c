/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rails (rmx_rail_add): one connection's transfer requests striped over
 * more connections to the same peer, written once, run per transport:
 *   rmx-rails SCHEME [filter]
 * Two contexts in this process: the owner O listens twice (its second
 * listener on $RXE_VM_ADDR2 where the SoftRoCE VM has a second device,
 * else on the same address) and publishes a region; the initiator R
 * connects A to O and opens rails to either listener.
 *
 * With RMX_RAILS_CUT set (the VM's rails.rdma-cut), the case rail_cut
 * moves 1 GiB over A and a rail on the second device, takes that device's
 * network device down mid-transfer (ip link set $RMX_RAILS_CUT down), and
 * checks that the request completes with every byte and A carries on.
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
#include "tcp_cut.h"

#define BLOCK (64u << 10)
#define WAIT_MS 60000

static struct {
  rmx_ctx_t *o, *r;
  server_t s;           /* O's first listener and its accepted ends */
  rmx_listener_t *l2;   /* O's second listener: no on_accept may run there */
  char uri2[128];
  int l2_accepts;
  client_t a;
  uint8_t *region, *src, *back;
  size_t size, nsrc; /* the region's bytes; blocks of src and back (fewer where it is 1 GiB) */
  rmx_mem_t *m;
} W;

typedef struct added {
  int calls, status;
  unsigned rail;
} added_t;

typedef struct done {
  int calls, status;
  size_t failed;
} done_t;

static int in_api;   /* inside an API call: no callback may run now */
static int relaying; /* a tcp_cut relay runs: pumped with the contexts */

static void l2_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  (void)l;
  (void)c;
  (void)arg;
  W.l2_accepts++;
}

static void added_cb(rmx_conn_t *c, int status, unsigned rail, void *arg)
{
  added_t *a = arg;
  if (in_api)
    fail_msg("a rail's callback ran inside an API call");
  if (a->calls++)
    fail_msg("a rail's callback ran twice");
  if (c != W.a.c)
    fail_msg("a rail's callback named another connection");
  a->status = status;
  a->rail = rail;
}

static void xfer_cb(rmx_xfer_t *x, int status, size_t failed, void *arg)
{
  done_t *d = arg;
  (void)x;
  if (d->calls++)
    fail_msg("a transfer ended twice");
  d->status = status;
  d->failed = failed;
}

static void pump_until(const int *n, int want)
{
  uint64_t end = uv_hrtime() + (uint64_t)WAIT_MS * 1000000u;
  while (*n < want) {
    assert_true(rmx_ctx_progress(W.r) >= 0);
    assert_true(rmx_ctx_progress(W.o) >= 0);
    if (relaying)
      tcp_cut_pump();
    if (uv_hrtime() > end)
      fail_msg("timed out: %d of %d", *n, want);
  }
}

static void pump_ms(uint64_t ms)
{
  uint64_t end = uv_hrtime() + ms * 1000000u;
  while (uv_hrtime() < end) {
    assert_true(rmx_ctx_progress(W.r) >= 0);
    assert_true(rmx_ctx_progress(W.o) >= 0);
  }
}

static unsigned rail_add(const char *uri)
{
  added_t a = {0};
  in_api = 1;
  assert_int_equal(rmx_rail_add(W.a.c, uri, added_cb, &a), 0);
  in_api = 0;
  pump_until(&a.calls, 1);
  assert_int_equal(a.status, 0);
  assert_true(a.rail >= 1 && a.rail <= RMX_RAILS_MAX);
  return a.rail;
}

static uint64_t lane_bytes(unsigned l)
{
  rmx_rail_info_t in;
  assert_int_equal(rmx_rail_info(W.a.c, l, &in), 0);
  return in.bytes;
}

static void lookup_cb(rmx_conn_t *c, int status, rmx_rkey_t *rk, void *arg)
{
  (void)c;
  rmx_rkey_t **out = arg;
  assert_int_equal(status, 0);
  *out = rk;
}

static rmx_rkey_t *lookup(void)
{
  rmx_rkey_t *rk = NULL;
  assert_int_equal(rmx_mem_lookup(W.a.c, "rails/region", 0, lookup_cb, &rk), 0);
  uint64_t end = uv_hrtime() + (uint64_t)WAIT_MS * 1000000u;
  while (!rk) {
    assert_true(rmx_ctx_progress(W.r) >= 0);
    assert_true(rmx_ctx_progress(W.o) >= 0);
    assert_true(uv_hrtime() < end);
  }
  return rk;
}

/* Block i of a request goes to slot perm(i) of the region: scattered. */
static size_t slot(size_t i, size_t n) { return (i * 7919) % n; }

/* A request of n blocks over rk, op WRITE (src -> region) or READ (region
 * -> back), prepared but not posted. */
static rmx_xfer_t *prep(rmx_rkey_t *rk, rmx_xfer_op_t op, size_t n)
{
  rmx_xfer_entry_t *e = calloc(n, sizeof(*e));
  assert_non_null(e);
  for (size_t i = 0; i < n; i++)
    e[i] = (rmx_xfer_entry_t){.addr = (op == RMX_XFER_WRITE ? W.src : W.back) +
                                      (i % W.nsrc) * BLOCK,
                              .len = BLOCK, .rkey = rk, .offset = slot(i, n) * BLOCK};
  rmx_xfer_t *x = NULL;
  assert_int_equal(rmx_xfer_prep(W.a.c, op, e, n, &x), 0);
  free(e);
  return x;
}

static void run(rmx_xfer_t *x, done_t *d)
{
  memset(d, 0, sizeof(*d));
  in_api = 1;
  assert_int_equal(rmx_xfer_post(x, NULL, 0, xfer_cb, d), 0);
  in_api = 0;
  pump_until(&d->calls, 1);
}

/* Every block where the request put it. */
static void check_written(size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (memcmp(W.region + slot(i, n) * BLOCK, W.src + (i % W.nsrc) * BLOCK, BLOCK) != 0)
      fail_msg("block %zu of %zu is not in place", i, n);
}

static void check_read(size_t n)
{
  assert_true(n <= W.nsrc); /* each block to a place of its own */
  for (size_t i = 0; i < n; i++)
    if (memcmp(W.back + i * BLOCK, W.region + slot(i, n) * BLOCK, BLOCK) != 0)
      fail_msg("block %zu of %zu read back wrong", i, n);
}

/* ---- set-up ---- */

static int setup_size(size_t size, size_t src)
{
  memset(&W, 0, sizeof(W));
  W.size = size;
  W.nsrc = src / BLOCK;
  W.o = ctx_new(0);
  W.r = ctx_new(0);
  server_start(W.o, &W.s, SRV_SINK);
  const char *a2 = getenv("RXE_VM_ADDR2");
  if (strcmp(scheme, "rdma") == 0 && a2)
    snprintf(W.uri2, sizeof(W.uri2), "rdma://%s:0", a2);
  else
    uri_for(W.uri2, sizeof(W.uri2), 0);
  assert_int_equal(rmx_listen(W.o, W.uri2, l2_accept, NULL, &W.l2), 0);
  assert_int_equal(rmx_listener_uri(W.l2, W.uri2, sizeof(W.uri2)), 0);
  client_connect(W.r, &W.a, W.s.uri);
  pump_until(&W.a.connected, 1);
  assert_int_equal(W.a.connect_status, 0);
  pump_until(&W.s.accepted, 1);
  W.region = calloc(1, size);
  W.src = malloc(src);
  W.back = calloc(1, src);
  assert_true(W.region && W.src && W.back);
  pattern(W.src, src, 7);
  assert_int_equal(rmx_mem_reg(W.o, W.region, size, RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE,
                               &W.m), 0);
  assert_int_equal(rmx_mem_publish(W.m, "rails/region"), 0);
  alarm(300);
  return 0;
}

static int setup(void **state)
{
  (void)state;
  return setup_size(16u << 20, 16u << 20);
}

static int teardown(void **state)
{
  rmx_ctx_stats_t st;
  (void)state;
  if (W.m)
    rmx_mem_dereg(W.m);
  if (W.a.c && !W.a.closed) {
    assert_int_equal(rmx_conn_close(W.a.c, cl_closed, &W.a), 0);
    pump_until(&W.a.closed, 1);
  }
  rmx_listener_close(W.l2);
  if (W.s.l)
    rmx_listener_close(W.s.l);
  int want = W.s.accepted;
  while (W.s.nconns)
    assert_int_equal(rmx_conn_close(W.s.conns[--W.s.nconns], srv_conn_closed, &W.s), 0);
  pump_until(&W.s.closed, want);
  /* The rails went with their connections, at both ends. */
  for (int i = 0; i < 2000; i++) {
    assert_int_equal(rmx_ctx_stats_get(W.o, &st, sizeof(st)), 0);
    if (st.conns == 0)
      break;
    pump_ms(5);
  }
  assert_int_equal(st.conns, 0);
  assert_int_equal(st.mem_regs, 0);
  assert_int_equal(rmx_ctx_stats_get(W.r, &st, sizeof(st)), 0);
  assert_int_equal(st.conns, 0);
  assert_int_equal(W.l2_accepts, 0); /* rails never reach on_accept */
  assert_int_equal(W.s.accepted, 1);
  ctx_done(W.r);
  ctx_done(W.o);
  free(W.region);
  free(W.src);
  free(W.back);
  alarm(0);
  return 0;
}

/* ---- the cases ---- */

/* Three rails; a large request goes over all four lanes, a small one over
 * A alone; every byte checked both ways. */
static void stripes_every_byte(void **state)
{
  (void)state;
  size_t n = W.size / BLOCK;
  unsigned r1 = rail_add(W.uri2), r2 = rail_add(W.uri2), r3 = rail_add(W.s.uri);
  assert_true(r1 != r2 && r2 != r3 && r1 != r3);
  assert_int_equal(rmx_conn_rails(W.a.c), 3);
  rmx_rkey_t *rk = lookup();
  rmx_xfer_t *w = prep(rk, RMX_XFER_WRITE, n), *rd = prep(rk, RMX_XFER_READ, n);
  done_t d;
  run(w, &d);
  assert_int_equal(d.status, 0);
  check_written(n);
  uint64_t sum = 0;
  for (unsigned l = 0; l <= 3; l++) {
    uint64_t b = lane_bytes(l);
    if (b == 0)
      fail_msg("lane %u carried nothing of a %zu-byte request", l, W.size);
    sum += b;
  }
  assert_true(sum == W.size); /* each part once */
  run(rd, &d);
  assert_int_equal(d.status, 0);
  check_read(n);
  /* Small: A alone. */
  uint64_t before[4];
  for (unsigned l = 0; l <= 3; l++)
    before[l] = lane_bytes(l);
  rmx_xfer_t *small = prep(rk, RMX_XFER_WRITE, 4);
  run(small, &d);
  assert_int_equal(d.status, 0);
  assert_true(lane_bytes(0) == before[0] + 4 * BLOCK);
  for (unsigned l = 1; l <= 3; l++)
    assert_true(lane_bytes(l) == before[l]);
  rmx_xfer_release(small);
  rmx_xfer_release(w);
  rmx_xfer_release(rd);
  rmx_rkey_release(rk);
}

/* A key found before the rail holds none for it: its requests stay on A;
 * the lookup after the rail asks the owner again and covers the rail. */
static void key_before_rail_stays_on_a(void **state)
{
  (void)state;
  size_t n = W.size / BLOCK;
  rmx_rkey_t *old = lookup();
  unsigned r = rail_add(W.uri2);
  rmx_xfer_t *w = prep(old, RMX_XFER_WRITE, n);
  done_t d;
  run(w, &d);
  assert_int_equal(d.status, 0);
  check_written(n);
  assert_true(lane_bytes(r) == 0);
  rmx_rkey_t *now = lookup();
  rmx_xfer_t *w2 = prep(now, RMX_XFER_WRITE, n);
  memset(W.region, 0, W.size);
  run(w2, &d);
  assert_int_equal(d.status, 0);
  check_written(n);
  assert_true(lane_bytes(r) > 0);
  rmx_xfer_release(w);
  rmx_xfer_release(w2);
  rmx_rkey_release(old);
  rmx_rkey_release(now);
}

/* A rail closed while a request has parts on it: the request completes
 * with every byte over the lanes left, and A carries on. */
static void rail_closed_mid_request(void **state)
{
  (void)state;
  size_t n = W.size / BLOCK;
  unsigned r1 = rail_add(W.uri2), r2 = rail_add(W.uri2);
  rmx_rkey_t *rk = lookup();
  rmx_xfer_t *w = prep(rk, RMX_XFER_WRITE, n);
  done_t d = {0};
  assert_int_equal(rmx_xfer_post(w, NULL, 0, xfer_cb, &d), 0);
  uint64_t end = uv_hrtime() + (uint64_t)WAIT_MS * 1000000u;
  while (lane_bytes(r1) == 0 && !d.calls) {
    assert_true(rmx_ctx_progress(W.r) >= 0);
    assert_true(rmx_ctx_progress(W.o) >= 0);
    assert_true(uv_hrtime() < end);
  }
  assert_int_equal(rmx_rail_close(W.a.c, r1), 0);
  assert_int_equal(rmx_rail_close(W.a.c, r1), RMX_ENOENT);
  pump_until(&d.calls, 1);
  assert_int_equal(d.status, 0);
  check_written(n);
  rmx_rail_info_t in;
  assert_int_equal(rmx_rail_info(W.a.c, r1, &in), 0);
  assert_int_equal(in.up, 0);
  assert_int_equal(rmx_conn_rails(W.a.c), 1);
  /* Carries on: again, over A and r2. */
  uint64_t b2 = lane_bytes(r2);
  memset(W.region, 0, W.size);
  run(w, &d);
  assert_int_equal(d.status, 0);
  check_written(n);
  assert_true(lane_bytes(r2) > b2);
  rmx_xfer_release(w);
  rmx_rkey_release(rk);
}

/* The owner closes its end of A: R's rails go with A, and A's requests
 * end once each. */
static void connection_lost_takes_its_rails(void **state)
{
  (void)state;
  rail_add(W.uri2);
  rail_add(W.s.uri);
  rmx_conn_t *t = W.s.conns[--W.s.nconns];
  assert_int_equal(rmx_conn_close(t, srv_conn_closed, &W.s), 0);
  pump_until(&W.a.disconnects, 1);
  assert_int_equal(rmx_conn_rails(W.a.c), 0);
  rmx_ctx_stats_t st;
  for (int i = 0; i < 2000; i++) {
    assert_int_equal(rmx_ctx_stats_get(W.r, &st, sizeof(st)), 0);
    if (st.conns == 1) /* A alone, closed by teardown */
      break;
    pump_ms(5);
  }
  assert_int_equal(st.conns, 1);
}

/* A rail asked for, then A closed at once: its callback runs once, with
 * RMX_ECANCELED, before A's on_closed. */
static void close_with_rail_in_flight(void **state)
{
  (void)state;
  added_t a = {0};
  assert_int_equal(rmx_rail_add(W.a.c, W.uri2, added_cb, &a), 0);
  assert_int_equal(rmx_conn_close(W.a.c, cl_closed, &W.a), 0);
  pump_until(&W.a.closed, 1);
  assert_int_equal(a.calls, 1);
  assert_int_equal(a.status, RMX_ECANCELED);
  assert_int_equal(a.rail, 0);
}

/* Misuse and refusals. */
static void argument_errors(void **state)
{
  (void)state;
  added_t a = {0};
  rmx_rail_info_t in;
  assert_int_equal(rmx_rail_add(NULL, W.uri2, added_cb, &a), RMX_EINVAL);
  assert_int_equal(rmx_rail_add(W.a.c, NULL, added_cb, &a), RMX_EINVAL);
  assert_int_equal(rmx_rail_add(W.a.c, W.uri2, NULL, &a), RMX_EINVAL);
  assert_int_equal(rmx_rail_add(W.s.conns[0], W.uri2, added_cb, &a), RMX_EINVAL); /* accepted */
  const char *other = strcmp(scheme, "tcp") == 0 ? "rdma://127.0.0.1:1" : "tcp://127.0.0.1:1";
  int rc = rmx_rail_add(W.a.c, other, added_cb, &a);
  assert_true(rc == RMX_EINVAL || rc == RMX_ENOTSUP || rc == RMX_ENODEV);
  assert_int_equal(rmx_rail_info(W.a.c, RMX_RAILS_MAX + 1, &in), RMX_EINVAL);
  assert_int_equal(rmx_rail_info(W.a.c, 1, &in), RMX_ENOENT);
  assert_int_equal(rmx_rail_info(W.a.c, 0, &in), 0);
  assert_int_equal(in.up, 1);
  assert_int_equal(rmx_rail_close(W.a.c, 0), RMX_EINVAL);
  assert_int_equal(rmx_rail_close(W.a.c, 1), RMX_ENOENT);
  assert_int_equal(a.calls, 0);
  /* Nobody listens there: the connect's error, once. */
  char dead[128];
  uri_for(dead, sizeof(dead), 1);
  assert_int_equal(rmx_rail_add(W.a.c, dead, added_cb, &a), 0);
  pump_until(&a.calls, 1);
  assert_true(a.status != 0);
  assert_int_equal(a.rail, 0);
  /* RMX_RAILS_MAX numbers in a connection's life, the failed one counted. */
  for (unsigned i = 2; i <= RMX_RAILS_MAX; i++)
    rail_add(W.uri2);
  memset(&a, 0, sizeof(a));
  assert_int_equal(rmx_rail_add(W.a.c, W.uri2, added_cb, &a), 0);
  pump_until(&a.calls, 1);
  assert_int_equal(a.status, RMX_ENOMEM);
  assert_int_equal(rmx_conn_rails(W.a.c), RMX_RAILS_MAX - 1);
}

/* TCP: a rail through a relay that is reset while the rail has parts in
 * flight: they fail there and go again over A; every byte arrives. */
static void rail_reset_mid_request(void **state)
{
  (void)state;
  size_t n = W.size / BLOCK;
  if (strcmp(scheme, "tcp") != 0)
    skip(); /* rail_cut does it over RDMA */
  const char *colon = strrchr(W.uri2, ':');
  int port = tcp_cut_start(atoi(colon + 1));
  assert_true(port > 0);
  relaying = 1;
  char via[128];
  uri_for(via, sizeof(via), port);
  unsigned r = rail_add(via);
  rmx_rkey_t *rk = lookup();
  rmx_xfer_t *w = prep(rk, RMX_XFER_WRITE, n);
  done_t d = {0};
  assert_int_equal(rmx_xfer_post(w, NULL, 0, xfer_cb, &d), 0);
  uint64_t end = uv_hrtime() + (uint64_t)WAIT_MS * 1000000u;
  while (lane_bytes(r) == 0 && !d.calls) {
    assert_true(rmx_ctx_progress(W.r) >= 0);
    assert_true(rmx_ctx_progress(W.o) >= 0);
    tcp_cut_pump();
    assert_true(uv_hrtime() < end);
  }
  assert_int_equal(d.calls, 0);
  tcp_cut();
  pump_until(&d.calls, 1);
  assert_int_equal(d.status, 0);
  check_written(n);
  assert_int_equal(rmx_conn_rails(W.a.c), 0);
  assert_true(lane_bytes(0) + lane_bytes(r) >= W.size); /* some parts went twice */
  relaying = 0;
  tcp_cut_stop();
  rmx_xfer_release(w);
  rmx_rkey_release(rk);
}

/* The done-when case: 1 GiB over A and a rail on the second device; that
 * device's link is taken down mid-transfer. */
static void rail_cut(void **state)
{
  (void)state;
  const char *dev = getenv("RMX_RAILS_CUT");
  char cmd[160];
  size_t n = W.size / BLOCK;
  if (!dev || strcmp(scheme, "rdma") != 0 || !getenv("RXE_VM_ADDR2"))
    skip();
  unsigned r = rail_add(W.uri2);
  rmx_rkey_t *rk = lookup();
  rmx_xfer_t *w = prep(rk, RMX_XFER_WRITE, n);
  done_t d = {0};
  assert_int_equal(rmx_xfer_post(w, NULL, 0, xfer_cb, &d), 0);
  uint64_t end = uv_hrtime() + (uint64_t)WAIT_MS * 1000000u;
  while (lane_bytes(r) < (64u << 20) && !d.calls) {
    assert_true(rmx_ctx_progress(W.r) >= 0);
    assert_true(rmx_ctx_progress(W.o) >= 0);
    assert_true(uv_hrtime() < end);
  }
  assert_int_equal(d.calls, 0); /* cut mid-transfer, not after */
  snprintf(cmd, sizeof(cmd), "ip link set %s down", dev);
  assert_int_equal(system(cmd), 0);
  uint64_t at_cut = lane_bytes(r);
  pump_until(&d.calls, 1);
  snprintf(cmd, sizeof(cmd), "ip link set %s up", dev);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(d.status, 0);
  check_written(n);
  print_message("rail %u carried %llu MiB before the cut, %llu in all; A %llu MiB\n", r,
                (unsigned long long)(at_cut >> 20), (unsigned long long)(lane_bytes(r) >> 20),
                (unsigned long long)(lane_bytes(0) >> 20));
  assert_int_equal(rmx_conn_rails(W.a.c), 0);
  /* A carries on: read 64 MiB of it back. */
  rmx_xfer_t *rd = prep(rk, RMX_XFER_READ, W.nsrc);
  run(rd, &d);
  assert_int_equal(d.status, 0);
  check_read(W.nsrc);
  rmx_xfer_release(rd);
  rmx_xfer_release(w);
  rmx_rkey_release(rk);
}

static int setup_gib(void **state)
{
  (void)state;
  /* 1 GiB at the target; the initiator's 64 MiB sent over and over */
  return setup_size(getenv("RMX_RAILS_CUT") ? (1u << 30) : BLOCK * 16, 64u << 20);
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
    T(stripes_every_byte), T(key_before_rail_stays_on_a), T(rail_closed_mid_request),
    T(connection_lost_takes_its_rails), T(close_with_rail_in_flight), T(argument_errors),
    T(rail_reset_mid_request),
    cmocka_unit_test_setup_teardown(rail_cut, setup_gib, teardown),
  };
  char name[64];
  snprintf(name, sizeof(name), "rails/%s", scheme);
  return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
