/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-conns: how one server holds up as its connections grow. A server
 * (a child process, its own context) answers 8-byte RPCs; this process
 * opens N connections to it, 128 connects in flight at most, then keeps
 * one call outstanding on every connection for SECONDS, and prints one
 * line:
 *
 *   conns, connect time and rate (connections made per second), calls per
 *   second, p50 and p99 round trip in us, the server's
 *   resident and registered bytes per connection (with every connection
 *   made and idle, less what it had listening alone), and fairness: the
 *   fewest and the most calls one connection completed, over the mean.
 *
 *   rmx-conns tcp|rdma|shm|auto ADDR N [SECONDS] [--json] [--contexts K] [--work US]
 *
 * For shm, ADDR is the listener's name: "@NAME" (abstract) or a path. The
 * memory figures then also split what a connection holds: each process's
 * private bytes and proportional set size (Pss), and the segment both map
 * (its mapped size, counted once: its pages are allocated when it is
 * made, so a page neither side has touched still costs the host).
 *
 * With --contexts K the server is K contexts, one thread each, serving
 * one listener group; it then also reports how evenly the connections
 * were spread (the fewest and most one context took, over the mean).
 * With --work US each call keeps the server's CPU busy for US
 * microseconds before it answers, as a service's handler would. The
 * server's settings come from the environment as usual (RMX_SRQ,
 * RMX_PROGRESS...). Public API only.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rmx/rmx.h>
#include <uv.h>

#include "tool.h"

#define RPC_ID 7
#define WINDOW 128 /* connects in flight */
#define MAX_SAMPLES (4u << 20)

static pid_t server_pid;

static void die(const char *what, int rc)
{
  fprintf(stderr, "rmx-conns: %s: %s\n", what, rc ? rmx_strerror(rc) : strerror(errno));
  if (server_pid > 0)
    kill(server_pid, SIGKILL);
  exit(1);
}

/* ---- the server ---- */

/* One server context: the first runs on the server's main thread, which
 * also answers the client process; the others on threads of their own. */
typedef struct sctx {
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  pthread_t th;
  atomic_int up, asked;
  int accepted;
  rmx_ctx_stats_t st;
} sctx_t;

static sctx_t *sc;
static int s_k = 1; /* server contexts */
static rmx_group_t *s_group;
static int s_in, s_out; /* requests from the client process, reports to it */

static uint64_t s_work_ns; /* --work: what each call costs the server's CPU */

static void s_handler(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  (void)arg;
  for (uint64_t t0 = uv_hrtime(); s_work_ns && uv_hrtime() - t0 < s_work_ns;)
    ; /* a service's handler computing its answer */
  rmx_rpc_reply(req, data, len);
}

static void s_gone(rmx_conn_t *c, int status, void *arg)
{
  (void)status;
  (void)arg;
  rmx_conn_close(c, NULL, NULL);
}

static void s_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  (void)l;
  ((sctx_t *)arg)->accepted++;
  rmx_conn_cbs_t cbs = {.on_disconnect = s_gone};
  rmx_conn_set_cbs(c, &cbs, NULL);
}

static int s_open(sctx_t *x, const char *uri, int n)
{
  rmx_config_t cfg;
  rmx_config_init(&cfg);
  if (cfg.max_conns < (uint32_t)n + 64)
    cfg.max_conns = (uint32_t)n + 64;
  int rc = rmx_ctx_create(&x->ctx, NULL, &cfg);
  if (!rc)
    rc = rmx_rpc_register(x->ctx, RPC_ID, s_handler, NULL);
  if (!rc)
    rc = s_group ? rmx_listen_group(x->ctx, s_group, s_accept, x, &x->l)
                 : rmx_listen(x->ctx, uri, s_accept, x, &x->l);
  if (rc) /* the parent reads only our stdout: the reason goes to stderr */
    fprintf(stderr, "rmx-conns server: %s: %s\n", uri ? uri : "listener group", rmx_strerror(rc));
  return rc != 0;
}

/* Posted to a context: its counters, read on its own thread. */
static void s_stats(void *arg)
{
  sctx_t *x = arg;
  rmx_ctx_stats_get(x->ctx, &x->st, sizeof(x->st));
  x->asked = 0;
}

