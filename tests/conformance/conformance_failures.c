/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Conformance, failures: connects that cannot succeed, closes in the middle
 * of things, and peers in other processes that are killed.
 */
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

#include "conformance.h"

static char logged[512];

/* Keeps the last log line that holds arg (a string). */
static void keep_line(rmx_log_level_t level, const char *line, void *arg)
{
  if (strstr(line, arg))
    snprintf(logged, sizeof(logged), "%s", line);
}

void connect_to_closed_port_fails(void **state)
{
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  client_t cl;
  server_start(ctx, &s, 0);
  server_unlisten(ctx, &s); /* nobody listens there any more */
  logged[0] = '\0';
  rmx_log_set_handler(keep_line, "connect failed");
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  rmx_log_set_handler(NULL, NULL);
  assert_int_equal(cl.connect_status, RMX_ECONNREFUSED);
  /* the log line names the connection by its address: "peer HOST:PORT:" */
  char addr_port[160];
  snprintf(addr_port, sizeof(addr_port), "peer %s: connect failed", strstr(s.uri, "://") + 3);
  if (!strstr(logged, addr_port))
    fail_msg("the refusal's log line does not name %s: '%s'", s.uri, logged);
  assert_int_equal(rmx_send(cl.c, "x", 1, cl_sent, &cl), RMX_ENOTCONN);
  client_close(ctx, &cl);
  assert_int_equal(cl.connected, 1);
  assert_int_equal(cl.disconnects, 0);
  ctx_done(ctx);
}

void bad_uris_are_refused(void **state)
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

void unresolvable_host_fails(void **state)
{
  rmx_ctx_t *ctx = ctx_new(0);
  client_t cl;
  char uri[128];
  int shm = strcmp(scheme, "shm") == 0; /* a socket name: nothing to resolve, nobody there */
  if (shm)
    snprintf(uri, sizeof(uri), "shm:///no-such-dir.invalid/socket");
  else
    snprintf(uri, sizeof(uri), "%s://no-such-host.invalid:7471", scheme);
  client_connect(ctx, &cl, uri);
  run_until(ctx, &cl.connected, 1);
  assert_int_equal(cl.connect_status, shm ? RMX_ECONNREFUSED : RMX_ENORESOLVE);
  client_close(ctx, &cl);
  ctx_done(ctx);
}

void close_while_connecting(void **state)
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
 * on_closed; the peer gets exactly the ones that completed, then an
 * orderly disconnect (status 0). */
static void pending_sends_then_close(int n, size_t len)
{
  static uint8_t msg[8000];
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  client_t cl;
  server_start(ctx, &s, 0);
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  server_until(ctx, &s, &s.accepted, 1);
  memset(msg, 'a', sizeof(msg));
  for (int i = 0; i < n; i++)
    assert_int_equal(rmx_send(cl.c, msg, len, cl_sent, &cl), 0);
  assert_int_equal(rmx_conn_close(cl.c, cl_closed, &cl), 0);
  assert_int_equal(rmx_send(cl.c, "x", 1, cl_sent, &cl), RMX_ENOTCONN);
  assert_int_equal(cl.sent_ok + cl.sent_err, 0); /* nothing inside the calls */
  run_until(ctx, &cl.closed, 1);
  assert_int_equal(cl.sent_ok + cl.sent_err, n);
  if (cl.sent_err)
    assert_int_equal(cl.last_err, RMX_ECANCELED);
  server_until(ctx, &s, &s.disconnects, 1);
  assert_int_equal(s.recvs, cl.sent_ok);
  assert_int_equal(s.last_disconnect, 0);
  server_stop(ctx, &s);
  ctx_done(ctx);
}

void close_with_pending_sends(void **state) { pending_sends_then_close(1000, 8); }

/* The same with the socket's buffers full when the close comes: over TCP,
 * the peer's unread credit returns must not turn the close into a reset
 * that drops sends already reported complete. */
void close_with_pending_large_sends(void **state) { pending_sends_then_close(2000, 8000); }

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
int role_dying_server(void)
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
int role_dying_client(const char *uri)
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

