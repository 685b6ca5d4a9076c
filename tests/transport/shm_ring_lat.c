/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Latency of the shared-memory ring (transport/shm/ring.c) alone, not a
 * test: two processes, pinned to CPU 0 and CPU 1, over a real segment
 * whose fds go over a socket pair, ping-pong SIZE bytes N times, either
 * spinning on the ring or sleeping on their doorbells, and the median and
 * 99th percentile of half a round trip are printed.
 *   rmx-shm-ring-lat [-n N] [-s SIZE] [-m spin|sleep|both]
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../transport/shm/seg.h"
#define LAT_PROG "shm_ring_lat"
#include "lat.h"

/* Wait until the ring has data (rx) or room (tx). */
static void wait_ring(rmx_shm_ring_t *r, int bell, int sleep)
{
  if (!sleep)
    return; /* spin: the caller looks again at once */
  ssize_t k = r->producer ? rmx__shm_ring_arm_write(r) : rmx__shm_ring_arm_read(r);
  if (k < 0)
    die("the ring broke");
  if (k > 0)
    return;
  struct pollfd pf = {.fd = bell, .events = POLLIN};
  while (poll(&pf, 1, -1) < 0)
    if (errno != EINTR)
      die("poll");
  rmx__shm_doorbell_drain(bell);
}

static void send_msg(rmx_shm_ring_t *tx, int bell, int sleep, const uint8_t *p, size_t n)
{
  while (n > 0) {
    struct iovec v = {.iov_base = (void *)p, .iov_len = n};
    ssize_t k = rmx__shm_ring_write(tx, &v, 1);
    if (k < 0)
      die("the ring broke");
    if (k == 0)
      wait_ring(tx, bell, sleep);
    p += k;
    n -= (size_t)k;
  }
}

static void recv_msg(rmx_shm_ring_t *rx, int bell, int sleep, uint8_t *p, size_t n)
{
  while (n > 0) {
    ssize_t k = rmx__shm_ring_read(rx, p, n);
    if (k < 0)
      die("the ring broke");
    if (k == 0)
      wait_ring(rx, bell, sleep);
    p += k;
    n -= (size_t)k;
  }
}

static void run(int sleep, long n, size_t size)
{
  rmx_shm_seg_t seg;
  rmx_shm_ring_t tx, rx;
  int sv[2], fds[RMX_SHM_NFDS];
  uint8_t msg[4096] = {0};
  long warm = n / 10 + 100;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 ||
      rmx__shm_seg_create(&seg, 0) != 0)
    die("no segment");
  pid_t pid = fork();
  if (pid == 0) { /* the echo side, on CPU 1 */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    rmx__shm_seg_close(&seg);
    pin(1);
    char hi[4];
    if (rmx__shm_fds_recv(sv[1], hi, 4, fds, RMX_SHM_NFDS) != 4 ||
        rmx__shm_seg_attach(&seg, fds, NULL) != 0)
      die("attach");
    rmx__shm_seg_rings(&seg, &tx, &rx);
    int bell = seg.bell[seg.side];
    for (long i = 0; i < warm + n; i++) {
      recv_msg(&rx, bell, sleep, msg, size);
      send_msg(&tx, bell, sleep, msg, size);
    }
    _exit(0);
  }
  pin(0);
  rmx__shm_seg_fds(&seg, fds);
  if (rmx__shm_fds_send(sv[0], "RMXS", 4, fds, RMX_SHM_NFDS) != 4)
    die("send fds");
  rmx__shm_seg_rings(&seg, &tx, &rx);
  int bell = seg.bell[seg.side];
  double *rtt = malloc(sizeof(double) * (size_t)n);
  for (long i = 0; i < warm + n; i++) {
    double t0 = now_ns();
    send_msg(&tx, bell, sleep, msg, size);
    recv_msg(&rx, bell, sleep, msg, size);
    if (i >= warm)
      rtt[i - warm] = now_ns() - t0;
  }
  waitpid(pid, NULL, 0);
  qsort(rtt, (size_t)n, sizeof(double), cmp);
  printf("%-5s %zu B x %ld: one way median %.3f us, p99 %.3f us (doorbells rung here: %llu)\n",
         sleep ? "sleep" : "spin", size, n, rtt[n / 2] / 2000, rtt[n * 99 / 100] / 2000,
         (unsigned long long)(tx.wakes + rx.wakes));
  free(rtt);
  rmx__shm_seg_close(&seg);
  close(sv[0]);
  close(sv[1]);
}

int main(int argc, char **argv)
{
  long n = 100000;
  size_t size = 8;
  const char *mode = "both";
  int o;
  while ((o = getopt(argc, argv, "n:s:m:")) != -1) {
    if (o == 'n')
      n = atol(optarg);
    else if (o == 's')
      size = (size_t)atol(optarg);
    else if (o == 'm')
      mode = optarg;
    else
      return 2;
  }
  if (n < 1 || size < 1 || size > 4096)
    die("-n at least 1, -s from 1 to 4096");
  if (strcmp(mode, "sleep") != 0)
    run(0, n, size);
  if (strcmp(mode, "spin") != 0)
    run(1, n, size);
  return 0;
}