static void s_stop(void *arg) { rmx_ctx_stop(((sctx_t *)arg)->ctx); }

static void *s_thread(void *arg)
{
  sctx_t *x = arg;
  x->up = s_open(x, NULL, 0) ? -1 : 1;
  if (x->up == 1)
    rmx_ctx_run(x->ctx);
  return NULL;
}

/* This process's memory, from /proc/self/smaps, in bytes: resident,
 * proportional (a page mapped by two processes counts half), private
 * outside the shm segments, and the segments' mapped and resident bytes.
 * A segment's pages are private to whichever side alone touched them:
 * they are counted as the segment's, not as that side's. */
typedef struct mem {
  long long rss, pss, priv, seg, seg_rss;
} mem_t;

static mem_t mem_now(void)
{
  mem_t m = {0};
  char line[512];
  int in_seg = 0;
  FILE *f = fopen("/proc/self/smaps", "r");
  while (f && fgets(line, sizeof(line), f)) {
    unsigned long lo, hi;
    long long kb;
    char key[64];
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, ' ')) {
      in_seg = strstr(line, "/memfd:rmx-shm") != NULL;
      if (in_seg)
        m.seg += (long long)(hi - lo);
    } else if (sscanf(line, "%63[^:]: %lld kB", key, &kb) == 2) {
      kb *= 1024;
      if (strcmp(key, "Rss") == 0) {
        m.rss += kb;
        m.seg_rss += in_seg ? kb : 0;
      } else if (strcmp(key, "Pss") == 0) {
        m.pss += kb;
      } else if (!in_seg && strncmp(key, "Private_", 8) == 0) {
        m.priv += kb;
      }
    }
  }
  if (f)
    fclose(f);
  return m;
}

/* 'r': report the memory (mem_t), registered bytes, connections, and the
 * fewest and most connections one context took; 'q': end. */
static void s_request(uv_poll_t *h, int status, int events)
{
  char cmd;
  (void)status;
  (void)events;
  if (read(s_in, &cmd, 1) != 1 || cmd == 'q') {
    uv_close((uv_handle_t *)h, NULL);
    for (int i = 1; i < s_k; i++)
      rmx_ctx_post(sc[i].ctx, s_stop, &sc[i]);
    rmx_ctx_stop(sc[0].ctx);
    return;
  }
  for (int i = 1; i < s_k; i++) {
    sc[i].asked = 1;
    rmx_ctx_post(sc[i].ctx, s_stats, &sc[i]);
  }
  s_stats(&sc[0]);
  unsigned long long reg = 0, conns = 0;
  int lo = sc[0].accepted, hi = lo;
  for (int i = 0; i < s_k; i++) {
    while (sc[i].asked)
      usleep(100);
    reg += sc[i].st.tp_reg_bytes;
    conns += sc[i].st.conns;
    lo = sc[i].accepted < lo ? sc[i].accepted : lo;
    hi = sc[i].accepted > hi ? sc[i].accepted : hi;
  }
  mem_t m = mem_now();
  dprintf(s_out, "%lld %lld %lld %lld %lld %llu %llu %d %d\n", m.rss, m.pss, m.priv, m.seg,
          m.seg_rss, reg, conns, lo, hi);
}

static int serve(const char *uri, int n)
{
  char bound[160];
  sc = calloc((size_t)s_k, sizeof(*sc));
  if (!sc || (s_k > 1 && rmx_group_open(uri, &s_group) != 0) || s_open(&sc[0], uri, n))
    return 1;
  for (int i = 1; i < s_k; i++) {
    pthread_create(&sc[i].th, NULL, s_thread, &sc[i]);
    while (!sc[i].up)
      usleep(1000);
    if (sc[i].up < 0)
      return 1;
  }
  if (rmx_listener_uri(sc[0].l, bound, sizeof(bound)))
    return 1;
  uv_poll_t p;
  uv_poll_init(rmx_ctx_loop(sc[0].ctx), &p, s_in);
  uv_poll_start(&p, UV_READABLE, s_request);
  dprintf(s_out, "%s\n", bound);
  rmx_ctx_run(sc[0].ctx);
  for (int i = 1; i < s_k; i++)
    pthread_join(sc[i].th, NULL);
  return 0; /* the process ends: what is still open goes with it */
}

