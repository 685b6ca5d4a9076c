/* SPDX-License-Identifier: BSD-3-Clause */
/* The shared-memory ring carrying real traffic: 100 MB between two
 * threads that spin, and between two processes over a real segment (the
 * fds passed over a socket pair) that sleep on their doorbells, each
 * stream checked byte by byte and by a checksum the producer sends last;
 * then 20,000 round trips of small messages where each side sleeps in
 * poll() with no timeout whenever it waits. A wake-up lost anywhere
 * hangs the test (ctest's timeout fails it): nothing here passes because
 * a timer ran out. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <rmx/rmx.h>

#include "../../transport/shm/seg.h"
#include "shm_test.h"

#define TOTAL (100ull << 20)
#define CHUNK 6000

/* Wait for data (rx) or room (tx): spin with a yield, or arm and sleep on
 * our doorbell. 0, or -1 when the ring refused. */
static int wait_for(rmx_shm_ring_t *r, int bell)
{
  if (bell < 0) {
    sched_yield();
    return 0;
  }
  ssize_t k = r->producer ? rmx__shm_ring_arm_write(r) : rmx__shm_ring_arm_read(r);
  if (k != 0)
    return k > 0 ? 0 : -1;
  struct pollfd pf = {.fd = bell, .events = POLLIN};
  while (poll(&pf, 1, -1) < 0)
    if (errno != EINTR)
      return -1;
  return rmx__shm_doorbell_drain(bell) == 0 ? 0 : -1;
}

/* Write all of p[0..n), waiting as needed. */
static int put_all(rmx_shm_ring_t *tx, int bell, const uint8_t *p, size_t n)
{
  while (n > 0) {
    struct iovec v = {.iov_base = (void *)p, .iov_len = n};
    ssize_t k = rmx__shm_ring_write(tx, &v, 1);
    if (k < 0 || (k == 0 && wait_for(tx, bell) != 0))
      return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* The stream's first total bytes in gather writes of random shapes, then
 * their checksum. */
static int produce(rmx_shm_ring_t *tx, int bell, uint64_t total, uint64_t seed)
{
  static _Thread_local uint8_t buf[3 * CHUNK];
  uint64_t pos = 0, h = SHM_FNV_INIT;
  while (pos < total) {
    size_t len = 1 + shm_rand(&seed) % (shm_rand(&seed) % 4 == 0 ? sizeof(buf) : 200);
    len = len < total - pos ? len : (size_t)(total - pos);
    shm_stream(pos, buf, len);
    size_t a = shm_rand(&seed) % (len + 1), b = a + shm_rand(&seed) % (len - a + 1);
    struct iovec v[3] = {{buf, a}, {buf + a, b - a}, {buf + b, len - b}};
    ssize_t k = rmx__shm_ring_write(tx, v, 3);
    if (k < 0 || (k == 0 && wait_for(tx, bell) != 0))
      return -1;
    h = shm_fnv(h, buf, (size_t)k);
    pos += (uint64_t)k;
  }
  uint8_t sum[8];
  memcpy(sum, &h, 8);
  return put_all(tx, bell, sum, 8);
}

/* Read the stream back in pieces of random sizes, straight from the spans
 * or copied out: every byte must be the stream's, and the checksum that
 * follows must be what we summed. */
static int consume(rmx_shm_ring_t *rx, int bell, uint64_t total, uint64_t seed)
{
  static _Thread_local uint8_t buf[CHUNK];
  uint64_t pos = 0, h = SHM_FNV_INIT, sum = 0;
  while (pos < total + 8) {
    struct iovec sp[2];
    ssize_t avail = rmx__shm_ring_peek(rx, sp);
    if (avail < 0 || (avail == 0 && wait_for(rx, bell) != 0))
      return -1;
    if (avail == 0)
      continue;
    size_t take = 1 + shm_rand(&seed) % CHUNK;
    take = take < (size_t)avail ? take : (size_t)avail;
    take = take < total + 8 - pos ? take : (size_t)(total + 8 - pos);
    if (rmx__shm_ring_copy(rx, 0, buf, take) != 0)
      return -1;
    size_t data = pos >= total ? 0 : take < total - pos ? take : (size_t)(total - pos);
    if (!shm_stream_ok(pos, buf, data))
      return -1;
    h = shm_fnv(h, buf, data);
    for (size_t i = data; i < take; i++) /* the checksum's bytes */
      sum |= (uint64_t)buf[i] << (8 * (pos + i - total));
    if (rmx__shm_ring_consume(rx, take) != 0)
      return -1;
    pos += take;
  }
  return sum == h ? 0 : -1;
}

struct producer_arg {
  rmx_shm_ring_t *tx;
  int rc;
};

static void *producer_thread(void *arg)
{
  struct producer_arg *a = arg;
  a->rc = produce(a->tx, -1, TOTAL, 42);
  return NULL;
}

static void two_threads_spin_100mb(void **state)
{
  shm_pair_t p;
  assert_int_equal(shm_pair_open(&p, RMX_SHM_RING_DEFAULT, -1, -1), 0);
  struct producer_arg a = {.tx = &p.tx};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, producer_thread, &a), 0);
  assert_int_equal(consume(&p.rx, -1, TOTAL, 7), 0);
  pthread_join(th, NULL);
  assert_int_equal(a.rc, 0);
  assert_int_equal(p.tx.wakes + p.rx.wakes, 0); /* spinning: no doorbell, no system call */
  shm_pair_close(&p);
}

