/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reconnect (rmx_connect_opts_t, docs/reliability.md). A server context and
 * a client context share one loop; the server goes away and comes back on
 * the same port. Every callback is counted: on_connected once, on_disconnect
 * once per loss, on_reconnect once per attempt with consecutive numbers,
 * exactly one success per loss, nothing after on_closed; what was in flight
 * at the loss fails and is never delivered afterwards.
 *
 *   rmx-reconnect tcp|rdma
 */
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

static const char *scheme = "tcp", *addr = "127.0.0.1";
static uv_loop_t loop;

#define H_HOLD 7 /* an RPC handler that keeps its request unanswered */

typedef struct world {
  rmx_ctx_t *sctx, *cctx;
  rmx_listener_t *l;
  int port;
  rmx_conn_t *sc, *cc; /* the server's side (latest), the client */
  int accepted, srecvd, sheld;
  int connected, conn_status, disconnects, disc_status, crecvd;
  int attempts, last_attempt, successes, fails, attempt_gap;
  int sent_ok, sent_err, replies, reply_err, closed, after_closed;
  rmx_rpc_req_t *held;  /* a request the client's handler kept */
  int close_in;         /* CLOSE_IN_*: where the client closes itself */
  int send_on_resume;   /* rmx_send from on_reconnect(0) */
  int close_called;
} world_t;

enum { CLOSE_IN_NONE, CLOSE_IN_DISCONNECT, CLOSE_IN_FAILED_ATTEMPT, CLOSE_IN_RESUME };

static world_t W;

static void wait_for(const int *counter, int want)
{
  while (*counter < want)
    uv_run(&loop, UV_RUN_ONCE);
}

static void tick_cb(uv_timer_t *t) { *(int *)t->data = 1; }

static void run_for(unsigned ms)
{
  uv_timer_t t;
  int done = 0;
  uv_timer_init(&loop, &t);
  t.data = &done;
  uv_timer_start(&t, tick_cb, ms, 0);
  wait_for(&done, 1);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(&loop, UV_RUN_NOWAIT);
}

/* ---- server ---- */

static void s_recv(rmx_conn_t *c, const void *d, size_t n, void *arg) { W.srecvd++; }

static void s_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  W.sc = c;
  W.accepted++;
  rmx_conn_set_cbs(c, &(rmx_conn_cbs_t){.on_recv = s_recv}, NULL);
}

static void s_hold(rmx_rpc_req_t *req, const void *d, size_t n, void *arg)
{
  W.sheld++; /* never answered: the caller's call is in flight at the loss */
}

static void s_closed(rmx_conn_t *c, void *arg) {}

static void s_reply(rmx_conn_t *c, int status, const void *d, size_t n, void *arg) {}

/* The server's address: its port over tcp and rdma (0 the first time: any
 * free one); over shm an abstract name of this run's, the same each time. */
static void server_uri(char *uri, size_t len)
{
  if (strcmp(scheme, "shm") == 0)
    snprintf(uri, len, "shm://@rmx-reconnect-%d", (int)getpid());
  else
    snprintf(uri, len, "%s://%s:%d", scheme, addr, W.port);
}

static void server_listen(void)
{
  char uri[128], got[128];
  server_uri(uri, sizeof(uri));
  assert_int_equal(rmx_listen(W.sctx, uri, s_accept, NULL, &W.l), 0);
  assert_int_equal(rmx_listener_uri(W.l, got, sizeof(got)), 0);
  if (strcmp(scheme, "shm") != 0)
    W.port = atoi(strrchr(got, ':') + 1);
}

/* The server goes away: its listener, then its connection (the client
 * sees a close on purpose: on_disconnect(0)). */
static void server_away(void)
{
  rmx_listener_close(W.l);
  W.l = NULL;
  if (W.sc)
    assert_int_equal(rmx_conn_close(W.sc, s_closed, NULL), 0);
  W.sc = NULL;
}

/* ---- client ---- */

