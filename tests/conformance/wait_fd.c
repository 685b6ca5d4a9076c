/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A context driven from an epoll loop that is not libuv's, through
 * rmx_ctx_fd(), rmx_ctx_timeout() and rmx_ctx_progress() only: messages
 * and an RPC echo go both ways (a call made outside the loop leaves
 * rmx_ctx_timeout() at 0 until it is handed over), a call that is never
 * answered times out (so timers run when no fd is readable), the calls
 * are refused where they cannot work, a send made from on_disconnect or
 * from the on_connected of a refused connect (after the turn's last flush)
 * leaves rmx_ctx_timeout() at 0 and goes out, and a destroy from a
 * callback ends the context. Poll and adaptive progress keep
 * rmx_ctx_timeout() at 0 around traffic (the caller busy-polls): poll for
 * good, adaptive until spin_us of quiet.
 *
 *   rmx-wait-fd tcp|rdma
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <uv.h>
#include <cmocka.h>

#include "harness.h"

enum { H_ECHO = 1, H_NEVER = 2 };

static int replies, reply_bad, timed_out, destroyed_in_cb;
static rmx_rpc_req_t *unanswered;

static void h_echo(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  assert_int_equal(rmx_rpc_reply(req, data, len), 0);
}

static void h_never(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  unanswered = req; /* answered only after the caller has given up */
}

static void on_reply(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  replies++;
  reply_bad += status != 0 || len != 5 || memcmp(data, "hello", 5) != 0;
}

static void on_timeout(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  timed_out += status == RMX_ETIMEDOUT;
}

/* Wait on the fd (never longer than rmx_ctx_timeout says), then progress,
 * until *done reaches want; a bound of iterations catches a hang. */
static void drive(rmx_ctx_t *ctx, int ep, const int *done, int want)
{
  for (int turns = 0; *done < want; turns++) {
    struct epoll_event ev;
    assert_true(turns < 1000000);
    int wait_ms = rmx_ctx_timeout(ctx);
    assert_true(wait_ms >= -1);
    epoll_wait(ep, &ev, 1, wait_ms);
    int before = *done, rc = rmx_ctx_progress(ctx);
    assert_true(rc >= 0);
    /* A call that ran a callback says so: 0 means nothing was ready, and a
     * caller that sleeps on it would sleep until the next timer. */
    if (*done != before)
      assert_true(rc > 0);
  }
}

static int looked_up;

static void on_lookup(rmx_conn_t *c, int status, rmx_rkey_t *rk, void *arg)
{
  assert_int_equal(status, 0);
  rmx_rkey_release(rk);
  looked_up++;
}

static int epoll_on(rmx_ctx_t *ctx)
{
  int fd = rmx_ctx_fd(ctx), ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN};
  assert_true(fd >= 0 && ep >= 0);
  assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
  return ep;
}

static void messages_rpcs_and_timers(void **state)
{
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  client_t cl;
  int ep = epoll_on(ctx);
  assert_int_equal(rmx_rpc_register(ctx, H_ECHO, h_echo, NULL), 0);
  assert_int_equal(rmx_rpc_register(ctx, H_NEVER, h_never, NULL), 0);
  server_start(ctx, &s, SRV_ECHO);
  client_connect(ctx, &cl, s.uri);
  drive(ctx, ep, &cl.connected, 1);
  assert_int_equal(cl.connect_status, 0);

  /* A call made outside the loop is handed over at its next turn: until
   * then the caller must not sleep on the fd. */
  for (int i = 0; i < 3; i++) {
    assert_int_equal(rmx_rpc_call(cl.c, H_ECHO, "hello", 5, 0, on_reply, NULL, NULL), 0);
    assert_int_equal(rmx_ctx_timeout(ctx), 0);
    drive(ctx, ep, &replies, i + 1);
  }

  uint8_t msg[20000]; /* above the eager size: rendezvous too */
  pattern(msg, sizeof(msg), 9);
  cl.expect_len = sizeof(msg);
  cl.expect_seed = 9;
  for (int i = 0; i < 50; i++)
    assert_int_equal(rmx_send(cl.c, msg, sizeof(msg), cl_sent, &cl), 0);
  for (int i = 0; i < 20; i++)
    assert_int_equal(rmx_rpc_call(cl.c, H_ECHO, "hello", 5, 0, on_reply, NULL, NULL), 0);
  drive(ctx, ep, &cl.recvs, 50);
  drive(ctx, ep, &replies, 23);
  assert_int_equal(cl.bad, 0);
  assert_int_equal(reply_bad, 0);

  /* Only a timer ends this one: nothing arrives for it. */
  assert_int_equal(rmx_rpc_call(cl.c, H_NEVER, "x", 1, 200, on_timeout, NULL, NULL), 0);
  drive(ctx, ep, &timed_out, 1);
  assert_non_null(unanswered);
  rmx_rpc_reply(unanswered, "late", 4); /* to a caller that gave up: dropped */

  /* A lookup answered from the cache calls back from the loop's deferred
   * work, not from a frame: that call counts too (drive checks it). */
  static uint8_t area[4096];
  rmx_mem_t *m;
  assert_int_equal(rmx_mem_reg(ctx, area, sizeof(area), RMX_MEM_REMOTE_READ, &m), 0);
  assert_int_equal(rmx_mem_publish(m, "wait-fd/area"), 0);
  assert_int_equal(rmx_mem_lookup(cl.c, "wait-fd/area", 0, on_lookup, NULL), 0);
  drive(ctx, ep, &looked_up, 1); /* asked over the connection */
  for (int i = 0; i < 3; i++) {
    assert_int_equal(rmx_mem_lookup(cl.c, "wait-fd/area", 0, on_lookup, NULL), 0);
    drive(ctx, ep, &looked_up, 2 + i); /* the cache's */
  }

  client_close(ctx, &cl); /* runs the loop itself: allowed outside progress */
  server_stop(ctx, &s);
  rmx_mem_dereg(m);
  close(ep);
  ctx_done(ctx);
}

