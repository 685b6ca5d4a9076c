/* SPDX-License-Identifier: BSD-3-Clause */
/* What the shared-memory latency and bandwidth programs share: pinning to
 * a CPU, the clock, giving up, and sorting round trips (inline, so that a
 * program need not use them all). Define LAT_PROG (the program's name, for
 * its messages) before including this. */
#ifndef RMX_TEST_LAT_H
#define RMX_TEST_LAT_H

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline void pin(int cpu)
{
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  if (sched_setaffinity(0, sizeof(s), &s) != 0)
    fprintf(stderr, LAT_PROG ": cannot pin to CPU %d: %s\n", cpu, strerror(errno));
}

static inline void die(const char *what)
{
  fprintf(stderr, LAT_PROG ": %s\n", what);
  exit(1);
}

static inline double now_ns(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static inline int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

#endif
