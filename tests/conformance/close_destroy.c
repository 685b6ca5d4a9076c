/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Closing and destroying never wait on a peer forever, and destroy never
 * runs the caller's loop. The peer that stops reading is a raw socket in a
 * helper thread: it completes the TCP handshake (docs/protocol.md), offers
 * big receive buffers, then never reads again, so the server's writes
 * stall in the kernel; in one case it keeps sending CREDIT frames, so only
 * the kernel's timeout ends the connection. Every callback is counted:
 * exactly once each, and nothing after on_closed. A thread that posts
 * across destroy (in each of its three modes) is refused from destroy's
 * start, and every post it had made runs exactly once.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include <rmx/rmx.h>

#define MSG (1000u << 10) /* one eager frame each, with 1 MiB buffers */
#define NMSG 48           /* far more than loopback socket buffers hold */

typedef struct world {
  rmx_ctx_t *ctx;
  uv_loop_t *loop; /* the caller's, or the context's own */
  rmx_listener_t *l;
  int port;
  rmx_conn_t *c; /* the accepted connection */
  int accepted, sent_ok, sent_err, closed, disconnects, disconnect_status, after_closed;
  int talk;      /* the raw peer sends a CREDIT frame every 100 ms (and still never reads) */
  int peer_up;   /* the raw peer finished its handshake */
  int peer_quit; /* tells the raw peer to go */
  pthread_t th;
  uint8_t *msg;
} world_t;

static world_t W;
static unsigned close_ms = 300; /* the close timeout world_up gives the context */

static void put32(uint8_t *p, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
  put32(p, (uint32_t)v);
  put32(p + 4, (uint32_t)(v >> 32));
}

/* A handshake as docs/protocol.md describes it, then silence. */
static void *stalled_peer(void *arg)
{
  world_t *w = arg;
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)w->port)};
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  uint8_t f[8 + 32] = {0}, *h = f + 8;
  put32(f, 32);
  f[4] = 1;                  /* HELLO */
  put32(h, 0x31584d52u);     /* magic */
  h[4] = 4;                  /* protocol version (docs/protocol.md) */
  put32(h + 8, 1u << 20);    /* eager size */
  put32(h + 12, 64);         /* receive depth */
  put64(h + 16, 1ull << 30); /* largest message */
  put32(h + 24, 0);          /* silence limit: none */
  put32(h + 28, 64);         /* remote window */
  assert_int_equal(write(fd, f, sizeof(f)), (ssize_t)sizeof(f));
  uint8_t ack[8 + 32];
  size_t got = 0;
  while (got < sizeof(ack)) {
    ssize_t n = read(fd, ack + got, sizeof(ack) - got);
    assert_true(n > 0);
    got += (size_t)n;
  }
  assert_int_equal(ack[4], 2); /* HELLO_ACK */
  __atomic_store_n(&w->peer_up, 1, __ATOMIC_SEQ_CST);
  static const uint8_t credit[8] = {0, 0, 0, 0, 16 + 4, 0, 0, 0}; /* CREDIT, 0 credits */
  for (int ms = 0; !__atomic_load_n(&w->peer_quit, __ATOMIC_SEQ_CST); ms++) {
    usleep(1000); /* never reads: the server's writes stall */
    if (w->talk && ms % 100 == 0 && write(fd, credit, sizeof(credit)) != sizeof(credit))
      break; /* the server has gone */
  }
  close(fd);
  return NULL;
}

static void on_sent(rmx_conn_t *c, int status, void *arg)
{
  world_t *w = arg;
  w->after_closed += w->closed;
  if (status)
    w->sent_err++;
  else
    w->sent_ok++;
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  world_t *w = arg;
  w->after_closed += w->closed;
  w->closed++;
}

static void on_disc(rmx_conn_t *c, int status, void *arg)
{
  world_t *w = arg;
  w->after_closed += w->closed;
  w->disconnects++;
  w->disconnect_status = status;
}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  world_t *w = arg;
  rmx_conn_cbs_t cbs = {.on_disconnect = on_disc};
  rmx_conn_set_cbs(c, &cbs, w);
  w->c = c;
  w->accepted++;
}

static void run_until(const int *counter, int want)
{
  while (__atomic_load_n(counter, __ATOMIC_SEQ_CST) < want)
    uv_run(W.loop, UV_RUN_ONCE);
}

/* A context (on loop, or its own), a listener, and a stalled peer whose
 * connection has NMSG big messages queued towards it. */
