/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shm://'s one copy when the target lets the memory go between its yes to
 * a read and the initiator's pull (docs/protocol.md, "Direct requests"):
 * the read must fail, never complete with what the memory held after the
 * target let it go. Two processes: the server (a child) registers a
 * region and serves; this process reads it by one copy. Its
 * process_vm_readv is wrapped: on the armed read's pull, before the copy,
 * it has the server deregister the region and overwrite it, and waits
 * until it has. A first read, unarmed, checks that one copy is in use and
 * the wrapper sees its pull.
 *   rmx-shm-pull
 */
#include <rmx/rmx.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#define REGION (1u << 20)
#define COPY_MIN (32u << 10) /* transport/shm/tp.h RMX_SHM_COPY_MIN */
#define JUNK 0xee

/* ---- the wrapper (this process) ---- */

static int go_fd = -1, ack_fd = -1; /* to the server, from it */
static int armed;                   /* the next pull of COPY_MIN or more waits */
static int pulls;                   /* pulls of COPY_MIN or more seen */

ssize_t process_vm_readv(pid_t pid, const struct iovec *l, unsigned long nl,
                         const struct iovec *r, unsigned long nr, unsigned long flags)
{
  size_t len = 0;
  for (unsigned long i = 0; i < nl; i++)
    len += l[i].iov_len;
  if (len >= COPY_MIN) {
    pulls++;
    if (armed) {
      char b;
      armed = 0;
      if (write(go_fd, "g", 1) != 1 || read(ack_fd, &b, 1) != 1)
        abort();
    }
  }
  return syscall(SYS_process_vm_readv, pid, l, nl, r, nr, flags);
}

/* ---- the server (a child process) ---- */

typedef struct srv {
  rmx_ctx_t *ctx;
  rmx_mem_t *mem;
  uint8_t *region;
  int go, ack, failed, gone, closed;
  uv_poll_t poll;
} srv_t;

static void pattern(uint8_t *p, size_t len)
{
  for (size_t i = 0; i < len; i++)
    p[i] = (uint8_t)(i * 7 + 3);
}

static void srv_closed(rmx_conn_t *c, void *arg) { ((srv_t *)arg)->closed = 1; (void)c; }

static void srv_gone(rmx_conn_t *c, int status, void *arg)
{
  (void)status;
  ((srv_t *)arg)->gone = 1;
  rmx_conn_close(c, srv_closed, arg);
}

static void srv_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  srv_t *s = arg;
  uint8_t blob[RMX_RKEY_MAX];
  size_t len = sizeof(blob);
  rmx_conn_cbs_t cbs = {.on_disconnect = srv_gone};
  (void)l;
  rmx_conn_set_cbs(c, &cbs, s);
  if (rmx_mem_pack_for(s->mem, c, blob, &len) != 0 || rmx_send(c, blob, len, NULL, NULL) != 0)
    s->failed = 1;
}

/* The client's pull is about to copy: the memory goes now, and what the
 * region holds from here is another's. */
static void srv_go(uv_poll_t *h, int status, int events)
{
  srv_t *s = h->data;
  char b;
  (void)status, (void)events;
  if (read(s->go, &b, 1) != 1) {
    s->failed = 1;
    uv_poll_stop(h);
    return;
  }
  rmx_mem_dereg(s->mem);
  s->mem = NULL;
  memset(s->region, JUNK, REGION);
  if (write(s->ack, "a", 1) != 1)
    s->failed = 1;
}

static int serve(const char *uri, int go, int ack, int ready)
{
  srv_t s = {.go = go, .ack = ack};
  rmx_listener_t *l;
  if (rmx_ctx_create(&s.ctx, NULL, NULL) != 0 || !(s.region = malloc(REGION)))
    return 2;
  pattern(s.region, REGION);
  if (rmx_mem_reg(s.ctx, s.region, REGION, RMX_MEM_REMOTE_READ, &s.mem) != 0 ||
      rmx_listen(s.ctx, uri, srv_accept, &s, &l) != 0)
    return 3;
  s.poll.data = &s;
  if (uv_poll_init(rmx_ctx_loop(s.ctx), &s.poll, go) != 0 ||
      uv_poll_start(&s.poll, UV_READABLE, srv_go) != 0)
    return 4;
  if (write(ready, "r", 1) != 1)
    return 5;
  while (!s.closed && !s.failed)
    uv_run(rmx_ctx_loop(s.ctx), UV_RUN_ONCE);
  uv_close((uv_handle_t *)&s.poll, NULL);
  rmx_listener_close(l);
  if (s.mem)
    rmx_mem_dereg(s.mem);
  int rc = rmx_ctx_destroy(s.ctx);
  free(s.region);
  return s.failed ? 6 : rc != 0 ? 7 : 0;
}

