/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-perf: latency, bandwidth and message rate of rmx, measured the way
 * perftest's ib_*_lat/bw and ucx_perftest measure, so the figures can sit
 * beside theirs (bench/compare runs them together).
 *
 *   rmx-perf server [URI]
 *   rmx-perf client URI [-t TEST] [-s SIZES | -a] [-n ITERS] [-w WARMUP]
 *                       [-W WINDOW] [-c CONNS] [--json] [--progress-ms MS]
 *
 * The client tells the server what comes through a control RPC; messages
 * and one-sided operations then run as a user would run them: rmx_send
 * (small messages copied into a pool buffer, large ones zero-copy by
 * rendezvous), rmx_rpc_call, and rmx_write/rmx_read/rmx_atomic_fadd from
 * registered memory. Every byte is checked (the check is outside the timed
 * part), and any failure exits 1.
 */
#include <rmx/rmx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "tool.h"
#include "perf_clock.h"

#include "perf.h"

static rmx_ctx_t *ctx;
static int polling; /* RMX_PROGRESS=poll: run_until spins on rmx_ctx_progress */

/* ------------------------------------------------------------------ */
/* client                                                             */
/* ------------------------------------------------------------------ */

typedef enum { K_SEND, K_RPC, K_WRITE, K_READ, K_ATOMIC } kind_t;

typedef struct test {
  const char *name;
  kind_t kind;
  int lat;           /* one at a time, each timed; else WINDOW in flight */
  int rate;          /* report messages per second (default size 64) */
} test_t;

static const test_t tests[] = {
  {"send_lat", K_SEND, 1, 0},  {"send_bw", K_SEND, 0, 0},   {"send_rate", K_SEND, 0, 1},
  {"rpc_lat", K_RPC, 1, 0},    {"rpc_rate", K_RPC, 0, 1},   {"write_lat", K_WRITE, 1, 0},
  {"write_bw", K_WRITE, 0, 0}, {"read_lat", K_READ, 1, 0},  {"read_bw", K_READ, 0, 0},
  {"atomic_lat", K_ATOMIC, 1, 0},
};

typedef struct pconn {
  rmx_conn_t *c;
  int up;
  uint8_t *buf;      /* source or destination; send_bw/rate: WINDOW slots */
  rmx_mem_t *mem;    /* buf registered (one-sided tests) */
  rmx_rkey_t *rk;    /* the server's region */
  long todo, inflight;
  uint64_t seq;      /* messages sent since CTL_SINK */
  uint64_t t_issue;  /* the op in flight (latency tests) */
  uint64_t old, prev_old;
  int have_old;
} pconn_t;

static struct run {
  const test_t *t;
  size_t size;
  long window;
  int nconn, failed;
  pconn_t *pc;
  long done, total;     /* this phase */
  int measuring, *phase_done;
  double *samples;      /* latency tests, us */
  long nsamples;
  int ctl_done, ctl_status;
  uint8_t ctl_reply[RMX_RKEY_MAX + 32];
  size_t ctl_len;
} R;

static void fail(const char *what, int st)
{
  if (!R.failed)
    fprintf(stderr, "rmx-perf: %s: %s\n", what, st ? rmx_strerror(st) : "wrong data");
  R.failed = 1;
  rmx_ctx_stop(ctx);
}

static void pump(pconn_t *p);

/* One operation of p ended (the sample is taken first). */
static void op_end(pconn_t *p, int st, const char *what)
{
  uint64_t now = perf_ticks();
  p->inflight--;
  if (st) {
    fail(what, st);
    return;
  }
  if (R.measuring && R.t->lat)
    R.samples[R.nsamples++] =
        perf_ns(p->t_issue, now) / 1000.0 / (R.t->kind == K_SEND ? 2.0 : 1.0);
  if (++R.done == R.total) {
    *R.phase_done = 1;
    rmx_ctx_stop(ctx);
  } else {
    pump(p);
  }
}