static void world_up2(uv_loop_t *loop, int talk)
{
  rmx_config_t cfg;
  char uri[128];
  memset(&W, 0, sizeof(W));
  W.talk = talk;
  alarm(60); /* a hang fails the test */
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.eager_size = 1u << 20;
  cfg.close_timeout_ms = close_ms;
  if (talk) { /* the kernel gives up on unacknowledged bytes after 1 s */
    cfg.keepalive_ms = 200;
    cfg.keepalive_timeout_ms = 1000;
    cfg.progress = RMX_PROGRESS_POLL;
  }
  assert_int_equal(rmx_ctx_create(&W.ctx, loop, &cfg), 0);
  W.loop = rmx_ctx_loop(W.ctx);
  assert_int_equal(rmx_listen(W.ctx, "tcp://127.0.0.1:0", on_accept, &W, &W.l), 0);
  assert_int_equal(rmx_listener_uri(W.l, uri, sizeof(uri)), 0);
  W.port = atoi(strrchr(uri, ':') + 1);
  assert_int_equal(pthread_create(&W.th, NULL, stalled_peer, &W), 0);
  run_until(&W.accepted, 1);
  while (!__atomic_load_n(&W.peer_up, __ATOMIC_SEQ_CST))
    uv_run(W.loop, UV_RUN_NOWAIT);
  W.msg = calloc(1, MSG);
  for (int i = 0; i < NMSG; i++)
    assert_int_equal(rmx_send(W.c, W.msg, MSG, on_sent, &W), 0);
  /* let the kernel take what it will */
  for (int i = 0; i < 50; i++)
    uv_run(W.loop, UV_RUN_NOWAIT);
  assert_true(W.sent_ok < NMSG); /* the peer really stalls us */
}

static void world_up(uv_loop_t *loop) { world_up2(loop, 0); }

static void world_down(void)
{
  __atomic_store_n(&W.peer_quit, 1, __ATOMIC_SEQ_CST);
  pthread_join(W.th, NULL);
  free(W.msg);
  alarm(0);
}

/* Every send ended once, on_closed once, nothing after it. */
static void check_ended(void)
{
  assert_int_equal(W.sent_ok + W.sent_err, NMSG);
  assert_true(W.sent_err > 0);
  assert_int_equal(W.closed, 1);
  assert_int_equal(W.after_closed, 0);
  assert_int_equal(W.disconnects, 0); /* closed by us: on_closed, not on_disconnect */
}

static void close_is_bounded_when_the_peer_stops_reading(void **state)
{
  world_up(NULL);
  assert_int_equal(rmx_conn_close(W.c, on_closed, &W), 0);
  run_until(&W.closed, 1);
  check_ended();
  rmx_listener_close(W.l);
  assert_int_equal(rmx_ctx_destroy(W.ctx), 0);
  world_down();
}

/* Destroy right after close: it finishes the close (within the timeout). */
static void destroy_is_bounded_when_the_peer_stops_reading(void **state)
{
  world_up(NULL);
  assert_int_equal(rmx_conn_close(W.c, on_closed, &W), 0);
  rmx_listener_close(W.l);
  assert_int_equal(rmx_ctx_destroy(W.ctx), 0);
  check_ended();
  world_down();
}

/* A peer that keeps talking but never reads: our bytes wait with its
 * window shut, and the connection ends with RMX_ETIMEDOUT after
 * keepalive_timeout_ms (the keepalive finds bytes the peer took none of;
 * Linux 6.x's TCP_USER_TIMEOUT spares a peer that sends). Under poll progress the
 * busy-poll read of this connection, which the peer's frames keep the
 * hot one, may be the call that takes the socket's error: the cause must
 * still come through, not a reset. Which call finds it varies: rounds. */
static void peer_that_stops_reading_times_out(void **state)
{
  for (int round = 0; round < 6; round++) {
    world_up2(NULL, 1);
    run_until(&W.disconnects, 1);
    assert_int_equal(W.disconnect_status, RMX_ETIMEDOUT);
    assert_int_equal(rmx_conn_close(W.c, on_closed, &W), 0);
    run_until(&W.closed, 1);
    assert_int_equal(W.sent_ok + W.sent_err, NMSG);
    assert_true(W.sent_err > 0);
    assert_int_equal(W.disconnects, 1);
    assert_int_equal(W.after_closed, 0);
    rmx_listener_close(W.l);
    assert_int_equal(rmx_ctx_destroy(W.ctx), 0);
    world_down();
  }
}

/* ---- destroy never runs the caller's loop ---- */

static int in_destroy, ran_in_destroy;
static void check_cb(uv_check_t *h) { ran_in_destroy += in_destroy; }

