/*
 * The conformance suite: written once against the public API, run against
 * every transport.
 *
 *   rmx-conformance SCHEME [cmocka filter]
 *
 * SCHEME is tcp or rdma; the address is $RMX_TEST_ADDR, else $RXE_VM_ADDR
 * (inside the SoftRoCE VM), else 127.0.0.1.
 */
#include <pthread.h>
#include <rmx/rmx.h>
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
#include <uv.h>

#include "harness.h"

/* ---- tests ---- */

static void connect_accept_close(void **state)
{
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  client_t cl;
  server_start(ctx, &s, 0);
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  assert_int_equal(cl.connect_status, 0);
  run_until(ctx, &s.accepted, 1);
  assert_string_equal(rmx_conn_transport(cl.c), scheme);
  assert_int_equal(rmx_ctx_destroy(ctx), RMX_EBUSY); /* objects still open */
  client_close(ctx, &cl);
  /* the peer sees an orderly close, once */
  run_until(ctx, &s.disconnects, 1);
  assert_int_equal(s.last_disconnect, 0);
  assert_int_equal(cl.disconnects, 0);
  server_stop(ctx, &s);
  assert_int_equal(s.disconnects, 1);
  ctx_done(ctx);
}

static void message_sizes(void **state)
{
  static const size_t sizes[] = {0, 1, 2, 63, 64, 4095, 8183, 8184, 8185, 8192, 65536,
                                 (1u << 20) + 3, 16u << 20, 64u << 20};
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  client_t cl;
  uint8_t *msg = malloc(64u << 20);
  server_start(ctx, &s, 1);
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  assert_int_equal(cl.connect_status, 0);
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    cl.expect_len = sizes[i];
    cl.expect_seed = (uint32_t)i;
    pattern(msg, sizes[i], (uint32_t)i);
    assert_int_equal(rmx_send(cl.c, msg, sizes[i], cl_sent, &cl), 0);
    run_until(ctx, &cl.recvs, (int)i + 1);
    run_until(ctx, &cl.sent_ok, (int)i + 1); /* msg may be reused only now */
    if (cl.bad)
      fail_msg("the echo of %zu bytes differs", sizes[i]);
  }
  rmx_conn_stats_t st;
  rmx_conn_stats(cl.c, &st);
  assert_true(st.msgs_sent == sizeof(sizes) / sizeof(sizes[0]));
  assert_true(st.rndv_sent > 0 && st.eager_sent > 0);
  client_close(ctx, &cl);
  server_stop(ctx, &s);
  free(msg);
  ctx_done(ctx);
}

static void send_from_pool_buffers(void **state)
{
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  client_t cl;
  static const size_t sizes[] = {100, 8184, 300000};
  server_start(ctx, &s, 1);
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  for (int i = 0; i < 3; i++) {
    rmx_buf_t *b;
    assert_int_equal(rmx_buf_get(ctx, sizes[i], &b), 0);
    assert_true(rmx_buf_size(b) >= sizes[i]);
    pattern(rmx_buf_data(b), sizes[i], 100 + i);
    cl.expect_len = sizes[i];
    cl.expect_seed = 100 + i;
    assert_int_equal(rmx_send_buf(cl.c, b, rmx_buf_size(b) + 1, cl_sent, &cl), RMX_EINVAL);
    assert_int_equal(rmx_send_buf(cl.c, b, sizes[i], cl_sent, &cl), 0);
    run_until(ctx, &cl.recvs, i + 1);
    run_until(ctx, &cl.sent_ok, i + 1);
    assert_int_equal(cl.bad, 0);
  }
  client_close(ctx, &cl);
  server_stop(ctx, &s);
  ctx_done(ctx);
}

/* ---- order ---- */

typedef struct seqrx {
  uint32_t next;
  int bad, recvs;
} seqrx_t;

static seqrx_t seq_state;

static void seq_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  seqrx_t *r = &seq_state;
  uint32_t seq;
  r->recvs++;
  if (len < 4) {
    r->bad++;
    return;
  }
  memcpy(&seq, data, 4);
  if (seq != r->next++)
    r->bad++;
  /* every 1000th is a large one: check its tail too */
  if (len > 4 && ((const uint8_t *)data)[len - 1] != (uint8_t)seq)
    r->bad++;
}

static void seq_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  server_t *s = arg;
  rmx_conn_cbs_t cbs = {.on_recv = seq_recv, .on_disconnect = srv_disconnect};
  s->conns[s->nconns++] = c;
  s->accepted++;
  rmx_conn_set_cbs(c, &cbs, s);
}