/* ---- the client ---- */

typedef struct cl {
  rmx_conn_t *c;
  uint64_t calls;
  uint64_t sent_at;
  int up;
} cl_t;

static rmx_ctx_t *ctx;
static cl_t *cls;
static int n, nup, nfailed, running, outstanding;
static uint32_t *samples; /* round trips in ns, up to MAX_SAMPLES */
static size_t nsamples;

static void call(cl_t *k);

static void on_reply(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  cl_t *k = arg;
  (void)c;
  (void)data;
  (void)len;
  outstanding--;
  if (status)
    die("a call failed", status);
  uint64_t now = uv_hrtime();
  if (running) {
    k->calls++;
    if (nsamples < MAX_SAMPLES)
      samples[nsamples++] = (uint32_t)(now - k->sent_at > UINT32_MAX ? UINT32_MAX
                                                                     : now - k->sent_at);
    call(k);
  }
}

static void call(cl_t *k)
{
  uint64_t v = 42;
  k->sent_at = uv_hrtime();
  int rc = rmx_rpc_call(k->c, RPC_ID, &v, sizeof(v), 0, on_reply, k, NULL);
  if (rc)
    die("rmx_rpc_call", rc);
  outstanding++;
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  cl_t *k = arg;
  (void)c;
  if (status) {
    if (nfailed++ < 3)
      fprintf(stderr, "rmx-conns: a connect failed: %s\n", rmx_strerror(status));
    return;
  }
  k->up = 1;
  nup++;
}

static void spin_until(const int *a, const int *b, int want, double secs)
{
  uint64_t end = uv_hrtime() + (uint64_t)(secs * 1e9);
  while (*a + (b ? *b : 0) < want) {
    if (rmx_ctx_progress(ctx) < 0)
      die("progress", 0);
    if (uv_hrtime() > end) {
      fprintf(stderr, "rmx-conns: timed out (%d of %d)\n", *a + (b ? *b : 0), want);
      kill(server_pid, SIGKILL);
      exit(1);
    }
  }
}

static int s_lo, s_hi; /* the fewest and most connections one server context took */

static void ask(FILE *from, int to, mem_t *m, unsigned long long *reg, unsigned long long *c)
{
  if (write(to, "r", 1) != 1 ||
      fscanf(from, "%lld %lld %lld %lld %lld %llu %llu %d %d", &m->rss, &m->pss, &m->priv, &m->seg,
             &m->seg_rss, reg, c, &s_lo, &s_hi) != 9)
    die("the server did not report", 0);
}

