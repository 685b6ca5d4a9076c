/* SPDX-License-Identifier: BSD-3-Clause */
/* The fast-path cases (fastpath.h): each spins on rmx_ctx_progress. */
#include <pthread.h>
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

#include "fastpath.h"
#include "harness.h"
#include "spin.h"

static const int ONLY_OK[] = {0};                      /* status 0 alone */
static const int CANCELED[] = {RMX_ECANCELED, 0};      /* a local close */

static int all_fired(const fp_end_t *e) { return e->sent_ok + e->sent_err >= e->nsends; }

static void close_both(fp_world_t *w, fp_end_t *a, fp_end_t *b)
{
  fp_close(a);
  fp_close(b);
  FP_SPIN_UNTIL(w, a->closed && b->closed);
  fp_spin_ms(w, 20); /* anything owed after on_closed would come now */
}

/* Close both ends of a run where nothing may fail, check, and free. */
static void finish_clean(fp_world_t *w, fp_end_t *cl, fp_end_t *sv)
{
  close_both(w, cl, sv);
  fp_check_end(cl, ONLY_OK, "client");
  fp_check_end(sv, ONLY_OK, "server");
  fp_world_down(w);
  fp_end_free(cl);
  fp_end_free(sv);
}

/* cl connects to w's listener, which accepts into sv. */
static void connect_pair(fp_world_t *w, fp_end_t *cl, fp_end_t *sv)
{
  w->accept_into = sv;
  fp_connect(w, cl, w->uri);
  FP_SPIN_UNTIL(w, sv->connected);
}

/* Connected, both ends post n messages each, in one go. */
static void connect_and_burst(fp_world_t *w, fp_end_t *cl, fp_end_t *sv, int n)
{
  connect_pair(w, cl, sv);
  for (int i = 0; i < n; i++) {
    assert_int_equal(fp_send_next(cl), 0);
    assert_int_equal(fp_send_next(sv), 0);
  }
}

/* ---- a. order: eager and rendezvous interleaved, both ways ---- */

static void ordering_body(uv_loop_t *callers)
{
  enum { N = 320 }; /* 20 of 1 MiB and 20 of 64 KiB each way */
  fp_world_t w;
  fp_end_t cl, sv;
  fp_world_up(&w, NULL, callers);
  fp_end_init(&cl, N, fp_size_mixed);
  fp_end_init(&sv, N, fp_size_mixed);
  connect_and_burst(&w, &cl, &sv, N);
  FP_SPIN_UNTIL(&w, cl.recvs >= N && sv.recvs >= N && all_fired(&cl) && all_fired(&sv));
  fp_spin_ms(&w, 20);
  assert_int_equal(cl.recvs, N);
  assert_int_equal(sv.recvs, N);
  assert_int_equal(cl.sent_ok, N);
  assert_int_equal(sv.sent_ok, N);
  assert_int_equal(cl.disconnects + sv.disconnects, 0);
  finish_clean(&w, &cl, &sv);
}

void ordering_eager_and_rendezvous(void **state)
{
  (void)state;
  ordering_body(NULL);
}

/* The same with the context on the caller's loop: rmx_ctx_progress, then
 * uv_run(UV_RUN_NOWAIT) by the caller, alternately (spin_once). */
