/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The byte ring of one direction (ring.h). Every load from the segment is
 * of an index or a flag, made once into a local and checked before use;
 * every store to it is of our own index, a flag, or data bytes.
 */
#include <errno.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include <rmx/rmx.h>

#include "ring.h"

/* The control lines in the segment: head, tail and the flags each on a
 * line of their own, so the producer's store of head and the consumer's
 * store of tail never share a line, and the flags, written only when a
 * side goes to sleep, stay in both caches while both spin. */
struct shm_ctrl {
  alignas(RMX_SHM_LINE) _Atomic uint32_t head;
  alignas(RMX_SHM_LINE) _Atomic uint32_t tail;
  alignas(RMX_SHM_LINE) _Atomic uint32_t rd_armed; /* the consumer sleeps for data */
  _Atomic uint32_t wr_armed;                       /* the producer sleeps for room */
};
_Static_assert(sizeof(struct shm_ctrl) == RMX_SHM_RING_CTRL, "control is three lines");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the peer shares these words: they must be lock-free");

static struct shm_ctrl *ctrl(const rmx_shm_ring_t *r)
{
  return (struct shm_ctrl *)r->ctrl;
}

static int broke(rmx_shm_ring_t *r)
{
  r->broken = 1;
  return RMX_EPROTO;
}

int rmx__shm_ring_init(rmx_shm_ring_t *r, void *ctl, void *data, uint32_t cap, int producer,
                       int wake_fd)
{
  if (cap < RMX_SHM_RING_MIN || cap > RMX_SHM_RING_MAX || (cap & (cap - 1)) != 0 ||
      ((uintptr_t)ctl % RMX_SHM_LINE) != 0 || data == NULL)
    return RMX_EINVAL;
  memset(r, 0, sizeof(*r));
  r->ctrl = ctl;
  r->data = data;
  r->cap = cap;
  r->producer = producer != 0;
  r->wake_fd = wake_fd;
  return 0;
}

void rmx__shm_ring_reset(void *ctl)
{
  struct shm_ctrl *c = ctl;
  atomic_init(&c->head, 0);
  atomic_init(&c->tail, 0);
  atomic_init(&c->rd_armed, 0);
  atomic_init(&c->wr_armed, 0);
}

/* ---- the peer's index, read once and checked ---- */

/* Producer: the consumer's tail must lie in [the tail last seen, our
 * head]: it never goes back and never passes what we wrote. */
static int tail_load(rmx_shm_ring_t *r)
{
  uint32_t t = atomic_load_explicit(&ctrl(r)->tail, memory_order_acquire);
  if ((uint32_t)(t - r->seen) > (uint32_t)(r->pos - r->seen))
    return broke(r);
  r->seen = t;
  return 0;
}

/* Consumer: the producer's head must lie in [the head last seen, our tail
 * + capacity]: it never goes back and never laps us. */
static int head_load(rmx_shm_ring_t *r)
{
  uint32_t h = atomic_load_explicit(&ctrl(r)->head, memory_order_acquire);
  if ((uint32_t)(h - r->seen) > (uint32_t)(r->pos + r->cap - r->seen))
    return broke(r);
  r->seen = h;
  return 0;
}

/* ---- wake-ups ----
 *
 * The lost wake-up to rule out: the consumer finds the ring empty and goes
 * to sleep while the producer, at the same moment, publishes and sees no
 * one asleep. Each side does a store, then a seq_cst fence, then a load of
 * what the other stored:
 *
 *   consumer (arm_read)            producer (write)
 *   store rd_armed = 1             store head = new (release)
 *   fence(seq_cst)  F_c            fence(seq_cst)  F_p
 *   load head: new data? -> go on  load rd_armed: set? -> ring the doorbell
 *   else sleep on the doorbell
 *
 * F_c and F_p are in the single total order of seq_cst operations. If F_c
 * comes first, the producer's load (after F_p) sees rd_armed = 1 (the
 * memory model's rule for two seq_cst fences: a load sequenced after the
 * later fence sees a store sequenced before the earlier one, or a later
 * store to the same object), and it rings. If F_p comes first, the
 * consumer's load of head sees the new head, and it does not sleep. Either
 * way the bytes are noticed. Without the fences both loads could be
 * satisfied before the other side's store is visible (a store buffer does
 * that on x86 as well), and both would miss. The same argument, with tail
 * and wr_armed, covers a producer asleep for room and the consumer that
 * frees it. The doorbell itself is an eventfd: a write before the sleeper
 * polls leaves the counter set, so the poll returns at once.
 *
 * The waker takes the flag back (exchange) so that one sleep costs one
 * doorbell write; while nobody is armed it only loads the flag, a line
 * no one writes, and makes no system call.
 */