static int cmp_u32(const void *a, const void *b)
{
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

static const char usage[] =
    "usage: rmx-conns [--json] [--contexts K] [--work US] tcp|rdma|shm|auto ADDR N [SECONDS]\n"
    "  One server (a child process) answers 8-byte RPCs; N connections to it are\n"
    "  opened (128 connects in flight at most), then each keeps one call\n"
    "  outstanding for SECONDS (3).\n"
    "  Prints the connect time and rate, calls per second, p50 and p99 round\n"
    "  trip, the server's resident and registered bytes per idle connection, and\n"
    "  the fewest and most calls of one connection over the mean.\n"
    "  shm: ADDR is the listener's @NAME or path; adds each side's private and\n"
    "  proportional bytes and the shared segment's, per idle connection.\n"
    "  auto: a tcp:// server at ADDR, and auto:// connects (on this host: shm).\n"
    "  --json     one JSON object instead of the line\n"
    "  --contexts K  the server is K contexts on K threads, one listener group;\n"
    "             adds how evenly they took the connections\n"
    "  --work US  each call keeps the server busy for US microseconds\n"
    "  --version  the tool's and the library's version\n";

static int json; /* --json */

/* rmx-conns' own options, beside --help and --version (tool.h). */
static const struct option conns_opts[] = {{"json", no_argument, NULL, 'j'},
                                           {"contexts", required_argument, NULL, 'k'},
                                           {"work", required_argument, NULL, 'w'},
                                           {NULL, 0, NULL, 0}};

static void conns_option(int ch, const char *arg)
{
  if (ch == 'j')
    json = 1;
  else if (ch == 'k')
    s_k = (int)tool_num("--contexts", arg, 1, 64);
  else
    s_work_ns = tool_num("--work", arg, 0, 1000000) * 1000;
}

int main(int argc, char **argv)
{
  int first = tool_options_with(argc, argv, usage, conns_opts, conns_option);
  int argn = argc - first;
  char **args = argv + first;
  if (argn < 3 || argn > 4)
    tool_bad("expected tcp|rdma|shm|auto, an address and a count");
  int shm = strcmp(args[0], "shm") == 0, is_auto = strcmp(args[0], "auto") == 0;
  if (strcmp(args[0], "tcp") != 0 && strcmp(args[0], "rdma") != 0 && !shm && !is_auto)
    tool_bad("unknown transport '%s'", args[0]);
  n = (int)tool_num("N", args[2], 1, 1000000);
  double secs = argn > 3 ? (double)tool_num("SECONDS", args[3], 1, 3600) : 3.0;
  signal(SIGPIPE, SIG_IGN);
  struct rlimit rl; /* a socket per connection, at each end */
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  int req[2], rep[2];
  if (pipe(req) || pipe(rep))
    die("pipe", 0);
  char uri[200];
  /* auto: a tcp:// server, connected to as auto:// (its peers choose) */
  snprintf(uri, sizeof(uri), shm ? "%s://%s" : "%s://%s:0", is_auto ? "tcp" : args[0], args[1]);
  server_pid = fork();
  if (server_pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    s_in = req[0];
    s_out = rep[1];
    close(req[1]);
    close(rep[0]);
    _exit(serve(uri, n));
  }
  close(req[0]); /* so a server that exits early reads as EOF, not silence */
  close(rep[1]);
  FILE *from = fdopen(rep[0], "r");
  char bound[200];
  if (!from || !fgets(bound, sizeof(bound), from)) {
    fprintf(stderr, "rmx-conns: the server did not start (its reason is above)\n");
    exit(1);
  }
  bound[strcspn(bound, "\n")] = 0;
  if (is_auto) { /* tcp://A:P -> auto://A:P */
    char *rest = strstr(bound, "://");
    char tmp[200];
    snprintf(tmp, sizeof(tmp), "auto%s", rest ? rest : "");
    snprintf(bound, sizeof(bound), "%s", tmp);
  }

  rmx_config_t cfg;
  rmx_config_init(&cfg);
  if (cfg.rpc_max_inflight < 4)
    cfg.rpc_max_inflight = 4;
  int rc = rmx_ctx_create(&ctx, NULL, &cfg);
  if (rc)
    die("context", rc);
  cls = calloc((size_t)n, sizeof(*cls));
  samples = malloc(MAX_SAMPLES * sizeof(*samples));
  if (!cls || !samples)
    die("memory", 0);

  mem_t s0, s1, m0 = mem_now(), m1; /* the server's, this process's */
  unsigned long long reg0, reg1, c0, c1;
  ask(from, req[1], &s0, &reg0, &c0);
  /* At most WINDOW connects in flight: one thread making a thousand QPs
   * at once answers the server's replies late, and a server drops a
   * connection whose handshake outlasts RMX_HANDSHAKE_TIMEOUT_MS. */
  uint64_t t0 = uv_hrtime();
  for (int i = 0; i < n; i++) {
    if (i - nup - nfailed >= WINDOW)
      spin_until(&nup, &nfailed, i - WINDOW + 1, 600);
    if ((rc = rmx_connect(ctx, bound, on_connected, &cls[i], &cls[i].c)) != 0)
      die("rmx_connect", rc);
  }
  spin_until(&nup, &nfailed, n, 600);
  double tconn = (double)(uv_hrtime() - t0) / 1e9;
  if (nfailed)
    die("not every connection was made", RMX_ECONNREFUSED);
  for (int i = 0; i < 200; i++) /* the server's side settles */
    rmx_ctx_progress(ctx);
  ask(from, req[1], &s1, &reg1, &c1);
  m1 = mem_now();

  running = 1;
  for (int i = 0; i < n; i++)
    call(&cls[i]);
  uint64_t start = uv_hrtime(), stop = start + (uint64_t)(secs * 1e9);
  while (uv_hrtime() < stop)
    if (rmx_ctx_progress(ctx) < 0)
      die("progress", 0);
  running = 0;
  double elapsed = (double)(uv_hrtime() - start) / 1e9;
  while (outstanding > 0) /* the calls in flight end */
    if (rmx_ctx_progress(ctx) < 0)
      die("progress", 0);

  uint64_t total = 0, lo = UINT64_MAX, hi = 0;
  for (int i = 0; i < n; i++) {
    total += cls[i].calls;
    lo = cls[i].calls < lo ? cls[i].calls : lo;
    hi = cls[i].calls > hi ? cls[i].calls : hi;
  }
  qsort(samples, nsamples, sizeof(*samples), cmp_u32);
  double p50 = nsamples ? samples[nsamples / 2] / 1e3 : 0;
  double p99 = nsamples ? samples[(size_t)((double)nsamples * 0.99)] / 1e3 : 0;
  double mean = (double)total / n;
  double rate = (double)total / elapsed;
  double rss_per = (double)(s1.rss - s0.rss) / n, reg_per = ((double)reg1 - (double)reg0) / n;
  double share = (double)n / s_k; /* connections per server context, if even */
  if (json)
    printf("{\"conns\": %d, \"connect_s\": %.3f, \"connects_per_s\": %.0f, \"calls_per_s\": %.0f, "
           "\"p50_us\": %.1f, \"p99_us\": %.1f, \"server_rss_per_conn\": %.0f, "
           "\"server_reg_per_conn\": %.0f, \"fewest_over_mean\": %.2f, "
           "\"most_over_mean\": %.2f, \"contexts\": %d, \"spread_lo\": %.3f, "
           "\"spread_hi\": %.3f, \"work_us\": %llu",
           n, tconn, n / tconn, rate, p50, p99, rss_per, reg_per, lo / mean, hi / mean, s_k,
           s_lo / share, s_hi / share, (unsigned long long)(s_work_ns / 1000));
  else
    printf("conns %d  connect %.3f s (%.0f/s)  %.0f calls/s  p50 %.1f us  p99 %.1f us  "
           "server per conn: %.0f B resident, %.0f B registered  fairness %.2f .. %.2f"
           "  contexts %d, spread %.3f .. %.3f",
           n, tconn, n / tconn, rate, p50, p99, rss_per, reg_per, lo / mean, hi / mean, s_k,
           s_lo / share, s_hi / share);
  if (shm) {
    /* The host's cost of a connection: what each side holds alone, and
     * the segment once (both map it; its pages exist untouched too). */
#define PER(a, b, f) ((double)((b).f - (a).f) / n)
    double host = PER(s0, s1, priv) + PER(m0, m1, priv) + PER(s0, s1, seg);
    if (json)
      printf(", \"server_pss_per_conn\": %.0f, \"server_private_per_conn\": %.0f, "
             "\"client_rss_per_conn\": %.0f, \"client_pss_per_conn\": %.0f, "
             "\"client_private_per_conn\": %.0f, \"seg_per_conn\": %.0f, "
             "\"seg_resident_per_conn\": %.0f, \"host_per_conn\": %.0f",
             PER(s0, s1, pss), PER(s0, s1, priv), PER(m0, m1, rss), PER(m0, m1, pss),
             PER(m0, m1, priv), PER(s0, s1, seg), PER(s0, s1, seg_rss), host);
    else
      printf("\n  per idle conn: server %.0f B private, %.0f B Pss; client %.0f B private, "
             "%.0f B Pss; segment %.0f B mapped, %.0f B resident; host %.0f B",
             PER(s0, s1, priv), PER(s0, s1, pss), PER(m0, m1, priv), PER(m0, m1, pss),
             PER(s0, s1, seg), PER(s0, s1, seg_rss), host);
#undef PER
  }
  printf(json ? "}\n" : "\n");
  fflush(stdout);

  for (int i = 0; i < n; i++)
    rmx_conn_close(cls[i].c, NULL, NULL);
  rmx_ctx_destroy(ctx);
  if (write(req[1], "q", 1) != 1)
    die("the server is gone", 0);
  int st;
  waitpid(server_pid, &st, 0);
  free(cls);
  free(samples);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
