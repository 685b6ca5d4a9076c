/* SPDX-License-Identifier: BSD-3-Clause */
/* The shared-memory byte ring (transport/shm/ring.c) in one thread: empty
 * and full, partial gather writes, wrap-around of positions and of the
 * 32-bit indices, many sizes against a reference stream, the bounds of
 * copy and consume, and the sleep protocol step by step: who rings the
 * doorbell, when, and that nobody does while no one sleeps. */
#include <poll.h>
#include <setjmp.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <cmocka.h>

#include <rmx/rmx.h>

#include "shm_test.h"

#define CAP 4096u

static ssize_t put(rmx_shm_ring_t *r, const void *p, size_t n)
{
  struct iovec v = {.iov_base = (void *)p, .iov_len = n};
  return rmx__shm_ring_write(r, &v, 1);
}

/* Whether the doorbell was rung; drains it. */
static int rung(int fd)
{
  struct pollfd pf = {.fd = fd, .events = POLLIN};
  int k = poll(&pf, 1, 0);
  if (k == 1)
    assert_int_equal(rmx__shm_doorbell_drain(fd), 0);
  return k == 1;
}

static void init_checks_its_arguments(void **state)
{
  static alignas(64) uint8_t ctl[RMX_SHM_RING_CTRL + 64];
  static uint8_t data[CAP];
  rmx_shm_ring_t r;
  assert_int_equal(rmx__shm_ring_init(&r, ctl, data, CAP + 1, 1, -1), RMX_EINVAL);
  assert_int_equal(rmx__shm_ring_init(&r, ctl, data, 2048, 1, -1), RMX_EINVAL);
  assert_int_equal(rmx__shm_ring_init(&r, ctl, data, RMX_SHM_RING_MAX * 2, 1, -1), RMX_EINVAL);
  assert_int_equal(rmx__shm_ring_init(&r, ctl + 4, data, CAP, 1, -1), RMX_EINVAL);
  assert_int_equal(rmx__shm_ring_init(&r, ctl, data, CAP, 1, -1), 0);
  /* each end does only its own side's calls */
  shm_pair_t p;
  assert_int_equal(shm_pair_open(&p, CAP, -1, -1), 0);
  struct iovec sp[2];
  uint8_t b[8] = {0};
  assert_int_equal(rmx__shm_ring_peek(&p.tx, sp), RMX_EINVAL);
  assert_int_equal(rmx__shm_ring_consume(&p.tx, 0), RMX_EINVAL);
  assert_int_equal(rmx__shm_ring_copy(&p.tx, 0, b, 0), RMX_EINVAL);
  assert_int_equal(rmx__shm_ring_arm_read(&p.tx), RMX_EINVAL);
  assert_int_equal(put(&p.rx, b, 8), RMX_EINVAL);
  assert_int_equal(rmx__shm_ring_arm_write(&p.rx), RMX_EINVAL);
  assert_int_equal(rmx__shm_ring_write(&p.tx, NULL, 1), RMX_EINVAL);
  assert_int_equal(rmx__shm_ring_write(&p.tx, NULL, -1), RMX_EINVAL);
  shm_pair_close(&p);
}

static void empty_and_full(void **state)
{
  shm_pair_t p;
  assert_int_equal(shm_pair_open(&p, CAP, -1, -1), 0);
  struct iovec sp[2];
  static uint8_t buf[CAP + 100], out[CAP + 100];
  shm_stream(0, buf, sizeof(buf));
  assert_int_equal(rmx__shm_ring_peek(&p.rx, sp), 0);
  assert_int_equal(rmx__shm_ring_read(&p.rx, out, 10), 0);
  assert_int_equal(put(&p.tx, buf, CAP + 100), CAP); /* a partial write: exactly the room */
  assert_int_equal(put(&p.tx, buf, 1), 0);             /* full */
  assert_int_equal(rmx__shm_ring_peek(&p.rx, sp), CAP);
  assert_int_equal(sp[0].iov_len, CAP);
  assert_int_equal(sp[1].iov_len, 0);
  assert_memory_equal(sp[0].iov_base, buf, CAP);
  assert_int_equal(rmx__shm_ring_consume(&p.rx, 1), 0);
  assert_int_equal(put(&p.tx, buf + CAP, 5), 1); /* one byte of room again */
  assert_int_equal(rmx__shm_ring_read(&p.rx, out, sizeof(out)), CAP);
  assert_memory_equal(out, buf + 1, CAP);
  assert_int_equal(rmx__shm_ring_peek(&p.rx, sp), 0);
  shm_pair_close(&p);
}

