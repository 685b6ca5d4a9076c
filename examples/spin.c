/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-spin: the polling pattern of a latency-sensitive program. The thread
 * that owns the context spins on rmx_ctx_progress() instead of sleeping in
 * an event loop, so a reply is picked up the moment it lands.
 *
 *   rmx-spin [URI [ROUNDS]]   (default tcp://127.0.0.1:0, 10000 rounds)
 *
 * A server process (forked) listens on URI and echoes; this process
 * connects to it and sends ROUNDS pings of 32 bytes one after the other,
 * each checked byte for byte and timed. Both spin. It prints the median
 * and 99th percentile round trip, closes everything and destroys both
 * contexts. Exit 0 when every echo came back intact and both sides ended
 * clean, 1 when something failed, 2 for a bad command line (tool.h).
 *
 * Why two processes: a spinning program usually has one busy connection,
 * and over TCP the fast path reads the connection that last had input
 * straight from its socket; any other waits for the loop's turn (every
 * 1024 calls). Both ends in one context would measure that wait.
 */
#include <poll.h>
#include <rmx/rmx.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tool.h"

enum {
  MSG_LEN = 32,
  /* Empty passes in a row before the spinner offers to sleep. A pass that
   * finds nothing costs about a microsecond or less, so this is a few ms
   * of quiet: far longer than a ping takes to come back, unless the peer
   * stalls (descheduled on a busy host, say). */
  IDLE_PASSES = 10000,
};

static rmx_ctx_t *ctx; /* one per process, on a private loop */
static rmx_conn_t *conn;
static int connected, echoed, closed, failed;
static long bad, backoffs, sleeps;
static unsigned char ping[MSG_LEN];
static pid_t parent;

static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The heart of the example: spin until a callback sets *flag.
 *
 * One rmx_ctx_progress() call polls every transport (the CQs over RDMA,
 * the connection that last had input over TCP), runs the callbacks that
 * are due, and sends what they and this thread posted before it returns.
 * It never blocks. With RMX_PROGRESS=poll it turns libuv's loop (timers,
 * connection set-up, posts from other threads) only once every 1024 calls,
 * so a call that finds nothing is cheap.
 *
 * Spinning costs a whole core. After IDLE_PASSES empty calls in a row the
 * spinner backs off by the wait-fd contract: sleep until rmx_ctx_fd() is
 * readable, but no longer than rmx_ctx_timeout() (0: do not sleep now;
 * -1: no timer is due, only the fd can wake us). That is always safe:
 * rmx says 0 whenever something needs polling. With RMX_PROGRESS=poll it
 * says 0 for good once traffic has started (rmx then never arms its
 * completion channels and keeps polling), so the back-off never sleeps;
 * run with RMX_PROGRESS=adaptive to see it sleep after spin_us of quiet.
 */
static int spin_until(const int *flag)
{
  unsigned zeros = 0;
  while (!*flag && !failed) {
    int n = rmx_ctx_progress(ctx);
    if (n < 0) { /* RMX_ECANCELED: a callback destroyed the context */
      fprintf(stderr, "rmx-spin: rmx_ctx_progress: %s\n", rmx_strerror(n));
      return -1;
    }
    if (n > 0)
      zeros = 0;
    if (n > 0 || ++zeros < IDLE_PASSES)
      continue;
    zeros = 0;
    backoffs++;
    int ms = rmx_ctx_timeout(ctx);
    if (ms != 0) {
      struct pollfd p = {.fd = rmx_ctx_fd(ctx), .events = POLLIN};
      sleeps++;
      poll(&p, 1, ms); /* readable or timed out: progress again either way */
    }
  }
  return failed ? -1 : 0;
}

/* Polling progress, set in code. rmx_config_init has read RMX_* from the
 * environment; the program's choice wins unless the user set
 * RMX_PROGRESS. The context gets a private loop (NULL): rmx_ctx_progress
 * turns it, and rmx_ctx_fd() is there to sleep on. */
static int make_ctx(void)
{
  rmx_config_t cfg;
  int rc = rmx_config_init(&cfg);
  if (rc != 0)
    return rc; /* its log line said which variable is wrong */
  if (!getenv("RMX_PROGRESS"))
    cfg.progress = RMX_PROGRESS_POLL;
  if ((rc = rmx_ctx_create(&ctx, NULL, &cfg)) != 0)
    fprintf(stderr, "rmx-spin: %s\n", rmx_strerror(rc));
  return rc;
}

static void on_closed(rmx_conn_t *c, void *arg) { closed = 1; }

static void on_gone(rmx_conn_t *c, int status, void *arg)
{
  if (status != 0) { /* 0: the peer closed on purpose */
    fprintf(stderr, "rmx-spin: connection lost: %s\n", rmx_strerror(status));
    failed = 1;
  }
  rmx_conn_close(c, on_closed, NULL);
}

/* ---- the server process: echo every message of one connection ---- */

static void server_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  /* 32 bytes are copied before rmx_send returns: no buffer to keep. The
   * echo leaves in the same rmx_ctx_progress call that delivered the ping. */
  if (rmx_send(c, data, len, NULL, NULL) != 0)
    failed = 1;
}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  static const rmx_conn_cbs_t cbs = {.on_recv = server_recv, .on_disconnect = on_gone};
  if (conn) { /* one client is all this server is for */
    rmx_conn_close(c, NULL, NULL);
    return;
  }
  conn = c;
  rmx_conn_set_cbs(c, &cbs, NULL);
}

/* Listen, tell the parent where (one line on @p fd), echo until the
 * client closes, then take everything down. The exit status. */
