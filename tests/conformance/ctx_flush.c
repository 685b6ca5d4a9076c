/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx_ctx_flush(): what the application sent since the last progress goes
 * to the socket in the call, and the ends of the sends it wrote are
 * reported there too, so the sender may sleep on its fd at once: its
 * on_sent ran (once), rmx_ctx_timeout() is no longer 0, and the peer gets
 * the messages while the sender's context is never progressed again.
 * Nothing is read: a message waiting for the sender stays until its next
 * progress. Refused where progress is (NULL, inside a callback); a destroy
 * from an on_sent it runs ends the context (RMX_ECANCELED).
 * rmx_ctx_wait(): a progress that, with nothing ready, sleeps in the loop
 * until something is: woken by another thread's rmx_ctx_post and by a
 * message, each within a few calls (a wait that did not sleep would
 * return 0 over and over), and refused where progress is and on the
 * caller's loop.
 *
 *   rmx-ctx-flush tcp
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <pthread.h>
#include <unistd.h>
#include <uv.h>
#include <cmocka.h>

#include "harness.h"

typedef struct side {
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  int connected, recvs, sent, sent_bad, closed, flush_in_cb, wait_in_cb;
  size_t last_len;
  uint8_t last[64];
} side_t;

static rmx_listener_t *lst;

static void on_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  side_t *s = arg;
  s->recvs++;
  s->last_len = len;
  memcpy(s->last, data, len < sizeof(s->last) ? len : sizeof(s->last));
  s->flush_in_cb = rmx_ctx_flush(s->ctx); /* not from a callback */
  s->wait_in_cb = rmx_ctx_wait(s->ctx);
}

static const rmx_conn_cbs_t cbs = {.on_recv = on_recv};

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  side_t *s = arg;
  s->c = c;
  s->connected = 1;
  rmx_conn_set_cbs(c, &cbs, s);
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  assert_int_equal(status, 0);
  ((side_t *)arg)->connected = 1;
}

static void on_sent(rmx_conn_t *c, int status, void *arg)
{
  side_t *s = arg;
  s->sent++;
  s->sent_bad += status != 0;
}

static void on_closed(rmx_conn_t *c, void *arg) { ((side_t *)arg)->closed++; }

static rmx_ctx_t *ctx_closing_fast(void)
{
  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.close_timeout_ms = 200; /* a close whose peer is never progressed */
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), 0);
  return ctx;
}

/* Progress both until *a and *b are set (a bound catches a hang). */
static void both_until(side_t *x, side_t *y, const int *a, const int *b)
{
  for (int i = 0; !(*a && *b); i++) {
    assert_true(i < 2000000);
    assert_true(rmx_ctx_progress(x->ctx) >= 0);
    assert_true(rmx_ctx_progress(y->ctx) >= 0);
  }
}

/* Sleep on y's fd and progress y alone until *counter reaches want; x's
 * context is not touched. The bound (5 s) only catches a message that
 * never comes. */
static void only_until(side_t *y, const int *counter, int want)
{
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN};
  assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, rmx_ctx_fd(y->ctx), &ev), 0);
  uint64_t end = uv_hrtime() + 5000000000u;
  while (*counter < want && uv_hrtime() < end) {
    int ms = rmx_ctx_timeout(y->ctx);
    epoll_wait(ep, &ev, 1, ms < 0 || ms > 100 ? 100 : ms);
    assert_true(rmx_ctx_progress(y->ctx) >= 0);
  }
  close(ep);
  assert_int_equal(*counter, want);
}

static void pair(side_t *cli, side_t *srv)
{
  char uri[128];
  memset(cli, 0, sizeof(*cli));
  memset(srv, 0, sizeof(*srv));
  cli->ctx = ctx_closing_fast();
  srv->ctx = ctx_new(0);
  uri_for(uri, sizeof(uri), 0);
  assert_int_equal(rmx_listen(srv->ctx, uri, on_accept, srv, &lst), 0);
  assert_int_equal(rmx_listener_uri(lst, uri, sizeof(uri)), 0);
  assert_int_equal(rmx_connect(cli->ctx, uri, on_connected, cli, &cli->c), 0);
  rmx_conn_set_cbs(cli->c, &cbs, cli);
  both_until(cli, srv, &cli->connected, &srv->connected);
  /* Until the handshake's own traffic has settled, the sender's loop may
   * still have work of its own. */
  for (int i = 0; rmx_ctx_timeout(cli->ctx) == 0; i++) {
    assert_true(i < 2000000);
    assert_true(rmx_ctx_progress(cli->ctx) >= 0);
    assert_true(rmx_ctx_progress(srv->ctx) >= 0);
  }
}

static void unpair(side_t *cli, side_t *srv)
{
  rmx_listener_close(lst);
  assert_int_equal(rmx_conn_close(cli->c, on_closed, cli), 0);
  assert_int_equal(rmx_conn_close(srv->c, on_closed, srv), 0);
  both_until(cli, srv, &cli->closed, &srv->closed);
  assert_int_equal(cli->closed + srv->closed, 2);
  assert_int_equal(rmx_ctx_destroy(cli->ctx), 0);
  assert_int_equal(rmx_ctx_destroy(srv->ctx), 0);
}