static void gather_writes_take_what_fits_in_order(void **state)
{
  shm_pair_t p;
  assert_int_equal(shm_pair_open(&p, CAP, -1, -1), 0);
  static uint8_t a[1000], b[3000], c[500], out[CAP];
  shm_stream(0, a, sizeof(a));
  shm_stream(1000, b, sizeof(b));
  shm_stream(4000, c, sizeof(c));
  struct iovec v[4] = {{a, sizeof(a)}, {NULL, 0}, {b, sizeof(b)}, {c, sizeof(c)}};
  assert_int_equal(rmx__shm_ring_write(&p.tx, v, 4), CAP); /* c cut after 96 bytes */
  assert_int_equal(rmx__shm_ring_read(&p.rx, out, CAP), CAP);
  assert_true(shm_stream_ok(0, out, CAP));
  struct iovec rest = {c + 96, sizeof(c) - 96};
  assert_int_equal(rmx__shm_ring_write(&p.tx, &rest, 1), sizeof(c) - 96);
  assert_int_equal(rmx__shm_ring_write(&p.tx, v, 0), 0);
  assert_int_equal(rmx__shm_ring_read(&p.rx, out, CAP), sizeof(c) - 96);
  assert_true(shm_stream_ok(CAP, out, sizeof(c) - 96));
  shm_pair_close(&p);
}

/* Bytes that straddle the end of the data area come back as two spans,
 * and copy and read join them. */
static void wrap_around_gives_two_spans(void **state)
{
  shm_pair_t p;
  assert_int_equal(shm_pair_open(&p, CAP, -1, -1), 0);
  static uint8_t buf[CAP], out[CAP];
  shm_stream(0, buf, CAP);
  assert_int_equal(put(&p.tx, buf, CAP - 10), CAP - 10);
  assert_int_equal(rmx__shm_ring_read(&p.rx, out, CAP - 10), CAP - 10);
  shm_stream(CAP - 10, buf, 30);
  assert_int_equal(put(&p.tx, buf, 30), 30);
  struct iovec sp[2];
  assert_int_equal(rmx__shm_ring_peek(&p.rx, sp), 30);
  assert_int_equal(sp[0].iov_len, 10);
  assert_int_equal(sp[1].iov_len, 20);
  assert_ptr_equal(sp[0].iov_base, p.data + CAP - 10);
  assert_ptr_equal(sp[1].iov_base, p.data);
  assert_memory_equal(sp[0].iov_base, buf, 10);
  assert_memory_equal(sp[1].iov_base, buf + 10, 20);
  uint8_t hdr[8];
  assert_int_equal(rmx__shm_ring_copy(&p.rx, 6, hdr, 8), 0); /* across the end */
  assert_memory_equal(hdr, buf + 6, 8);
  assert_int_equal(rmx__shm_ring_copy(&p.rx, 0, hdr, 0), 0);
  assert_int_equal(rmx__shm_ring_copy(&p.rx, 30, hdr, 0), 0);
  assert_int_equal(rmx__shm_ring_copy(&p.rx, 23, hdr, 8), RMX_EINVAL);
  assert_int_equal(rmx__shm_ring_copy(&p.rx, 31, hdr, 0), RMX_EINVAL);
  assert_int_equal(rmx__shm_ring_copy(&p.rx, SIZE_MAX, hdr, 2), RMX_EINVAL);
  assert_int_equal(rmx__shm_ring_consume(&p.rx, 31), RMX_EINVAL);
  assert_int_equal(rmx__shm_ring_consume(&p.rx, 30), 0);
  shm_pair_close(&p);
}

