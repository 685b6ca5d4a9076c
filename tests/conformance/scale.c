/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Many connections to one server (public API only): a server child
 * accepts N connections from one client context here, each carries one
 * message each way, all close, and the server's heap comes back to where
 * it was before the first connection. The first 1000 also carry a large
 * message and then 40 small round trips: the server's heap with them idle
 * again is what it was before (large read buffers are given back). The server measures its heap
 * (mallinfo2: bytes in use, arenas and mmapped chunks) with the listener
 * open and nothing connected, with the N connections established and
 * idle, and after they all closed, and reports it through a pipe.
 *
 *   rmx-scale tcp [N [SLACK_KIB]]      (default 10000; 512 KiB + 32 B x N)
 *
 * Prints the bytes per idle connection. Under a sanitizer the heap is not
 * glibc's: the memory check is skipped (mallinfo2 says nothing) and a
 * smaller N does (ctest passes one). Client and server are two processes:
 * each needs a descriptor per connection.
 */
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rmx/rmx.h>
#include <uv.h>

#define TEST_NAME "scale"
#include "test_util.h"

/* ---- the server (child) ---- */

static rmx_ctx_t *s_ctx;

/* The heap less the buffer pool's slabs, which the pool keeps for reuse
 * (rmx_ctx_stats' pool_bytes says how much). */
static rmx_ctx_stats_t stats(void)
{
  rmx_ctx_stats_t st;
  rmx_ctx_stats_get(s_ctx, &st, sizeof(st));
  return st;
}

static long long heap_bytes(void)
{
  struct mallinfo2 mi = mallinfo2();
  return (long long)(mi.uordblks + mi.hblkhd) - (long long)stats().pool_bytes;
}

#define BUSY_MAX 1000 /* connections that also carry a large message */
#define ROUNDS 40     /* small round trips after it, each waiting for the last */
#define BIG 2000      /* bytes: more than a connection's small read buffer */

static int n_want, accepted, echoed, gone, idle_conns, after_conns;
static long long base, idle, idle2, after;
static uv_timer_t settle;
static long long slack;
static int settle_left;

static void s_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  int busy = n_want < BUSY_MAX ? n_want : BUSY_MAX;
  (void)arg;
  if (echoed == 0) { /* the clients send once all connected: all idle until now */
    idle = heap_bytes();
    idle_conns = (int)stats().conns;
  }
  if (rmx_send(c, data, len, NULL, NULL) == 0 && ++echoed == n_want + busy * (1 + ROUNDS))
    idle2 = heap_bytes(); /* every connection idle again */
}

/* After the last close: wait until the context has freed every connection
 * (each one's handles close on the loop), then measure and stop. */
static void settle_cb(uv_timer_t *t)
{
  after = heap_bytes();
  after_conns = (int)stats().conns;
  if (after_conns == 0 || --settle_left == 0) {
    uv_timer_stop(t);
    rmx_ctx_stop(s_ctx);
  }
}

static void s_gone(rmx_conn_t *c, int status, void *arg)
{
  (void)status;
  (void)arg;
  rmx_conn_close(c, NULL, NULL); /* the application's part: frees it */
  if (++gone == n_want)
    uv_timer_start(&settle, settle_cb, 20, 20);
}

static void s_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  (void)l;
  (void)arg;
  rmx_conn_cbs_t cbs = {.on_recv = s_recv, .on_disconnect = s_gone};
  rmx_conn_set_cbs(c, &cbs, NULL);
  accepted++;
}

static int serve(int out, int n)
{
  rmx_listener_t *l;
  rmx_config_t cfg;
  char bound[128];
  rmx_config_init(&cfg);
  cfg.max_conns = (uint32_t)n; /* raised at will */
  n_want = n;
  if (rmx_ctx_create(&s_ctx, NULL, &cfg) != 0 ||
      rmx_listen(s_ctx, "tcp://127.0.0.1:0", s_accept, NULL, &l) != 0 ||
      rmx_listener_uri(l, bound, sizeof(bound)) != 0)
    return 1;
  uv_timer_init(rmx_ctx_loop(s_ctx), &settle);
  settle_left = 1000; /* 20 s at most */
  malloc_trim(0);
  base = heap_bytes();
  dprintf(out, "%s\n", bound);
  rmx_ctx_run(s_ctx);
  dprintf(out, "%d %d %d %lld %lld %lld %lld %d %d\n", accepted, echoed, gone, base, idle, idle2,
          after, idle_conns, after_conns);
  uv_close((uv_handle_t *)&settle, NULL);
  rmx_listener_close(l);
  rmx_ctx_destroy(s_ctx);
  return 0;
}

/* ---- the clients ---- */

static int nconnected, nfailed, ngot, *rounds;

/* Every message starts with its connection's number; after the first
 * echo, a busy connection's echoes each bring the next small message. */
static void c_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  intptr_t i = (intptr_t)arg;
  if (len < sizeof(arg) || memcmp(data, &arg, sizeof(arg)) != 0)
    FAIL("a client got a message that is not its own back");
  ngot++;
  if (rounds[i - 1] > 0 && rounds[i - 1]++ <= ROUNDS &&
      rmx_send(c, &arg, sizeof(arg), NULL, NULL) != 0)
    FAIL("send");
}

static void c_connected(rmx_conn_t *c, int status, void *arg)
{
  if (status) {
    if (nfailed++ < 5)
      fprintf(stderr, "scale: a client failed to connect: %s\n", rmx_strerror(status));
    return;
  }
  nconnected++;
  rmx_conn_cbs_t cbs = {.on_recv = c_recv};
  rmx_conn_set_cbs(c, &cbs, arg);
}