static rmx_ctx_t *ctx_progress(rmx_progress_t mode)
{
  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.progress = mode;
  cfg.spin_us = 2000;
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), 0);
  return ctx;
}

/* Turn the loop without sleeping until rmx_ctx_timeout() is no longer 0
 * or ms have passed; returns the last timeout. */
static int turn_while_zero(rmx_ctx_t *ctx, unsigned ms)
{
  uint64_t end = uv_hrtime() + (uint64_t)ms * 1000000;
  int t;
  while ((t = rmx_ctx_timeout(ctx)) == 0 && uv_hrtime() < end)
    assert_true(rmx_ctx_progress(ctx) >= 0);
  return t;
}

static void progress_modes_poll_or_sleep(void **state)
{
  static const rmx_progress_t modes[] = {RMX_PROGRESS_POLL, RMX_PROGRESS_ADAPTIVE,
                                         RMX_PROGRESS_EVENT};
  for (int m = 0; m < 3; m++) {
    rmx_ctx_t *ctx = ctx_progress(modes[m]);
    server_t s;
    client_t cl;
    int ep = epoll_on(ctx);
    replies = 0;
    assert_int_equal(rmx_rpc_register(ctx, H_ECHO, h_echo, NULL), 0);
    server_start(ctx, &s, SRV_ECHO);
    client_connect(ctx, &cl, s.uri);
    drive(ctx, ep, &cl.connected, 1);
    for (int i = 0; i < 20; i++) {
      assert_int_equal(rmx_rpc_call(cl.c, H_ECHO, "hello", 5, 0, on_reply, NULL, NULL), 0);
      drive(ctx, ep, &replies, i + 1);
      if (modes[m] != RMX_PROGRESS_EVENT) /* the reply just came: still polling */
        assert_int_equal(rmx_ctx_timeout(ctx), 0);
    }
    if (modes[m] == RMX_PROGRESS_POLL) {
      assert_int_equal(turn_while_zero(ctx, 50), 0); /* never sleeps */
    } else {
      /* Adaptive sleeps after spin_us (2 ms) of quiet, event once the
       * traffic is answered; the bound only catches one that never does. */
      assert_int_not_equal(turn_while_zero(ctx, 30000), 0);
    }
    client_close(ctx, &cl);
    server_stop(ctx, &s);
    close(ep);
    ctx_done(ctx);
  }
}

/* A send made from a callback that runs when the transport has closed
 * (libuv's close callbacks, after the turn's last flush): on_disconnect,
 * and on_connected reporting a refused connect. The caller must not sleep
 * on the fd while the send waits to be handed over. */
static client_t *send_on_disconnect_to;
static int lost_a, refused_status;

static void a_lost(rmx_conn_t *c, int status, void *arg)
{
  static uint8_t m[16];
  client_t *b = send_on_disconnect_to;
  lost_a++;
  pattern(m, sizeof(m), 5);
  assert_int_equal(rmx_send(b->c, m, sizeof(m), cl_sent, b), 0);
}

static void a_refused(rmx_conn_t *c, int status, void *arg)
{
  refused_status = status;
  a_lost(c, status, arg);
}

static void a_closed(rmx_conn_t *c, void *arg) { ((client_t *)arg)->closed++; }

