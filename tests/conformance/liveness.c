/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Liveness (docs/protocol.md, keepalive; docs/reliability.md): idle
 * connections stay up however long they idle, whoever watches; a peer that
 * goes silent is lost with RMX_ETIMEDOUT; a peer that keeps talking but
 * never returns credits ends the connection the same way; keepalives meet
 * the limit a peer announces. Every callback is counted: exactly once, and
 * nothing after on_closed.
 *
 *   rmx-liveness tcp|rdma
 *
 * Over rdma only the tests between two rmx contexts run; the raw peers
 * speak TCP (tests/conformance/rawpeer.c, written from docs/protocol.md).
 */
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include <rmx/rmx.h>

#include "rawpeer.h"

static const char *scheme = "tcp", *addr = "127.0.0.1";

/* ---- one side: a context, its connection, and what it was told ---- */

typedef struct side {
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  int connected, accepted, recvd, sent_ok, sent_err, timedout_sends;
  int disconnects, disc_status, closed, after_closed;
} side_t;

static uv_loop_t loop;
static rmx_listener_t *L;
static int port;

static void on_recv(rmx_conn_t *c, const void *d, size_t n, void *arg)
{
  side_t *s = arg;
  s->after_closed += s->closed;
  s->recvd++;
}

static void on_disc(rmx_conn_t *c, int status, void *arg)
{
  side_t *s = arg;
  s->after_closed += s->closed;
  s->disconnects++;
  s->disc_status = status;
}

static void on_sent(rmx_conn_t *c, int status, void *arg)
{
  side_t *s = arg;
  s->after_closed += s->closed;
  if (status == 0)
    s->sent_ok++;
  else
    s->sent_err++;
  s->timedout_sends += status == RMX_ETIMEDOUT;
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  side_t *s = arg;
  s->after_closed += s->closed;
  s->closed++;
}

static const rmx_conn_cbs_t cbs = {.on_recv = on_recv, .on_disconnect = on_disc};

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  side_t *s = arg;
  s->c = c;
  s->accepted++;
  rmx_conn_set_cbs(c, &cbs, s);
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  side_t *s = arg;
  assert_int_equal(status, 0);
  s->connected++;
  rmx_conn_set_cbs(c, &cbs, s);
}

static void wait_for(const int *counter, int want)
{
  while (__atomic_load_n(counter, __ATOMIC_SEQ_CST) < want)
    uv_run(&loop, UV_RUN_ONCE);
}

static void idle_cb(uv_timer_t *t) { *(int *)t->data = 1; }

/* Run the loop for ms of idleness (nothing the test sends). */
static void idle_for(unsigned ms)
{
  uv_timer_t t;
  int done = 0;
  uv_timer_init(&loop, &t);
  t.data = &done;
  uv_timer_start(&t, idle_cb, ms, 0);
  wait_for(&done, 1);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(&loop, UV_RUN_NOWAIT);
}

static void side_up(side_t *s, uint32_t ka_ms, uint32_t limit_ms, uint32_t depth)
{
  rmx_config_t cfg;
  memset(s, 0, sizeof(*s));
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.keepalive_ms = ka_ms;
  cfg.keepalive_timeout_ms = limit_ms;
  cfg.rx_depth = depth;
  cfg.close_timeout_ms = 1000;
  assert_int_equal(rmx_ctx_create(&s->ctx, &loop, &cfg), 0);
}

static void listen_on(side_t *srv)
{
  char uri[128], got[128];
  snprintf(uri, sizeof(uri), "%s://%s:0", scheme, addr);
  assert_int_equal(rmx_listen(srv->ctx, uri, on_accept, srv, &L), 0);
  assert_int_equal(rmx_listener_uri(L, got, sizeof(got)), 0);
  port = atoi(strrchr(got, ':') + 1);
}

static void pair_up(side_t *srv, side_t *cl)
{
  char uri[128];
  listen_on(srv);
  snprintf(uri, sizeof(uri), "%s://%s:%d", scheme, addr, port);
  assert_int_equal(rmx_connect(cl->ctx, uri, on_connected, cl, &cl->c), 0);
  wait_for(&cl->connected, 1);
  wait_for(&srv->accepted, 1);
}