/* Progress until *a plus the failed connects reach want; none may fail. */
static void run_until(rmx_ctx_t *ctx, const int *a, int want, int secs)
{
  progress_until(ctx, a, &nfailed, want, secs);
  if (nfailed)
    FAIL("%d of %d clients failed to connect", nfailed, want);
}

int main(int argc, char **argv)
{
  if (argc < 2 || strcmp(argv[1], "tcp") != 0) {
    fprintf(stderr, "usage: rmx-scale tcp [N [SLACK_KIB]]\n");
    return 2;
  }
  int n = argc > 2 ? atoi(argv[2]) : 10000;
  /* What stays is bounded, not per connection: the op and write-request
   * freelists (about 400 KiB at most) and the arrays indexed by descriptor
   * number (libuv's watchers, the transport's by_fd: 16 bytes a number). */
  slack = argc > 3 ? atoll(argv[3]) << 10 : (512 << 10) + 32ll * n;
  signal(SIGPIPE, SIG_IGN);
  int p[2];
  if (n < 1 || pipe(p) != 0)
    FAIL("arguments or pipe");
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(p[0]);
    _exit(serve(p[1], n));
  }
  test_server_pid = pid;
  close(p[1]);
  FILE *from = fdopen(p[0], "r");
  char uri[128];
  if (!fgets(uri, sizeof(uri), from))
    FAIL("the server did not start");
  uri[strcspn(uri, "\n")] = 0;

  rmx_config_t cfg;
  rmx_config_init(&cfg);
  cfg.connect_timeout_ms = 120000;
  rmx_ctx_t *ctx;
  if (rmx_ctx_create(&ctx, NULL, &cfg) != 0)
    FAIL("context");
  rmx_conn_t **c = calloc((size_t)n, sizeof(*c));
  rounds = calloc((size_t)n, sizeof(*rounds));
  for (int i = 0; i < n; i++)
    if (rmx_connect(ctx, uri, c_connected, (void *)(intptr_t)(i + 1), &c[i]) != 0)
      FAIL("rmx_connect %d", i);
  run_until(ctx, &nconnected, n, 120);
  for (int i = 0; i < n; i++) {
    void *arg = (void *)(intptr_t)(i + 1);
    if (rmx_send(c[i], &arg, sizeof(arg), NULL, NULL) != 0)
      FAIL("send %d", i);
  }
  run_until(ctx, &ngot, n, 120);
  /* Busy ones: a large message, then small round trips; the server's large
   * read buffers must be given back once the traffic is small again. */
  int busy = n < BUSY_MAX ? n : BUSY_MAX;
  uint8_t big[BIG] = {0};
  for (int i = 0; i < busy; i++) {
    void *arg = (void *)(intptr_t)(i + 1);
    memcpy(big, &arg, sizeof(arg));
    rounds[i] = 1;
    if (rmx_send(c[i], big, sizeof(big), NULL, NULL) != 0)
      FAIL("send big %d", i);
  }
  run_until(ctx, &ngot, n + busy * (1 + ROUNDS), 120);
  for (int i = 0; i < n; i++)
    rmx_conn_close(c[i], NULL, NULL);

  int acc, echo, gone_n, st, c_idle, c_after;
  long long b, i_, i2, a;
  /* The server stops once it has freed every connection (or after its own
   * 20 s): keep this side's closes going meanwhile. */
  for (;;) {
    rmx_ctx_progress(ctx);
    int w = waitpid(pid, &st, WNOHANG);
    if (w == pid)
      break;
    usleep(100);
  }
  test_server_pid = 0;
  if (fscanf(from, "%d %d %d %lld %lld %lld %lld %d %d", &acc, &echo, &gone_n, &b, &i_, &i2, &a,
             &c_idle, &c_after) != 9)
    FAIL("the server did not report");
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    FAIL("the server exited badly");
  rmx_ctx_destroy(ctx);
  free(c);
  free(rounds);
  if (acc != n || echo != n + busy * (1 + ROUNDS) || gone_n != n)
    FAIL("the server accepted %d, echoed %d, saw %d go; want %d, %d, %d", acc, echo, gone_n, n,
         n + busy * (1 + ROUNDS), n);
  if (c_idle != n || c_after != 0)
    FAIL("the server's rmx_ctx_stats counted %d connections with all %d up, %d after", c_idle, n,
         c_after);
  printf("scale: %d connections accepted, one message each way on each (%d of them a large one "
         "and %d round trips more), all closed\n", n, busy, ROUNDS);
#ifdef __SANITIZE_ADDRESS__
  if (1) {
#else
  if (b == 0 && a == 0) {
#endif
    printf("scale: no mallinfo2 figures (a sanitizer's heap): memory not checked\n");
    return 0;
  }
  printf("scale: server heap: %lld bytes before, %lld with %d idle connections (%lld bytes "
         "each), %lld after they closed (%+lld)\n",
         b, i_, n, (i_ - b) / n, a, a - b);
  printf("scale: server heap after the traffic, idle again: %lld bytes (%+lld)\n", i2, i2 - i_);
  if (i2 > i_ + slack)
    FAIL("the large read buffers were not given back: %lld bytes over the idle heap", i2 - i_);
  if (a > b + slack)
    FAIL("the server's heap did not come back: %lld bytes over its baseline (slack %lld)",
         a - b, slack);
  return 0;
}
