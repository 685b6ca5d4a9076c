/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-perf's clock: nanoseconds from the CPU's cycle counter where it has
 * one (x86-64), calibrated against CLOCK_MONOTONIC at start, as perftest
 * and UCX time their loops. clock_gettime elsewhere. Under emulation the
 * difference matters: in the SoftRoCE test VM the kernel's clock source is
 * an emulated HPET and clock_gettime costs about 1.2 us, rdtsc 14 ns.
 */
#ifndef RMX_PERF_CLOCK_H
#define RMX_PERF_CLOCK_H

#include <stdint.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

static double perf_ns_per_tick = 1.0;

static inline uint64_t perf_mono_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t perf_ticks(void)
{
#if defined(__x86_64__)
  return __rdtsc();
#else
  return perf_mono_ns();
#endif
}

/* Nanoseconds between two perf_ticks() readings. */
static inline double perf_ns(uint64_t from, uint64_t to)
{
  return (double)(to - from) * perf_ns_per_tick;
}

/* Measure the counter against the monotonic clock over about 100 ms. */
static inline void perf_clock_init(void)
{
#if defined(__x86_64__)
  struct timespec pause = {0, 100 * 1000 * 1000};
  uint64_t n0 = perf_mono_ns(), t0 = perf_ticks();
  nanosleep(&pause, NULL);
  uint64_t n1 = perf_mono_ns(), t1 = perf_ticks();
  if (t1 > t0 && n1 > n0)
    perf_ns_per_tick = (double)(n1 - n0) / (double)(t1 - t0);
#endif
}

#endif
