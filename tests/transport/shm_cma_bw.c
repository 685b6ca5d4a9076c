/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Bandwidth of one copy between processes (transport/shm/cma.c), not a
 * test: a peer process pinned to CPU 1 holds a buffer of SIZE bytes,
 * touched once so its pages exist, and this process, pinned to CPU 0,
 * writes SIZE bytes into it with rmx__shm_cma_copy (process_vm_writev)
 * N times; then, in the same run, memcpy of SIZE bytes between two
 * buffers of its own N times on the same core. Both figures in GB/s
 * (10^9 bytes a second), the best of -r rounds each.
 *   rmx-shm-cma-bw [-n N] [-s SIZE] [-r ROUNDS]
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rmx/rmx.h>

#include "../../transport/shm/cma.h"
#define LAT_PROG "shm_cma_bw"
#include "lat.h"

static uint8_t *area(size_t size)
{
  uint8_t *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    die("no memory");
  memset(p, 1, size); /* the pages exist before the clock starts */
  return p;
}

int main(int argc, char **argv)
{
  long n = 500, rounds = 5;
  size_t size = 4u << 20;
  int o;
  while ((o = getopt(argc, argv, "n:s:r:")) != -1) {
    if (o == 'n')
      n = atol(optarg);
    else if (o == 's')
      size = (size_t)atol(optarg);
    else if (o == 'r')
      rounds = atol(optarg);
    else
      return 2;
  }
  if (n < 1 || size < 1 || rounds < 1)
    die("-n, -s and -r at least 1");
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    die("socketpair");
  pid_t pid = fork();
  if (pid < 0)
    die("fork");
  if (pid == 0) { /* the peer, on CPU 1: holds the target and waits */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(sv[0]);
    pin(1);
    uint64_t at = (uintptr_t)area(size);
    char c;
    if (write(sv[1], &at, sizeof(at)) != sizeof(at))
      _exit(1);
    _exit(read(sv[1], &c, 1) < 0); /* until the writer is done */
  }
  close(sv[1]);
  pin(0);
  uint64_t at;
  if (read(sv[0], &at, sizeof(at)) != sizeof(at))
    die("no address from the peer");
  uint8_t *src = area(size), *dst = area(size);
  struct iovec l = {src, size}, r = {(void *)(uintptr_t)at, size};
  double best_cma = 0, best_cpy = 0;
  for (long k = 0; k < rounds; k++) {
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
      int rc = rmx__shm_cma_copy(pid, RMX_SHM_CMA_WRITE, &l, 1, &r, 1, NULL);
      if (rc != 0) {
        fprintf(stderr, LAT_PROG ": process_vm_writev: %s\n", rmx_strerror(rc));
        exit(1);
      }
    }
    double cma = (double)size * (double)n / (now_ns() - t0);
    t0 = now_ns();
    for (long i = 0; i < n; i++) {
      src[i % size] = (uint8_t)i; /* each round's copy is of changed bytes */
      memcpy(dst, src, size);
      __asm__ volatile("" : : "r"(dst) : "memory"); /* keep every copy */
    }
    double cpy = (double)size * (double)n / (now_ns() - t0);
    best_cma = cma > best_cma ? cma : best_cma;
    best_cpy = cpy > best_cpy ? cpy : best_cpy;
  }
  close(sv[0]);
  waitpid(pid, NULL, 0);
  printf("%zu B x %ld, best of %ld: process_vm_writev to a process on CPU 1 %.2f GB/s, "
         "memcpy on CPU 0 %.2f GB/s\n",
         size, n, rounds, best_cma, best_cpy);
  return 0;
}
