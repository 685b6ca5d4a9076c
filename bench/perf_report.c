/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-perf's output: latency statistics, and a table for people or one JSON
 * object per line for scripts (the fields bench/compare and
 * tests/perf_check.sh read). Units, in every line of the table and in the
 * JSON's names: latency in us (lat_us), bandwidth in MiB/s of 2^20 bytes
 * (mib_s, what perftest, UCX and sockperf print as MB/s), message rate in
 * millions a second (mmsg_s).
 */
#include <rmx/rmx.h>
#include <math.h>
#include <stdio.h>

#include "perf.h"

/*
 * Percentiles by selection, not sorting: after select(a, lo, hi, k), a[k]
 * holds what a sort would put there, nothing before it is larger and
 * nothing after it smaller. Linear on average where a sort is n log n: a
 * latency run's samples are taken per round trip, and their processing
 * should not show up in a count of instructions per round trip.
 */
static void select_kth(double *a, long lo, long hi, long k) /* [lo, hi) */
{
  while (hi - lo > 1) {
    double pv = a[lo + (hi - lo) / 2];
    long i = lo, j = hi - 1;
    while (i <= j) {
      while (a[i] < pv)
        i++;
      while (a[j] > pv)
        j--;
      if (i <= j) {
        double t = a[i];
        a[i++] = a[j];
        a[j--] = t;
      }
    }
    /* [lo, j] <= pv <= [i, hi), and anything between equals pv */
    if (k <= j)
      hi = j + 1;
    else if (k >= i)
      lo = i;
    else
      return;
  }
}

/* The q quantile of the n samples a, selecting from @p from on: everything
 * before it has been selected already and is no larger. */
static long pct_at(double *a, long n, double q, long from)
{
  long i = (long)(q * (double)n);
  if (i >= n)
    i = n - 1;
  if (i < from)
    i = from;
  select_kth(a, from, n, i);
  return i;
}

void perf_latency(perf_result_t *r, double *a, long n)
{
  double sum = 0, lo = a[0], hi = a[0];
  for (long i = 0; i < n; i++) {
    sum += a[i];
    lo = a[i] < lo ? a[i] : lo;
    hi = a[i] > hi ? a[i] : hi;
  }
  r->mean = sum / (double)n;
  double sq = 0; /* the deviations from the mean: no cancellation as in sum(x^2) - n mean^2 */
  for (long i = 0; i < n; i++)
    sq += (a[i] - r->mean) * (a[i] - r->mean);
  r->stddev = sqrt(sq / (double)n);
  long i50 = pct_at(a, n, 0.5, 0), i99 = pct_at(a, n, 0.99, i50);
  long i999 = pct_at(a, n, 0.999, i99);
  r->p50 = a[i50];
  r->p99 = a[i99];
  r->p999 = a[i999];
  r->min = lo;
  r->max = hi;
}


/* The progress mode in effect: what RMX_PROGRESS made of the defaults. */
static const char *progress_name(void)
{
  rmx_config_t cfg;
  rmx_config_init(&cfg);
  return (const char *[]){"event", "poll", "adaptive"}[cfg.progress % 3];
}

void perf_header(int json, const perf_result_t *r)
{
  if (json)
    return;
  printf("# rmx-perf %s over %s, progress %s, %d connection%s%s\n", r->test, r->transport,
         progress_name(), r->conns, r->conns == 1 ? "" : "s",
         !r->lat      ? "; bandwidth in MiB/s (2^20 bytes a second), rate in Mmsg/s (10^6 a second)"
         : r->one_way ? "; latency one way (half the round trip), us"
                      : "; latency of the whole operation, us");
  if (r->lat)
    printf("%-10s %9s %8s %9s %9s %9s %9s %9s %9s %9s %s\n", "test", "bytes", "iters", "mean",
           "p50", "p99", "p99.9", "min", "max", "stddev", "unit");
  else
    printf("%-10s %9s %8s %18s %17s\n", "test", "bytes", "iters", "bandwidth", "message rate");
}

void perf_report(int json, const perf_result_t *r)
{
  if (json) {
    printf("{\"test\":\"%s\",\"transport\":\"%s\",\"progress\":\"%s\",\"size\":%zu,"
           "\"iters\":%ld,\"warmup\":%ld,\"window\":%ld,\"conns\":%d,",
           r->test, r->transport, progress_name(), r->size, r->iters, r->warmup, r->window,
           r->conns);
    if (r->lat)
      printf("\"lat_kind\":\"%s\",\"lat_us\":{\"mean\":%.3f,\"stddev\":%.3f,\"p50\":%.3f,"
             "\"p99\":%.3f,\"p999\":%.3f,\"min\":%.3f,\"max\":%.3f},\"mib_s\":null,"
             "\"mmsg_s\":null}\n",
             r->one_way ? "one_way" : "round_trip", r->mean, r->stddev, r->p50, r->p99, r->p999,
             r->min, r->max);
    else
      printf("\"lat_kind\":null,\"lat_us\":null,\"mib_s\":%.6g,\"mmsg_s\":%.6g}\n", r->mib_s,
             r->mmsg_s);
  } else if (r->lat) {
    printf("%-10s %9zu %8ld %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f us\n", r->test, r->size,
           r->iters, r->mean, r->p50, r->p99, r->p999, r->min, r->max, r->stddev);
  } else {
    printf("%-10s %9zu %8ld %12.2f MiB/s %10.4f Mmsg/s\n", r->test, r->size, r->iters, r->mib_s,
           r->mmsg_s);
  }
  fflush(stdout);
}