/* A small message's bytes are checked whole, a large one's at its ends. */
static int same_bytes(const uint8_t *a, const uint8_t *b, size_t len)
{
  if (len <= 4096)
    return memcmp(a, b, len) == 0;
  return memcmp(a, b, 2048) == 0 && memcmp(a + len - 2048, b + len - 2048, 2048) == 0 &&
         a[len / 2] == b[len / 2];
}

static void on_sent(rmx_conn_t *c, int st, void *arg) { op_end(arg, st, "send"); }

static void on_echo(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  pconn_t *p = arg;
  if (!R.t || R.t->kind != K_SEND || !R.t->lat || p->inflight != 1) {
    fail("a message nobody asked for", 0);
    return;
  }
  op_end(p, 0, "echo"); /* timed first; p->buf does not change meanwhile */
  if (len != R.size || !same_bytes(data, p->buf, len))
    fail("echo", 0);
}

static void on_rpc(rmx_conn_t *c, int st, const void *data, size_t len, void *arg)
{
  pconn_t *p = arg;
  if (st == 0 && (len != R.size || !same_bytes(data, p->buf, len)))
    fail("rpc reply", 0);
  op_end(p, st, "rpc");
}

static void on_op(rmx_conn_t *c, int st, void *arg)
{
  pconn_t *p = arg;
  if (st == 0 && R.t->kind == K_ATOMIC) {
    if (p->have_old && p->old != p->prev_old + 1)
      fail("atomic fetch-add returned a value out of sequence", 0);
    p->prev_old = p->old;
    p->have_old = 1;
  }
  if (st == 0 && R.t->kind == K_READ && R.t->lat) {
    uint8_t want[3] = {pattern_at(0), pattern_at(R.size / 2), pattern_at(R.size - 1)};
    if (p->buf[0] != want[0] || p->buf[R.size / 2] != want[1] || p->buf[R.size - 1] != want[2])
      fail("read", 0);
  }
  op_end(p, st, R.t->kind == K_ATOMIC ? "atomic" : R.t->kind == K_READ ? "read" : "write");
}

static int start(pconn_t *p)
{
  size_t n = R.size;
  rmx_iov_t iov = {p->buf, n, p->mem};
  int rc = 0;
  if (R.t->kind == K_READ && R.t->lat) /* must be written again by this read */
    p->buf[0] = p->buf[n / 2] = p->buf[n - 1] = (uint8_t)~pattern_at(0);
  p->todo--;
  p->inflight++;
  p->t_issue = perf_ticks();
  switch (R.t->kind) {
  case K_SEND:
    if (R.t->lat) {
      rc = rmx_send(p->c, p->buf, n, NULL, NULL);
    } else {
      uint8_t *slot = p->buf + (p->seq % (uint64_t)R.window) * n;
      rc = rmx_send(p->c, slot, n, on_sent, p);
    }
    p->seq++;
    break;
  case K_RPC:
    rc = rmx_rpc_call(p->c, H_ECHO, p->buf, n, 0, on_rpc, p, NULL);
    break;
  case K_WRITE:
    rc = rmx_write(p->c, &iov, 1, p->rk, 0, on_op, p);
    break;
  case K_READ:
    rc = rmx_read(p->c, &iov, 1, p->rk, 0, on_op, p);
    break;
  case K_ATOMIC:
    rc = rmx_atomic_fadd(p->c, p->rk, 0, 1, &p->old, on_op, p);
    break;
  }
  if (rc) {
    p->inflight--;
    fail(R.t->name, rc);
  }
  return rc;
}

static void pump(pconn_t *p)
{
  long window = R.t->lat ? 1 : R.window;
  while (!R.failed && p->todo > 0 && p->inflight < window)
    if (start(p) != 0)
      return;
}

/* Run the loop until a callback stops it (every op of the phase ended, a
 * control reply came, or something failed) and *until holds. */
static void run_until(const int *until)
{
  if (polling) {
    /* RMX_PROGRESS=poll: spin on the fast path, as a polling application does. */
    while (!*until && !R.failed) {
      int rc = rmx_ctx_progress(ctx);
      if (rc < 0)
        fail("rmx_ctx_progress", rc);
    }
    return;
  }
  while (!*until && !R.failed) {
    long before = R.done;
    int ctl_before = R.ctl_done;
    rmx_ctx_run(ctx);
    if (!*until && !R.failed && R.done == before && R.ctl_done == ctl_before)
      fail("the loop stopped with work outstanding", RMX_EIO);
  }
}

