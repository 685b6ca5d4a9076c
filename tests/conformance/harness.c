/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers shared by the conformance suites: contexts, an echo server,
 * a checking client, and a loop runner with a hang guard. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <unistd.h>
#include <uv.h>

#include "harness.h"
#include "spin.h"

const char *scheme = "tcp";
const char *addr = "127.0.0.1";

/* ---- helpers ---- */

void uri_for(char *buf, size_t len, int port)
{
  static unsigned fresh;
  if (strcmp(scheme, "shm") == 0) { /* port 0: a name no one else uses */
    if (port)
      snprintf(buf, len, "shm://@rmx-test-%d-port-%d", (int)getpid(), port);
    else
      snprintf(buf, len, "shm://@rmx-test-%d-%u", (int)getpid(), ++fresh);
    return;
  }
  snprintf(buf, len, strchr(addr, ':') ? "%s://[%s]:%d" : "%s://%s:%d", scheme, addr, port);
}

rmx_ctx_t *ctx_new(uint64_t max_msg)
{
  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  assert_int_equal(rmx_config_init(&cfg), 0);
  if (max_msg)
    cfg.max_msg_size = max_msg;
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), 0);
  return ctx;
}

/* Run the loop until *counter reaches want; the alarm set per test guards
 * against hangs (a hang fails the test, it is not a timing threshold).
 * With RMX_PROGRESS=poll it spins on rmx_ctx_progress instead (spin.h). */
void run_until(rmx_ctx_t *ctx, const int *counter, int want)
{
  if (spin_mode()) {
    uv_loop_t *callers = spin_callers_loop(ctx);
    while (*counter < want)
      if (spin_once(ctx, callers) == SPIN_GONE) {
        if (*counter < want)
          fail_msg("the context is gone, and the counter at %d of %d", *counter, want);
        return;
      }
    return;
  }
  while (*counter < want)
    uv_run(rmx_ctx_loop(ctx), UV_RUN_ONCE);
}

static void stop_loop(uv_timer_t *t) { uv_stop(t->loop); }

void run_for_ms(rmx_ctx_t *ctx, uint64_t ms)
{
  if (spin_mode()) {
    uv_loop_t *callers = spin_callers_loop(ctx);
    uint64_t end = uv_hrtime() + ms * 1000000u;
    while (uv_hrtime() < end)
      if (spin_once(ctx, callers) == SPIN_GONE)
        fail_msg("the context is gone while the test still runs it");
    return;
  }
  uv_timer_t t;
  uv_timer_init(rmx_ctx_loop(ctx), &t);
  uv_timer_start(&t, stop_loop, ms, 0);
  uv_run(rmx_ctx_loop(ctx), UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(rmx_ctx_loop(ctx), UV_RUN_NOWAIT);
}

void pattern(uint8_t *p, size_t len, uint32_t seed)
{
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < len; i++) {
    if ((i & 3) == 0)
      x = x * 1103515245u + 12345u;
    p[i] = (uint8_t)(x >> ((i & 3) * 8));
  }
}

/* ---- an echo server living in the same context ---- */



void srv_sent(rmx_conn_t *c, int status, void *arg) { free(arg); }

static void seq_check(server_t *s, const uint8_t *data, size_t len)
{
  uint32_t seq;
  if (len < 4) {
    s->bad++;
    return;
  }
  memcpy(&seq, data, 4);
  if (seq != s->next++ || (len > 4 && data[len - 1] != (uint8_t)seq))
    s->bad++;
}

void srv_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  server_t *s = arg;
  s->recvs++;
  if (s->echo == SRV_SEQ || s->echo == SRV_SEQ_ECHO)
    seq_check(s, data, len);
  if (s->echo != SRV_ECHO && s->echo != SRV_SEQ_ECHO)
    return;
  void *copy = malloc(len ? len : 1);
  assert_non_null(copy);
  memcpy(copy, data, len);
  assert_int_equal(rmx_send(c, copy, len, srv_sent, copy), 0);
}

void srv_conn_closed(rmx_conn_t *c, void *arg) { ((server_t *)arg)->closed++; }

void srv_disconnect(rmx_conn_t *c, int status, void *arg)
{
  server_t *s = arg;
  s->disconnects++;
  s->last_disconnect = status;
  for (int i = 0; i < s->nconns; i++)
    if (s->conns[i] == c) {
      s->conns[i] = s->conns[--s->nconns];
      assert_int_equal(rmx_conn_close(c, srv_conn_closed, s), 0);
      return;
    }
  fail_msg("disconnect for a connection the server does not know");
}

void srv_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  server_t *s = arg;
  rmx_conn_cbs_t cbs = {.on_recv = srv_recv, .on_disconnect = srv_disconnect};
  rmx_conn_set_cbs(c, &cbs, s);
  assert_true(s->nconns < 128);
  s->conns[s->nconns++] = c;
  s->accepted++;
}

