/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A peer that keeps the remote window is never cut off. Two contexts on
 * two threads (so the target reads new requests while its answers are
 * still being written) keep exactly the window of one-sided writes, then
 * reads, in flight, for many rounds. The target once counted a request
 * until libuv's write callback, a loop turn after the answer had left,
 * while the initiator counts until the answer arrives; a compliant peer
 * was cut off with RMX_EPROTO after a few hundred writes.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include <rmx/rmx.h>

#define WIN 64         /* the default RMX_RMA_WINDOW */
#define SIZE 4096
#define SLOTS 256      /* SIZE-byte places in the target region */
#define TOTAL 40000    /* operations per direction */

static rmx_ctx_t *sctx, *cctx;
static rmx_listener_t *lst;
static rmx_conn_t *sconn, *cconn;
static rmx_mem_t *smem;
static uint8_t *region, *src;
static uint8_t blob[RMX_RKEY_MAX];
static size_t bloblen;
static int srv_disconnects, srv_closed;
static int connected, cli_disconnects, issued, done_ok, done_err, reading;
static rmx_rkey_t *rk;

static void s_disc(rmx_conn_t *c, int st, void *a) { srv_disconnects++; }
static void s_closed(rmx_conn_t *c, void *a) { srv_closed = 1; }

static void s_accept(rmx_listener_t *l, rmx_conn_t *c, void *a)
{
  rmx_conn_set_cbs(c, &(rmx_conn_cbs_t){.on_disconnect = s_disc}, NULL);
  sconn = c;
}

/* The target's thread: its own context and loop. */
static void s_stop(void *arg)
{
  rmx_conn_close(sconn, s_closed, NULL);
  rmx_listener_close(lst);
}

static void *target(void *arg)
{
  rmx_ctx_run(sctx);
  return NULL;
}

static void c_disc(rmx_conn_t *c, int st, void *a) { cli_disconnects++; }
static void c_connected(rmx_conn_t *c, int st, void *a)
{
  assert_int_equal(st, 0);
  rmx_conn_set_cbs(c, &(rmx_conn_cbs_t){.on_disconnect = c_disc}, NULL);
  connected = 1;
}

static void op_done(rmx_conn_t *c, int st, void *a);

static void issue(void)
{
  rmx_iov_t v = {src, SIZE, NULL};
  uint64_t off = (uint64_t)(issued % SLOTS) * SIZE;
  int rc = reading ? rmx_read(cconn, &v, 1, rk, off, op_done, NULL)
                   : rmx_write(cconn, &v, 1, rk, off, op_done, NULL);
  assert_int_equal(rc, 0);
  issued++;
}

static void op_done(rmx_conn_t *c, int st, void *a)
{
  if (st) {
    done_err++;
    return;
  }
  done_ok++;
  if (issued < TOTAL && !done_err)
    issue(); /* one in, one out: exactly the window stays in flight */
}

static void run_until(const int *flag, int want)
{
  while (*flag < want && !done_err && !cli_disconnects)
    uv_run(rmx_ctx_loop(cctx), UV_RUN_ONCE);
}

static void round_of(int read)
{
  reading = read;
  issued = done_ok = 0;
  for (int i = 0; i < WIN; i++)
    issue();
  run_until(&done_ok, TOTAL);
  assert_int_equal(done_err, 0);
  assert_int_equal(cli_disconnects, 0);
  assert_int_equal(done_ok, TOTAL);
}

static void window_kept_is_never_cut_off(void **state)
{
  char uri[128];
  pthread_t th;
  alarm(600); /* a hang fails the test */
  region = calloc(1, SLOTS * SIZE);
  src = calloc(1, SIZE);
  assert_int_equal(rmx_ctx_create(&sctx, NULL, NULL), 0);
  assert_int_equal(rmx_ctx_create(&cctx, NULL, NULL), 0);
  assert_int_equal(rmx_listen(sctx, "tcp://127.0.0.1:0", s_accept, NULL, &lst), 0);
  assert_int_equal(rmx_listener_uri(lst, uri, sizeof(uri)), 0);
  assert_int_equal(rmx_mem_reg(sctx, region, SLOTS * SIZE,
                               RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE, &smem), 0);
  bloblen = sizeof(blob);
  assert_int_equal(rmx_mem_pack(smem, blob, &bloblen), 0);
  assert_int_equal(pthread_create(&th, NULL, target, NULL), 0);
  assert_int_equal(rmx_connect(cctx, uri, c_connected, NULL, &cconn), 0);
  run_until(&connected, 1);
  assert_int_equal(rmx_rkey_unpack(cconn, blob, bloblen, &rk), 0);
  round_of(0);
  round_of(1);
  rmx_rkey_release(rk);
  assert_int_equal(rmx_conn_close(cconn, NULL, NULL), 0);
  assert_int_equal(rmx_ctx_post(sctx, s_stop, NULL), 0);
  pthread_join(th, NULL); /* rmx_ctx_run returns once the target has nothing left */
  assert_true(srv_closed);
  assert_true(srv_disconnects <= 1);
  rmx_mem_dereg(smem);
  assert_int_equal(rmx_ctx_destroy(sctx), 0);
  assert_int_equal(rmx_ctx_destroy(cctx), 0);
  free(region);
  free(src);
  alarm(0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {cmocka_unit_test(window_kept_is_never_cut_off)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
