/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shm://'s copy modes, between two processes: one copy where each may
 * reach the other's memory, the segment where the kernel refuses it (a
 * seccomp filter on process_vm_readv/writev in the server) or the server
 * turns it off (RMX_SHM_COPY=0). Each case moves the same one-sided reads
 * and writes (below, at and above the one-copy size), a large message
 * each way (rendezvous reads) and checks every byte; then it asks the
 * server what its log said about the copy mode and how many bytes it
 * moved by one copy (tp_direct_bytes), and checks both sides' figures to
 * the byte: every byte of a transfer of 32 KiB or more by one copy, or
 * none.
 *   rmx-shm-copy
 */
#include <rmx/rmx.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include "cma_filter.h"

#define REGION (8u << 20)
#define BIG (4u << 20) /* the message each way */
#define COPY_MIN (32u << 10) /* transport/shm/tp.h RMX_SHM_COPY_MIN */
#define LINE 512

enum { MODE_ON, MODE_FILTER, MODE_OFF };

static const size_t sizes[] = {1, 4095, COPY_MIN - 1, COPY_MIN, (1u << 20) + 7, BIG};

/* The "shm: ..." copy-mode line this process logged (the last one). */
static char copy_line[LINE];

static void on_log(rmx_log_level_t level, const char *line, void *arg)
{
  (void)level, (void)arg;
  if (strstr(line, "one copy (process_vm") || strstr(line, "the segment carries every byte"))
    snprintf(copy_line, sizeof(copy_line), "%s", line);
}

static void pattern(uint8_t *p, size_t len, uint32_t seed)
{
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < len; i++) {
    x = x * 1103515245u + 12345u;
    p[i] = (uint8_t)(x >> 16);
  }
}

static rmx_ctx_t *ctx_make(int copy)
{
  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  if (rmx_config_init(&cfg) != 0)
    return NULL;
  cfg.log_level = RMX_LOG_INFO;
  cfg.shm_copy = (uint32_t)copy;
  rmx_log_set_handler(on_log, NULL);
  return rmx_ctx_create(&ctx, NULL, &cfg) == 0 ? ctx : NULL;
}

static uint64_t direct_bytes(rmx_ctx_t *ctx)
{
  rmx_ctx_stats_t st;
  return rmx_ctx_stats_get(ctx, &st, sizeof(st)) == 0 ? st.tp_direct_bytes : UINT64_MAX;
}

/* ---- the server (a child process) ---- */


typedef struct srv {
  rmx_ctx_t *ctx;
  rmx_mem_t *mem;
  uint8_t *region;
  rmx_conn_t *c;
  int closed, failed;
} srv_t;

static void srv_sent(rmx_conn_t *c, int status, void *arg)
{
  (void)c, (void)status;
  free(arg);
}

static void srv_closed(rmx_conn_t *c, void *arg) { ((srv_t *)arg)->closed = 1; (void)c; }

static void srv_gone(rmx_conn_t *c, int status, void *arg)
{
  (void)status;
  rmx_conn_close(c, srv_closed, arg);
}

/* A message: "stats" is answered with the direct bytes and the copy line,
 * anything else is echoed. */
static void srv_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  srv_t *s = arg;
  if (len == 5 && memcmp(data, "stats", 5) == 0) {
    char out[LINE + 32];
    int n = snprintf(out, sizeof(out), "%llu %s", (unsigned long long)direct_bytes(s->ctx),
                     copy_line);
    if (rmx_send(c, out, (size_t)n, NULL, NULL) != 0)
      s->failed = 1;
    return;
  }
  void *copy = malloc(len ? len : 1); /* a large one is read from it later */
  if (!copy || (memcpy(copy, data, len), rmx_send(c, copy, len, srv_sent, copy)) != 0)
    s->failed = 1;
}

static void srv_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  srv_t *s = arg;
  uint8_t blob[RMX_RKEY_MAX];
  size_t len = sizeof(blob);
  rmx_conn_cbs_t cbs = {.on_recv = srv_recv, .on_disconnect = srv_gone};
  (void)l;
  s->c = c;
  rmx_conn_set_cbs(c, &cbs, s);
  if (rmx_mem_pack_for(s->mem, c, blob, &len) != 0 || rmx_send(c, blob, len, NULL, NULL) != 0)
    s->failed = 1;
}