/* Close what is still open, check every callback came once, destroy.
 * expect_disc: on_disconnect calls expected; -1: at most one. */
static void side_down(side_t *s, int expect_disc)
{
  if (s->c) {
    assert_int_equal(rmx_conn_close(s->c, on_closed, s), 0);
    wait_for(&s->closed, 1);
    assert_int_equal(s->closed, 1);
  }
  if (expect_disc >= 0)
    assert_int_equal(s->disconnects, expect_disc);
  else
    assert_true(s->disconnects <= 1);
  assert_int_equal(s->after_closed, 0);
  assert_int_equal(rmx_ctx_destroy(s->ctx), 0);
}

/* Both ways, one message each: the connection still carries traffic. */
static void exchange(side_t *a, side_t *b)
{
  int ra = a->recvd, rb = b->recvd;
  assert_int_equal(rmx_send(a->c, "ping", 4, on_sent, a), 0);
  assert_int_equal(rmx_send(b->c, "pong", 4, on_sent, b), 0);
  wait_for(&a->recvd, ra + 1);
  wait_for(&b->recvd, rb + 1);
}

/* ---- between two rmx contexts (tcp and rdma) ---- */

/* Idle for many times the limit with the smallest receive depth: the
 * keepalives' own credits keep coming back, nobody is declared lost. */
static void idle_pair_stays_up(void **state)
{
  side_t srv, cl;
  side_up(&srv, 100, 500, 4);
  side_up(&cl, 100, 500, 4);
  pair_up(&srv, &cl);
  idle_for(3000);
  assert_int_equal(srv.disconnects + cl.disconnects, 0);
  exchange(&srv, &cl);
  rmx_listener_close(L);
  side_down(&cl, 0);
  wait_for(&srv.disconnects, 1); /* the client's close */
  assert_int_equal(srv.disc_status, 0);
  side_down(&srv, 1);
}

/* Only one side watches (the other has keepalive_ms 0): the side that does
 * not watch still sends what the watcher's limit asks for, and gets the
 * credits of those frames back. Both directions. */
static void one_watcher_stays_up(void **state)
{
  for (int watcher = 0; watcher < 2; watcher++) {
    side_t srv, cl;
    side_up(&srv, watcher == 0 ? 100 : 0, 500, 4);
    side_up(&cl, watcher == 1 ? 100 : 0, 500, 4);
    pair_up(&srv, &cl);
    idle_for(3000);
    assert_int_equal(srv.disconnects + cl.disconnects, 0);
    exchange(&srv, &cl);
    rmx_listener_close(L);
    side_down(&cl, 0);
    wait_for(&srv.disconnects, 1);
    side_down(&srv, 1);
  }
}

/* ---- against raw TCP peers ---- */

typedef struct raw {
  pthread_t th;
  uint32_t silence;   /* the limit it announces */
  int mode;           /* what it does after the handshake */
  int keepalives;     /* empty CREDIT frames it saw */
  int frames;         /* frames it saw */
  int quit;
  int fd;
} raw_t;

enum { RAW_SILENT, RAW_ANSWER_CREDITS };

/* Connect, hello, read the HELLO_ACK. */
static int raw_handshake(raw_t *r)
{
  uint8_t f[64], kind, body[64];
  uint32_t blen;
  hello_t h = hello_default();
  h.silence = r->silence;
  int fd = raw_dial(port);
  if (fd < 0)
    return -1;
  size_t n = hello_frame(f, &h, 0, 0);
  if (wr_all(fd, f, n) || rd_tframe(fd, &kind, body, &blen, sizeof(body)) || kind != K_HELLO_ACK) {
    close(fd);
    return -1;
  }
  return fd;
}

/* RAW_SILENT: never a byte more. RAW_ANSWER_CREDITS: every 100 ms a
 * CREDIT frame of its own that returns the credits of the server's CREDIT
 * frames (its keepalives) and never those of a message: alive and talking,
 * but the server's messages wait for credits. It keeps the credit rules:
 * its own credits are the server's depth, less what it sent, plus what the
 * server returned; the last one only for a frame that returns some. */
