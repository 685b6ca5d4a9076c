/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What rmx-perf's client and server share: the RPC handlers of the server,
 * the control requests that set it up, and the byte pattern both check.
 */
#ifndef RMX_PERF_H
#define RMX_PERF_H

#include <rmx/rmx.h>
#include <stddef.h>
#include <stdint.h>

enum { H_ECHO = 1, H_CTL = 2 };                   /* RPC handlers of the server */
enum { CTL_ECHO, CTL_SINK, CTL_SINK_END, CTL_MEM, CTL_MEM_SUM, CTL_MEM_FREE };

typedef struct ctl {
  uint32_t cmd, window;
  uint64_t size;
} ctl_t;

typedef struct sink_report {
  uint64_t msgs, bytes, bad;
} sink_report_t;

/* The byte at offset off of a region or buffer whose contents are checked. */
static inline uint8_t pattern_at(uint64_t off) { return (uint8_t)(off * 131 + 7); }

static inline void pattern_fill(uint8_t *p, size_t len)
{
  for (size_t i = 0; i < len; i++)
    p[i] = pattern_at(i);
}

static inline uint64_t pattern_sum(const uint8_t *p, size_t len) /* FNV-1a */
{
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* One test at one size, as reported (perf_report.c). */
typedef struct perf_result {
  const char *test, *transport;
  int lat, one_way; /* a latency test; its figure is half the round trip */
  size_t size;
  long iters, warmup, window;
  int conns;
  double mib_s, mmsg_s;                    /* throughput tests: 2^20 B/s, 10^6 msg/s */
  double mean, p50, p99, p999, min, max;   /* latency tests, us */
  double stddev;                           /* latency tests, us (population) */
} perf_result_t;

/* mean, standard deviation, percentiles, min and max of n > 0 latency
 * samples (reordered) */
void perf_latency(perf_result_t *r, double *a, long n);
void perf_header(int json, const perf_result_t *r);
void perf_report(int json, const perf_result_t *r);

/* The server (perf_server.c): serves clients on uri until SIGTERM/SIGINT.
 * Returns 0, 1 when it could not serve, or 2 when the library refused the
 * URI (a usage error). */
int perf_server(rmx_ctx_t *ctx, const char *uri);
/* Run the context's loop until SIGTERM or SIGINT (both servers). */
void perf_run_until_signal(rmx_ctx_t *ctx);

#endif
