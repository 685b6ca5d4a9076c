/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * An idle context lets the foreign loop that drives it sleep. The driver
 * is an epoll loop of the application's own, as rmx.h describes it: wait on
 * rmx_ctx_fd() no longer than rmx_ctx_timeout(), then rmx_ctx_progress().
 * With no connection (fresh, with a listener, after one was opened, used
 * and closed) it may wake for rmx's timers but must not spin: a second of
 * idling wakes it a handful of times, not millions. A post from another
 * thread still wakes it and runs; a post queued before the wait makes
 * rmx_ctx_timeout() 0. A close that waits on a silent peer wakes it at the
 * close timeout.
 *
 *   rmx-wait-idle tcp
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include <uv.h>
#include <cmocka.h>

#include "harness.h"

#define MAX_WAKES 20 /* a handful: rmx's own timers may wake it */

/* The application's loop: its own timer (a timerfd) and rmx's fd. */
typedef struct app {
  rmx_ctx_t *ctx;
  int ep, tfd;
} app_t;

static app_t app_new(rmx_ctx_t *ctx)
{
  app_t a = {.ctx = ctx, .ep = epoll_create1(0), .tfd = timerfd_create(CLOCK_MONOTONIC, 0)};
  struct epoll_event rmx_ev = {.events = EPOLLIN, .data.u32 = 0};
  struct epoll_event t_ev = {.events = EPOLLIN, .data.u32 = 1};
  int fd = rmx_ctx_fd(ctx);
  assert_true(fd >= 0 && a.ep >= 0 && a.tfd >= 0);
  assert_int_equal(epoll_ctl(a.ep, EPOLL_CTL_ADD, fd, &rmx_ev), 0);
  assert_int_equal(epoll_ctl(a.ep, EPOLL_CTL_ADD, a.tfd, &t_ev), 0);
  return a;
}

static void app_free(app_t *a)
{
  close(a->tfd);
  close(a->ep);
}

/*
 * Run the application's loop until its timer (ms from now) fires or *done
 * reaches want (done NULL: the timer only). Returns how often epoll_wait
 * returned; *timer_fired says whether the timer ended it.
 */
static long app_run(app_t *a, unsigned ms, const int *done, int want, int *timer_fired)
{
  struct itimerspec its = {.it_value = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000}};
  long wakes = 0;
  int fired = 0;
  assert_int_equal(timerfd_settime(a->tfd, 0, &its, NULL), 0);
  while (!fired && !(done && __atomic_load_n(done, __ATOMIC_SEQ_CST) >= want)) {
    struct epoll_event ev[2];
    int wait_ms = rmx_ctx_timeout(a->ctx);
    assert_true(wait_ms >= -1);
    int n = epoll_wait(a->ep, ev, 2, wait_ms);
    wakes++;
    for (int i = 0; i < n; i++) {
      if (ev[i].data.u32 == 1) {
        uint64_t x;
        assert_int_equal(read(a->tfd, &x, sizeof(x)), (ssize_t)sizeof(x));
        fired = 1;
      }
    }
    assert_true(rmx_ctx_progress(a->ctx) >= 0);
  }
  struct itimerspec off = {0};
  assert_int_equal(timerfd_settime(a->tfd, 0, &off, NULL), 0);
  if (timer_fired)
    *timer_fired = fired;
  return wakes;
}

static long idle_second(app_t *a)
{
  int fired;
  long wakes = app_run(a, 1000, NULL, 0, &fired);
  assert_true(fired);
  return wakes;
}

/* ---- posts from another thread ---- */

static int ran;
static void count_run(void *arg) { __atomic_add_fetch(&ran, 1, __ATOMIC_SEQ_CST); }

typedef struct poster {
  rmx_ctx_t *ctx;
  int ready, go; /* the driver is about to wait; post now */
  int rc;
} poster_t;

static void *post_when_told(void *arg)
{
  poster_t *p = arg;
  while (!__atomic_load_n(&p->go, __ATOMIC_SEQ_CST))
    usleep(1000);
  usleep(20000); /* most likely while the driver sleeps (either way it must run) */
  __atomic_store_n(&p->rc, rmx_ctx_post(p->ctx, count_run, NULL), __ATOMIC_SEQ_CST);
  return NULL;
}

/* A post from another thread wakes a driver that sleeps without a timer
 * (rmx_ctx_timeout() -1) and runs; the app's own timer bounds a miss. */
static void post_wakes_the_sleeper(app_t *a)
{
  poster_t p = {.ctx = a->ctx, .rc = 1};
  pthread_t th;
  int want = __atomic_load_n(&ran, __ATOMIC_SEQ_CST) + 1, fired;
  assert_int_equal(pthread_create(&th, NULL, post_when_told, &p), 0);
  __atomic_store_n(&p.go, 1, __ATOMIC_SEQ_CST);
  app_run(a, 20000, &ran, want, &fired);
  pthread_join(th, NULL);
  assert_int_equal(p.rc, 0);
  assert_false(fired); /* woken by the post, not by the app's timer */
  assert_int_equal(ran, want);
}

