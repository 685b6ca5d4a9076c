/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The metadata test's case 6 (meta.c): a handle in the application's own
 * libuv loop. Requests in flight keep uv_run going, an open idle handle
 * does not, and after close and destroy nothing is left on the loop
 * (uv_loop_close succeeds).
 */
#include <stdio.h>
#include <rmx/rmx.h>
#include <uv.h>

#define TEST_NAME "meta"
#include "meta_etcd.h"

typedef struct rec {
  int n, status;
} rec_t;

static void on_done(rmx_meta_t *m, int status, void *arg)
{
  rec_t *r = arg;
  (void)m;
  r->n++;
  r->status = status;
}

void case_own_loop(const char *endpoint)
{
  uv_loop_t loop;
  rmx_ctx_t *ctx;
  rmx_meta_t *m;
  rec_t o = {0}, u = {0}, c = {0};
  if (uv_loop_init(&loop) != 0 || rmx_ctx_create(&ctx, &loop, NULL) != 0)
    FAIL("a context in the caller's loop");
  if (rmx_meta_open(ctx, endpoint, "/t/", "uvloop", 5, on_done, &o, &m) != 0)
    FAIL("open");
  uv_run(&loop, UV_RUN_DEFAULT); /* returns once nothing is in flight */
  if (o.n != 1 || o.status)
    FAIL("open in the caller's loop: %d calls, %s", o.n, rmx_err_name(o.status));
  if (rmx_meta_set_uri(m, "tcp://u", on_done, &u) != 0)
    FAIL("set_uri");
  uv_run(&loop, UV_RUN_DEFAULT);
  if (u.n != 1 || u.status)
    FAIL("set_uri in the caller's loop: %d calls, %s", u.n, rmx_err_name(u.status));
  if (rmx_meta_close(m, on_done, &c) != 0)
    FAIL("close");
  uv_run(&loop, UV_RUN_DEFAULT);
  if (c.n != 1 || c.status)
    FAIL("close in the caller's loop: %d calls, %s", c.n, rmx_err_name(c.status));
  if (rmx_ctx_destroy(ctx) != 0)
    FAIL("destroy");
  uv_run(&loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&loop) != 0)
    FAIL("handles left in the caller's loop");
  printf("meta: in the caller's libuv loop, nothing left after close\n");
}