static void phase(long iters, int measuring)
{
  int all_done = iters == 0;
  R.done = 0;
  R.total = iters;
  R.measuring = measuring;
  R.phase_done = &all_done;
  for (int i = 0; i < R.nconn; i++)
    R.pc[i].todo = iters / R.nconn + (i < iters % R.nconn);
  for (int i = 0; i < R.nconn && !R.failed; i++)
    pump(&R.pc[i]);
  run_until(&all_done);
  R.phase_done = NULL;
}

/* ---- control ---- */

static void on_ctl(rmx_conn_t *c, int st, const void *data, size_t len, void *arg)
{
  R.ctl_done = 1;
  R.ctl_status = st;
  R.ctl_len = len < sizeof(R.ctl_reply) ? len : sizeof(R.ctl_reply);
  memcpy(R.ctl_reply, data, R.ctl_len);
  rmx_ctx_stop(ctx);
}

/* A control RPC to p's server connection, answered before this returns. */
static int ctl(pconn_t *p, uint32_t cmd, uint32_t window, uint64_t size)
{
  ctl_t m = {.cmd = cmd, .window = window, .size = size};
  R.ctl_done = 0;
  int rc = rmx_rpc_call(p->c, H_CTL, &m, sizeof(m), 0, on_ctl, NULL, NULL);
  if (rc) {
    fail("control call", rc);
    return rc;
  }
  run_until(&R.ctl_done);
  if (!R.failed && R.ctl_status)
    fail("control call", R.ctl_status);
  return R.failed ? -1 : 0;
}

/* ---- one test at one size ---- */

/* Buffers, registrations and the server's side for R.t at R.size. */
static int setup(pconn_t *p)
{
  int sink = R.t->kind == K_SEND && !R.t->lat;
  size_t n = R.size, slots = sink ? (size_t)R.window : 1;
  p->buf = aligned_alloc(64, (slots * n + 63) & ~(size_t)63);
  if (!p->buf) {
    fail("buffers", RMX_ENOMEM);
    return -1;
  }
  p->seq = 0;
  p->have_old = 0;
  if (sink) /* slot k holds the byte k, which the server checks */
    for (size_t k = 0; k < slots; k++)
      memset(p->buf + k * n, (int)(uint8_t)k, n);
  else if (R.t->kind == K_READ)
    memset(p->buf, 0, n);
  else
    pattern_fill(p->buf, n);
  switch (R.t->kind) {
  case K_SEND:
    return ctl(p, R.t->lat ? CTL_ECHO : CTL_SINK, (uint32_t)R.window, 0);
  case K_RPC:
    return 0;
  default:
    break;
  }
  int rc = rmx_mem_reg(ctx, p->buf, n, RMX_MEM_LOCAL, &p->mem);
  if (rc) {
    fail("registering the local buffer", rc);
    return -1;
  }
  /* reads find the pattern there; writes must put it there */
  if (ctl(p, CTL_MEM, R.t->kind == K_WRITE ? 0 : 1, n) != 0)
    return -1;
  if ((rc = rmx_rkey_unpack(p->c, R.ctl_reply, R.ctl_len, &p->rk)) != 0) {
    fail("the server's key", rc);
    return -1;
  }
  return 0;
}