static void a_send_from_a_close_callback_goes_out(void **state)
{
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  client_t a, b;
  int ep = epoll_on(ctx);
  server_start(ctx, &s, SRV_ECHO);
  client_connect(ctx, &a, s.uri);
  drive(ctx, ep, &a.connected, 1);
  drive(ctx, ep, &s.accepted, 1); /* s.conns[0] is a's */
  client_connect(ctx, &b, s.uri);
  drive(ctx, ep, &b.connected, 1);
  drive(ctx, ep, &s.accepted, 2);
  static const rmx_conn_cbs_t cbs = {.on_disconnect = a_lost};
  rmx_conn_set_cbs(a.c, &cbs, &a);
  send_on_disconnect_to = &b;
  b.expect_len = 16;
  b.expect_seed = 5;
  lost_a = 0;
  /* The server ends a's connection; a's on_disconnect sends on b. */
  assert_int_equal(rmx_conn_close(s.conns[0], srv_conn_closed, &s), 0);
  s.conns[0] = s.conns[--s.nconns];
  drive(ctx, ep, &lost_a, 1);
  assert_int_equal(rmx_ctx_timeout(ctx), 0);
  drive(ctx, ep, &b.recvs, 1);
  assert_int_equal(b.bad, 0);
  assert_int_equal(rmx_conn_close(a.c, a_closed, &a), 0);
  drive(ctx, ep, &a.closed, 1);
  /* A connect refused: its on_connected runs from the close callbacks too,
   * and here nothing else is under way that would wake the caller. */
  server_t dead;
  client_t x = {0};
  server_start(ctx, &dead, SRV_SINK);
  server_unlisten(ctx, &dead); /* nobody listens there any more */
  lost_a = 0;
  assert_int_equal(rmx_connect(ctx, dead.uri, a_refused, NULL, &x.c), 0);
  drive(ctx, ep, &lost_a, 1);
  assert_int_equal(refused_status, RMX_ECONNREFUSED);
  assert_int_equal(rmx_ctx_timeout(ctx), 0);
  drive(ctx, ep, &b.recvs, 2);
  assert_int_equal(b.bad, 0);
  assert_int_equal(rmx_conn_close(x.c, a_closed, &x), 0);
  drive(ctx, ep, &x.closed, 1);
  server_stop(ctx, &dead);
  client_close(ctx, &b);
  server_stop(ctx, &s);
  close(ep);
  ctx_done(ctx);
}

static void on_post_destroy(void *arg)
{
  rmx_ctx_t *ctx = arg;
  assert_int_equal(rmx_ctx_progress(ctx), RMX_EINVAL); /* not from a callback */
  assert_int_equal(rmx_ctx_destroy(ctx), 0);
  destroyed_in_cb = 1;
}

static void refused_where_it_cannot_work(void **state)
{
  uv_loop_t loop;
  rmx_ctx_t *ctx;
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(rmx_ctx_create(&ctx, &loop, NULL), 0);
  assert_int_equal(rmx_ctx_fd(ctx), RMX_EINVAL); /* the caller's loop is the caller's */
  assert_int_equal(rmx_ctx_timeout(ctx), RMX_EINVAL);
  assert_int_equal(rmx_ctx_progress(ctx), 0); /* the fast path polls there too */
  assert_int_equal(rmx_ctx_destroy(ctx), 0);
  assert_int_equal(rmx_ctx_progress(ctx), RMX_ECANCELED); /* finishing in the loop */
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);

  /* A destroy from a callback: progress finishes it and says so. */
  ctx = ctx_new(0);
  int ep = epoll_on(ctx);
  destroyed_in_cb = 0;
  assert_int_equal(rmx_ctx_post(ctx, on_post_destroy, ctx), 0);
  int rc = 0;
  for (int turns = 0; rc >= 0; turns++) {
    struct epoll_event ev;
    assert_true(turns < 1000);
    epoll_wait(ep, &ev, 1, 100);
    rc = rmx_ctx_progress(ctx);
  }
  assert_int_equal(rc, RMX_ECANCELED);
  assert_int_equal(destroyed_in_cb, 1);
  close(ep);
}

int main(int argc, char **argv)
{
  if (harness_args(argc, argv) != 0)
    return 2;
  alarm(240); /* a hang fails the run */
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(messages_rpcs_and_timers),
    cmocka_unit_test(refused_where_it_cannot_work),
    cmocka_unit_test(progress_modes_poll_or_sleep),
    cmocka_unit_test(a_send_from_a_close_callback_goes_out),
  };
  return cmocka_run_group_tests_name("wait-fd", tests, NULL, NULL);
}
