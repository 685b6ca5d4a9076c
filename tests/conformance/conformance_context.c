/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Conformance, the context: posts from other threads, a context in the
 * caller's loop, host names and IPv6, the device chosen by name.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>
#include <cmocka.h>

#include "conformance.h"

/* ---- the context ---- */

typedef struct posted {
  pthread_t owner;
  int count, wrong_thread;
} posted_t;

static void on_post(void *arg)
{
  posted_t *p = arg;
  if (!pthread_equal(pthread_self(), p->owner))
    p->wrong_thread++;
  p->count++;
}

typedef struct poster {
  rmx_ctx_t *ctx;
  posted_t *p;
} poster_t;

static void *post_thread(void *arg)
{
  poster_t *t = arg;
  for (int i = 0; i < 1000; i++)
    if (rmx_ctx_post(t->ctx, on_post, t->p) != 0)
      return (void *)1;
  return NULL;
}

static void *post_once(void *arg)
{
  poster_t *t = arg;
  return (void *)(intptr_t)rmx_ctx_post(t->ctx, on_post, t->p);
}

/* A post another thread made has run by the end of the next
 * rmx_ctx_progress, in every progress mode: a spinning caller does not
 * wait for the loop's periodic turn (RMX_PROGRESS=poll). */
void post_runs_at_next_progress(void **state)
{
  rmx_ctx_t *ctx = ctx_new(0);
  posted_t p = {.owner = pthread_self()};
  poster_t t = {ctx, &p};
  for (int round = 0; round < 50; round++) {
    int before = p.count;
    assert_int_equal(rmx_ctx_progress(ctx) >= 0, 1); /* a pass with nothing due */
    pthread_t th;
    void *ret;
    assert_int_equal(pthread_create(&th, NULL, post_once, &t), 0);
    assert_int_equal(pthread_join(th, &ret), 0); /* the post has returned */
    assert_null(ret);
    assert_int_equal(rmx_ctx_progress(ctx) >= 0, 1);
    assert_int_equal(p.count, before + 1);
  }
  assert_int_equal(p.wrong_thread, 0);
  ctx_done(ctx);
  (void)state;
}

void post_from_other_threads(void **state)
{
  rmx_ctx_t *ctx = ctx_new(0);
  posted_t p = {.owner = pthread_self()};
  poster_t t = {ctx, &p};
  pthread_t th[4];
  void *ret;
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&th[i], NULL, post_thread, &t), 0);
  /* the async handle alone does not keep the loop alive: keep it awake */
  uv_timer_t keep;
  uv_timer_init(rmx_ctx_loop(ctx), &keep);
  uv_timer_start(&keep, (uv_timer_cb)(void (*)(void))abort, 600000, 0);
  run_until(ctx, &p.count, 4000);
  uv_close((uv_handle_t *)&keep, NULL);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(pthread_join(th[i], &ret), 0);
    assert_null(ret);
  }
  assert_int_equal(p.count, 4000);
  assert_int_equal(p.wrong_thread, 0);
  ctx_done(ctx);
  (void)state;
}

void lives_in_callers_loop(void **state)
{
  uv_loop_t loop;
  rmx_ctx_t *ctx;
  server_t s;
  client_t cl;
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(rmx_ctx_create(&ctx, &loop, NULL), 0);
  assert_ptr_equal(rmx_ctx_loop(ctx), &loop);
  assert_int_equal(rmx_ctx_run(ctx), RMX_EINVAL); /* the caller runs its loop */
  server_start(ctx, &s, 1);
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  cl.expect_len = 5;
  pattern((uint8_t[5]){0}, 0, 0);
  uint8_t m[5];
  pattern(m, 5, 0);
  cl.expect_seed = 0;
  assert_int_equal(rmx_send(cl.c, m, 5, cl_sent, &cl), 0);
  run_until(ctx, &cl.recvs, 1);
  assert_int_equal(cl.bad, 0);
  client_close(ctx, &cl);
  server_stop(ctx, &s);
  assert_int_equal(rmx_ctx_destroy(ctx), 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0); /* nothing of rmx left in it */
}

/* Host names and IPv6 (TCP here: the SoftRoCE device has only IPv4). */
void names_and_ipv6(void **state)
{
  if (strcmp(scheme, "tcp") != 0 || peer_ctl)
    skip();
  rmx_ctx_t *ctx = ctx_new(0);
  rmx_listener_t *l;
  server_t s;
  client_t cl;
  char uri[128];
  memset(&s, 0, sizeof(s));
  s.echo = 1;
  assert_int_equal(rmx_listen(ctx, "tcp://[::1]:0", srv_accept, &s, &l), 0);
  s.l = l;
  assert_int_equal(rmx_listener_uri(l, s.uri, sizeof(s.uri)), 0);
  assert_non_null(strstr(s.uri, "tcp://[::1]:"));
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  assert_int_equal(cl.connect_status, 0);
  client_close(ctx, &cl);
  server_stop(ctx, &s);
  /* a name: "localhost" on an IPv4 listener */
  server_start(ctx, &s, 1);
  snprintf(uri, sizeof(uri), "tcp://localhost:%s", strrchr(s.uri, ':') + 1);
  if (strcmp(addr, "127.0.0.1") == 0) {
    client_connect(ctx, &cl, uri);
    run_until(ctx, &cl.connected, 1);
    assert_int_equal(cl.connect_status, 0);
    client_close(ctx, &cl);
  }
  server_stop(ctx, &s);
  ctx_done(ctx);
}

/* RMX_DEVICE: a wrong name is refused clearly; the right one works. */
void device_choice(void **state)
{
  const char *dev = getenv("RXE_VM_DEV");
  if (strcmp(scheme, "rdma") != 0 || !dev || peer_ctl)
    skip();
  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  char uri[128];
  uri_for(uri, sizeof(uri), 0);
  assert_int_equal(rmx_config_init(&cfg), 0);
  snprintf(cfg.device, sizeof(cfg.device), "no-such-device");
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), 0);
  assert_int_equal(rmx_listen(ctx, uri, srv_accept, NULL, &l), RMX_ENODEV);
  ctx_done(ctx);
  snprintf(cfg.device, sizeof(cfg.device), "%s", dev);
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), 0);
  server_t s;
  client_t cl;
  memset(&s, 0, sizeof(s));
  assert_int_equal(rmx_listen(ctx, uri, srv_accept, &s, &s.l), 0);
  assert_int_equal(rmx_listener_uri(s.l, s.uri, sizeof(s.uri)), 0);
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  assert_int_equal(cl.connect_status, 0);
  client_close(ctx, &cl);
  server_stop(ctx, &s);
  ctx_done(ctx);
}