static void *raw_main(void *arg)
{
  raw_t *r = arg;
  uint8_t kind, *body = malloc(16384), out[64];
  uint32_t blen, credits = 64, owed = 0; /* hello_default()'s depth */
  uint64_t last = now_ms();
  r->fd = raw_handshake(r);
  assert_true(r->fd >= 0);
  while (!__atomic_load_n(&r->quit, __ATOMIC_SEQ_CST)) {
    if (r->mode == RAW_SILENT) {
      usleep(10000);
      continue;
    }
    struct pollfd p = {.fd = r->fd, .events = POLLIN};
    if (poll(&p, 1, 20) == 1) { /* a frame is never read in part */
      if (rd_tframe(r->fd, &kind, body, &blen, 16384) != 0)
        break; /* closed by the server */
      if (kind != K_FRAME || blen < 8)
        continue;
      __atomic_add_fetch(&r->frames, 1, __ATOMIC_SEQ_CST);
      credits += g16(body + 2);
      if (body[0] == F_CREDIT && g32(body + 4) == 0) {
        __atomic_add_fetch(&r->keepalives, 1, __ATOMIC_SEQ_CST);
        owed++;
      }
    }
    if (now_ms() - last >= 100 && (credits >= 2 || (credits == 1 && owed > 0))) {
      size_t n = msg_frame(out, F_CREDIT, 0, (uint16_t)owed, NULL, 0);
      if (wr_all(r->fd, out, n))
        break;
      credits--;
      owed = 0;
      last = now_ms();
    }
  }
  free(body);
  close(r->fd);
  return NULL;
}

static void raw_start(raw_t *r, uint32_t silence, int mode)
{
  memset(r, 0, sizeof(*r));
  r->silence = silence;
  r->mode = mode;
  assert_int_equal(pthread_create(&r->th, NULL, raw_main, r), 0);
}

static void raw_stop(raw_t *r)
{
  __atomic_store_n(&r->quit, 1, __ATOMIC_SEQ_CST);
  pthread_join(r->th, NULL);
}

#define NMSG 100 /* more than the raw peer's 64 credits */

/* The raw client goes quiet after its handshake: the server declares it
 * lost, fails what waited, reports it once. */
static void silent_peer_is_lost(void **state)
{
  side_t srv;
  raw_t r;
  side_up(&srv, 100, 500, 64);
  listen_on(&srv);
  raw_start(&r, 0, RAW_SILENT);
  wait_for(&srv.accepted, 1);
  /* Within the credits (no stall), and one by rendezvous, whose FIN never
   * comes: it is outstanding when the peer is declared lost. */
  static uint8_t big[64 << 10];
  for (int i = 0; i < 10; i++)
    assert_int_equal(rmx_send(srv.c, "x", 1, on_sent, &srv), 0);
  assert_int_equal(rmx_send(srv.c, big, sizeof(big), on_sent, &srv), 0);
  wait_for(&srv.disconnects, 1);
  assert_int_equal(srv.disc_status, RMX_ETIMEDOUT);
  assert_int_equal(srv.sent_ok, 10);
  assert_int_equal(srv.sent_err, 1);
  assert_int_equal(srv.timedout_sends, 1);
  raw_stop(&r);
  rmx_listener_close(L);
  side_down(&srv, 1);
}

/* The raw client answers keepalives but never returns a message's credit:
 * the server's messages wait, it is not silent, and the connection still
 * ends with RMX_ETIMEDOUT. */
static void credit_stall_is_an_error(void **state)
{
  side_t srv;
  raw_t r;
  side_up(&srv, 100, 1000, 64);
  listen_on(&srv);
  raw_start(&r, 0, RAW_ANSWER_CREDITS);
  wait_for(&srv.accepted, 1);
  for (int i = 0; i < NMSG; i++)
    assert_int_equal(rmx_send(srv.c, "x", 1, on_sent, &srv), 0);
  wait_for(&srv.disconnects, 1);
  assert_int_equal(srv.disc_status, RMX_ETIMEDOUT);
  assert_true(__atomic_load_n(&r.keepalives, __ATOMIC_SEQ_CST) > 0); /* it was talking */
  assert_int_equal(srv.sent_ok + srv.sent_err, NMSG);
  assert_true(srv.timedout_sends > 0);
  raw_stop(&r);
  rmx_listener_close(L);
  side_down(&srv, 1);
}