static void ten_thousand_in_order(void **state)
{
  enum { N = 10000, BIG = 100000 };
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  client_t cl;
  char uri[128];
  memset(&s, 0, sizeof(s));
  memset(&seq_state, 0, sizeof(seq_state));
  uri_for(uri, sizeof(uri), 0);
  assert_int_equal(rmx_listen(ctx, uri, seq_accept, &s, &s.l), 0);
  assert_int_equal(rmx_listener_uri(s.l, s.uri, sizeof(s.uri)), 0);
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  uint8_t *big = malloc((size_t)(N / 1000) * BIG);
  /* All queued at once: credits, not the test, pace them. */
  for (uint32_t i = 0; i < N; i++) {
    if (i % 1000 == 999) {
      uint8_t *b = big + (i / 1000) * BIG;
      memcpy(b, &i, 4);
      memset(b + 4, (uint8_t)i, BIG - 4);
      assert_int_equal(rmx_send(cl.c, b, BIG, cl_sent, &cl), 0);
    } else {
      assert_int_equal(rmx_send(cl.c, &i, 4, cl_sent, &cl), 0);
    }
  }
  run_until(ctx, &seq_state.recvs, N);
  run_until(ctx, &cl.sent_ok, N);
  assert_int_equal(seq_state.bad, 0);
  assert_int_equal(cl.sent_err, 0);
  rmx_conn_stats_t st;
  rmx_conn_stats(cl.c, &st);
  assert_true(st.credit_stalls > 0); /* 10,000 queued > 64 credits */
  client_close(ctx, &cl);
  server_stop(ctx, &s);
  free(big);
  ctx_done(ctx);
}

static void many_connections(void **state)
{
  enum { NC = 32, MSGS = 50 };
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  static client_t cl[NC];
  uint8_t msg[3000];
  server_start(ctx, &s, 1);
  for (int i = 0; i < NC; i++)
    client_connect(ctx, &cl[i], s.uri);
  for (int i = 0; i < NC; i++) {
    run_until(ctx, &cl[i].connected, 1);
    assert_int_equal(cl[i].connect_status, 0);
    cl[i].expect_len = sizeof(msg);
    cl[i].expect_seed = 7;
  }
  pattern(msg, sizeof(msg), 7);
  for (int m = 0; m < MSGS; m++)
    for (int i = 0; i < NC; i++)
      assert_int_equal(rmx_send(cl[i].c, msg, sizeof(msg), cl_sent, &cl[i]), 0);
  for (int i = 0; i < NC; i++) {
    run_until(ctx, &cl[i].recvs, MSGS);
    run_until(ctx, &cl[i].sent_ok, MSGS);
    assert_int_equal(cl[i].bad, 0);
  }
  assert_int_equal(s.accepted, NC);
  for (int i = 0; i < NC; i++)
    client_close(ctx, &cl[i]);
  run_until(ctx, &s.disconnects, NC);
  server_stop(ctx, &s);
  ctx_done(ctx);
}

static void over_maximum_is_refused(void **state)
{
  rmx_ctx_t *ctx = ctx_new(1u << 20);
  server_t s;
  client_t cl;
  static uint8_t msg[(1u << 20) + 1];
  server_start(ctx, &s, 0);
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  assert_int_equal(rmx_send(cl.c, msg, sizeof(msg), cl_sent, &cl), RMX_EMSGSIZE);
  rmx_buf_t *b;
  assert_int_equal(rmx_buf_get(ctx, sizeof(msg), &b), RMX_EMSGSIZE);
  assert_int_equal(rmx_send(cl.c, msg, sizeof(msg) - 1, cl_sent, &cl), 0); /* the maximum goes */
  run_until(ctx, &cl.sent_ok, 1);
  run_until(ctx, &s.recvs, 1);
  assert_int_equal(cl.sent_err, 0);
  client_close(ctx, &cl);
  server_stop(ctx, &s);
  ctx_done(ctx);
}

static void connect_to_closed_port_fails(void **state)
{
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  client_t cl;
  server_start(ctx, &s, 0);
  rmx_listener_close(s.l); /* nobody listens there any more */
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  assert_int_equal(cl.connect_status, RMX_ECONNREFUSED);
  assert_int_equal(rmx_send(cl.c, "x", 1, cl_sent, &cl), RMX_ENOTCONN);
  client_close(ctx, &cl);
  assert_int_equal(cl.connected, 1);
  assert_int_equal(cl.disconnects, 0);
  ctx_done(ctx);
}