static int serve(const char *uri, int mode, int ready_fd)
{
  srv_t s = {0};
  rmx_listener_t *l;
  if (mode == MODE_FILTER && cma_filter_refuse() != 0)
    return 3;
  if (!(s.ctx = ctx_make(mode != MODE_OFF)) || !(s.region = calloc(1, REGION)) ||
      rmx_mem_reg(s.ctx, s.region, REGION, RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE,
                  &s.mem) != 0 ||
      rmx_listen(s.ctx, uri, srv_accept, &s, &l) != 0)
    return 4;
  /* Whether this process may read its parent's memory at all (Yama's
   * ptrace_scope 1 allows only the other way): 'r' yes, 'n' no. The
   * bytes sit at the same address in both after the fork. */
  static const char mark[] = "rmx-shm-copy";
  char got[sizeof(mark)];
  struct iovec lv = {got, sizeof(got)}, rv = {(void *)mark, sizeof(mark)};
  int reach = mode != MODE_FILTER &&
              process_vm_readv(getppid(), &lv, 1, &rv, 1, 0) == (ssize_t)sizeof(mark);
  if (write(ready_fd, reach ? "r" : "n", 1) != 1)
    return 5;
  while (!s.closed && !s.failed)
    uv_run(rmx_ctx_loop(s.ctx), UV_RUN_ONCE);
  rmx_listener_close(l);
  rmx_mem_dereg(s.mem);
  int rc = rmx_ctx_destroy(s.ctx);
  free(s.region);
  return s.failed ? 6 : rc != 0 ? 7 : 0;
}

/* ---- the client (this process) ---- */

typedef struct cl {
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  int connected, status, done, errors, closed;
  uint8_t *msg;  /* the last message */
  size_t msg_len;
  int msgs;
} cl_t;

static void cl_connected(rmx_conn_t *c, int status, void *arg)
{
  cl_t *k = arg;
  (void)c;
  k->connected = 1;
  k->status = status;
}

static void cl_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  cl_t *k = arg;
  (void)c;
  free(k->msg);
  k->msg = malloc(len + 1);
  if (!k->msg)
    abort();
  memcpy(k->msg, data, len);
  k->msg[len] = 0;
  k->msg_len = len;
  k->msgs++;
}

static void cl_op(rmx_conn_t *c, int status, void *arg)
{
  cl_t *k = arg;
  (void)c;
  k->done++;
  if (status)
    k->errors++;
}

static void cl_closed(rmx_conn_t *c, void *arg) { ((cl_t *)arg)->closed = 1; (void)c; }

static void until(cl_t *k, const int *v, int want)
{
  while (*v < want)
    uv_run(rmx_ctx_loop(k->ctx), UV_RUN_ONCE);
}

/* One case: the server in its mode, everything moved and checked, then
 * the figures. */
