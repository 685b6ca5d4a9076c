/* SPDX-License-Identifier: BSD-3-Clause */
/* The shared-memory ring against a peer that writes anything into the
 * shared words (transport/shm/ring.c): each index out of its range is
 * refused with RMX_EPROTO, and the ring stays refused; with random values
 * written between calls, and by a thread that never stops writing them,
 * every call returns an error or a result within the ring's bounds. The
 * ring's data area is a heap block of exactly its capacity: under the
 * sanitizers (RMX_SANITIZE=ON) any access outside it fails the test. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
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

static void consumer_refuses_everything(rmx_shm_ring_t *rx)
{
  struct iovec sp[2];
  uint8_t b[4];
  assert_int_equal(rmx__shm_ring_peek(rx, sp), RMX_EPROTO);
  assert_int_equal(rmx__shm_ring_copy(rx, 0, b, 0), RMX_EPROTO);
  assert_int_equal(rmx__shm_ring_consume(rx, 0), RMX_EPROTO);
  assert_int_equal(rmx__shm_ring_read(rx, b, 4), RMX_EPROTO);
  assert_int_equal(rmx__shm_ring_arm_read(rx), RMX_EPROTO);
}

static void producer_refuses_everything(rmx_shm_ring_t *tx)
{
  uint8_t b[4] = {0};
  assert_int_equal(put(tx, b, 4), RMX_EPROTO);
  assert_int_equal(put(tx, b, 0), RMX_EPROTO);
  assert_int_equal(rmx__shm_ring_arm_write(tx), RMX_EPROTO);
}

static void a_head_that_laps_the_tail_is_refused(void **state)
{
  shm_pair_t p;
  assert_int_equal(shm_pair_open(&p, CAP, -1, -1), 0);
  struct iovec sp[2];
  *shm_word(&p, W_HEAD) = CAP; /* exactly full: fine */
  assert_int_equal(rmx__shm_ring_peek(&p.rx, sp), CAP);
  *shm_word(&p, W_HEAD) = CAP + 1;
  consumer_refuses_everything(&p.rx);
  *shm_word(&p, W_HEAD) = 0; /* an honest value again: broken is broken */
  consumer_refuses_everything(&p.rx);
  shm_pair_close(&p);
}

static void a_head_that_goes_back_is_refused(void **state)
{
  shm_pair_t p;
  assert_int_equal(shm_pair_open(&p, CAP, -1, -1), 0);
  uint8_t b[100] = {0}, out[100];
  struct iovec sp[2];
  assert_int_equal(put(&p.tx, b, 100), 100);
  assert_int_equal(rmx__shm_ring_read(&p.rx, out, 40), 40);
  *shm_word(&p, W_HEAD) = 70; /* behind what was seen, ahead of the tail */
  assert_int_equal(rmx__shm_ring_peek(&p.rx, sp), RMX_EPROTO);
  consumer_refuses_everything(&p.rx);
  /* arming reads the head too */
  shm_pair_t q;
  assert_int_equal(shm_pair_open(&q, CAP, -1, -1), 0);
  *shm_word(&q, W_HEAD) = UINT32_MAX; /* "minus one" */
  assert_int_equal(rmx__shm_ring_arm_read(&q.rx), RMX_EPROTO);
  consumer_refuses_everything(&q.rx);
  shm_pair_close(&q);
  shm_pair_close(&p);
}

static void a_tail_past_the_head_is_refused(void **state)
{
  shm_pair_t p;
  assert_int_equal(shm_pair_open(&p, CAP, -1, -1), 0);
  static uint8_t b[CAP];
  assert_int_equal(put(&p.tx, b, 100), 100);
  *shm_word(&p, W_TAIL) = 101;
  assert_int_equal(put(&p.tx, b, CAP), RMX_EPROTO); /* the room it needs makes it look */
  producer_refuses_everything(&p.tx);
  shm_pair_t q;
  assert_int_equal(shm_pair_open(&q, CAP, -1, -1), 0);
  *shm_word(&q, W_TAIL) = 1;
  assert_int_equal(rmx__shm_ring_arm_write(&q.tx), RMX_EPROTO);
  producer_refuses_everything(&q.tx);
  shm_pair_close(&q);
  shm_pair_close(&p);
}

