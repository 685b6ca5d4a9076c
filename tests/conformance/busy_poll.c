/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A polling client whose every pass finds work that takes long still
 * turns its loop, so its timers run and its keepalives go:
 *   rmx-busy-poll SCHEME   (tcp: 127.0.0.1; rdma: $RMX_TEST_ADDR, else $RXE_VM_ADDR)
 *
 * The server, a child with its own context, declares a peer lost after
 * 1.5 s without a frame from it (RMX_KEEPALIVE_TIMEOUT_MS: long enough for
 * a loaded 2-core host). The client polls (RMX_PROGRESS=poll) and streams
 * one-sided writes, which give the server's core nothing to hear; each
 * write's callback takes 4 ms. The client must still send its keepalives
 * (every 100 ms), so for 6 s of this no write fails and the connection
 * stays. A client that turned its loop only every RMX__TURN_EVERY passes
 * (1,024 of them: 4 s here) went silent for longer than the limit and lost
 * its connection.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rmx/rmx.h>

#define TEST_NAME "busy-poll"
#include "test_util.h"

#define REGION (1u << 20)
#define BLOCK 4096
#define INFLIGHT 8

static void config(rmx_config_t *cfg, rmx_progress_t progress)
{
  rmx_config_init(cfg);
  cfg->keepalive_ms = 100;
  cfg->keepalive_timeout_ms = 1500;
  cfg->progress = progress;
}

/* ---- the server (child): a region, its key to each client ---- */

static rmx_mem_t *srv_mem;

static void srv_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  uint8_t blob[RMX_RKEY_MAX];
  size_t len = sizeof(blob);
  (void)l;
  (void)arg;
  if (rmx_mem_pack_for(srv_mem, c, blob, &len) || rmx_send(c, blob, len, NULL, NULL))
    _exit(3);
}

static void server(const char *uri, int fd)
{
  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  char where[128];
  static uint8_t region[REGION];
  config(&cfg, RMX_PROGRESS_EVENT);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (rmx_ctx_create(&ctx, NULL, &cfg) ||
      rmx_mem_reg(ctx, region, REGION, RMX_MEM_REMOTE_WRITE, &srv_mem) ||
      rmx_listen(ctx, uri, srv_accept, NULL, &l) ||
      rmx_listener_uri(l, where, sizeof(where)))
    _exit(2);
  if (write(fd, where, strlen(where) + 1) < 0)
    _exit(2);
  close(fd);
  rmx_ctx_run(ctx); /* until killed */
  _exit(0);
}

/* ---- the client: polls, each completion takes 2 ms ---- */

static rmx_conn_t *conn;
static rmx_rkey_t *rk;
static int connected, lost, lost_status, writes, failed, fail_status;
static uint8_t src[BLOCK];

static void burn_ms(unsigned ms)
{
  uint64_t end = now_ms() + ms;
  while (now_ms() < end)
    ;
}

static void wrote(rmx_conn_t *c, int status, void *arg);

static void post_one(void)
{
  rmx_iov_t v = {.addr = src, .len = BLOCK};
  int rc = rmx_write(conn, &v, 1, rk, (uint64_t)(writes % (REGION / BLOCK)) * BLOCK, wrote, NULL);
  if (rc) {
    failed++;
    fail_status = rc;
  }
}

static int streaming = 1;

static void wrote(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  (void)arg;
  burn_ms(4); /* the application's work per completion */
  if (status) {
    failed++;
    fail_status = status;
    return;
  }
  writes++;
  if (streaming)
    post_one();
}

static void got_key(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  (void)arg;
  if (!rk && rmx_rkey_unpack(c, data, len, &rk))
    FAIL("unpack");
}

static void on_lost(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  (void)arg;
  lost++;
  lost_status = status;
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  (void)arg;
  if (status)
    FAIL("connect: %s", rmx_strerror(status));
  connected = 1;
}

static int closed;
static void on_closed(rmx_conn_t *c, void *arg)
{
  (void)c;
  (void)arg;
  closed = 1;
}

int main(int argc, char **argv)
{
  char uri[128], where[128] = {0};
  int fds[2];
  if (argc < 2)
    FAIL("usage: rmx-busy-poll tcp|rdma");
  listen_uri(argv[1], uri, sizeof(uri));
  alarm(120);
  if (pipe(fds))
    FAIL("pipe");
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    server(uri, fds[1]);
  }
  test_server_pid = pid;
  close(fds[1]);
  if (read(fds[0], where, sizeof(where) - 1) <= 0)
    FAIL("the server did not start");
  close(fds[0]);

  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  config(&cfg, RMX_PROGRESS_POLL);
  if (rmx_ctx_create(&ctx, NULL, &cfg) || rmx_connect(ctx, where, on_connected, NULL, &conn))
    FAIL("connect");
  rmx_conn_set_cbs(conn, &(rmx_conn_cbs_t){.on_recv = got_key, .on_disconnect = on_lost}, NULL);
  uint64_t end = now_ms() + 10000;
  while ((!connected || !rk) && now_ms() < end && !lost)
    rmx_ctx_progress(ctx);
  if (!rk)
    FAIL("no key from the server");
  for (int i = 0; i < INFLIGHT; i++)
    post_one();
  end = now_ms() + 6000;
  while (now_ms() < end && !lost && !failed)
    if (rmx_ctx_progress(ctx) < 0)
      FAIL("progress");
  streaming = 0;
  if (lost || failed)
    FAIL("after %d writes of 4 ms each: %s (%s): the client's keepalives did not go while it "
         "polled", writes, lost ? "connection lost" : "a write failed",
         rmx_strerror(lost ? lost_status : fail_status));
  if (writes < 100)
    FAIL("only %d writes in 6 s", writes);
  rmx_rkey_release(rk);
  if (rmx_conn_close(conn, on_closed, NULL))
    FAIL("close");
  end = now_ms() + 10000;
  while (!closed && now_ms() < end)
    rmx_ctx_progress(ctx);
  if (!closed || rmx_ctx_destroy(ctx))
    FAIL("teardown");
  kill(pid, SIGTERM);
  waitpid(pid, NULL, 0);
  printf("busy-poll %s: %d writes of 4 ms each in 6 s, the connection kept\n", argv[1], writes);
  return 0;
}