static void c_connected(rmx_conn_t *c, int status, void *arg)
{
  W.after_closed += W.closed;
  W.connected++;
  W.conn_status = status;
}

static void c_closed(rmx_conn_t *c, void *arg);
static void c_sent(rmx_conn_t *c, int status, void *arg);

static void close_here(rmx_conn_t *c, int where)
{
  if (W.close_in != where)
    return;
  assert_int_equal(rmx_conn_close(c, c_closed, NULL), 0);
  W.close_called = 1;
  assert_int_equal(W.closed, 0); /* never from inside the call */
}

static void c_disc(rmx_conn_t *c, int status, void *arg)
{
  W.after_closed += W.closed;
  W.disconnects++;
  W.disc_status = status;
  close_here(c, CLOSE_IN_DISCONNECT);
}

static void c_recv(rmx_conn_t *c, const void *d, size_t n, void *arg)
{
  W.after_closed += W.closed;
  W.crecvd++;
}

static void c_reconnect(rmx_conn_t *c, unsigned attempt, int status, void *arg)
{
  W.after_closed += W.closed;
  W.attempts++;
  W.attempt_gap += (int)attempt != W.last_attempt + 1; /* numbered 1, 2, ... per loss */
  W.last_attempt = status == 0 ? 0 : (int)attempt;
  if (status == 0)
    W.successes++;
  else
    W.fails++;
  if (status == 0 && W.send_on_resume)
    assert_int_equal(rmx_send(c, "resumed", 7, c_sent, NULL), 0);
  close_here(c, status == 0 ? CLOSE_IN_RESUME : CLOSE_IN_FAILED_ATTEMPT);
}

static void c_sent(rmx_conn_t *c, int status, void *arg)
{
  W.after_closed += W.closed;
  if (status == 0)
    W.sent_ok++;
  else
    W.sent_err++;
}

static void c_reply(rmx_conn_t *c, int status, const void *d, size_t n, void *arg)
{
  W.after_closed += W.closed;
  W.replies++;
  W.reply_err += status != 0;
}

static void c_closed(rmx_conn_t *c, void *arg)
{
  W.after_closed += W.closed;
  W.closed++;
}

static void c_hold(rmx_rpc_req_t *req, const void *d, size_t n, void *arg) { W.held = req; }

static int client_connect(unsigned min_ms, unsigned max_ms, unsigned tries)
{
  char uri[128];
  rmx_connect_opts_t o = {.size = sizeof(o), .reconnect_min_ms = min_ms,
                          .reconnect_max_ms = max_ms, .reconnect_tries = tries,
                          .on_reconnect = c_reconnect};
  server_uri(uri, sizeof(uri));
  int rc = rmx_connect_opts(W.cctx, uri, &o, c_connected, NULL, &W.cc);
  if (rc == 0)
    rmx_conn_set_cbs(W.cc, &(rmx_conn_cbs_t){.on_recv = c_recv, .on_disconnect = c_disc}, NULL);
  return rc;
}

static void world_up(void)
{
  rmx_config_t cfg;
  memset(&W, 0, sizeof(W));
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.close_timeout_ms = 1000;
  assert_int_equal(rmx_ctx_create(&W.sctx, &loop, &cfg), 0);
  assert_int_equal(rmx_ctx_create(&W.cctx, &loop, &cfg), 0);
  assert_int_equal(rmx_rpc_register(W.sctx, H_HOLD, s_hold, NULL), 0);
  assert_int_equal(rmx_rpc_register(W.cctx, H_HOLD, c_hold, NULL), 0);
  server_listen();
}

/* linger_ms: run the loop that long after on_closed (a retry that was not
 * stopped would fire then). */
static void world_down_after(unsigned linger_ms)
{
  if (W.l)
    rmx_listener_close(W.l);
  if (W.sc)
    assert_int_equal(rmx_conn_close(W.sc, s_closed, NULL), 0);
  if (!W.close_called)
    assert_int_equal(rmx_conn_close(W.cc, c_closed, NULL), 0);
  wait_for(&W.closed, 1);
  run_for(linger_ms);
  assert_int_equal(W.closed, 1);
  assert_int_equal(W.after_closed, 0);
  assert_int_equal(rmx_ctx_destroy(W.cctx), 0);
  assert_int_equal(rmx_ctx_destroy(W.sctx), 0);
}

