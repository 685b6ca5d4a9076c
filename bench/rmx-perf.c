/*
 * rmx-perf: latency and bandwidth of rmx messages, reported like perftest.
 *
 *   rmx-perf server URI
 *   rmx-perf lat URI SIZE ITERS      ping-pong; prints one-way latency
 *                                     (half the round trip), median and p99
 *   rmx-perf bw  URI SIZE ITERS      streams ITERS messages, WINDOW (64) in
 *                                     flight; prints MB/s once the server has
 *                                     counted every byte
 *
 * One line of results on stdout, "key=value" pairs, for scripts.
 */
#include <rmx/rmx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tool.h"

#define WINDOW 64
#define TAG_LAT 'L'
#define TAG_BW 'B'
#define TAG_END 'E'

static rmx_ctx_t *ctx;

static double now_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* ---- server ---- */

typedef struct srv_conn {
  uint64_t bytes, msgs;
} srv_conn_t;

static void free_sent(rmx_conn_t *c, int st, void *arg) { free(arg); }
static void srv_closed(rmx_conn_t *c, void *arg) { free(arg); }

static void srv_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  srv_conn_t *s = arg;
  char tag = len ? *(const char *)data : TAG_LAT;
  if (tag == TAG_BW) {
    s->bytes += len;
    s->msgs++;
  } else if (tag == TAG_END) {
    uint64_t reply[2] = {s->msgs, s->bytes};
    void *r = malloc(sizeof(reply));
    memcpy(r, reply, sizeof(reply));
    rmx_send(c, r, sizeof(reply), free_sent, r);
    s->bytes = s->msgs = 0;
  } else { /* ping: answer with the same bytes */
    void *copy = len > 4096 ? malloc(len) : NULL;
    if (copy)
      memcpy(copy, data, len);
    rmx_send(c, copy ? copy : data, len, free_sent, copy);
  }
}

static void srv_disc(rmx_conn_t *c, int st, void *arg) { rmx_conn_close(c, srv_closed, arg); }

static void srv_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  rmx_conn_cbs_t cbs = {.on_recv = srv_recv, .on_disconnect = srv_disc};
  rmx_conn_set_cbs(c, &cbs, calloc(1, sizeof(srv_conn_t)));
}

/* ---- client ---- */

typedef struct cli {
  rmx_conn_t *c;
  int mode, failed, done;
  size_t size;
  long iters, sent, completed, recvd;
  uint8_t *msg;
  double t0, start, *lat;
  uint64_t ack_msgs, ack_bytes;
} cli_t;

static void cli_send(cli_t *k);

static void cli_sent(rmx_conn_t *c, int st, void *arg)
{
  cli_t *k = arg;
  if (st) {
    fprintf(stderr, "rmx-perf: send failed: %s\n", rmx_strerror(st));
    k->failed = 1;
    return;
  }
  k->completed++;
  if (k->mode == TAG_BW)
    cli_send(k);
}

static void cli_send(cli_t *k)
{
  if (k->mode == TAG_LAT) {
    k->t0 = now_us();
    if (rmx_send(k->c, k->msg, k->size, cli_sent, k))
      k->failed = 1;
    return;
  }
  while (k->sent < k->iters && k->sent - k->completed < WINDOW) {
    if (rmx_send(k->c, k->msg, k->size, cli_sent, k)) {
      k->failed = 1;
      return;
    }
    k->sent++;
  }
  if (k->sent == k->iters && k->completed == k->iters && !k->done) {
    static const char end = TAG_END;
    k->done = 1;
    rmx_send(k->c, &end, 1, NULL, NULL);
  }
}

static void cli_closed(rmx_conn_t *c, void *arg) { rmx_ctx_stop(ctx); }