static void a_tail_that_goes_back_is_refused(void **state)
{
  shm_pair_t p;
  assert_int_equal(shm_pair_open(&p, CAP, -1, -1), 0);
  static uint8_t b[CAP];
  assert_int_equal(put(&p.tx, b, CAP), CAP);
  *shm_word(&p, W_TAIL) = 200;
  assert_int_equal(put(&p.tx, b, 300), 200); /* what the honest consumer freed */
  *shm_word(&p, W_TAIL) = 100;
  assert_int_equal(put(&p.tx, b, 1), RMX_EPROTO);
  producer_refuses_everything(&p.tx);
  shm_pair_close(&p);
}

/* What a call returned must fit the ring whatever the peer did. */
static void check_span(const shm_pair_t *p, const struct iovec sp[2], ssize_t avail)
{
  assert_true(avail >= 0 && avail <= (ssize_t)p->cap);
  assert_true(sp[0].iov_len + sp[1].iov_len == (size_t)avail);
  uint8_t *a = sp[0].iov_base, *b = sp[1].iov_base;
  assert_true(a >= p->data && a + sp[0].iov_len <= p->data + p->cap);
  assert_true(b == p->data && sp[1].iov_len <= p->cap);
}

/* One random call on a random end; returns 1 when it found the ring
 * broken (after which every call must refuse). */
static int one_call(shm_pair_t *p, uint64_t *seed, uint8_t *buf)
{
  struct iovec sp[2], v[2];
  ssize_t k;
  switch (shm_rand(seed) % 7) {
  case 0: {
    size_t a = shm_rand(seed) % (2 * CAP), b = shm_rand(seed) % 64;
    v[0] = (struct iovec){buf, a};
    v[1] = (struct iovec){buf, b};
    k = rmx__shm_ring_write(&p->tx, v, 2);
    assert_true(k == RMX_EPROTO || (k >= 0 && (size_t)k <= a + b && k <= (ssize_t)p->cap));
    return k == RMX_EPROTO;
  }
  case 1:
    k = rmx__shm_ring_peek(&p->rx, sp);
    if (k == RMX_EPROTO)
      return 1;
    check_span(p, sp, k);
    return 0;
  case 2: {
    size_t off = shm_rand(seed) % (CAP + 2), n = shm_rand(seed) % (CAP + 2);
    int rc = rmx__shm_ring_copy(&p->rx, off, buf, n);
    assert_true(rc == 0 || rc == RMX_EINVAL || rc == RMX_EPROTO);
    return rc == RMX_EPROTO;
  }
  case 3: {
    int rc = rmx__shm_ring_consume(&p->rx, shm_rand(seed) % (CAP + 2));
    assert_true(rc == 0 || rc == RMX_EINVAL || rc == RMX_EPROTO);
    return rc == RMX_EPROTO;
  }
  case 4:
    k = rmx__shm_ring_read(&p->rx, buf, shm_rand(seed) % (2 * CAP));
    assert_true(k == RMX_EPROTO || (k >= 0 && k <= (ssize_t)p->cap));
    return k == RMX_EPROTO;
  case 5:
    k = rmx__shm_ring_arm_read(&p->rx);
    assert_true(k == RMX_EPROTO || (k >= 0 && k <= (ssize_t)p->cap));
    return k == RMX_EPROTO;
  default:
    k = rmx__shm_ring_arm_write(&p->tx);
    assert_true(k == RMX_EPROTO || (k >= 0 && k <= (ssize_t)p->cap));
    return k == RMX_EPROTO;
  }
}

/* A value a scribbler writes: mostly near the indices, so that some pass
 * the checks and the calls go on, sometimes anything. */
static uint32_t scribble_value(shm_pair_t *p, uint64_t *seed)
{
  uint32_t near = (shm_rand(seed) & 1) ? p->tx.pos : p->rx.pos;
  switch (shm_rand(seed) % 4) {
  case 0: return (uint32_t)shm_rand(seed);
  case 1: return near - (uint32_t)(shm_rand(seed) % 8);
  default: return near + (uint32_t)(shm_rand(seed) % (2 * CAP));
  }
}