static void destroy_never_runs_the_callers_loop(void **state)
{
  uv_loop_t loop;
  uv_check_t check;
  assert_int_equal(uv_loop_init(&loop), 0);
  uv_check_init(&loop, &check);
  uv_check_start(&check, check_cb);
  uv_unref((uv_handle_t *)&check);
  world_up(&loop);
  assert_int_equal(rmx_conn_close(W.c, on_closed, &W), 0);
  rmx_listener_close(W.l);
  in_destroy = 1;
  assert_int_equal(rmx_ctx_destroy(W.ctx), 0);
  in_destroy = 0;
  assert_int_equal(ran_in_destroy, 0);
  assert_int_equal(W.closed, 0); /* on_closed comes from the loop, later */
  uv_run(&loop, UV_RUN_DEFAULT);  /* returns once the context is gone */
  check_ended();
  uv_close((uv_handle_t *)&check, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0); /* nothing of rmx is left on it */
  world_down();
}

/* ---- destroy from inside a callback of rmx_ctx_run ---- */

static void destroy_in_on_closed(rmx_conn_t *c, void *arg)
{
  on_closed(c, arg);
  assert_int_equal(rmx_ctx_destroy(W.ctx), 0);
  assert_int_equal(rmx_ctx_destroy(W.ctx), RMX_EALREADY);
}

static void close_in_timer(uv_timer_t *t)
{
  rmx_listener_close(W.l);
  assert_int_equal(rmx_conn_close(W.c, destroy_in_on_closed, &W), 0);
  uv_close((uv_handle_t *)t, NULL);
}

static void destroy_from_a_callback_inside_run(void **state)
{
  uv_timer_t t;
  world_up(NULL);
  uv_timer_init(W.loop, &t);
  uv_timer_start(&t, close_in_timer, 1, 0);
  assert_int_equal(rmx_ctx_run(W.ctx), 0); /* returns with the context destroyed */
  check_ended();
  world_down();
}

/* ---- a request its handler never answers does not keep destroy waiting ---- */

static rmx_rpc_req_t *held_req;
static int nheld;
static int held_calls_ended, held_client_closed;

static void hold_handler(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  held_req = req; /* never answered */
  nheld++;
}

static void held_reply(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  held_calls_ended++;
}

static void held_client_on_closed(rmx_conn_t *c, void *arg) { held_client_closed++; }

static void held_connected(rmx_conn_t *c, int status, void *arg)
{
  assert_int_equal(status, 0);
  assert_int_equal(rmx_rpc_call(c, 9, "q", 1, 0, held_reply, NULL, NULL), 0);
}

static rmx_conn_t *held_srv[4];
static void hold_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg) { held_srv[W.accepted++] = c; }

/* n connections, each with a request its handler never answers (two once
 * made destroy spin: each connection's release waited behind the other's). */
static int plain_connected;
static void held_connected_plain(rmx_conn_t *c, int status, void *arg)
{
  assert_int_equal(status, 0);
  plain_connected = 1;
}

static void destroy_with_unanswered_requests(int n)
{
  rmx_conn_t *cl[4];
  char uri[128];
  memset(&W, 0, sizeof(W));
  held_req = NULL;
  nheld = held_calls_ended = held_client_closed = 0;
  alarm(60);
  assert_int_equal(rmx_ctx_create(&W.ctx, NULL, NULL), 0);
  W.loop = rmx_ctx_loop(W.ctx);
  assert_int_equal(rmx_rpc_register(W.ctx, 9, hold_handler, NULL), 0);
  assert_int_equal(rmx_listen(W.ctx, "tcp://127.0.0.1:0", hold_accept, &W, &W.l), 0);
  assert_int_equal(rmx_listener_uri(W.l, uri, sizeof(uri)), 0);
  for (int i = 0; i < n; i++)
    assert_int_equal(rmx_connect(W.ctx, uri, held_connected, NULL, &cl[i]), 0);
  while (nheld < n)
    uv_run(W.loop, UV_RUN_ONCE);
  for (int i = 0; i < n; i++) {
    assert_int_equal(rmx_conn_close(cl[i], held_client_on_closed, NULL), 0);
    assert_int_equal(rmx_conn_close(held_srv[i], on_closed, &W), 0);
  }
  rmx_listener_close(W.l);
  assert_int_equal(rmx_ctx_destroy(W.ctx), 0); /* returns: LSan checks nothing leaked */
  assert_int_equal(held_calls_ended, n);
  assert_int_equal(held_client_closed, n);
  assert_int_equal(W.closed, n);
  if (n == 1) /* W tracks "after on_closed" for one connection */
    assert_int_equal(W.after_closed, 0);
  alarm(0);
}

