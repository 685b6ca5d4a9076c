/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-echo: an echo server and a ping-pong client.
 *
 *   rmx-echo server URI                 echo every message back
 *   rmx-echo client URI [COUNT [SIZE]]  send COUNT messages of SIZE bytes one
 *                                       at a time, check each echo byte for
 *                                       byte, print round-trip times
 *
 * URI is tcp://host:port, rdma://host:port or auto://host:port. Exit 0 when
 * done and checked, 1 when it failed, 2 for a bad command line (tool.h).
 */
#include <rmx/rmx.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>
#include "tool.h"

static rmx_ctx_t *ctx;

static double now_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* ---- server ---- */

static void echo_sent(rmx_conn_t *c, int status, void *arg)
{
  if (status && status != RMX_ECANCELED && status != RMX_ECONNRESET)
    fprintf(stderr, "rmx-echo: echo failed: %s\n", rmx_strerror(status));
}

static void server_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  /* Received data lives only during this callback, and whether a send is
   * copied or goes zero-copy depends on the eager size: the reply goes
   * from a pool buffer, which rmx owns until it is sent. */
  rmx_buf_t *b;
  int rc = rmx_buf_get(ctx, len ? len : 1, &b);
  if (rc == 0) {
    memcpy(rmx_buf_data(b), data, len);
    if ((rc = rmx_send_buf(c, b, len, echo_sent, NULL)) != 0)
      rmx_buf_put(b);
  }
  if (rc)
    fprintf(stderr, "rmx-echo: cannot echo %zu bytes: %s\n", len, rmx_strerror(rc));
}

static void server_closed(rmx_conn_t *c, void *arg) { (void)c, (void)arg; }

static void server_disconnect(rmx_conn_t *c, int status, void *arg)
{
  rmx_conn_stats_t st;
  rmx_conn_stats(c, &st);
  printf("server: %s connection closed (%s): %llu messages, %llu bytes echoed\n",
         rmx_conn_transport(c), status ? rmx_strerror(status) : "by the peer",
         (unsigned long long)st.msgs_sent, (unsigned long long)st.bytes_sent);
  fflush(stdout);
  rmx_conn_close(c, server_closed, NULL);
}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  static const rmx_conn_cbs_t cbs = {.on_recv = server_recv, .on_disconnect = server_disconnect};
  rmx_conn_set_cbs(c, &cbs, NULL);
  printf("server: accepted a %s connection\n", rmx_conn_transport(c));
  fflush(stdout);
}

static void on_signal(uv_signal_t *s, int signum) { rmx_ctx_stop(ctx); }

static int run_server(const char *uri)
{
  rmx_listener_t *l;
  char bound[128];
  static uv_signal_t sig;
  int rc = rmx_listen(ctx, uri, on_accept, NULL, &l);
  if (rc)
    return tool_uri_failed("listen on", uri, rc);
  if ((rc = rmx_listener_uri(l, bound, sizeof(bound))) != 0) {
    fprintf(stderr, "rmx-echo: the bound URI: %s\n", rmx_strerror(rc));
    rmx_listener_close(l);
    return 1;
  }
  printf("server: listening on %s\n", bound);
  fflush(stdout);
  uv_signal_init(rmx_ctx_loop(ctx), &sig);
  uv_signal_start(&sig, on_signal, SIGTERM);
  uv_unref((uv_handle_t *)&sig);
  rmx_ctx_run(ctx);
  uv_close((uv_handle_t *)&sig, NULL);
  rmx_listener_close(l);
  return 0;
}

/* ---- client ---- */

typedef struct client {
  rmx_conn_t *conn;
  unsigned char *msg;
  size_t size;
  long count, done;
  double t0, *rtt;
  int failed;
} client_t;

static void client_send(client_t *cl);

static void client_sent(rmx_conn_t *c, int status, void *arg)
{
  client_t *cl = arg;
  if (status) {
    fprintf(stderr, "rmx-echo: send failed: %s\n", rmx_strerror(status));
    cl->failed = 1;
  }
}

static void client_closed(rmx_conn_t *c, void *arg) { rmx_ctx_stop(ctx); }

static void client_finish(client_t *cl)
{
  rmx_conn_close(cl->conn, client_closed, cl);
}

static void client_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  client_t *cl = arg;
  cl->rtt[cl->done] = now_us() - cl->t0;
  if (len != cl->size || memcmp(data, cl->msg, len) != 0) {
    fprintf(stderr, "rmx-echo: echo %ld differs from what was sent\n", cl->done);
    cl->failed = 1;
    client_finish(cl);
    return;
  }
  if (++cl->done == cl->count)
    client_finish(cl);
  else
    client_send(cl);
}