static void random_scribbles_between_calls(void **state)
{
  static uint8_t buf[2 * CAP + 64];
  int bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  uint64_t seed = 12345;
  int broken = 0, fine = 0;
  for (int round = 0; round < 400; round++) {
    shm_pair_t p;
    assert_int_equal(shm_pair_open(&p, CAP, bell, bell), 0);
    for (int i = 0; i < 200; i++) {
      if (shm_rand(&seed) % 8 == 0)
        *shm_word(&p, (int)(shm_rand(&seed) % 4)) = scribble_value(&p, &seed);
      if (shm_rand(&seed) % 5 == 0)
        p.data[shm_rand(&seed) % CAP] = (uint8_t)shm_rand(&seed);
      if (one_call(&p, &seed, buf)) {
        broken++;
        /* whichever end broke refuses from now on */
        if (p.tx.broken)
          producer_refuses_everything(&p.tx);
        if (p.rx.broken)
          consumer_refuses_everything(&p.rx);
        break;
      }
      fine++;
    }
    rmx__shm_doorbell_drain(bell);
    shm_pair_close(&p);
  }
  print_message("scribbles between calls: %d calls went through, %d rounds broke\n", fine, broken);
  assert_true(broken > 100 && fine > 1000); /* both paths were walked */
  close(bell);
}

struct scribbler {
  shm_pair_t *p;
  atomic_int stop;
};

static void *scribble_loop(void *arg)
{
  struct scribbler *s = arg;
  uint64_t seed = 777;
  while (!atomic_load(&s->stop)) {
    uint32_t v = (uint32_t)shm_rand(&seed);
    int w = (int)(shm_rand(&seed) % 4);
    /* mostly small steps from what is there, so calls keep passing */
    uint32_t old = __atomic_load_n(shm_word(s->p, w), __ATOMIC_RELAXED);
    __atomic_store_n(shm_word(s->p, w), (v & 7) ? old + (v >> 24) % 64 : v, __ATOMIC_RELAXED);
    __atomic_store_n(&s->p->data[v % CAP], (uint8_t)v, __ATOMIC_RELAXED);
  }
  return NULL;
}

/* A peer thread writes the words without pause while we call. */
static void a_scribbling_thread_never_gets_us_out_of_bounds(void **state)
{
  static uint8_t buf[2 * CAP + 64];
  int bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  shm_pair_t p;
  assert_int_equal(shm_pair_open(&p, CAP, bell, bell), 0);
  struct scribbler s = {.p = &p};
  atomic_init(&s.stop, 0);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, scribble_loop, &s), 0);
  uint64_t seed = 99;
  int broken = 0, fine = 0;
  for (int i = 0; i < 300000; i++) {
    if (!one_call(&p, &seed, buf)) {
      fine++;
    } else {
      broken++;
      /* start over on the same memory, as a new connection would */
      rmx__shm_ring_reset(p.ctrl);
      assert_int_equal(rmx__shm_ring_init(&p.tx, p.ctrl, p.data, CAP, 1, bell), 0);
      assert_int_equal(rmx__shm_ring_init(&p.rx, p.ctrl, p.data, CAP, 0, bell), 0);
    }
    if ((i & 1023) == 0)
      rmx__shm_doorbell_drain(bell);
  }
  atomic_store(&s.stop, 1);
  pthread_join(th, NULL);
  print_message("scribbling thread: %d calls went through, %d found the ring broken\n", fine, broken);
  assert_true(broken > 0 && fine > 0);
  shm_pair_close(&p);
  close(bell);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(a_head_that_laps_the_tail_is_refused),
    cmocka_unit_test(a_head_that_goes_back_is_refused),
    cmocka_unit_test(a_tail_past_the_head_is_refused),
    cmocka_unit_test(a_tail_that_goes_back_is_refused),
    cmocka_unit_test(random_scribbles_between_calls),
    cmocka_unit_test(a_scribbling_thread_never_gets_us_out_of_bounds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