/* The child: take the segment's fds from the socket, attach, and run. */
typedef int (*child_fn)(rmx_shm_ring_t *tx, rmx_shm_ring_t *rx, int bell);

static pid_t child_start(int sock, child_fn fn)
{
  pid_t pid = fork();
  if (pid != 0)
    return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  int fds[RMX_SHM_NFDS];
  char hello[4];
  rmx_shm_seg_t seg;
  rmx_shm_ring_t tx, rx;
  if (rmx__shm_fds_recv(sock, hello, sizeof(hello), fds, RMX_SHM_NFDS) != 4 ||
      rmx__shm_seg_attach(&seg, fds, NULL) != 0)
    _exit(2);
  rmx__shm_seg_rings(&seg, &tx, &rx);
  int rc = fn(&tx, &rx, seg.bell[seg.side]);
  rmx__shm_seg_close(&seg);
  _exit(rc == 0 ? 0 : 1);
}

/* Parent side: a segment, its fds sent to a child running fn. */
static pid_t pair_with_child(rmx_shm_seg_t *seg, rmx_shm_ring_t *tx, rmx_shm_ring_t *rx,
                             child_fn fn)
{
  int sv[2], fds[RMX_SHM_NFDS];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  assert_int_equal(rmx__shm_seg_create(seg, 0), 0);
  pid_t pid = child_start(sv[1], fn);
  assert_true(pid > 0);
  rmx__shm_seg_fds(seg, fds);
  assert_int_equal(rmx__shm_fds_send(sv[0], "RMXS", 4, fds, RMX_SHM_NFDS), 4);
  close(sv[0]);
  close(sv[1]);
  rmx__shm_seg_rings(seg, tx, rx);
  return pid;
}

static void child_ok(pid_t pid)
{
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

static int produce_sleeping(rmx_shm_ring_t *tx, rmx_shm_ring_t *rx, int bell)
{
  return produce(tx, bell, TOTAL, 43);
}

static void two_processes_sleep_100mb(void **state)
{
  rmx_shm_seg_t seg;
  rmx_shm_ring_t tx, rx;
  pid_t pid = pair_with_child(&seg, &tx, &rx, produce_sleeping);
  assert_int_equal(consume(&rx, seg.bell[seg.side], TOTAL, 8), 0);
  child_ok(pid);
  print_message("sleeping consumer rang its producer %llu times\n",
                (unsigned long long)rx.wakes);
  rmx__shm_seg_close(&seg);
}

#define ROUNDS 20000

/* Echo what comes until ROUNDS messages' worth of bytes went back. */
static int echo(rmx_shm_ring_t *tx, rmx_shm_ring_t *rx, int bell)
{
  uint8_t buf[512];
  uint64_t seed = 5, total = 0;
  for (int i = 0; i < ROUNDS; i++)
    total += 1 + shm_rand(&seed) % 300;
  while (total > 0) {
    ssize_t k = rmx__shm_ring_read(rx, buf, sizeof(buf));
    if (k < 0 || (k == 0 && wait_for(rx, bell) != 0))
      return -1;
    if (k > 0 && put_all(tx, bell, buf, (size_t)k) != 0)
      return -1;
    total -= (uint64_t)k;
  }
  return 0;
}

static void ping_pong_where_both_sides_sleep(void **state)
{
  rmx_shm_seg_t seg;
  rmx_shm_ring_t tx, rx;
  pid_t pid = pair_with_child(&seg, &tx, &rx, echo);
  int bell = seg.bell[seg.side];
  uint8_t msg[300], back[300];
  uint64_t seed = 5, at = 0;
  for (int i = 0; i < ROUNDS; i++) {
    size_t len = 1 + shm_rand(&seed) % 300;
    shm_stream(at, msg, len);
    at += len;
    assert_int_equal(put_all(&tx, bell, msg, len), 0);
    for (size_t got = 0; got < len;) {
      ssize_t k = rmx__shm_ring_read(&rx, back + got, len - got);
      assert_true(k >= 0);
      if (k == 0)
        assert_int_equal(wait_for(&rx, bell), 0);
      got += (size_t)k;
    }
    assert_memory_equal(back, msg, len);
  }
  child_ok(pid);
  print_message("ping-pong: %llu doorbells rung by this side\n",
                (unsigned long long)(tx.wakes + rx.wakes));
  rmx__shm_seg_close(&seg);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(two_threads_spin_100mb),
    cmocka_unit_test(two_processes_sleep_100mb),
    cmocka_unit_test(ping_pong_where_both_sides_sleep),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