static void run_case(int mode)
{
  char uri[64];
  int ready[2], st;
  snprintf(uri, sizeof(uri), "shm://@rmx-shm-copy-%d-%d", (int)getpid(), mode);
  assert_int_equal(pipe(ready), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(ready[0]);
    _exit(serve(uri, mode, ready[1]));
  }
  close(ready[1]);
  char r;
  assert_int_equal(read(ready[0], &r, 1), 1);
  close(ready[0]);
  if (mode == MODE_ON && r != 'r') { /* the kernel allows one direction only */
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    print_message("the server cannot read this process's memory here: no one copy to test\n");
    skip();
  }

  cl_t k = {0};
  copy_line[0] = 0;
  k.ctx = ctx_make(1);
  assert_non_null(k.ctx);
  rmx_conn_cbs_t cbs = {.on_recv = cl_recv};
  assert_int_equal(rmx_connect(k.ctx, uri, cl_connected, &k, &k.c), 0);
  rmx_conn_set_cbs(k.c, &cbs, &k);
  until(&k, &k.connected, 1);
  assert_int_equal(k.status, 0);
  until(&k, &k.msgs, 1); /* the key */
  rmx_rkey_t *rk;
  assert_int_equal(rmx_rkey_unpack(k.c, k.msg, k.msg_len, &rk), 0);

  uint8_t *out = malloc(BIG), *in = malloc(BIG);
  assert_true(out && in);
  uint64_t want_srv = 0, want_cl = 0, off = 0;
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    size_t n = sizes[i];
    pattern(out, n, (uint32_t)(i + 1));
    memset(in, 0, n);
    rmx_iov_t w = {.addr = out, .len = n}, rd = {.addr = in, .len = n};
    assert_int_equal(rmx_write(k.c, &w, 1, rk, off, cl_op, &k), 0);
    assert_int_equal(rmx_read(k.c, &rd, 1, rk, off, cl_op, &k), 0); /* after the write */
    until(&k, &k.done, (int)(2 * (i + 1)));
    assert_int_equal(k.errors, 0);
    assert_memory_equal(in, out, n);
    if (n >= COPY_MIN) { /* each side pulls: the server our write, we our read */
      want_srv += n;
      want_cl += n;
    }
    off += n;
  }
  /* A large message each way: the server reads ours, we read its echo. */
  pattern(out, BIG, 99);
  assert_int_equal(rmx_send(k.c, out, BIG, NULL, NULL), 0);
  until(&k, &k.msgs, 2);
  assert_int_equal(k.msg_len, BIG);
  assert_memory_equal(k.msg, out, BIG);
  want_srv += BIG;
  want_cl += BIG;

  assert_int_equal(rmx_send(k.c, "stats", 5, NULL, NULL), 0);
  until(&k, &k.msgs, 3);
  unsigned long long got_srv = strtoull((char *)k.msg, NULL, 10);
  const char *srv_line = strchr((char *)k.msg, ' ');
  assert_non_null(srv_line);
  print_message("server: %s\nclient: %s\n", srv_line + 1, copy_line);
  if (mode == MODE_ON) {
    assert_int_equal(got_srv, want_srv);
    assert_int_equal(direct_bytes(k.ctx), want_cl);
    assert_non_null(strstr(srv_line, "one copy (process_vm_readv)"));
    assert_non_null(strstr(copy_line, "one copy (process_vm_readv)"));
  } else {
    assert_int_equal(got_srv, 0);
    assert_int_equal(direct_bytes(k.ctx), 0);
    assert_non_null(strstr(srv_line, "the segment carries every byte"));
    assert_non_null(strstr(copy_line, "the segment carries every byte"));
    if (mode == MODE_FILTER) { /* the server could not reach us; we told it we reach it */
      assert_non_null(strstr(srv_line, "process_vm_readv refused: Operation not permitted"));
      assert_non_null(strstr(copy_line, "the peer cannot reach this process's memory"));
    } else {
      assert_non_null(strstr(srv_line, "one copy is off here (RMX_SHM_COPY=0)"));
      assert_non_null(strstr(copy_line, "the peer offers no one copy"));
    }
  }

  rmx_rkey_release(rk);
  assert_int_equal(rmx_conn_close(k.c, cl_closed, &k), 0);
  until(&k, &k.closed, 1);
  assert_int_equal(rmx_ctx_destroy(k.ctx), 0);
  free(out);
  free(in);
  free(k.msg);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

static void one_copy_where_both_reach(void **state)
{
  (void)state;
  run_case(MODE_ON);
}

static void segment_under_a_seccomp_filter(void **state)
{
  (void)state;
#ifndef CMA_FILTER
  skip();
#endif
  run_case(MODE_FILTER);
}

static void segment_when_turned_off(void **state)
{
  (void)state;
  run_case(MODE_OFF);
}

int main(void)
{
  signal(SIGPIPE, SIG_IGN);
  alarm(300);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(one_copy_where_both_reach),
      cmocka_unit_test(segment_under_a_seccomp_filter),
      cmocka_unit_test(segment_when_turned_off),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