static void cli_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  cli_t *k = arg;
  if (k->mode == TAG_LAT) {
    k->lat[k->recvd++] = (now_us() - k->t0) / 2;
    if (k->recvd == k->iters)
      rmx_conn_close(c, cli_closed, k);
    else
      cli_send(k);
  } else if (len == 16) {
    memcpy(&k->ack_msgs, data, 8);
    memcpy(&k->ack_bytes, (const uint8_t *)data + 8, 8);
    k->t0 = now_us();
    rmx_conn_close(c, cli_closed, k);
  }
}

static void cli_disc(rmx_conn_t *c, int st, void *arg)
{
  ((cli_t *)arg)->failed = 1;
  rmx_conn_close(c, cli_closed, arg);
}

static void cli_connected(rmx_conn_t *c, int st, void *arg)
{
  cli_t *k = arg;
  rmx_conn_cbs_t cbs = {.on_recv = cli_recv, .on_disconnect = cli_disc};
  if (st) {
    fprintf(stderr, "rmx-perf: connect: %s\n", rmx_strerror(st));
    k->failed = 1;
    rmx_conn_close(c, cli_closed, k);
    return;
  }
  rmx_conn_set_cbs(c, &cbs, k);
  k->start = now_us();
  cli_send(k);
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static const char usage[] =
    "usage: rmx-perf server URI\n"
    "       rmx-perf lat URI SIZE ITERS   ping-pong latency of SIZE-byte messages\n"
    "       rmx-perf bw URI SIZE ITERS    one-way bandwidth of SIZE-byte messages\n";

int main(int argc, char **argv)
{
  int first = tool_options(argc, argv, usage), n = argc - first;
  char **op = argv + first;
  int server = n >= 1 && strcmp(op[0], "server") == 0;
  if (n < 1 || (!server && strcmp(op[0], "lat") && strcmp(op[0], "bw")))
    tool_bad("server, lat or bw");
  if (server ? n != 2 : n != 4)
    tool_bad(server ? "server takes a URI" : "%s takes a URI, a SIZE and ITERS", op[0]);
  size_t size = server ? 0 : (size_t)tool_num("SIZE", op[2], 1, 1ull << 40);
  long iters = server ? 0 : (long)tool_num("ITERS", op[3], 1, 1000000000);
  if (rmx_ctx_create(&ctx, NULL, NULL))
    return 1;
  if (server) {
    rmx_listener_t *l;
    char u[128];
    if (rmx_listen(ctx, op[1], srv_accept, NULL, &l) || rmx_listener_uri(l, u, sizeof(u)))
      return 1;
    printf("listening on %s\n", u);
    fflush(stdout);
    rmx_ctx_run(ctx);
    return 0;
  }
  cli_t k = {.mode = strcmp(op[0], "bw") == 0 ? TAG_BW : TAG_LAT, .size = size, .iters = iters};
  k.msg = calloc(1, k.size);
  k.lat = calloc((size_t)k.iters, sizeof(double));
  if (!k.msg || !k.lat) {
    fprintf(stderr, "rmx-perf: no memory for %ld iterations of %zu bytes\n", iters, size);
    return 1;
  }
  k.msg[0] = (uint8_t)k.mode;
  if (rmx_connect(ctx, op[1], cli_connected, &k, &k.c))
    return 1;
  rmx_ctx_run(ctx);
  if (k.failed)
    return 1;
  if (k.mode == TAG_LAT) {
    qsort(k.lat, (size_t)k.iters, sizeof(double), cmp);
    printf("rmx-perf lat size=%zu iters=%ld median_us=%.2f p99_us=%.2f\n", k.size, k.iters,
           k.lat[k.iters / 2], k.lat[k.iters * 99 / 100]);
  } else {
    double secs = (k.t0 - k.start) / 1e6;
    printf("rmx-perf bw size=%zu iters=%ld mb_s=%.1f msgs=%llu\n", k.size, k.iters,
           (double)k.ack_bytes / secs / 1e6, (unsigned long long)k.ack_msgs);
  }
  free(k.msg);
  free(k.lat);
  rmx_ctx_destroy(ctx);
  return 0;
}
