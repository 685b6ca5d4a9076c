/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Small helpers for the conformance programs (public API only): a
 * monotonic clock, loop pumping with a deadline, and FAIL, which prints
 * "NAME: FAIL: ..." and exits 1. A program that uses FAIL defines
 * TEST_NAME (its name in that line) before it includes this header; one
 * with a server child sets test_server_pid, and FAIL kills that child
 * first so that it is never left behind.
 */
#ifndef RMX_TEST_UTIL_H
#define RMX_TEST_UTIL_H

#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <rmx/rmx.h>

static pid_t test_server_pid; /* a server child to kill on FAIL, or 0 */

__attribute__((noreturn, format(printf, 2, 3))) static inline void
test_fail(const char *who, const char *fmt, ...)
{
  va_list ap;
  fprintf(stderr, "%s: FAIL: ", who);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  if (test_server_pid > 0)
    kill(test_server_pid, SIGKILL);
  exit(1);
}

#define FAIL(...) test_fail(TEST_NAME, __VA_ARGS__)

/* Milliseconds on the monotonic clock. */
static inline uint64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One turn of each context's loop, without blocking. */
static inline void pump(rmx_ctx_t *a, rmx_ctx_t *b)
{
  rmx_ctx_progress(a);
  rmx_ctx_progress(b);
}

/* Progress ctx until *a, plus *b where b is given, reaches want; FAIL if
 * progress fails or after secs seconds. */
static inline void test_progress_until(const char *who, rmx_ctx_t *ctx, const int *a,
                                       const int *b, int want, int secs)
{
  uint64_t end = now_ms() + (uint64_t)secs * 1000;
  while (*a + (b ? *b : 0) < want) {
    if (rmx_ctx_progress(ctx) < 0)
      test_fail(who, "progress");
    if (now_ms() > end)
      test_fail(who, "timed out: %d of %d", *a + (b ? *b : 0), want);
  }
}

#define progress_until(...) test_progress_until(TEST_NAME, __VA_ARGS__)

/* A URI to listen on for scheme sch (any port): tcp on 127.0.0.1; rdma on
 * $RMX_TEST_ADDR, else $RXE_VM_ADDR (the SoftRoCE VM's), FAIL without one;
 * shm on an abstract name of its own. */
static inline void test_listen_uri(const char *who, const char *sch, char *uri, size_t n)
{
  if (strcmp(sch, "rdma") == 0) {
    const char *a = getenv("RMX_TEST_ADDR") ? getenv("RMX_TEST_ADDR") : getenv("RXE_VM_ADDR");
    if (!a)
      test_fail(who, "rdma needs RMX_TEST_ADDR or RXE_VM_ADDR");
    snprintf(uri, n, "rdma://%s:0", a);
  } else if (strcmp(sch, "shm") == 0) { /* a fresh abstract name */
    static unsigned fresh;
    snprintf(uri, n, "shm://@rmx-test-%d-%u", (int)getpid(), ++fresh);
  } else {
    snprintf(uri, n, "tcp://127.0.0.1:0");
  }
}

#define listen_uri(...) test_listen_uri(TEST_NAME, __VA_ARGS__)

#endif