void ordering_on_callers_loop(void **state)
{
  uv_loop_t loop;
  rmx_ctx_t *ctx;
  (void)state;
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(rmx_ctx_create(&ctx, &loop, NULL), 0);
  int rc = rmx_ctx_progress(ctx); /* accepted there: the fast path polls */
  assert_int_equal(rmx_ctx_destroy(ctx), 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_true(rc >= 0);
  ordering_body(&loop); /* closes the loop */
}

/* ---- b. credits exhausted mid-burst ---- */

void credits_exhausted_mid_burst(void **state)
{
  enum { N = 600, M = 200 }; /* sent in one go; sent from on_recv */
  rmx_config_t cfg;
  fp_world_t w;
  fp_end_t cl, sv;
  rmx_conn_stats_t a, b;
  (void)state;
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.rx_depth = 4; /* the fewest credits a connection may have */
  fp_world_up(&w, &cfg, NULL);
  fp_end_init(&cl, N + M + 1, fp_size_small);
  fp_end_init(&sv, N + M + 1, fp_size_small);
  sv.echo = 1;    /* every message back, sent from on_recv */
  cl.refill = M;  /* a new one for each of the first M echoes */
  connect_pair(&w, &cl, &sv);
  for (int i = 0; i < N; i++)
    assert_int_equal(fp_send_next(&cl), 0);
  FP_SPIN_UNTIL(&w, cl.recvs >= N + M && all_fired(&cl) && all_fired(&sv));
  fp_spin_ms(&w, 20);
  assert_int_equal(sv.recvs, N + M);
  assert_int_equal(cl.recvs, N + M);
  assert_int_equal(cl.sent_ok, N + M);
  assert_int_equal(sv.sent_ok, N + M);
  assert_int_equal(cl.bad + sv.bad, 0);
  assert_int_equal(cl.disconnects + sv.disconnects, 0);
  /* the case did what it says: sends waited for credits */
  rmx_conn_stats(cl.c, &a);
  rmx_conn_stats(sv.c, &b);
  assert_true(a.credit_stalls + b.credit_stalls > 0);
  /* and the connection is still up */
  assert_int_equal(fp_send_next(&cl), 0);
  FP_SPIN_UNTIL(&w, cl.recvs == N + M + 1 && all_fired(&cl) && all_fired(&sv));
  finish_clean(&w, &cl, &sv);
}

/* ---- c. a close, and a destroy, from callbacks the fast path runs ---- */

void close_from_recv_mid_burst(void **state)
{
  enum { N = 300 };
  fp_world_t w;
  fp_end_t cl, sv;
  (void)state;
  fp_world_up(&w, NULL, NULL);
  fp_end_init(&cl, N, fp_size_mixed);
  fp_end_init(&sv, N, fp_size_mixed);
  cl.close_at = 40;          /* rmx_conn_close from its 40th on_recv */
  sv.close_on_disconnect = 1;
  connect_and_burst(&w, &cl, &sv, N);
  FP_SPIN_UNTIL(&w, cl.closed && sv.closed);
  fp_spin_ms(&w, 50);
  assert_true(cl.recvs >= 40);
  assert_int_equal(cl.disconnects, 0); /* a local close is no disconnect */
  assert_int_equal(sv.disconnects, 1);
  assert_int_equal(sv.unfired_at_disc, 0);
  fp_check_end(&cl, CANCELED, "client (closed from on_recv)");
  fp_check_end(&sv, NULL, "server");
  fp_world_down(&w);
  fp_end_free(&cl);
  fp_end_free(&sv);
}

static struct {
  fp_world_t *w;
  fp_end_t *cl, *sv;
  int destroy_rc;
} D;

static void close_all_at_20(fp_end_t *e)
{
  if (e->recvs != 20)
    return;
  rmx_listener_close(D.w->l);
  D.w->l = NULL;
  fp_close(D.cl);
  fp_close(D.sv);
}

static void destroy_when_all_closed(fp_end_t *e)
{
  (void)e;
  if (!D.cl->closed || !D.sv->closed)
    return;
  D.destroy_rc = rmx_ctx_destroy(D.w->ctx);
  if (D.destroy_rc == 0)
    spin_destroy_called = fp_destroyed = 1;
}

void destroy_from_on_closed(void **state)
{
  enum { N = 200 };
  fp_world_t w;
  fp_end_t cl, sv;
  (void)state;
  fp_world_up(&w, NULL, NULL);
  fp_end_init(&cl, N, fp_size_mixed);
  fp_end_init(&sv, N, fp_size_mixed);
  D.w = &w;
  D.cl = &cl;
  D.sv = &sv;
  D.destroy_rc = 1;
  cl.recv_hook = close_all_at_20; /* both ends and the listener, mid-burst */
  cl.closed_hook = sv.closed_hook = destroy_when_all_closed;
  connect_and_burst(&w, &cl, &sv, N);
  /* spin_once fails the case unless the call whose callback destroyed the
   * context reports it gone */
  while (spin_once(w.ctx, NULL) != SPIN_GONE)
    ;
  assert_int_equal(D.destroy_rc, 0);
  assert_int_equal(fp_after_destroy, 0);
  assert_int_equal(cl.disconnects + sv.disconnects, 0);
  fp_check_end(&cl, CANCELED, "client");
  fp_check_end(&sv, CANCELED, "server");
  fp_end_free(&cl);
  fp_end_free(&sv);
}

/* ---- d. a peer lost in the middle of a batch ---- */

static pid_t burster;

static void kill_burster_at_100(fp_end_t *e)
{
  if (e->recvs == 100)
    assert_int_equal(kill(burster, SIGKILL), 0);
}

/* A child bursts mixed messages at us, 64 in flight, and we burst at it;
 * from inside on_recv, mid-batch, the child is killed. */
void peer_killed_mid_burst(void **state)
{
  enum { N = 200 };
  fp_world_t w;
  fp_end_t sv;
  int fd, status;
  (void)state;
  fp_world_up(&w, NULL, NULL);
  fp_end_init(&sv, N, fp_size_mixed);
  sv.close_on_disconnect = 1;
  sv.recv_hook = kill_burster_at_100;
  w.accept_into = &sv;
  burster = spawn("--burster", w.uri, &fd);
  FP_SPIN_UNTIL(&w, sv.connected);
  for (int i = 0; i < N; i++)
    assert_int_equal(fp_send_next(&sv), 0);
  FP_SPIN_UNTIL(&w, sv.closed);
  fp_spin_ms(&w, 50);
  assert_int_equal(waitpid(burster, &status, 0), burster);
  close(fd);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  assert_true(sv.recvs >= 100);
  assert_int_equal(sv.disconnects, 1);
  assert_true(sv.disc_status < 0); /* a loss, not a close */
  assert_int_equal(sv.unfired_at_disc, 0);
  fp_check_end(&sv, NULL, "server");
  fp_world_down(&w);
  fp_end_free(&sv);
}

/* The peer: a context of its own on its own thread, spinning too. It bursts
 * at us once connected and closes from its 60th on_recv, while we burst. */
typedef struct peer {
  fp_world_t w;
  fp_end_t e;
  volatile int ready;
  int err, timed_out, sent;
} peer_t;

static void *peer_main(void *arg)
{
  enum { N = 300 };
  peer_t *p = arg;
  uint64_t end = uv_hrtime() + 20000000000ull;
  p->w.accept_into = &p->e;
  p->e.close_at = 60;
  if ((p->err = rmx_ctx_create(&p->w.ctx, NULL, NULL)) != 0 || (p->err = fp_listen(&p->w)) != 0) {
    __atomic_store_n(&p->ready, 1, __ATOMIC_RELEASE);
    return NULL;
  }
  __atomic_store_n(&p->ready, 1, __ATOMIC_RELEASE);
  while (!(p->e.closed && all_fired(&p->e))) {
    int rc = rmx_ctx_progress(p->w.ctx);
    if (rc < 0) {
      p->err = rc;
      return NULL; /* the context is left: the case fails */
    }
    if (p->e.connected && !p->sent) {
      p->sent = 1;
      for (int i = 0; i < N && !p->err; i++)
        p->err = fp_send_next(&p->e);
    }
    if (uv_hrtime() > end) {
      p->timed_out = 1;
      return NULL;
    }
  }
  end = uv_hrtime() + 50000000ull;
  while (uv_hrtime() < end && !p->err)
    if (rmx_ctx_progress(p->w.ctx) < 0)
      p->err = 1;
  rmx_listener_close(p->w.l);
  p->err = p->err ? p->err : rmx_ctx_destroy(p->w.ctx);
  return NULL;
}

void peer_closes_mid_burst(void **state)
{
  enum { N = 400 };
  fp_world_t w;
  fp_end_t cl;
  pthread_t th;
  static peer_t p;
  (void)state;
  memset(&p, 0, sizeof(p));
  fp_end_init(&p.e, 300, fp_size_mixed);
  fp_world_up(&w, NULL, NULL);
  fp_end_init(&cl, N, fp_size_mixed);
  cl.close_on_disconnect = 1;
  assert_int_equal(pthread_create(&th, NULL, peer_main, &p), 0);
  while (!__atomic_load_n(&p.ready, __ATOMIC_ACQUIRE))
    usleep(1000);
  assert_int_equal(p.err, 0);
  fp_connect(&w, &cl, p.w.uri);
  for (int i = 0; i < N; i++)
    assert_int_equal(fp_send_next(&cl), 0);
  FP_SPIN_UNTIL(&w, cl.closed);
  fp_spin_ms(&w, 50);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(p.err, 0);
  assert_int_equal(p.timed_out, 0);
  assert_int_equal(cl.disconnects, 1);
  assert_int_equal(cl.unfired_at_disc, 0);
  fp_check_end(&cl, NULL, "this side");
  assert_true(p.e.recvs >= 60);
  assert_int_equal(p.e.disconnects, 0);
  fp_check_end(&p.e, CANCELED, "the peer (closed from on_recv)");
  fp_world_down(&w);
  fp_end_free(&cl);
  fp_end_free(&p.e);
}