/* The indices run past 2^32 and wrap: nothing changes. */
static void indices_wrap_at_2_32(void **state)
{
  shm_pair_t p;
  assert_int_equal(shm_pair_open(&p, CAP, -1, -1), 0);
  uint32_t start = UINT32_MAX - 3000;
  *shm_word(&p, W_HEAD) = *shm_word(&p, W_TAIL) = start;
  p.tx.pos = p.tx.seen = p.rx.pos = p.rx.seen = start;
  static uint8_t buf[CAP], out[CAP];
  uint64_t at = 0;
  for (int i = 0; i < 10; i++) {
    shm_stream(at, buf, 1500);
    assert_int_equal(put(&p.tx, buf, 1500), 1500);
    assert_int_equal(rmx__shm_ring_read(&p.rx, out, CAP), 1500);
    assert_true(shm_stream_ok(at, out, 1500));
    at += 1500;
  }
  assert_true(p.rx.pos < start); /* wrapped */
  shm_pair_close(&p);
}

/* Random gather writes and random reads, copies and consumes, for several
 * capacities: what comes out is the stream that went in. */
static void many_sizes_keep_the_stream(void **state)
{
  static uint8_t src[3][RMX_SHM_RING_MIN * 4], out[RMX_SHM_RING_MIN * 4];
  for (uint32_t cap = RMX_SHM_RING_MIN; cap <= RMX_SHM_RING_MIN * 4; cap *= 2) {
    shm_pair_t p;
    assert_int_equal(shm_pair_open(&p, cap, -1, -1), 0);
    uint64_t seed = cap, wpos = 0, rpos = 0;
    for (int op = 0; op < 40000; op++) {
      if (shm_rand(&seed) & 1) {
        struct iovec v[3];
        int n = 1 + (int)(shm_rand(&seed) % 3);
        uint64_t at = wpos;
        for (int i = 0; i < n; i++) {
          size_t len = shm_rand(&seed) % 8 == 0 ? shm_rand(&seed) % sizeof(src[i])
                                                : shm_rand(&seed) % 64;
          shm_stream(at, src[i], len);
          v[i] = (struct iovec){src[i], len};
          at += len;
        }
        ssize_t k = rmx__shm_ring_write(&p.tx, v, n);
        assert_true(k >= 0 && (uint64_t)k <= at - wpos && (uint64_t)k <= cap - (wpos - rpos));
        wpos += (uint64_t)k;
      } else {
        struct iovec sp[2];
        ssize_t avail = rmx__shm_ring_peek(&p.rx, sp);
        assert_int_equal(avail, wpos - rpos);
        assert_true(shm_stream_ok(rpos, sp[0].iov_base, sp[0].iov_len));
        assert_true(shm_stream_ok(rpos + sp[0].iov_len, sp[1].iov_base, sp[1].iov_len));
        size_t n = avail ? shm_rand(&seed) % ((size_t)avail + 1) : 0;
        size_t off = n ? shm_rand(&seed) % n : 0;
        assert_int_equal(rmx__shm_ring_copy(&p.rx, off, out, n - off), 0);
        assert_true(shm_stream_ok(rpos + off, out, n - off));
        assert_int_equal(rmx__shm_ring_consume(&p.rx, n), 0);
        rpos += n;
      }
    }
    assert_int_equal(p.tx.wakes + p.rx.wakes, 0); /* nobody slept, nobody was rung */
    shm_pair_close(&p);
  }
}