void server_start(rmx_ctx_t *ctx, server_t *s, int echo)
{
  char uri[128];
  memset(s, 0, sizeof(*s));
  s->echo = echo;
  if (peer_ctl) {
    peer_server_start(s);
    return;
  }
  uri_for(uri, sizeof(uri), 0);
  assert_int_equal(rmx_listen(ctx, uri, srv_accept, s, &s->l), 0);
  assert_int_equal(rmx_listener_uri(s->l, s->uri, sizeof(s->uri)), 0);
}

/* Close the listener and every connection; wait for their callbacks. */
void server_stop(rmx_ctx_t *ctx, server_t *s)
{
  if (s->remote) {
    peer_server_stop(s);
    return;
  }
  if (s->l)
    rmx_listener_close(s->l);
  s->l = NULL;
  /* Every accepted connection is closed once, here or on its disconnect;
   * the server is done when every one of them has reported on_closed. */
  int want = s->accepted;
  while (s->nconns)
    assert_int_equal(rmx_conn_close(s->conns[--s->nconns], srv_conn_closed, s), 0);
  run_until(ctx, &s->closed, want);
}

void server_unlisten(rmx_ctx_t *ctx, server_t *s)
{
  if (s->remote)
    peer_server_unlisten(s);
  else if (s->l)
    rmx_listener_close(s->l);
  s->l = NULL;
}

void server_until(rmx_ctx_t *ctx, server_t *s, const int *field, int want)
{
  if (!s->remote) {
    run_until(ctx, field, want);
    return;
  }
  for (;;) {
    peer_server_stats(s);
    if (*field >= want)
      return;
    run_for_ms(ctx, 5); /* our side may have work to do meanwhile */
  }
}

/* ---- a client ---- */



void cl_connected(rmx_conn_t *c, int status, void *arg)
{
  client_t *cl = arg;
  cl->connected++;
  cl->connect_status = status;
}

void cl_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  client_t *cl = arg;
  cl->recvs++;
  if (len != cl->expect_len) {
    cl->bad++;
    return;
  }
  uint8_t *want = malloc(len ? len : 1);
  pattern(want, len, cl->expect_seed);
  if (memcmp(data, want, len) != 0)
    cl->bad++;
  free(want);
}

void cl_sent(rmx_conn_t *c, int status, void *arg)
{
  client_t *cl = arg;
  if (status == 0)
    cl->sent_ok++;
  else {
    cl->sent_err++;
    cl->last_err = status;
  }
}

void cl_disconnect(rmx_conn_t *c, int status, void *arg)
{
  client_t *cl = arg;
  cl->disconnects++;
  cl->last_disconnect = status;
  cl->sent_before_disconnect = cl->sent_ok + cl->sent_err;
}

void cl_closed(rmx_conn_t *c, void *arg) { ((client_t *)arg)->closed++; }

void client_connect(rmx_ctx_t *ctx, client_t *cl, const char *uri)
{
  static const rmx_conn_cbs_t cbs = {.on_recv = cl_recv, .on_disconnect = cl_disconnect};
  memset(cl, 0, sizeof(*cl));
  assert_int_equal(rmx_connect(ctx, uri, cl_connected, cl, &cl->c), 0);
  rmx_conn_set_cbs(cl->c, &cbs, cl);
  assert_int_equal(cl->connected, 0); /* never from inside the call */
}

void client_close(rmx_ctx_t *ctx, client_t *cl)
{
  assert_int_equal(rmx_conn_close(cl->c, cl_closed, cl), 0);
  assert_int_equal(rmx_conn_close(cl->c, cl_closed, cl), RMX_EALREADY);
  assert_int_equal(cl->closed, 0);
  run_until(ctx, &cl->closed, 1);
}

void ctx_done(rmx_ctx_t *ctx) { assert_int_equal(rmx_ctx_destroy(ctx), 0); }


int harness_args(int argc, char **argv)
{
  if (argc < 2 || (strcmp(argv[1], "tcp") && strcmp(argv[1], "rdma") && strcmp(argv[1], "shm"))) {
    fprintf(stderr, "usage: %s tcp|rdma|shm [filter]\n", argv[0]);
    return -1;
  }
  scheme = argv[1];
  if (getenv("RMX_TEST_ADDR"))
    addr = getenv("RMX_TEST_ADDR");
  else if (getenv("RXE_VM_ADDR"))
    addr = getenv("RXE_VM_ADDR");
  return 0;
}

/* Run this program again as ROLE in a child (a fork alone would share
 * rdma-core's per-process state, which the kernel refuses to serve in the
 * child); its stdout comes back through *out_fd. */
pid_t spawn(const char *role, const char *uri, int *out_fd)
{
  int fd[2];
  assert_int_equal(pipe(fd), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fd[1], STDOUT_FILENO);
    close(fd[0]);
    close(fd[1]);
    execl("/proc/self/exe", "/proc/self/exe", scheme, role, uri ? uri : "", (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  *out_fd = fd[0];
  return pid;
}

void read_line(int fd, char *buf, size_t len)
{
  size_t n = 0;
  while (n + 1 < len && read(fd, buf + n, 1) == 1 && buf[n] != '\n')
    n++;
  buf[n] = '\0';
}