static void a_flush_writes_and_reports_the_ends(void **state)
{
  side_t cli, srv;
  pair(&cli, &srv);
  assert_int_equal(rmx_ctx_flush(cli.ctx), 0); /* nothing to do: no callback */
  assert_int_equal(cli.sent, 0);

  for (int round = 1; round <= 3; round++) {
    uint8_t small[8], mid[1000];
    pattern(small, sizeof(small), (uint32_t)round);
    pattern(mid, sizeof(mid), (uint32_t)round);
    assert_int_equal(rmx_send(cli.c, small, sizeof(small), on_sent, &cli), 0);
    assert_int_equal(rmx_send(cli.c, mid, sizeof(mid), on_sent, &cli), 0);
    assert_int_equal(rmx_ctx_timeout(cli.ctx), 0); /* not out yet: no sleeping */
    assert_int_equal(rmx_ctx_flush(cli.ctx), 0);
    assert_int_equal(cli.sent, 2 * round); /* both ended in the call, once */
    assert_int_equal(cli.sent_bad, 0);
    assert_int_not_equal(rmx_ctx_timeout(cli.ctx), 0); /* nothing left for the loop */
    only_until(&srv, &srv.recvs, 2 * round);
    assert_int_equal(srv.last_len, sizeof(mid));
    assert_memory_equal(srv.last, mid, sizeof(srv.last));
    assert_int_equal(srv.flush_in_cb, RMX_EINVAL);
    assert_int_equal(srv.wait_in_cb, RMX_EINVAL);
  }

  /* An answer waits for the sender's progress: flushing reads nothing. */
  assert_int_equal(rmx_send(srv.c, "back", 4, NULL, NULL), 0);
  assert_int_equal(rmx_ctx_flush(srv.ctx), 0);
  usleep(20000);
  assert_int_equal(rmx_ctx_flush(cli.ctx), 0);
  assert_int_equal(cli.recvs, 0);
  both_until(&cli, &srv, &cli.recvs, &cli.recvs);
  assert_int_equal(cli.last_len, 4);
  assert_int_equal(cli.sent, 6); /* no callback ran twice */
  unpair(&cli, &srv);
}

static side_t *destroy_from;

static void on_sent_destroy(rmx_conn_t *c, int status, void *arg)
{
  side_t *s = destroy_from;
  s->sent++;
  assert_int_equal(rmx_conn_close(s->c, on_closed, s), 0);
  assert_int_equal(rmx_ctx_destroy(s->ctx), 0);
}

static void refused_and_a_destroy_from_on_sent(void **state)
{
  side_t cli, srv;
  assert_int_equal(rmx_ctx_flush(NULL), RMX_EINVAL);
  pair(&cli, &srv);
  destroy_from = &cli;
  assert_int_equal(rmx_send(cli.c, "x", 1, on_sent_destroy, NULL), 0);
  assert_int_equal(rmx_ctx_flush(cli.ctx), RMX_ECANCELED); /* and the context is gone */
  assert_int_equal(cli.sent, 1);
  assert_int_equal(cli.closed, 1);
  only_until(&srv, &srv.recvs, 1);
  rmx_listener_close(lst);
  assert_int_equal(rmx_conn_close(srv.c, on_closed, &srv), 0);
  only_until(&srv, &srv.closed, 1);
  assert_int_equal(rmx_ctx_destroy(srv.ctx), 0);

  /* On the caller's libuv loop it flushes too; the destroy finishes there. */
  uv_loop_t loop;
  rmx_ctx_t *ctx;
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(rmx_ctx_create(&ctx, &loop, NULL), 0);
  assert_int_equal(rmx_ctx_flush(ctx), 0);
  assert_int_equal(rmx_ctx_destroy(ctx), 0);
  assert_int_equal(rmx_ctx_flush(ctx), RMX_ECANCELED);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static int posted;
static void post_fn(void *arg) { posted = *(int *)arg; }

static void *post_later(void *arg)
{
  static int one = 1;
  usleep(50000);
  assert_int_equal(rmx_ctx_post(arg, post_fn, &one), 0);
  return NULL;
}

/* Calls of rmx_ctx_wait until *counter reaches want. */
static int waits_until(rmx_ctx_t *ctx, const int *counter, int want)
{
  int calls = 0, rc;
  while (*counter < want) {
    assert_true((rc = rmx_ctx_wait(ctx)) >= 0);
    calls++;
  }
  assert_true(rc > 0); /* the call that ran it says so */
  return calls;
}

static void a_wait_sleeps_until_something_comes(void **state)
{
  side_t cli, srv;
  pthread_t t;
  assert_int_equal(rmx_ctx_wait(NULL), RMX_EINVAL);
  pair(&cli, &srv);
  posted = 0;
  assert_int_equal(pthread_create(&t, NULL, post_later, cli.ctx), 0);
  assert_true(waits_until(cli.ctx, &posted, 1) <= 4); /* slept, not spun, for 50 ms */
  pthread_join(t, NULL);

  assert_int_equal(rmx_send(srv.c, "wake", 4, NULL, NULL), 0);
  assert_int_equal(rmx_ctx_flush(srv.ctx), 0);
  assert_true(waits_until(cli.ctx, &cli.recvs, 1) <= 4);
  assert_int_equal(cli.last_len, 4);
  unpair(&cli, &srv);

  uv_loop_t loop; /* the caller's loop is the caller's to sleep in */
  rmx_ctx_t *ctx;
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(rmx_ctx_create(&ctx, &loop, NULL), 0);
  assert_int_equal(rmx_ctx_wait(ctx), RMX_EINVAL);
  assert_int_equal(rmx_ctx_destroy(ctx), 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(int argc, char **argv)
{
  if (harness_args(argc, argv) != 0)
    return 2;
  alarm(120); /* a hang fails the run */
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(a_flush_writes_and_reports_the_ends),
    cmocka_unit_test(refused_and_a_destroy_from_on_sent),
    cmocka_unit_test(a_wait_sleeps_until_something_comes),
  };
  return cmocka_run_group_tests_name("ctx-flush", tests, NULL, NULL);
}
