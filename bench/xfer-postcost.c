/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * xfer-postcost: what posting costs per entry, counted by callgrind: a
 * 128-entry transfer request posted once (rmx_xfer_post) against the same
 * 128 blocks posted as 128 rmx_write calls, on a connection of one context
 * to itself.
 *
 *   valgrind --tool=callgrind --collect-atstart=no --vgdb=no \
 *       rmx-xfer-postcost xfer|write post|cycle [N [BLOCK [URI]]]
 *
 * Only the measured part is collected (CALLGRIND_TOGGLE_COLLECT): "post"
 * the posting calls alone, "cycle" a post and the loop turns until its
 * completions (the transport's work and the callbacks included). N rounds
 * (default 100) after 10 not collected; callgrind's total divided by
 * N x 128 is the figure per entry. Blocks (default 4096) are spread at the
 * peer so that the request cannot merge them. Without valgrind it runs and
 * prints the rounds' time.
 */
#include <rmx/rmx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <valgrind/callgrind.h>

#define ENTRIES 128

static rmx_ctx_t *ctx;
static rmx_conn_t *cli, *srv;
static int flag, status, left;

static void stop_with(int st)
{
  status = st;
  flag = 1;
  rmx_ctx_stop(ctx);
}

static int wait_flag(void)
{
  while (!flag)
    if (rmx_ctx_run(ctx) < 0)
      return RMX_EIO;
  flag = 0;
  return status;
}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  srv = c;
  if (cli && status == 1)
    stop_with(0);
}

static void on_connected(rmx_conn_t *c, int st, void *arg)
{
  if (st || srv)
    stop_with(st);
  else
    status = 1; /* connected; the accept comes next */
}

static void on_xfer(rmx_xfer_t *x, int st, size_t failed, void *arg) { stop_with(st); }

static void on_write(rmx_conn_t *c, int st, void *arg)
{
  if (st || --left == 0)
    stop_with(st);
}

int main(int argc, char **argv)
{
  if (argc < 3 || (strcmp(argv[1], "xfer") && strcmp(argv[1], "write")) ||
      (strcmp(argv[2], "post") && strcmp(argv[2], "cycle"))) {
    fprintf(stderr, "usage: rmx-xfer-postcost xfer|write post|cycle [N [BLOCK [URI]]]\n");
    return 2;
  }
  int xfer = strcmp(argv[1], "xfer") == 0, cycle = strcmp(argv[2], "cycle") == 0;
  long n = argc > 3 ? atol(argv[3]) : 100;
  size_t block = argc > 4 ? (size_t)atol(argv[4]) : 4096;
  const char *uri = argc > 5 ? argv[5] : "tcp://127.0.0.1:0";
  size_t len = ENTRIES * block;
  uint8_t *src = calloc(1, len), *dst = calloc(1, 2 * len), blob[RMX_RKEY_MAX];
  size_t blen = sizeof(blob);
  char bound[128];
  rmx_listener_t *l;
  rmx_mem_t *ms, *md;
  rmx_rkey_t *rk;
  rmx_xfer_t *x = NULL;
  rmx_xfer_entry_t e[ENTRIES];
  rmx_iov_t iov[ENTRIES];
  uint64_t off[ENTRIES];
  int rc = src && dst && n > 0 && block > 0 ? rmx_ctx_create(&ctx, NULL, NULL) : RMX_EINVAL;
  if (rc == 0)
    rc = rmx_listen(ctx, uri, on_accept, NULL, &l);
  if (rc == 0)
    rc = rmx_listener_uri(l, bound, sizeof(bound));
  if (rc == 0)
    rc = rmx_connect(ctx, bound, on_connected, NULL, &cli);
  if (rc == 0)
    rc = wait_flag();
  if (rc == 0)
    rc = rmx_mem_reg(ctx, src, len, RMX_MEM_LOCAL, &ms);
  if (rc == 0)
    rc = rmx_mem_reg(ctx, dst, 2 * len, RMX_MEM_REMOTE_WRITE, &md);
  if (rc == 0)
    rc = rmx_mem_pack_for(md, srv, blob, &blen);
  if (rc == 0)
    rc = rmx_rkey_unpack(cli, blob, blen, &rk);
  for (int i = 0; i < ENTRIES; i++) { /* every other block at the peer, backwards */
    off[i] = (uint64_t)(ENTRIES - 1 - i) * 2 * block;
    e[i] = (rmx_xfer_entry_t){src + (size_t)i * block, block, ms, rk, off[i]};
    iov[i] = (rmx_iov_t){src + (size_t)i * block, block, ms};
  }
  if (rc == 0 && xfer)
    rc = rmx_xfer_prep(cli, RMX_XFER_WRITE, e, ENTRIES, &x);
  if (rc) {
    fprintf(stderr, "rmx-xfer-postcost: setting up: %s\n", rmx_strerror(rc));
    return 1;
  }
  for (long r = -10; r < n && rc == 0; r++) {
    int measured = r >= 0;
    if (measured)
      CALLGRIND_TOGGLE_COLLECT;
    if (xfer) {
      rc = rmx_xfer_post(x, NULL, 0, on_xfer, NULL);
    } else {
      left = ENTRIES;
      for (int i = 0; i < ENTRIES && rc == 0; i++)
        rc = rmx_write(cli, &iov[i], 1, rk, off[i], on_write, NULL);
    }
    if (measured && !cycle)
      CALLGRIND_TOGGLE_COLLECT;
    if (rc == 0)
      rc = wait_flag();
    if (measured && cycle)
      CALLGRIND_TOGGLE_COLLECT;
  }
  if (rc) {
    fprintf(stderr, "rmx-xfer-postcost: posting: %s\n", rmx_strerror(rc));
    return 1;
  }
  printf("%s %s: %ld rounds of %d entries of %zu bytes over %s\n", argv[1], argv[2], n, ENTRIES,
         block, rmx_conn_transport(cli));
  rmx_xfer_release(x);
  rmx_rkey_release(rk);
  rmx_mem_dereg(ms);
  rmx_mem_dereg(md);
  return 0;
}