/* What the server saw, checked; then everything of setup() released. */
static void finish(pconn_t *p, uint64_t iters)
{
  if (!R.failed && R.t->kind == K_SEND && !R.t->lat && ctl(p, CTL_SINK_END, 0, 0) == 0) {
    sink_report_t rep;
    memcpy(&rep, R.ctl_reply, sizeof(rep));
    if (R.ctl_len != sizeof(rep) || rep.msgs != p->seq || rep.bytes != p->seq * R.size ||
        rep.bad) {
      fprintf(stderr, "rmx-perf: the server counted %llu messages, %llu bytes, %llu wrong; "
              "%llu were sent\n", (unsigned long long)rep.msgs, (unsigned long long)rep.bytes,
              (unsigned long long)rep.bad, (unsigned long long)p->seq);
      fail("send", 0);
    }
  }
  if (!R.failed && R.t->kind == K_WRITE && ctl(p, CTL_MEM_SUM, 0, R.size) == 0) {
    uint64_t sum;
    memcpy(&sum, R.ctl_reply, sizeof(sum));
    if (R.ctl_len != sizeof(sum) || sum != pattern_sum(p->buf, R.size))
      fail("write: the server's region is not what was written", 0);
  }
  if (!R.failed && R.t->kind == K_READ)
    for (size_t i = 0; i < R.size; i++)
      if (p->buf[i] != pattern_at(i)) {
        fail("read: the buffer is not what the server holds", 0);
        break;
      }
  if (!R.failed && R.t->kind == K_ATOMIC && p->have_old == 0 && iters)
    fail("atomic", 0);
  if (p->rk) {
    rmx_rkey_release(p->rk);
    if (!R.failed)
      ctl(p, CTL_MEM_FREE, 0, 0);
  }
  if (p->mem)
    rmx_mem_dereg(p->mem);
  free(p->buf);
  p->buf = NULL;
  p->mem = NULL;
  p->rk = NULL;
}

static int run_test(const test_t *t, size_t size, long iters, long warmup, perf_result_t *res)
{
  R.t = t;
  R.size = size;
  R.nsamples = 0;
  for (int i = 0; i < R.nconn && !R.failed; i++)
    setup(&R.pc[i]);
  if (!R.failed && warmup)
    phase(warmup, 0);
  uint64_t t0 = perf_ticks();
  if (!R.failed)
    phase(iters, 1);
  uint64_t t1 = perf_ticks();
  for (int i = 0; i < R.nconn; i++)
    finish(&R.pc[i], (uint64_t)(iters + warmup));
  if (t->kind == K_SEND && !t->lat)
    t1 = perf_ticks(); /* the servers have confirmed every byte */
  R.t = NULL;
  if (R.failed)
    return -1;
  double secs = perf_ns(t0, t1) / 1e9;
  res->mib_s = (double)size * (double)iters / secs / (1 << 20); /* MiB/s, as perftest's MB/sec */
  res->mmsg_s = (double)iters / secs / 1e6;
  if (t->lat && R.nsamples) {
    perf_latency(res, R.samples, R.nsamples);
  }
  return 0;
}

/* ---- connections ---- */

static int connected_count, closed_count;

static void on_connected(rmx_conn_t *c, int st, void *arg)
{
  pconn_t *p = arg;
  if (st) {
    fail("connect", st);
    return;
  }
  p->up = 1;
  if (++connected_count == R.nconn)
    rmx_ctx_stop(ctx);
}

static void on_disconnect(rmx_conn_t *c, int st, void *arg)
{
  ((pconn_t *)arg)->up = 0;
  fail("the server went away", st ? st : RMX_ECONNRESET);
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  if (++closed_count == R.nconn)
    rmx_ctx_stop(ctx);
}

static uv_timer_t progress_timer;

static void on_progress(uv_timer_t *h)
{
  if (R.t && R.measuring)
    fprintf(stderr, "rmx-perf: %s %zu B: %ld of %ld\n", R.t->name, R.size, R.done, R.total);
}

/* ---- main ---- */