static void bad_uris_are_refused(void **state)
{
  rmx_ctx_t *ctx = ctx_new(0);
  rmx_conn_t *c = NULL;
  rmx_listener_t *l = NULL;
  assert_int_equal(rmx_connect(ctx, "nonsense", cl_connected, NULL, &c), RMX_EINVAL);
  assert_int_equal(rmx_connect(ctx, "ftp://127.0.0.1:1", cl_connected, NULL, &c), RMX_EINVAL);
  assert_int_equal(rmx_listen(ctx, "tcp://127.0.0.1:99999", srv_accept, NULL, &l), RMX_EINVAL);
  assert_null(c);
  assert_null(l);
  ctx_done(ctx);
}

static void unresolvable_host_fails(void **state)
{
  rmx_ctx_t *ctx = ctx_new(0);
  client_t cl;
  char uri[128];
  snprintf(uri, sizeof(uri), "%s://no-such-host.invalid:7471", scheme);
  client_connect(ctx, &cl, uri);
  run_until(ctx, &cl.connected, 1);
  assert_int_equal(cl.connect_status, RMX_ENORESOLVE);
  client_close(ctx, &cl);
  ctx_done(ctx);
}

static void close_while_connecting(void **state)
{
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  client_t cl;
  server_start(ctx, &s, 0);
  client_connect(ctx, &cl, s.uri);
  assert_int_equal(rmx_conn_close(cl.c, cl_closed, &cl), 0);
  run_until(ctx, &cl.closed, 1);
  assert_int_equal(cl.connected, 1); /* on_connected still ran, once, first */
  assert_int_equal(cl.connect_status, RMX_ECANCELED);
  server_stop(ctx, &s);
  ctx_done(ctx);
}

/* Sends queued when the connection closes: each callback once, then
 * on_closed; the peer gets exactly the ones that completed. */
static void close_with_pending_sends(void **state)
{
  enum { N = 1000 };
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  client_t cl;
  server_start(ctx, &s, 0);
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  run_until(ctx, &s.accepted, 1);
  for (int i = 0; i < N; i++)
    assert_int_equal(rmx_send(cl.c, "abcdefgh", 8, cl_sent, &cl), 0);
  assert_int_equal(rmx_conn_close(cl.c, cl_closed, &cl), 0);
  assert_int_equal(rmx_send(cl.c, "x", 1, cl_sent, &cl), RMX_ENOTCONN);
  assert_int_equal(cl.sent_ok + cl.sent_err, 0); /* nothing inside the calls */
  run_until(ctx, &cl.closed, 1);
  assert_int_equal(cl.sent_ok + cl.sent_err, N);
  if (cl.sent_err)
    assert_int_equal(cl.last_err, RMX_ECANCELED);
  run_until(ctx, &s.disconnects, 1);
  assert_int_equal(s.last_disconnect, 0);
  assert_int_equal(s.recvs, cl.sent_ok);
  server_stop(ctx, &s);
  ctx_done(ctx);
}

/* ---- processes that die ----
 * Peers in other processes are this program again, exec'd with a role:
 * a fork alone would share rdma-core's per-process device state, which the
 * kernel refuses to serve in the child. Children never use cmocka. */

static void on_first_die(rmx_conn_t *c, const void *d, size_t l, void *arg) { kill(getpid(), SIGKILL); }

static void die_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  rmx_conn_cbs_t cbs = {.on_recv = on_first_die};
  rmx_conn_set_cbs(c, &cbs, NULL);
}

/* Role: a server that dies on its first message. Prints its URI. */
static int role_dying_server(void)
{
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  char u[128];
  uri_for(u, sizeof(u), 0);
  if (rmx_ctx_create(&ctx, NULL, NULL) || rmx_listen(ctx, u, die_accept, NULL, &l) ||
      rmx_listener_uri(l, u, sizeof(u)))
    return 3;
  printf("%s\n", u);
  fflush(stdout);
  rmx_ctx_run(ctx);
  return 0;
}

static void dc_connected(rmx_conn_t *c, int status, void *arg)
{
  if (status || rmx_send(c, "hi", 2, NULL, NULL))
    _exit(4);
}

static void dc_recv(rmx_conn_t *c, const void *d, size_t l, void *arg) { kill(getpid(), SIGKILL); }