static void world_down(void) { world_down_after(50); }

/* The server leaves with a message send and an RPC call of the client in
 * flight, refuses connections for a while, then comes back: the client
 * fails what was in flight once, retries, reconnects on the same handle,
 * and the server never sees the old call again. A request the client's
 * handler held from before cannot be answered on the new connection. */
static void comes_back_after_server_restart(void **state)
{
  world_up();
  assert_int_equal(client_connect(20, 200, 0), 0);
  wait_for(&W.connected, 1);
  assert_int_equal(W.conn_status, 0);
  wait_for(&W.accepted, 1);

  /* the server calls the client, whose handler keeps the request */
  uint64_t id;
  assert_int_equal(rmx_rpc_call(W.sc, H_HOLD, "q", 1, 0, s_reply, NULL, &id), 0);
  while (!W.held)
    uv_run(&loop, UV_RUN_ONCE);
  /* the client calls the server, whose handler keeps it */
  assert_int_equal(rmx_rpc_call(W.cc, H_HOLD, "r", 1, 0, c_reply, NULL, &id), 0);
  wait_for(&W.sheld, 1);

  server_away();
  wait_for(&W.disconnects, 1);
  assert_int_equal(W.disc_status, 0); /* the server closed on purpose */
  assert_int_equal(W.replies, 1);     /* the call in flight failed, once */
  assert_int_equal(W.reply_err, 1);
  assert_int_equal(rmx_send(W.cc, "x", 1, c_sent, NULL), RMX_ENOTCONN);
  wait_for(&W.fails, 2); /* refused attempts while nobody listens */

  server_listen();
  wait_for(&W.successes, 1);
  assert_int_equal(W.attempt_gap, 0);
  assert_int_equal(W.attempts, W.fails + 1);
  wait_for(&W.accepted, 2);

  /* the old request cannot be answered to the new server */
  assert_int_equal(rmx_rpc_reply(W.held, "late", 4), RMX_ENOTCONN);
  assert_int_equal(rmx_send(W.cc, "after", 5, c_sent, NULL), 0);
  wait_for(&W.srecvd, 1);
  wait_for(&W.sent_ok, 1);
  run_for(100);
  assert_int_equal(W.sheld, 1);      /* the old call was not sent again */
  assert_int_equal(W.srecvd, 1);     /* nor the late reply, nor anything else */
  assert_int_equal(W.connected, 1);  /* on_connected: the first connect only */
  assert_int_equal(W.disconnects, 1);
  world_down();
}

/* Out of tries: no attempt more, the connection stays down until closed. */
static void gives_up_after_its_tries(void **state)
{
  world_up();
  assert_int_equal(client_connect(20, 40, 3), 0);
  wait_for(&W.connected, 1);
  wait_for(&W.accepted, 1);
  server_away();
  wait_for(&W.fails, 3);
  run_for(300);
  assert_int_equal(W.attempts, 3);
  assert_int_equal(W.successes, 0);
  assert_int_equal(W.attempt_gap, 0);
  assert_int_equal(rmx_send(W.cc, "x", 1, c_sent, NULL), RMX_ENOTCONN);
  world_down();
}

/* Closing while an attempt waits stops the retries: on_closed, and no
 * on_reconnect after it. */
static void close_stops_the_retries(void **state)
{
  world_up();
  assert_int_equal(client_connect(200, 400, 0), 0);
  wait_for(&W.connected, 1);
  wait_for(&W.accepted, 1);
  server_away();
  wait_for(&W.disconnects, 1);
  /* the first attempt is still waiting out its delay (100 .. 200 ms) */
  world_down_after(600);
  assert_int_equal(W.attempts, 0);
}