static const char usage[] =
    "usage: rmx-perf server [URI]            serve clients (default tcp://127.0.0.1:0)\n"
    "       rmx-perf client URI [options]    measure against a server\n"
    "  -t, --test NAME       send_lat (default), send_bw, send_rate, rpc_lat, rpc_rate,\n"
    "                        write_lat, write_bw, read_lat, read_bw, atomic_lat\n"
    "  -s, --size LIST       sizes in bytes, comma-separated, up to 64M (default 8;\n"
    "                        65536 for *_bw, 64 for *_rate; atomics are always 8)\n"
    "  -a, --all             every power of two from 2 B to 8 MiB\n"
    "  -n, --iters N         measured iterations per size (default 10000 for latency,\n"
    "                        20000 for rates, 5000 for bandwidth; fewer above 64 KiB)\n"
    "  -w, --warmup N        iterations run first, not measured (default n/10, >= 100)\n"
    "  -W, --window N        operations in flight per connection for *_bw, *_rate (64)\n"
    "  -c, --conns N         connections; iterations are spread over them (1)\n"
    "      --json            one JSON object per size instead of the table\n"
    "      --progress-ms MS  a progress line on stderr this often (1000; 0: none)\n"
    "  -h, --help            this text\n"
    "      --version         rmx-perf and the library's version\n"
    "Latency in us: send_lat is one way (half the round trip, as ib_send_lat); rpc_lat\n"
    "is the whole call; write_lat, read_lat and atomic_lat from post to completion;\n"
    "mean, percentiles, min, max and the standard deviation. Bandwidth in MiB/s\n"
    "(2^20 bytes a second, what perftest, UCX and sockperf call MB/s), send_bw until\n"
    "the server has counted every byte; message rate in Mmsg/s (10^6 a second).\n"
    "Numbers are decimal, with an optional K, M or G (2^10, 2^20, 2^30).\n"
    "RMX_PROGRESS=event|poll|adaptive chooses how completions are waited for.\n"
    "Exit 0: measured and every byte checked; 1: it failed; 2: a bad command line.\n";