static int serve(const char *uri, int fd)
{
  rmx_listener_t *l;
  char bound[128];
  int rc;
  prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive the client */
  if (getppid() != parent)
    return 1; /* it is gone already */
  if (make_ctx() != 0)
    return 1;
  if ((rc = rmx_listen(ctx, uri, on_accept, NULL, &l)) != 0)
    return tool_uri_failed("listen on", uri, rc);
  if (rmx_listener_uri(l, bound, sizeof(bound)) != 0 || dprintf(fd, "%s\n", bound) < 0)
    return 1;
  close(fd);
  int ok = spin_until(&closed) == 0;
  rmx_listener_close(l);
  return !(ok && rmx_ctx_destroy(ctx) == 0);
}

/* ---- the client: ping-pong, check, time ---- */

static void client_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  if (len != MSG_LEN || memcmp(data, ping, MSG_LEN) != 0)
    bad++; /* data is valid only in this callback: check it here */
  echoed = 1;
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  if (status != 0) {
    fprintf(stderr, "rmx-spin: connect: %s\n", rmx_strerror(status));
    failed = 1;
  }
  connected = 1;
}

static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int client(const char *uri, long rounds, uint64_t *rtt)
{
  static const rmx_conn_cbs_t cbs = {.on_recv = client_recv, .on_disconnect = on_gone};
  int rc;
  if (make_ctx() != 0)
    return -1;
  /* The connect's handshake runs in libuv's loop, which the spin turns. */
  if ((rc = rmx_connect(ctx, uri, on_connected, NULL, &conn)) != 0) {
    fprintf(stderr, "rmx-spin: connect to %s: %s\n", uri, rmx_strerror(rc));
    return -1;
  }
  rmx_conn_set_cbs(conn, &cbs, NULL);
  if (spin_until(&connected) != 0)
    return -1;
  for (long i = 0; i < rounds; i++) {
    for (int k = 0; k < MSG_LEN; k++)
      ping[k] = (unsigned char)(i * 31 + k);
    echoed = 0;
    uint64_t t0 = now_ns();
    /* Queued here, on the wire in the next rmx_ctx_progress call; the
     * spin then finds the echo without a wake-up. */
    if ((rc = rmx_send(conn, ping, MSG_LEN, NULL, NULL)) != 0) {
      fprintf(stderr, "rmx-spin: send: %s\n", rmx_strerror(rc));
      return -1;
    }
    if (spin_until(&echoed) != 0)
      return -1;
    rtt[i] = now_ns() - t0;
  }
  /* Close, spin until on_closed ran, destroy. Outside any callback, on a
   * private loop, rmx_ctx_destroy finishes before it returns. */
  rmx_conn_close(conn, on_closed, NULL);
  if (spin_until(&closed) != 0 || (rc = rmx_ctx_destroy(ctx)) != 0)
    return -1;
  return 0;
}

static const char usage[] =
    "usage: rmx-spin [URI [ROUNDS]]\n"
    "       rmx-spin --help | --version\n"
    "  The polling pattern: a client and a forked echo server both spin on\n"
    "  rmx_ctx_progress() (RMX_PROGRESS=poll unless the environment says\n"
    "  otherwise) through ROUNDS (10000) checked ping-pongs of 32 bytes over URI\n"
    "  (tcp://127.0.0.1:0, where the server listens; rdma://ADDR:0 works too);\n"
    "  prints the median and 99th percentile round trip in us.\n"
    "  Exit 0: every echo came back intact; 1: one did not, or the run failed;\n"
    "  2: a bad command line.\n";

int main(int argc, char **argv)
{
  int first = tool_options(argc, argv, usage), fds[2], status;
  if (argc - first > 2)
    tool_bad("at most a URI and a round count, not %d operands", argc - first);
  const char *uri = argc > first ? argv[first] : "tcp://127.0.0.1:0";
  tool_uri("URI", uri);
  long rounds = argc > first + 1 ? (long)tool_num("ROUNDS", argv[first + 1], 1, 100000000) : 10000;
  uint64_t *rtt = malloc((size_t)rounds * sizeof(*rtt));
  if (!rtt || pipe(fds) != 0)
    return 1;
  fflush(NULL);
  parent = getpid();
  pid_t pid = fork();
  if (pid < 0)
    return 1;
  if (pid == 0) {
    close(fds[0]);
    free(rtt);
    exit(serve(uri, fds[1]));
  }

  /* The server's URI with its real port, in one write; nothing if it
   * could not listen. */
  char bound[128];
  close(fds[1]);
  ssize_t got = read(fds[0], bound, sizeof(bound) - 1);
  close(fds[0]);
  bound[got > 0 ? got : 0] = '\0';
  bound[strcspn(bound, "\n")] = '\0';
  got = got > 0;
  int rc = got ? client(bound, rounds, rtt) : -1;
  if (rc != 0)
    kill(pid, SIGTERM); /* it would wait for a client forever */
  int server_rc = waitpid(pid, &status, 0) == pid && WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  if (!got) /* it could not listen: its status says why (2: the URI) */
    return server_rc ? server_rc : 1;
  if (rc == 0 && server_rc != 0)
    fprintf(stderr, "rmx-spin: the server process failed\n");
  if (rc != 0 || server_rc != 0) {
    free(rtt);
    return 1;
  }

  qsort(rtt, (size_t)rounds, sizeof(*rtt), cmp_u64);
  printf("spin: %ld round trips of %d B over %s, %ld bad\n", rounds, MSG_LEN, bound, bad);
  printf("spin: median %.1f us, p99 %.1f us\n", rtt[rounds / 2] / 1e3,
         rtt[(rounds * 99) / 100] / 1e3);
  printf("spin: backed off %ld times (%d empty passes each), slept on the fd %ld of them\n",
         backoffs, IDLE_PASSES, sleeps);
  free(rtt);
  return bad != 0;
}