/* A post queued before the wait: the driver must not sleep at all. */
static void queued_post_means_now(app_t *a)
{
  int want = ran + 1;
  assert_int_equal(rmx_ctx_post(a->ctx, count_run, NULL), 0);
  assert_int_equal(rmx_ctx_timeout(a->ctx), 0);
  app_run(a, 20000, &ran, want, NULL);
  assert_int_equal(ran, want);
}

static void a_fresh_context_lets_its_driver_sleep(void **state)
{
  rmx_ctx_t *ctx = ctx_new(0);
  app_t a = app_new(ctx);
  /* First thing, before any progress: a post must wake it. */
  post_wakes_the_sleeper(&a);
  long wakes = idle_second(&a);
  print_message("fresh context: %ld wakes in 1 s\n", wakes);
  assert_true(wakes <= MAX_WAKES);
  post_wakes_the_sleeper(&a);
  queued_post_means_now(&a);
  app_free(&a);
  ctx_done(ctx);
}

static void after_a_connection_closed_it_sleeps_again(void **state)
{
  rmx_ctx_t *ctx = ctx_new(0);
  app_t a = app_new(ctx);
  server_t s;
  client_t cl;
  server_start(ctx, &s, SRV_ECHO);
  long wakes = idle_second(&a); /* a listener, no connection */
  print_message("listening: %ld wakes in 1 s\n", wakes);
  assert_true(wakes <= MAX_WAKES);

  client_connect(ctx, &cl, s.uri);
  app_run(&a, 20000, &cl.connected, 1, NULL);
  assert_int_equal(cl.connect_status, 0);
  static uint8_t msg[20000]; /* rendezvous too */
  pattern(msg, sizeof(msg), 3);
  cl.expect_len = sizeof(msg);
  cl.expect_seed = 3;
  for (int i = 0; i < 10; i++)
    assert_int_equal(rmx_send(cl.c, msg, sizeof(msg), cl_sent, &cl), 0);
  app_run(&a, 20000, &cl.recvs, 10, NULL);
  assert_int_equal(cl.bad, 0);
  /* The close, driven by the application's loop too. */
  assert_int_equal(rmx_conn_close(cl.c, cl_closed, &cl), 0);
  app_run(&a, 20000, &cl.closed, 1, NULL);
  app_run(&a, 20000, &s.closed, 1, NULL);
  assert_int_equal(cl.closed, 1);
  assert_int_equal(s.closed, 1);

  wakes = idle_second(&a); /* still listening, the connection gone */
  print_message("closed, listening: %ld wakes in 1 s\n", wakes);
  assert_true(wakes <= MAX_WAKES);
  server_stop(ctx, &s);
  wakes = idle_second(&a); /* nothing at all */
  print_message("closed, not listening: %ld wakes in 1 s\n", wakes);
  assert_true(wakes <= MAX_WAKES);
  post_wakes_the_sleeper(&a);
  queued_post_means_now(&a);
  app_free(&a);
  ctx_done(ctx);
}

/* A close whose peer never answers (its context is not run) ends at the
 * close timeout: the driver sleeps until then, not spinning and not for
 * good, and on_closed runs. */
static void a_close_to_a_silent_peer_wakes_at_its_deadline(void **state)
{
  rmx_config_t cfg;
  rmx_ctx_t *ctx, *peer = ctx_new(0);
  server_t s;
  client_t cl;
  int fired;
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.close_timeout_ms = 300;
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), 0);
  app_t a = app_new(ctx);
  server_start(peer, &s, SRV_SINK);
  client_connect(ctx, &cl, s.uri);
  while (!cl.connected || !s.accepted) {
    assert_true(rmx_ctx_progress(ctx) >= 0);
    uv_run(rmx_ctx_loop(peer), UV_RUN_NOWAIT);
  }
  assert_int_equal(cl.connect_status, 0);
  assert_int_equal(rmx_conn_close(cl.c, cl_closed, &cl), 0);
  long wakes = app_run(&a, 20000, &cl.closed, 1, &fired);
  print_message("close to a silent peer: %ld wakes\n", wakes);
  assert_false(fired);
  assert_int_equal(cl.closed, 1);
  assert_true(wakes <= MAX_WAKES);
  app_free(&a);
  ctx_done(ctx);
  server_stop(peer, &s);
  ctx_done(peer);
}

int main(int argc, char **argv)
{
  if (harness_args(argc, argv) != 0)
    return 2;
  alarm(120); /* a hang fails the run */
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(a_fresh_context_lets_its_driver_sleep),
    cmocka_unit_test(after_a_connection_closed_it_sleeps_again),
    cmocka_unit_test(a_close_to_a_silent_peer_wakes_at_its_deadline),
  };
  return cmocka_run_group_tests_name("wait-idle", tests, NULL, NULL);
}