static size_t parse_sizes(const char *list, size_t *out, size_t max)
{
  size_t n = 0;
  char *copy = strdup(list), *save = NULL;
  for (char *s = strtok_r(copy, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
    if (n == max)
      tool_bad("-s: at most %zu sizes", max);
    out[n++] = (size_t)tool_num("-s size", s, 1, 64ull << 20);
  }
  free(copy);
  if (n == 0)
    tool_bad("-s: no size in '%s'", list);
  return n;
}

int main(int argc, char **argv)
{
  static const struct option opts[] = {
    {"test", required_argument, NULL, 't'},   {"size", required_argument, NULL, 's'},
    {"all", no_argument, NULL, 'a'},          {"iters", required_argument, NULL, 'n'},
    {"warmup", required_argument, NULL, 'w'}, {"window", required_argument, NULL, 'W'},
    {"conns", required_argument, NULL, 'c'},  {"json", no_argument, NULL, 'j'},
    {"progress-ms", required_argument, NULL, 'p'}, {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},      {NULL, 0, NULL, 0}};
  const test_t *t = &tests[0];
  size_t sizes[64], nsizes = 0;
  long iters = -1, warmup = -1, progress_ms = 1000;
  int json = 0, ch;
  tool_init(argv, usage);
  R.window = 64;
  R.nconn = 1;
  opterr = 0;
  while ((ch = getopt_long(argc, argv, ":t:s:an:w:W:c:h", opts, NULL)) != -1) {
    switch (ch) {
    case 't':
      t = NULL;
      for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
        if (strcmp(optarg, tests[i].name) == 0)
          t = &tests[i];
      if (!t)
        tool_bad("no test '%s'", optarg);
      break;
    case 's': nsizes = parse_sizes(optarg, sizes, 64); break;
    case 'a':
      for (nsizes = 0; nsizes < 23; nsizes++)
        sizes[nsizes] = (size_t)2 << nsizes;
      break;
    case 'n': iters = (long)tool_num("-n", optarg, 1, 1000000000); break;
    case 'w': warmup = (long)tool_num("-w", optarg, 0, 1000000000); break;
    case 'W': R.window = (long)tool_num("-W", optarg, 1, 1024); break;
    case 'c': R.nconn = (int)tool_num("-c", optarg, 1, 256); break;
    case 'j': json = 1; break;
    case 'p': progress_ms = (long)tool_num("--progress-ms", optarg, 0, 3600000); break;
    case 'h': tool_help();
    case 'V': tool_version();
    case ':': tool_bad("%s needs a value", argv[optind - 1]);
    default: tool_bad("unknown option '%s'", argv[optind - 1]);
    }
  }
  int nops = argc - optind;
  char **op = argv + optind;
  int server = nops >= 1 && strcmp(op[0], "server") == 0;
  if (nops < 1)
    tool_bad("server or client");
  if (!server && strcmp(op[0], "client") != 0)
    tool_bad("'%s' is neither server nor client", op[0]);
  if (server ? nops > 2 : nops != 2)
    tool_bad(server ? "server takes at most a URI" : "client takes one URI");
  if (nops == 2)
    tool_uri("URI", op[1]);
  rmx_config_t cfg;
  int rc = rmx_config_init(&cfg);
  if (rc == 0) {
    polling = cfg.progress == RMX_PROGRESS_POLL;
    rc = rmx_ctx_create(&ctx, NULL, &cfg);
  }
  if (rc) {
    fprintf(stderr, "rmx-perf: %s\n", rmx_strerror(rc));
    return 1;
  }
  if (server) {
    rc = perf_server(ctx, nops == 2 ? op[1] : "tcp://127.0.0.1:0");
    rmx_ctx_destroy(ctx);
    return rc;
  }

  if (t->kind == K_ATOMIC) {
    sizes[0] = 8;
    nsizes = 1;
  } else if (nsizes == 0) {
    sizes[0] = t->lat ? 8 : t->rate ? 64 : 65536;
    nsizes = 1;
  }
  perf_clock_init();
  R.pc = calloc((size_t)R.nconn, sizeof(pconn_t));
  long most = iters > 0 ? iters : 20000;
  R.samples = calloc((size_t)most, sizeof(double));
  if (!R.pc || !R.samples)
    return 1;
  rmx_conn_cbs_t cbs = {.on_recv = on_echo, .on_disconnect = on_disconnect};
  for (int i = 0; i < R.nconn && !R.failed; i++) {
    if ((rc = rmx_connect(ctx, op[1], on_connected, &R.pc[i], &R.pc[i].c)) != 0) {
      if (rc == RMX_EINVAL) /* the URI: a usage error */
        tool_uri_failed("connect to", op[1], rc);
      fail("connect", rc);
      break;
    }
    rmx_conn_set_cbs(R.pc[i].c, &cbs, &R.pc[i]);
  }
  while (!R.failed && connected_count < R.nconn)
    rmx_ctx_run(ctx);
  const char *transport = R.failed ? "" : rmx_conn_transport(R.pc[0].c);
  uv_timer_init(rmx_ctx_loop(ctx), &progress_timer);
  if (progress_ms) {
    uv_timer_start(&progress_timer, on_progress, (uint64_t)progress_ms, (uint64_t)progress_ms);
    uv_unref((uv_handle_t *)&progress_timer);
  }

  for (size_t k = 0; k < nsizes && !R.failed; k++) {
    size_t size = sizes[k];
    long n = iters > 0 ? iters : t->lat ? 10000 : t->rate ? 20000 : 5000;
    if (iters <= 0 && size > 65536) /* about as many bytes as 64 KiB takes, at least 100 */
      n = n / (long)(size / 65536) > 100 ? n / (long)(size / 65536) : 100;
    long w = warmup >= 0 ? warmup : n / 10 > 100 ? n / 10 : 100;
    if (n > most)
      n = most;
    perf_result_t res = {.test = t->name, .lat = t->lat, .one_way = t->kind == K_SEND,
                         .transport = transport, .size = size, .iters = n, .warmup = w,
                         .window = t->lat ? 1 : R.window, .conns = R.nconn};
    if (run_test(t, size, n, w, &res) != 0)
      break;
    if (k == 0)
      perf_header(json, &res);
    perf_report(json, &res);
  }

  uv_close((uv_handle_t *)&progress_timer, NULL);
  for (int i = 0; i < R.nconn; i++)
    if (R.pc[i].c)
      rmx_conn_close(R.pc[i].c, on_closed, NULL);
  while (closed_count < R.nconn) {
    int before = closed_count;
    rmx_ctx_run(ctx);
    if (closed_count == before)
      break;
  }
  rc = rmx_ctx_destroy(ctx);
  free(R.pc);
  free(R.samples);
  if (rc)
    fprintf(stderr, "rmx-perf: destroying the context: %s\n", rmx_strerror(rc));
  return R.failed || rc ? 1 : 0;
}