/* ---- the client (this process) ---- */

typedef struct cl {
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  int connected, status, done, op_status, gone, gone_status, closed, msgs;
  uint8_t key[RMX_RKEY_MAX];
  size_t key_len;
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
  if (len <= sizeof(k->key)) {
    memcpy(k->key, data, len);
    k->key_len = len;
  }
  k->msgs++;
}

static void cl_op(rmx_conn_t *c, int status, void *arg)
{
  cl_t *k = arg;
  (void)c;
  k->done++;
  k->op_status = status;
}

static void cl_gone(rmx_conn_t *c, int status, void *arg)
{
  cl_t *k = arg;
  (void)c;
  k->gone++;
  k->gone_status = status;
}

static void cl_closed(rmx_conn_t *c, void *arg) { ((cl_t *)arg)->closed++; (void)c; }

static void until(cl_t *k, const int *v, int want)
{
  while (*v < want)
    uv_run(rmx_ctx_loop(k->ctx), UV_RUN_ONCE);
}

static void read_of_memory_let_go_before_the_pull_fails(void **state)
{
  (void)state;
  char uri[64];
  int go[2], ack[2], ready[2], st;
  snprintf(uri, sizeof(uri), "shm://@rmx-shm-pull-%d", (int)getpid());
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(ack), 0);
  assert_int_equal(pipe(ready), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(go[1]), close(ack[0]), close(ready[0]);
    _exit(serve(uri, go[0], ack[1], ready[1]));
  }
  close(go[0]), close(ack[1]), close(ready[1]);
  go_fd = go[1];
  ack_fd = ack[0];
  char r;
  assert_int_equal(read(ready[0], &r, 1), 1);

  cl_t k = {0};
  assert_int_equal(rmx_ctx_create(&k.ctx, NULL, NULL), 0);
  rmx_conn_cbs_t cbs = {.on_recv = cl_recv, .on_disconnect = cl_gone};
  assert_int_equal(rmx_connect(k.ctx, uri, cl_connected, &k, &k.c), 0);
  rmx_conn_set_cbs(k.c, &cbs, &k);
  until(&k, &k.connected, 1);
  assert_int_equal(k.status, 0);
  until(&k, &k.msgs, 1);
  rmx_rkey_t *rk;
  assert_int_equal(rmx_rkey_unpack(k.c, k.key, k.key_len, &rk), 0);

  /* Unarmed: every byte right, until one goes by one copy (the wrapper
   * sees its pull): the agreement's messages may still be on their way
   * when the first read goes. */
  uint8_t *in = malloc(REGION), *want = malloc(REGION);
  assert_true(in && want);
  pattern(want, REGION);
  rmx_iov_t rd = {.addr = in, .len = REGION};
  int tries = 0;
  while (pulls == 0 && tries < 100) {
    memset(in, 0, REGION);
    assert_int_equal(rmx_read(k.c, &rd, 1, rk, 0, cl_op, &k), 0);
    until(&k, &k.done, ++tries);
    assert_int_equal(k.op_status, 0);
    assert_memory_equal(in, want, REGION);
  }
  if (pulls == 0) { /* never agreed: the kernel lets one side reach the other only */
    print_message("no one copy between these processes here: nothing to test\n");
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    skip();
  }
  assert_int_equal(pulls, 1);

  /* Armed: the region is let go and overwritten between the yes and the
   * copy. The read fails, and the connection with it. */
  armed = 1;
  memset(in, 0, REGION);
  assert_int_equal(rmx_read(k.c, &rd, 1, rk, 0, cl_op, &k), 0);
  until(&k, &k.done, tries + 1);
  assert_int_equal(pulls, 2);
  assert_int_equal(armed, 0);
  print_message("the read across the release: %s; the connection: %s\n",
                rmx_strerror(k.op_status), k.gone ? rmx_strerror(k.gone_status) : "up");
  assert_int_not_equal(k.op_status, 0);
  until(&k, &k.gone, 1);
  assert_int_not_equal(k.gone_status, 0);

  rmx_rkey_release(rk);
  assert_int_equal(rmx_conn_close(k.c, cl_closed, &k), 0);
  until(&k, &k.closed, 1);
  assert_int_equal(k.done, tries + 1);
  assert_int_equal(k.gone, 1);
  assert_int_equal(rmx_ctx_destroy(k.ctx), 0);
  free(in);
  free(want);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  close(go[1]), close(ack[0]), close(ready[0]);
}

int main(void)
{
  signal(SIGPIPE, SIG_IGN);
  alarm(120);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(read_of_memory_let_go_before_the_pull_fails),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
