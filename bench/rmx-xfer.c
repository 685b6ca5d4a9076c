/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-xfer: the transfer engine's throughput and request latency, measured
 * as nixlbench and Mooncake's transfer_engine_bench measure theirs: blocks
 * of --block bytes, --batch of them per request, --inflight requests per
 * thread, each request prepared once (rmx_xfer_prep) and posted again and
 * again (rmx_xfer_post) until --total bytes have moved or --seconds passed.
 *
 *   rmx-xfer server [URI] [--size BYTES]
 *   rmx-xfer client URI [--op write|read] [--block B] [--batch N] ...
 *   rmx-xfer reg [URI] [--size BYTES] [--huge] [--verbs]
 *   rmx-xfer lookup [URI] [--count N] [--etcd ENDPOINT]
 *
 * The server registers one region and sends each client a key to it packed
 * for that client's connection; each client thread works in its own window
 * of it (xfer_client.c). reg measures what registering memory costs
 * (xfer_reg.c), lookup what finding memory by name does (xfer_lookup.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"
#include "perf_clock.h"

#include "perf.h"
#include "xfer.h"

static const char usage[] =
    "usage: rmx-xfer server [URI] [--size BYTES] [--rail URI]...\n"
    "                                              serve a region (default 1G; less if it\n"
    "                                              cannot be registered), also listening\n"
    "                                              at each --rail URI for clients' rails\n"
    "       rmx-xfer client URI [options]          move data to or from it\n"
    "       rmx-xfer reg [URI] [--size BYTES] [--huge] [--verbs]\n"
    "                                              what registering memory costs\n"
    "       rmx-xfer lookup [URI] [--count N] [--etcd ENDPOINT]\n"
    "                                              what finding memory by name costs\n"
    "client options:\n"
    "      --op write|read   what every request does (write)\n"
    "      --block BYTES     bytes per block (64K)\n"
    "      --batch N         blocks per request (128)\n"
    "      --inflight N      requests in flight per thread (4)\n"
    "      --total BYTES     bytes to move, all threads together (1G)\n"
    "      --seconds S       move for S seconds instead\n"
    "      --warmup N        posts per thread before the timed part (--inflight)\n"
    "      --threads N       threads, each with its own context and connection (1)\n"
    "      --notify          each write post carries a notification; the server counts\n"
    "                        and checks them\n"
    "      --check           a pattern in the source, every byte verified at the end\n"
    "      --contig          blocks in order at the server too (the library merges them)\n"
    "      --cache           entries without a registration: the registration cache\n"
    "                        provides one when requests are prepared\n"
    "      --rail URI        also a rail to URI (the server's --rail), up to 7: large\n"
    "                        requests are striped over the connection and its rails\n"
    "      --json            one JSON object instead of the table\n"
    "reg options:\n"
    "      --size BYTES      the largest region: 256M, 512M, ... up to it (1G)\n"
    "      --huge            also 2 MiB huge pages (MAP_HUGETLB, else MADV_HUGEPAGE)\n"
    "      --verbs           also ibv_reg_mr on the same memory (builds with rdma-core)\n"
    "lookup options:\n"
    "      --count N         names published and looked up (200)\n"
    "      --etcd ENDPOINT   also publish them in etcd and find them there\n"
    "  -h, --help            this text\n"
    "      --version         rmx-xfer and the library's version\n"
    "Bandwidth in GB/s (10^9 bytes a second) and MiB/s (2^20, as perftest's MB/sec);\n"
    "latency in us from rmx_xfer_post() to the request's callback: p50, p99, p99.9.\n"
    "Numbers are decimal, with an optional K, M or G (2^10, 2^20, 2^30).\n"
    "RMX_PROGRESS=event|poll|adaptive chooses how completions are waited for.\n"
    "Exit 0: measured (and with --check every byte checked); 1: it failed;\n"
    "2: a bad command line.\n";

static xfer_opts_t O = {.block = 64 << 10, .batch = 128, .inflight = 4, .total = 1ull << 30,
                        .threads = 1, .warmup = UINT64_MAX, .count = 200,
                        .size = 1ull << 30,
                        .op = RMX_XFER_WRITE};

enum { O_OP = 256, O_BLOCK, O_BATCH, O_INFLIGHT, O_TOTAL, O_SECONDS, O_WARMUP, O_THREADS,
       O_NOTIFY, O_CHECK, O_CONTIG, O_CACHE, O_RAILS, O_JSON, O_SIZE, O_HUGE, O_VERBS,
       O_COUNT, O_ETCD };

static void take(int ch, const char *a)
{
  switch (ch) {
  case O_OP:
    if (strcmp(a, "write") && strcmp(a, "read"))
      tool_bad("--op '%s' is neither write nor read", a);
    O.op = strcmp(a, "read") == 0 ? RMX_XFER_READ : RMX_XFER_WRITE;
    break;
  case O_BLOCK: O.block = tool_num("--block", a, 1, 1ull << 30); break;
  case O_BATCH: O.batch = tool_num("--batch", a, 1, RMX_XFER_MAX_ENTRIES); break;
  case O_INFLIGHT: O.inflight = tool_num("--inflight", a, 1, 1024); break;
  case O_TOTAL: O.total = tool_num("--total", a, 1, 1ull << 50); break;
  case O_SECONDS: O.seconds = tool_num("--seconds", a, 1, 86400); break;
  case O_WARMUP: O.warmup = tool_num("--warmup", a, 0, 1000000); break;
  case O_THREADS: O.threads = tool_num("--threads", a, 1, 256); break;
  case O_NOTIFY: O.notify = 1; break;
  case O_CHECK: O.check = 1; break;
  case O_CONTIG: O.contig = 1; break;
  case O_CACHE: O.cache = 1; break;
  case O_RAILS:
    if (O.nrail == RMX_RAILS_MAX)
      tool_bad("at most %d --rail", RMX_RAILS_MAX);
    tool_uri("--rail", a);
    O.rail[O.nrail++] = a;
    break;
  case O_JSON: O.json = 1; break;
  case O_SIZE: O.size = tool_num("--size", a, 4096, 1ull << 40); break;
  case O_HUGE: O.huge = 1; break;
  case O_VERBS: O.verbs = 1; break;
  case O_COUNT: O.count = tool_num("--count", a, 1, 100000); break;
  case O_ETCD: O.etcd = a; break;
  }
}

static const char *progress_name(void)
{
  rmx_config_t cfg;
  rmx_config_init(&cfg);
  return (const char *[]){"event", "poll", "adaptive"}[cfg.progress % 3];
}

static void report(xfer_thr_res_t *r)
{
  uint64_t reqs = 0, bytes = 0, notes = 0, checked = 0, post_ticks = 0, posts = 0;
  uint64_t mprep = 0, mrun = 0, t0 = UINT64_MAX, t1 = 0;
  size_t nlat = 0, k = 0;
  for (uint64_t i = 0; i < O.threads; i++) {
    reqs += r[i].requests, bytes += r[i].bytes, notes += r[i].notes, checked += r[i].checked;
    post_ticks += r[i].post_ticks, posts += r[i].posts, nlat += r[i].nlat;
    mprep += r[i].misses_prep, mrun += r[i].misses_run;
    t0 = r[i].t0 < t0 ? r[i].t0 : t0;
    t1 = r[i].t1 > t1 ? r[i].t1 : t1;
  }
  double *lat = malloc((nlat ? nlat : 1) * sizeof(double));
  for (uint64_t i = 0; lat && i < O.threads; i++)
    for (size_t j = 0; j < r[i].nlat; j++)
      lat[k++] = r[i].lat[j];
  perf_result_t p = {0};
  if (lat && nlat)
    perf_latency(&p, lat, (long)nlat);
  free(lat);
  double secs = perf_ns(t0, t1) / 1e9, post_us = posts ? perf_ns(0, post_ticks) / 1e3 / posts : 0;
  double gb = secs > 0 ? bytes / secs / 1e9 : 0, mib = secs > 0 ? bytes / secs / (1 << 20) : 0;
  double rps = secs > 0 ? reqs / secs : 0;
  const char *op = O.op == RMX_XFER_READ ? "read" : "write";
  if (O.json) {
    printf("{\"test\":\"xfer\",\"op\":\"%s\",\"transport\":\"%s\",\"progress\":\"%s\","
           "\"block\":%llu,\"batch\":%llu,\"inflight\":%llu,\"threads\":%llu,\"contig\":%s,"
           "\"cache\":%s,\"notify\":%s,\"check\":%s,\"requests\":%llu,\"bytes\":%llu,"
           "\"seconds\":%.6f,\"gb_s\":%.6g,\"mib_s\":%.6g,\"req_s\":%.6g,"
           "\"lat_us\":{\"mean\":%.3f,\"p50\":%.3f,\"p99\":%.3f,\"p999\":%.3f,\"min\":%.3f,"
           "\"max\":%.3f},\"post_us\":%.3f,\"reg_misses_prep\":%llu,\"reg_misses_run\":%llu,"
           "\"notes\":%llu,\"checked_bytes\":%llu}\n",
           op, r[0].transport, progress_name(), (unsigned long long)O.block,
           (unsigned long long)O.batch, (unsigned long long)O.inflight,
           (unsigned long long)O.threads, O.contig ? "true" : "false",
           O.cache ? "true" : "false", O.notify ? "true" : "false", O.check ? "true" : "false",
           (unsigned long long)reqs, (unsigned long long)bytes, secs, gb, mib, rps, p.mean, p.p50,
           p.p99, p.p999, p.min, p.max, post_us, (unsigned long long)mprep,
           (unsigned long long)mrun, (unsigned long long)notes, (unsigned long long)checked);
  } else {
    printf("# rmx-xfer %s over %s, progress %s: %llu B blocks, %llu a request, %llu in flight, "
           "%llu thread%s%s\n", op, r[0].transport, progress_name(), (unsigned long long)O.block,
           (unsigned long long)O.batch, (unsigned long long)O.inflight,
           (unsigned long long)O.threads, O.threads == 1 ? "" : "s",
           O.contig ? ", contiguous (merged)" : "");
    printf("%-5s %8s %6s %9s %12s %8s %7s %10s %10s %9s %9s %9s %8s\n", "op", "block", "batch",
           "requests", "bytes", "seconds", "GB/s", "MiB/s", "req/s", "p50_us", "p99_us",
           "p99.9_us", "post_us");
    printf("%-5s %8llu %6llu %9llu %12llu %8.3f %7.3f %10.2f %10.1f %9.1f %9.1f %9.1f %8.2f\n",
           op, (unsigned long long)O.block, (unsigned long long)O.batch,
           (unsigned long long)reqs, (unsigned long long)bytes, secs, gb, mib, rps, p.p50, p.p99,
           p.p999, post_us);
    printf("# registrations by the cache: %llu preparing, %llu while posting%s",
           (unsigned long long)mprep, (unsigned long long)mrun, O.notify || O.check ? "" : "\n");
    if (O.notify)
      printf("; %llu notifications counted by the server%s", (unsigned long long)notes,
             O.check ? "" : "\n");
    if (O.check)
      printf("; %llu bytes checked\n", (unsigned long long)checked);
    if (O.nrail) {
      printf("# by lane (MiB, all threads):");
      for (int l = 0; l <= O.nrail; l++) {
        uint64_t b = 0;
        for (uint64_t i = 0; i < O.threads; i++)
          b += r[i].lane_bytes[l];
        printf(" %s %.1f", l ? "rail" : "connection", b / 1048576.0);
      }
      printf("\n");
    }
  }
  fflush(stdout);
}

static int client(void)
{
  xfer_thr_res_t *r = calloc(O.threads, sizeof(*r));
  pthread_t *th = calloc(O.threads, sizeof(*th));
  pthread_barrier_t bar;
  int failed = 0;
  if (!r || !th)
    return 1;
  if (O.warmup == UINT64_MAX)
    O.warmup = O.inflight;
  perf_clock_init();
  O.ns_per_tick = perf_ns_per_tick;
  pthread_barrier_init(&bar, NULL, (unsigned)O.threads);
  for (uint64_t i = 0; i < O.threads; i++) {
    r[i] = (xfer_thr_res_t){.o = &O, .id = (int)i, .barrier = &bar};
    if (pthread_create(&th[i], NULL, xfer_thread, &r[i]) != 0) {
      fprintf(stderr, "rmx-xfer: cannot start thread %llu\n", (unsigned long long)i);
      exit(1); /* the others wait on the barrier */
    }
  }
  for (uint64_t i = 0; i < O.threads; i++) {
    pthread_join(th[i], NULL);
    failed |= r[i].failed;
  }
  pthread_barrier_destroy(&bar);
  if (!failed)
    report(r);
  for (uint64_t i = 0; i < O.threads; i++)
    free(r[i].lat);
  free(r);
  free(th);
  return failed;
}

int main(int argc, char **argv)
{
  static const struct option opts[] = {
    {"op", required_argument, NULL, O_OP},           {"block", required_argument, NULL, O_BLOCK},
    {"batch", required_argument, NULL, O_BATCH},     {"inflight", required_argument, NULL, O_INFLIGHT},
    {"total", required_argument, NULL, O_TOTAL},     {"seconds", required_argument, NULL, O_SECONDS},
    {"warmup", required_argument, NULL, O_WARMUP},   {"threads", required_argument, NULL, O_THREADS},
    {"notify", no_argument, NULL, O_NOTIFY},         {"check", no_argument, NULL, O_CHECK},
    {"contig", no_argument, NULL, O_CONTIG},         {"cache", no_argument, NULL, O_CACHE},
    {"rail", required_argument, NULL, O_RAILS},     {"json", no_argument, NULL, O_JSON},
    {"size", required_argument, NULL, O_SIZE},       {"huge", no_argument, NULL, O_HUGE},
    {"verbs", no_argument, NULL, O_VERBS},           {"help", no_argument, NULL, 'h'},
    {"count", required_argument, NULL, O_COUNT},     {"etcd", required_argument, NULL, O_ETCD},
    {"version", no_argument, NULL, 'V'},             {NULL, 0, NULL, 0}};
  int ch;
  tool_init(argv, usage);
  opterr = 0;
  /* options may come before or after the mode and URI */
  while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    if (ch == 'h')
      tool_help();
    if (ch == 'V')
      tool_version();
    if (ch == ':')
      tool_bad("%s needs a value", argv[optind - 1]);
    if (ch == '?')
      tool_bad("unknown option '%s'", argv[optind - 1]);
    take(ch, optarg);
  }
  int nops = argc - optind;
  char **op = argv + optind;
  if (nops < 1)
    tool_bad("server, client, reg or lookup");
  const char *mode = op[0];
  if (strcmp(mode, "server") && strcmp(mode, "client") && strcmp(mode, "reg") &&
      strcmp(mode, "lookup"))
    tool_bad("'%s' is not server, client, reg or lookup", mode);
  int is_client = strcmp(mode, "client") == 0;
  if (is_client ? nops != 2 : nops > 2)
    tool_bad(is_client ? "client takes one URI" : "%s takes at most a URI", mode);
  if (nops == 2)
    tool_uri("URI", op[1]);
  if (O.notify && O.op == RMX_XFER_READ)
    tool_bad("--notify is for writes: a read request carries no notification");
  O.uri = nops == 2 ? op[1] : NULL;
  if (strcmp(mode, "reg") == 0)
    return xfer_reg(&O);
  if (strcmp(mode, "lookup") == 0)
    return xfer_lookup(&O);
  if (is_client)
    return client();
  rmx_ctx_t *ctx;
  int rc = rmx_ctx_create(&ctx, NULL, NULL);
  if (rc) {
    fprintf(stderr, "rmx-xfer: %s\n", rmx_strerror(rc));
    return 1;
  }
  rc = xfer_server(ctx, O.uri ? O.uri : "tcp://127.0.0.1:0", O.size, O.rail, O.nrail);
  int drc = rmx_ctx_destroy(ctx);
  if (drc)
    fprintf(stderr, "rmx-xfer: destroying the context: %s\n", rmx_strerror(drc));
  return rc ? rc : drc ? 1 : 0;
}