static void destroy_with_an_unanswered_request(void **state)
{
  destroy_with_unanswered_requests(1);
}

static void destroy_with_unanswered_requests_on_two_connections(void **state)
{
  destroy_with_unanswered_requests(2);
}

/* ---- the application runs the private loop itself (uv_run) ---- */

static int self_destroy_rc = 1;
static void self_run_on_closed(rmx_conn_t *c, void *arg)
{
  on_closed(c, arg);
  self_destroy_rc = rmx_ctx_destroy(W.ctx); /* would run the loop it is inside */
}

static void destroy_from_a_callback_of_a_self_run_loop_is_refused(void **state)
{
  rmx_conn_t *cl;
  char uri[128];
  memset(&W, 0, sizeof(W));
  alarm(60);
  assert_int_equal(rmx_ctx_create(&W.ctx, NULL, NULL), 0);
  W.loop = rmx_ctx_loop(W.ctx);
  assert_int_equal(rmx_listen(W.ctx, "tcp://127.0.0.1:0", on_accept, &W, &W.l), 0);
  assert_int_equal(rmx_listener_uri(W.l, uri, sizeof(uri)), 0);
  assert_int_equal(rmx_connect(W.ctx, uri, held_connected_plain, NULL, &cl), 0);
  plain_connected = 0;
  while (!W.accepted || !plain_connected)
    uv_run(W.loop, UV_RUN_ONCE);
  rmx_listener_close(W.l);
  assert_int_equal(rmx_conn_close(W.c, NULL, NULL), 0);
  assert_int_equal(rmx_conn_close(cl, self_run_on_closed, &W), 0);
  while (!W.closed)
    uv_run(W.loop, UV_RUN_ONCE);
  assert_int_equal(self_destroy_rc, RMX_EBUSY); /* refused, nothing freed under us */
  assert_int_equal(rmx_ctx_destroy(W.ctx), 0); /* outside the loop: fine */
  alarm(0);
}

/* ---- a thread posts across destroy ----
 *
 * It posts in a tight loop (at most BACKLOG waiting before destroy, so
 * memory stays bounded) and stops at its first RMX_ECANCELED, as rmx.h
 * tells it to. Destroy refuses from its start: the poster sees the refusal
 * while the stalled connection's close is still in flight (its on_closed
 * not run), and only then lets the peer go, which ends that close; with a
 * close timeout of 20 s nothing else ends it sooner. Every post accepted
 * runs exactly once. CAP stops a poster that is never refused.
 */
#define BACKLOG 10000
#define CAP 1000000

static struct {
  pthread_t th;
  long accepted, runs;
  int destroy_began, closed, canceled, closed_when_canceled, other_rc;
  long trigger_at; /* post destroy_in_post once this many were accepted */
} P;

static void post_run(void *arg) { __atomic_add_fetch(&P.runs, 1, __ATOMIC_SEQ_CST); }

static void post_on_closed(rmx_conn_t *c, void *arg)
{
  on_closed(c, arg);
  __atomic_store_n(&P.closed, 1, __ATOMIC_SEQ_CST);
}

/* Destroy from a callback under rmx_ctx_run: here a post. */
static void destroy_in_post(void *arg)
{
  post_run(arg);
  rmx_listener_close(W.l);
  assert_int_equal(rmx_conn_close(W.c, post_on_closed, &W), 0);
  __atomic_store_n(&P.destroy_began, 1, __ATOMIC_SEQ_CST);
  assert_int_equal(rmx_ctx_destroy(W.ctx), 0);
  assert_int_equal(rmx_ctx_post(W.ctx, post_run, NULL), RMX_ECANCELED);
}

static void *poster(void *arg)
{
  rmx_ctx_t *ctx = arg;
  for (long n = 0;;) {
    if (n - __atomic_load_n(&P.runs, __ATOMIC_SEQ_CST) >= BACKLOG &&
        !__atomic_load_n(&P.destroy_began, __ATOMIC_SEQ_CST)) {
      sched_yield();
      continue;
    }
    if (n >= CAP)
      break; /* never refused */
    int rc = rmx_ctx_post(ctx, n == P.trigger_at ? destroy_in_post : post_run, NULL);
    if (rc == RMX_ECANCELED) {
      P.closed_when_canceled = __atomic_load_n(&P.closed, __ATOMIC_SEQ_CST);
      P.canceled = 1;
      break; /* and never call again */
    }
    if (rc != 0) {
      P.other_rc = rc;
      break;
    }
    __atomic_store_n(&P.accepted, ++n, __ATOMIC_SEQ_CST);
  }
  __atomic_store_n(&W.peer_quit, 1, __ATOMIC_SEQ_CST); /* the close can end now */
  return NULL;
}