void peer_killed_fails_outstanding(void **state)
{
  enum { SMALL = 100 };
  char uri[128];
  long dying = dying_server(uri, sizeof(uri));
  assert_true(uri[0] != '\0');
  rmx_ctx_t *ctx = ctx_new(0);
  client_t cl;
  uint8_t *big = calloc(1, 64u << 20);
  logged[0] = '\0';
  rmx_log_set_handler(keep_line, " lost: ");
  client_connect(ctx, &cl, uri);
  run_until(ctx, &cl.connected, 1);
  assert_int_equal(cl.connect_status, 0);
  assert_int_equal(rmx_send(cl.c, "die", 3, cl_sent, &cl), 0);
  assert_int_equal(rmx_send(cl.c, big, 64u << 20, cl_sent, &cl), 0);
  for (int i = 0; i < SMALL; i++)
    assert_int_equal(rmx_send(cl.c, "more", 4, cl_sent, &cl), 0);
  run_until(ctx, &cl.disconnects, 1);
  rmx_log_set_handler(NULL, NULL);
  assert_int_not_equal(cl.last_disconnect, 0);
  /* the loss is logged with the peer's address (and over RDMA its QP) */
  char host_port[160];
  snprintf(host_port, sizeof(host_port), "%s", strstr(uri, "://") + 3);
  if (!strstr(logged, host_port) || (strcmp(scheme, "rdma") == 0 && !strstr(logged, " QP 0x")))
    fail_msg("the loss's log line does not name %s%s: '%s'", host_port,
             strcmp(scheme, "rdma") == 0 ? " and its QP" : "", logged);
  /* every send completed, before on_disconnect; the big one cannot have */
  assert_int_equal(cl.sent_before_disconnect, SMALL + 2);
  assert_true(cl.sent_err >= 1);
  assert_int_equal(rmx_send(cl.c, "x", 1, cl_sent, &cl), RMX_ENOTCONN);
  client_close(ctx, &cl);
  assert_int_equal(cl.disconnects, 1);
  int st = dying_server_reap(dying);
  assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  free(big);
  ctx_done(ctx);
}

/* A loop held longer than the silence limit (a long callback, or a long
 * call between turns) does not lose a peer that kept talking: its frames
 * wait unread, and the first sweep after the hold lets the loop read them
 * before judging. The peer is another process that tolerates our silence
 * (its limit is the default 10 s) and sends a keepalive every 200 ms; our
 * limit is 1 s and the loop is held for 3 s. It dies on our first message,
 * which shows the connection still carries one. */
void held_loop_keeps_a_talking_peer(void **state)
{
  char uri[128];
  assert_int_equal(setenv("RMX_KEEPALIVE_MS", "200", 1), 0); /* the server's */
  long dying = dying_server(uri, sizeof(uri));
  assert_int_equal(unsetenv("RMX_KEEPALIVE_MS"), 0);
  assert_true(uri[0] != '\0');
  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.keepalive_ms = 200;
  cfg.keepalive_timeout_ms = 1000;
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), 0);
  client_t cl;
  client_connect(ctx, &cl, uri);
  run_until(ctx, &cl.connected, 1);
  assert_int_equal(cl.connect_status, 0);
  run_for_ms(ctx, 500); /* keepalives both ways */
  usleep(3000 * 1000);  /* the loop is held */
  run_for_ms(ctx, 1500);
  if (cl.disconnects) { /* the server must not outlive the case */
    if (!peer_ctl) {
      kill((pid_t)dying, SIGKILL);
      dying_server_reap(dying);
    }
    fail_msg("the peer was declared lost after the loop was held: %s",
             rmx_err_name(cl.last_disconnect));
  }
  assert_int_equal(rmx_send(cl.c, "die", 3, cl_sent, &cl), 0);
  run_until(ctx, &cl.disconnects, 1);
  assert_int_equal(cl.sent_before_disconnect, 1);
  client_close(ctx, &cl);
  int st = dying_server_reap(dying);
  assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  ctx_done(ctx);
}

void server_survives_killed_client(void **state)
{
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  client_t cl;
  int fd;
  server_start(ctx, &s, 1);
  pid_t pid = spawn("--dying-client", s.uri, &fd);
  close(fd);
  server_until(ctx, &s, &s.disconnects, 1);
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