/* rmx_conn_close from inside on_disconnect, from a failed attempt's
 * on_reconnect, and from the successful one's (after a send there): each
 * time on_closed once, nothing after it, no attempt after the close. */
static void close_from_its_callbacks(void **state)
{
  static const int where[] = {CLOSE_IN_DISCONNECT, CLOSE_IN_FAILED_ATTEMPT, CLOSE_IN_RESUME};
  for (int i = 0; i < 3; i++) {
    world_up();
    W.close_in = where[i];
    W.send_on_resume = where[i] == CLOSE_IN_RESUME;
    assert_int_equal(client_connect(20, 40, 0), 0);
    wait_for(&W.connected, 1);
    wait_for(&W.accepted, 1);
    rmx_listener_close(W.l); /* the first attempts are refused */
    W.l = NULL;
    assert_int_equal(rmx_conn_close(W.sc, s_closed, NULL), 0);
    W.sc = NULL;
    if (where[i] == CLOSE_IN_RESUME) {
      wait_for(&W.fails, 1);
      server_listen();
      wait_for(&W.closed, 1);
      wait_for(&W.srecvd, 1); /* the send from on_reconnect went before the close */
      assert_int_equal(W.successes, 1);
      assert_int_equal(W.sent_ok, 1);
    }
    wait_for(&W.closed, 1);
    int attempts = W.attempts;
    world_down_after(300); /* 7 delays of the first attempt's bound */
    assert_int_equal(W.attempts, attempts);
    assert_int_equal(W.disconnects, 1);
    assert_int_equal(W.attempts, where[i] == CLOSE_IN_DISCONNECT ? 0
                                 : where[i] == CLOSE_IN_FAILED_ATTEMPT ? 1 : W.fails + 1);
  }
}

/* A first connect that fails is reported by on_connected, never retried;
 * options are checked. */
static void first_failure_is_not_retried(void **state)
{
  world_up();
  rmx_listener_close(W.l); /* nobody listens on W.port */
  W.l = NULL;
  assert_int_equal(client_connect(20, 40, 0), 0);
  wait_for(&W.connected, 1);
  assert_int_not_equal(W.conn_status, 0);
  run_for(200);
  assert_int_equal(W.attempts, 0);

  rmx_conn_t *c;
  char uri[128];
  server_uri(uri, sizeof(uri));
  rmx_connect_opts_t o = {.size = 4, .reconnect_min_ms = 10, .reconnect_max_ms = 10};
  assert_int_equal(rmx_connect_opts(W.cctx, uri, &o, c_connected, NULL, &c), RMX_EINVAL);
  o.size = sizeof(o);
  o.reconnect_max_ms = 5; /* below the first delay */
  assert_int_equal(rmx_connect_opts(W.cctx, uri, &o, c_connected, NULL, &c), RMX_EINVAL);
  world_down();
}

int main(int argc, char **argv)
{
  if (argc < 2 || (strcmp(argv[1], "tcp") && strcmp(argv[1], "rdma") && strcmp(argv[1], "shm"))) {
    fprintf(stderr, "usage: %s tcp|rdma|shm\n", argv[0]);
    return 2;
  }
  scheme = argv[1];
  if (strcmp(scheme, "rdma") == 0)
    addr = getenv("RMX_TEST_ADDR") ? getenv("RMX_TEST_ADDR")
           : getenv("RXE_VM_ADDR") ? getenv("RXE_VM_ADDR") : "192.0.2.1";
  uv_loop_init(&loop);
  alarm(240); /* a hang fails the run */
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(comes_back_after_server_restart),
    cmocka_unit_test(gives_up_after_its_tries),
    cmocka_unit_test(close_stops_the_retries),
    cmocka_unit_test(close_from_its_callbacks),
    cmocka_unit_test(first_failure_is_not_retried),
  };
  int rc = cmocka_run_group_tests_name("reconnect", tests, NULL, NULL);
  uv_loop_close(&loop);
  return rc ? 1 : 0;
}