static void poster_start(long trigger_at)
{
  memset(&P, 0, sizeof(P));
  P.trigger_at = trigger_at;
  assert_int_equal(pthread_create(&P.th, NULL, poster, W.ctx), 0);
}

/* The poster is joined; check what it saw and that every post ran once. */
static void poster_check(void)
{
  assert_int_equal(pthread_join(P.th, NULL), 0);
  assert_int_equal(P.other_rc, 0);
  assert_int_equal(P.canceled, 1);
  assert_int_equal(P.closed_when_canceled, 0); /* refused from destroy's start */
  assert_true(P.accepted > 0);
  assert_int_equal(P.runs, P.accepted);
  check_ended();
}

static void destroy_now(void)
{
  assert_int_equal(rmx_conn_close(W.c, post_on_closed, &W), 0);
  rmx_listener_close(W.l);
  __atomic_store_n(&P.destroy_began, 1, __ATOMIC_SEQ_CST);
  assert_int_equal(rmx_ctx_destroy(W.ctx), 0);
}

/* Private loop, destroy outside rmx_ctx_run: it returns with the context
 * freed, which it does only after the close, so after the refusal. */
static void posts_across_destroy(void **state)
{
  close_ms = 20000;
  world_up(NULL);
  poster_start(-1);
  while (__atomic_load_n(&P.accepted, __ATOMIC_SEQ_CST) < BACKLOG / 2)
    sched_yield();
  destroy_now();
  poster_check();
  world_down();
  close_ms = 300;
}

/* Destroy from a post under rmx_ctx_run, with the poster still posting:
 * rmx_ctx_run returns with the context freed. */
static void posts_across_destroy_from_a_callback(void **state)
{
  close_ms = 20000;
  world_up(NULL);
  poster_start(1000);
  assert_int_equal(rmx_ctx_run(W.ctx), 0);
  poster_check();
  world_down();
  close_ms = 300;
}

/* The caller's loop: destroy returns at once, and the context is freed
 * while the loop runs on; the poster is joined before that. */
static void posts_across_destroy_on_the_callers_loop(void **state)
{
  uv_loop_t loop;
  close_ms = 20000;
  assert_int_equal(uv_loop_init(&loop), 0);
  world_up(&loop);
  poster_start(-1);
  while (__atomic_load_n(&P.accepted, __ATOMIC_SEQ_CST) < BACKLOG / 2)
    sched_yield();
  destroy_now();
  assert_int_equal(pthread_join(P.th, NULL), 0); /* refused at once */
  assert_int_equal(P.canceled, 1);
  uv_run(&loop, UV_RUN_DEFAULT); /* returns once the context is gone */
  assert_int_equal(P.runs, P.accepted);
  assert_int_equal(P.other_rc, 0);
  assert_int_equal(P.closed_when_canceled, 0);
  check_ended();
  assert_int_equal(uv_loop_close(&loop), 0);
  world_down();
  close_ms = 300;
}

/* Posts accepted but not yet run when destroy finds nothing to wait for
 * (no connection): they run once all the same, on either loop. */
static void posts_queued_at_destroy_run_once(void **state)
{
  for (int callers = 0; callers < 2; callers++) {
    uv_loop_t loop;
    rmx_ctx_t *ctx;
    memset(&P, 0, sizeof(P));
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(rmx_ctx_create(&ctx, callers ? &loop : NULL, NULL), 0);
    for (int i = 0; i < 100; i++)
      assert_int_equal(rmx_ctx_post(ctx, post_run, NULL), 0);
    assert_int_equal(rmx_ctx_destroy(ctx), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    assert_int_equal(P.runs, 100);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(close_is_bounded_when_the_peer_stops_reading),
    cmocka_unit_test(destroy_is_bounded_when_the_peer_stops_reading),
    cmocka_unit_test(peer_that_stops_reading_times_out),
    cmocka_unit_test(destroy_never_runs_the_callers_loop),
    cmocka_unit_test(destroy_from_a_callback_inside_run),
    cmocka_unit_test(destroy_with_an_unanswered_request),
    cmocka_unit_test(destroy_with_unanswered_requests_on_two_connections),
    cmocka_unit_test(destroy_from_a_callback_of_a_self_run_loop_is_refused),
    cmocka_unit_test(posts_across_destroy),
    cmocka_unit_test(posts_across_destroy_from_a_callback),
    cmocka_unit_test(posts_across_destroy_on_the_callers_loop),
    cmocka_unit_test(posts_queued_at_destroy_run_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