/* A server that does not watch (keepalive_ms 0) still sends keepalives
 * often enough for the limit the raw client announces. */
static void keepalives_meet_the_peer_limit(void **state)
{
  side_t srv;
  raw_t r;
  side_up(&srv, 0, 10000, 64);
  listen_on(&srv);
  raw_start(&r, 300, RAW_ANSWER_CREDITS);
  wait_for(&srv.accepted, 1);
  while (__atomic_load_n(&r.keepalives, __ATOMIC_SEQ_CST) < 10) /* 64 would need credits back */
    uv_run(&loop, UV_RUN_NOWAIT), usleep(1000);
  assert_int_equal(srv.disconnects, 0);
  assert_int_equal(rmx_send(srv.c, "x", 1, on_sent, &srv), 0);
  wait_for(&srv.sent_ok, 1);
  raw_stop(&r);
  rmx_listener_close(L);
  side_down(&srv, -1); /* the raw peer's close may or may not have been seen */
}

/* Limits below 100 ms are refused: in the configuration and in a hello. */
static void impossible_limits_are_refused(void **state)
{
  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.keepalive_timeout_ms = 50;
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), RMX_EINVAL);
  cfg.keepalive_timeout_ms = 500;
  cfg.keepalive_ms = 1000; /* checks less often than the limit */
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), RMX_EINVAL);
  cfg.keepalive_ms = 0; /* off: the limit does not matter */
  cfg.keepalive_timeout_ms = 0;
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), 0);
  assert_int_equal(rmx_ctx_destroy(ctx), 0);

  side_t srv;
  side_up(&srv, 100, 500, 64);
  listen_on(&srv);
  hello_t h = hello_default();
  h.silence = 50;
  uint8_t f[64], kind, body[64];
  uint32_t blen;
  int fd = raw_dial(port);
  assert_true(fd >= 0);
  assert_int_equal(wr_all(fd, f, hello_frame(f, &h, 0, 0)), 0);
  /* the server answers REJECT (EPROTO), or just closes */
  uv_run(&loop, UV_RUN_NOWAIT);
  for (int i = 0; i < 200 && !hung_up(fd); i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    usleep(5000);
  }
  if (rd_tframe(fd, &kind, body, &blen, sizeof(body)) == 0)
    assert_int_equal(kind, K_REJECT);
  assert_int_equal(srv.accepted, 0);
  close(fd);
  rmx_listener_close(L);
  side_down(&srv, 0);
}

int main(int argc, char **argv)
{
  if (argc < 2 || (strcmp(argv[1], "tcp") && strcmp(argv[1], "rdma"))) {
    fprintf(stderr, "usage: %s tcp|rdma\n", argv[0]);
    return 2;
  }
  scheme = argv[1];
  if (strcmp(scheme, "rdma") == 0)
    addr = getenv("RMX_TEST_ADDR") ? getenv("RMX_TEST_ADDR")
           : getenv("RXE_VM_ADDR") ? getenv("RXE_VM_ADDR") : "192.0.2.1";
  uv_loop_init(&loop);
  alarm(120); /* a hang fails the run */
  const struct CMUnitTest pair[] = {
    cmocka_unit_test(idle_pair_stays_up),
    cmocka_unit_test(one_watcher_stays_up),
  };
  const struct CMUnitTest raw[] = {
    cmocka_unit_test(silent_peer_is_lost),
    cmocka_unit_test(credit_stall_is_an_error),
    cmocka_unit_test(keepalives_meet_the_peer_limit),
    cmocka_unit_test(impossible_limits_are_refused),
  };
  int rc = cmocka_run_group_tests_name("liveness, two rmx contexts", pair, NULL, NULL);
  if (strcmp(scheme, "tcp") == 0)
    rc |= cmocka_run_group_tests_name("liveness, raw peers", raw, NULL, NULL);
  uv_loop_close(&loop);
  return rc ? 1 : 0;
}