static void wake_peer(rmx_shm_ring_t *r, _Atomic uint32_t *flag)
{
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(flag, memory_order_relaxed) == 0)
    return;
  if (atomic_exchange_explicit(flag, 0, memory_order_relaxed) == 0)
    return;
  if (r->wake_fd >= 0 && rmx__shm_doorbell_ring(r->wake_fd) == 0)
    r->wakes++;
}

/* Set our flag, then look at the peer's index again (the fence is the
 * one the argument above needs). Armed (0) when the index has not moved
 * since we last read it; else the flag is taken back (a doorbell the peer
 * rings anyway only makes the next poll return at once) and we say how
 * much there is: free room for a producer, readable bytes for a consumer. */
static ssize_t arm(rmx_shm_ring_t *r, _Atomic uint32_t *flag)
{
  uint32_t before = r->seen;
  atomic_store_explicit(flag, 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
  if ((r->producer ? tail_load(r) : head_load(r)) != 0)
    return RMX_EPROTO;
  if (r->seen == before)
    return 0;
  atomic_store_explicit(flag, 0, memory_order_relaxed);
  return r->producer ? r->cap - (r->pos - r->seen) : r->seen - r->pos;
}

/* ---- copies in and out, across the end of the data area ---- */

static void copy_in(rmx_shm_ring_t *r, uint32_t at, const uint8_t *src, size_t n)
{
  if (n == 0)
    return; /* a NULL buffer of no bytes is the caller's right */
  uint32_t off = at & (r->cap - 1);
  size_t first = r->cap - off < n ? r->cap - off : n;
  memcpy(r->data + off, src, first);
  memcpy(r->data, src + first, n - first);
}

static void copy_out(const rmx_shm_ring_t *r, uint32_t at, uint8_t *dst, size_t n)
{
  if (n == 0)
    return; /* a NULL buffer of no bytes is the caller's right */
  uint32_t off = at & (r->cap - 1);
  size_t first = r->cap - off < n ? r->cap - off : n;
  memcpy(dst, r->data + off, first);
  memcpy(dst + first, r->data, n - first);
}

/* ---- producer ---- */

ssize_t rmx__shm_ring_write(rmx_shm_ring_t *r, const struct iovec *iov, int n)
{
  if (r->broken)
    return RMX_EPROTO;
  if (!r->producer || n < 0 || (n > 0 && iov == NULL))
    return RMX_EINVAL;
  size_t want = 0;
  for (int i = 0; i < n && want < r->cap; i++)
    want += iov[i].iov_len < r->cap ? iov[i].iov_len : r->cap;
  uint32_t room = r->cap - (r->pos - r->seen);
  if (room < want) { /* the tail is read only when the room we knew of is short */
    if (tail_load(r) != 0)
      return RMX_EPROTO;
    room = r->cap - (r->pos - r->seen);
  }
  uint32_t done = 0;
  for (int i = 0; i < n && done < room; i++) {
    size_t take = iov[i].iov_len < room - done ? iov[i].iov_len : room - done;
    if (take == 0)
      continue; /* an empty element may have no base */
    copy_in(r, r->pos + done, iov[i].iov_base, take);
    done += (uint32_t)take;
  }
  if (done == 0)
    return 0;
  r->pos += done;
  atomic_store_explicit(&ctrl(r)->head, r->pos, memory_order_release);
  wake_peer(r, &ctrl(r)->rd_armed);
  return done;
}

ssize_t rmx__shm_ring_room(rmx_shm_ring_t *r)
{
  if (r->broken)
    return RMX_EPROTO;
  if (!r->producer)
    return RMX_EINVAL;
  if (tail_load(r) != 0)
    return RMX_EPROTO;
  return r->cap - (r->pos - r->seen);
}

ssize_t rmx__shm_ring_arm_write(rmx_shm_ring_t *r)
{
  if (r->broken)
    return RMX_EPROTO;
  return r->producer ? arm(r, &ctrl(r)->wr_armed) : RMX_EINVAL;
}

/* ---- consumer ---- */

ssize_t rmx__shm_ring_peek(rmx_shm_ring_t *r, struct iovec span[2])
{
  if (r->broken)
    return RMX_EPROTO;
  if (r->producer)
    return RMX_EINVAL;
  if (head_load(r) != 0)
    return RMX_EPROTO;
  uint32_t avail = r->seen - r->pos;
  uint32_t off = r->pos & (r->cap - 1);
  uint32_t first = r->cap - off < avail ? r->cap - off : avail;
  span[0].iov_base = r->data + off;
  span[0].iov_len = first;
  span[1].iov_base = r->data;
  span[1].iov_len = avail - first;
  return avail;
}

int rmx__shm_ring_copy(rmx_shm_ring_t *r, size_t off, void *dst, size_t n)
{
  if (r->broken)
    return RMX_EPROTO;
  uint32_t avail = r->seen - r->pos;
  if (r->producer || off > avail || n > avail - off)
    return RMX_EINVAL;
  copy_out(r, r->pos + (uint32_t)off, dst, n);
  return 0;
}

int rmx__shm_ring_consume(rmx_shm_ring_t *r, size_t n)
{
  if (r->broken)
    return RMX_EPROTO;
  if (r->producer || n > (uint32_t)(r->seen - r->pos))
    return RMX_EINVAL;
  if (n == 0)
    return 0;
  r->pos += (uint32_t)n;
  /* release: our reads of those bytes are done before the producer may
   * write over them */
  atomic_store_explicit(&ctrl(r)->tail, r->pos, memory_order_release);
  wake_peer(r, &ctrl(r)->wr_armed);
  return 0;
}

ssize_t rmx__shm_ring_read(rmx_shm_ring_t *r, void *dst, size_t n)
{
  struct iovec span[2];
  ssize_t avail = rmx__shm_ring_peek(r, span);
  if (avail <= 0)
    return avail;
  size_t take = (size_t)avail < n ? (size_t)avail : n;
  copy_out(r, r->pos, dst, take);
  int rc = rmx__shm_ring_consume(r, take);
  return rc != 0 ? rc : (ssize_t)take;
}

ssize_t rmx__shm_ring_arm_read(rmx_shm_ring_t *r)
{
  if (r->broken)
    return RMX_EPROTO;
  return r->producer ? RMX_EINVAL : arm(r, &ctrl(r)->rd_armed);
}

/* ---- doorbells ---- */

int rmx__shm_doorbell_ring(int fd)
{
  uint64_t one = 1;
  for (;;) {
    ssize_t k = write(fd, &one, sizeof(one));
    if (k == (ssize_t)sizeof(one))
      return 0;
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && errno == EAGAIN) /* the counter is full: the sleeper wakes anyway */
      return 0;
    return k < 0 && errno == EBADF ? RMX_EINVAL : RMX_EIO;
  }
}

int rmx__shm_doorbell_drain(int fd)
{
  uint64_t v;
  for (;;) {
    ssize_t k = read(fd, &v, sizeof(v));
    if (k == (ssize_t)sizeof(v) || (k < 0 && errno == EAGAIN))
      return 0;
    if (k < 0 && errno == EINTR)
      continue;
    return k < 0 && errno == EBADF ? RMX_EINVAL : RMX_EIO;
  }
}
