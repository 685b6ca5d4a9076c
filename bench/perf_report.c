/*
 * rmx-perf's output: a table for people, or one JSON object per line for
 * scripts (the fields bench/compare and tests/perf_check.sh read).
 */
#include <rmx/rmx.h>
#include <stdio.h>

#include "perf.h"

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
         !r->lat      ? ""
         : r->one_way ? "; latency one way (half the round trip), us"
                      : "; latency of the whole operation, us");
  if (r->lat)
    printf("%-10s %9s %8s %9s %9s %9s %9s %9s %9s\n", "test", "bytes", "iters", "mean", "p50",
           "p99", "p99.9", "min", "max");
  else
    printf("%-10s %9s %8s %12s %10s\n", "test", "bytes", "iters", "MB/s", "Mmsg/s");
}

void perf_report(int json, const perf_result_t *r)
{
  if (json) {
    printf("{\"test\":\"%s\",\"transport\":\"%s\",\"progress\":\"%s\",\"size\":%zu,"
           "\"iters\":%ld,\"warmup\":%ld,\"window\":%ld,\"conns\":%d,",
           r->test, r->transport, progress_name(), r->size, r->iters, r->warmup, r->window,
           r->conns);
    if (r->lat)
      printf("\"lat_kind\":\"%s\",\"lat_us\":{\"mean\":%.3f,\"p50\":%.3f,\"p99\":%.3f,"
             "\"p999\":%.3f,\"min\":%.3f,\"max\":%.3f},\"mb_s\":null,\"mmsg_s\":null}\n",
             r->one_way ? "one_way" : "round_trip", r->mean, r->p50, r->p99, r->p999, r->min,
             r->max);
    else
      printf("\"lat_kind\":null,\"lat_us\":null,\"mb_s\":%.6g,\"mmsg_s\":%.6g}\n", r->mb_s,
             r->mmsg_s);
  } else if (r->lat) {
    printf("%-10s %9zu %8ld %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", r->test, r->size, r->iters,
           r->mean, r->p50, r->p99, r->p999, r->min, r->max);
  } else {
    printf("%-10s %9zu %8ld %12.2f %10.4f\n", r->test, r->size, r->iters, r->mb_s, r->mmsg_s);
  }
  fflush(stdout);
}