/* Role: a client that connects, sends, and dies when answered. */
static int role_dying_client(const char *uri)
{
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  static const rmx_conn_cbs_t cbs = {.on_recv = dc_recv};
  if (rmx_ctx_create(&ctx, NULL, NULL) || rmx_connect(ctx, uri, dc_connected, NULL, &c))
    return 3;
  rmx_conn_set_cbs(c, &cbs, NULL);
  rmx_ctx_run(ctx);
  return 5;
}

static void peer_killed_fails_outstanding(void **state)
{
  enum { SMALL = 100 };
  char uri[128];
  int fd;
  pid_t pid = spawn("--dying-server", NULL, &fd);
  read_line(fd, uri, sizeof(uri));
  close(fd);
  assert_true(uri[0] != '\0');
  rmx_ctx_t *ctx = ctx_new(0);
  client_t cl;
  uint8_t *big = calloc(1, 64u << 20);
  client_connect(ctx, &cl, uri);
  run_until(ctx, &cl.connected, 1);
  assert_int_equal(cl.connect_status, 0);
  assert_int_equal(rmx_send(cl.c, "die", 3, cl_sent, &cl), 0);
  assert_int_equal(rmx_send(cl.c, big, 64u << 20, cl_sent, &cl), 0);
  for (int i = 0; i < SMALL; i++)
    assert_int_equal(rmx_send(cl.c, "more", 4, cl_sent, &cl), 0);
  run_until(ctx, &cl.disconnects, 1);
  assert_int_not_equal(cl.last_disconnect, 0);
  /* every send completed, before on_disconnect; the big one cannot have */
  assert_int_equal(cl.sent_before_disconnect, SMALL + 2);
  assert_true(cl.sent_err >= 1);
  assert_int_equal(rmx_send(cl.c, "x", 1, cl_sent, &cl), RMX_ENOTCONN);
  client_close(ctx, &cl);
  assert_int_equal(cl.disconnects, 1);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  free(big);
  ctx_done(ctx);
}

static void server_survives_killed_client(void **state)
{
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  client_t cl;
  int fd;
  server_start(ctx, &s, 1);
  pid_t pid = spawn("--dying-client", s.uri, &fd);
  close(fd);
  run_until(ctx, &s.disconnects, 1);
  assert_int_not_equal(s.last_disconnect, 0);
  assert_int_equal(s.recvs, 1);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  /* and it keeps serving */
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  assert_int_equal(cl.connect_status, 0);
  cl.expect_len = 1000;
  cl.expect_seed = 3;
  uint8_t msg[1000];
  pattern(msg, sizeof(msg), 3);
  for (int i = 0; i < 100; i++)
    assert_int_equal(rmx_send(cl.c, msg, sizeof(msg), cl_sent, &cl), 0);
  run_until(ctx, &cl.recvs, 100);
  assert_int_equal(cl.bad, 0);
  client_close(ctx, &cl);
  server_stop(ctx, &s);
  ctx_done(ctx);
}

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

static void post_from_other_threads(void **state)
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

static void lives_in_callers_loop(void **state)
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
static void names_and_ipv6(void **state)
{
  if (strcmp(scheme, "tcp") != 0)
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
static void device_choice(void **state)
{
  const char *dev = getenv("RXE_VM_DEV");
  if (strcmp(scheme, "rdma") != 0 || !dev)
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

static int arm_alarm(void **state)
{
  alarm(300); /* a hang kills the run instead of stalling CI */
  return 0;
}

int main(int argc, char **argv)
{
  if (harness_args(argc, argv) != 0)
    return 2;
  if (argc > 2 && strcmp(argv[2], "--dying-server") == 0)
    return role_dying_server();
  if (argc > 3 && strcmp(argv[2], "--dying-client") == 0)
    return role_dying_client(argv[3]);
  if (argc > 2)
    cmocka_set_test_filter(argv[2]);
  signal(SIGPIPE, SIG_IGN);
#define T(f) cmocka_unit_test_setup(f, arm_alarm)
  const struct CMUnitTest tests[] = {
    T(connect_accept_close), T(message_sizes), T(send_from_pool_buffers),
    T(ten_thousand_in_order), T(many_connections), T(over_maximum_is_refused),
    T(connect_to_closed_port_fails), T(bad_uris_are_refused), T(unresolvable_host_fails),
    T(close_while_connecting), T(close_with_pending_sends), T(peer_killed_fails_outstanding),
    T(server_survives_killed_client), T(post_from_other_threads), T(lives_in_callers_loop),
    T(names_and_ipv6), T(device_choice),
  };
  char name[64];
  snprintf(name, sizeof(name), "conformance/%s", scheme);
  return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