static void client_disconnect(rmx_conn_t *c, int status, void *arg)
{
  client_t *cl = arg;
  fprintf(stderr, "rmx-echo: server went away: %s\n", rmx_strerror(status));
  cl->failed = 1;
  client_finish(cl);
}

static void client_send(client_t *cl)
{
  cl->msg[0] = (unsigned char)cl->done; /* every message differs */
  cl->t0 = now_us();
  int rc = rmx_send(cl->conn, cl->msg, cl->size, client_sent, cl);
  if (rc) {
    fprintf(stderr, "rmx-echo: send: %s\n", rmx_strerror(rc));
    cl->failed = 1;
    client_finish(cl);
  }
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  client_t *cl = arg;
  static const rmx_conn_cbs_t cbs = {.on_recv = client_recv, .on_disconnect = client_disconnect};
  if (status) {
    fprintf(stderr, "rmx-echo: connect failed: %s\n", rmx_strerror(status));
    cl->failed = 1;
    client_finish(cl);
    return;
  }
  rmx_conn_set_cbs(c, &cbs, cl);
  printf("client: connected over %s, sending %ld messages of %zu bytes\n", rmx_conn_transport(c),
         cl->count, cl->size);
  client_send(cl);
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int run_client(const char *uri, long count, size_t size)
{
  client_t cl = {.size = size, .count = count};
  cl.msg = malloc(size ? size : 1);
  cl.rtt = calloc((size_t)count, sizeof(double));
  if (!cl.msg || !cl.rtt) {
    fprintf(stderr, "rmx-echo: no memory for %ld messages of %zu bytes\n", count, size);
    free(cl.msg);
    free(cl.rtt);
    return 1;
  }
  for (size_t i = 0; i < size; i++)
    cl.msg[i] = (unsigned char)(i * 131 + 7);
  double start = now_us();
  int rc = rmx_connect(ctx, uri, on_connected, &cl, &cl.conn);
  if (rc) {
    free(cl.msg);
    free(cl.rtt);
    return tool_uri_failed("connect to", uri, rc);
  }
  rmx_ctx_run(ctx);
  double secs = (now_us() - start) / 1e6;
  if (!cl.failed && cl.done == count) {
    qsort(cl.rtt, (size_t)count, sizeof(double), cmp_double);
    printf("client: %ld echoes of %zu B checked: round trip median %.1f us, p99 %.1f us, "
           "%.1f MiB/s each way (%.2f s)\n",
           count, size, cl.rtt[count / 2], cl.rtt[(count * 99) / 100],
           (double)count * (double)size / secs / (1 << 20), secs);
  }
  free(cl.msg);
  free(cl.rtt);
  return cl.failed || cl.done != count;
}

static const char usage[] =
    "usage: rmx-echo server URI\n"
    "       rmx-echo client URI [COUNT [SIZE]]\n"
    "       rmx-echo --help | --version\n"
    "  server: echo every message back, until SIGTERM or SIGINT\n"
    "  client: send COUNT messages (1000; 1 to 10^9) of SIZE bytes (64; 0 to\n"
    "          1 TiB) one at a time, check every echoed byte, print round-trip\n"
    "          times and MiB/s (2^20 bytes a second)\n"
    "  URI: tcp://HOST:PORT, rdma://HOST:PORT or auto://HOST:PORT. Numbers are\n"
    "  decimal, with an optional K, M or G (2^10, 2^20, 2^30).\n"
    "  Exit 0: done and checked; 1: it failed; 2: a bad command line.\n";

int main(int argc, char **argv)
{
  int first = tool_options(argc, argv, usage), n = argc - first;
  char **op = argv + first;
  if (n < 1)
    tool_bad("server or client, and a URI");
  if (strcmp(op[0], "server") && strcmp(op[0], "client"))
    tool_bad("'%s' is neither server nor client", op[0]);
  if (n < 2)
    tool_bad("%s needs a URI", op[0]);
  if (strcmp(op[0], "server") == 0 ? n != 2 : n > 4)
    tool_bad("too many operands: %s", strcmp(op[0], "server") == 0 ? "server takes only a URI"
                                                                   : "client takes URI [COUNT [SIZE]]");
  tool_uri("URI", op[1]);
  long count = n > 2 ? (long)tool_num("COUNT", op[2], 1, 1000000000) : 1000;
  uint64_t size = n > 3 ? tool_num("SIZE", op[3], 0, 1ull << 40) : 64;
  int rc = rmx_ctx_create(&ctx, NULL, NULL);
  if (rc) {
    fprintf(stderr, "rmx-echo: %s\n", rmx_strerror(rc));
    return 1;
  }
  if (strcmp(op[0], "server") == 0)
    rc = run_server(op[1]);
  else
    rc = run_client(op[1], count, size);
  if (rmx_ctx_destroy(ctx) != 0)
    fprintf(stderr, "rmx-echo: context still busy at exit\n");
  return rc;
}