/* A consumer that arms on an empty ring is woken by the next write, once. */
static void an_armed_reader_is_rung_once(void **state)
{
  int bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  shm_pair_t p;
  assert_int_equal(shm_pair_open(&p, CAP, bell, -1), 0);
  uint8_t b[16] = {1};
  assert_int_equal(rmx__shm_ring_arm_read(&p.rx), 0);
  assert_int_equal(*shm_word(&p, W_RD_ARMED), 1);
  assert_false(rung(bell));
  assert_int_equal(put(&p.tx, b, 16), 16);
  assert_true(rung(bell));
  assert_int_equal(p.tx.wakes, 1);
  assert_int_equal(*shm_word(&p, W_RD_ARMED), 0); /* the waker took the flag back */
  assert_int_equal(put(&p.tx, b, 16), 16);
  assert_false(rung(bell)); /* one sleep, one doorbell */
  /* bytes there but unseen: arming finds them and does not sleep */
  struct iovec sp[2];
  assert_int_equal(rmx__shm_ring_arm_read(&p.rx), 32);
  assert_int_equal(*shm_word(&p, W_RD_ARMED), 0);
  assert_int_equal(put(&p.tx, b, 1), 1);
  assert_false(rung(bell));
  /* part of a frame seen: arming sleeps until more comes */
  assert_int_equal(rmx__shm_ring_peek(&p.rx, sp), 33);
  assert_int_equal(rmx__shm_ring_arm_read(&p.rx), 0);
  assert_int_equal(put(&p.tx, b, 1), 1);
  assert_true(rung(bell));
  assert_int_equal(rmx__shm_ring_peek(&p.rx, sp), 34);
  close(bell);
  shm_pair_close(&p);
}

/* A producer that arms on a full ring is woken when room is freed. */
static void an_armed_writer_is_rung_when_room_comes(void **state)
{
  int bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  shm_pair_t p;
  assert_int_equal(shm_pair_open(&p, CAP, -1, bell), 0);
  static uint8_t b[CAP];
  struct iovec sp[2];
  assert_int_equal(put(&p.tx, b, CAP), CAP);
  assert_int_equal(rmx__shm_ring_arm_write(&p.tx), 0);
  assert_int_equal(*shm_word(&p, W_WR_ARMED), 1);
  assert_int_equal(rmx__shm_ring_peek(&p.rx, sp), CAP);
  assert_int_equal(rmx__shm_ring_consume(&p.rx, 100), 0);
  assert_true(rung(bell));
  assert_int_equal(rmx__shm_ring_consume(&p.rx, 100), 0);
  assert_false(rung(bell));
  /* room freed before the producer looked: arming finds it */
  assert_int_equal(rmx__shm_ring_arm_write(&p.tx), 200);
  assert_int_equal(*shm_word(&p, W_WR_ARMED), 0);
  assert_int_equal(rmx__shm_ring_consume(&p.rx, 1), 0);
  assert_false(rung(bell));
  assert_int_equal(p.rx.wakes, 1);
  close(bell);
  shm_pair_close(&p);
}

/* A full doorbell counter (the peer may write it too) still counts as rung;
 * a closed one is an error. */
static void doorbell_edges(void **state)
{
  int bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  uint64_t most = UINT64_MAX - 1;
  assert_int_equal(write(bell, &most, 8), 8);
  assert_int_equal(rmx__shm_doorbell_ring(bell), 0);
  assert_int_equal(rmx__shm_doorbell_drain(bell), 0);
  assert_int_equal(rmx__shm_doorbell_drain(bell), 0); /* nothing: not an error */
  close(bell);
  assert_int_equal(rmx__shm_doorbell_ring(bell), RMX_EINVAL);
  assert_int_equal(rmx__shm_doorbell_drain(bell), RMX_EINVAL);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(init_checks_its_arguments),
    cmocka_unit_test(empty_and_full),
    cmocka_unit_test(gather_writes_take_what_fits_in_order),
    cmocka_unit_test(wrap_around_gives_two_spans),
    cmocka_unit_test(indices_wrap_at_2_32),
    cmocka_unit_test(many_sizes_keep_the_stream),
    cmocka_unit_test(an_armed_reader_is_rung_once),
    cmocka_unit_test(an_armed_writer_is_rung_when_room_comes),
    cmocka_unit_test(doorbell_edges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
