/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One direction of a shared-memory connection: a single-producer
 * single-consumer byte ring in a segment both processes map (seg.h), used
 * like a pipe. The producer copies bytes in (a gather list, partial writes
 * allowed); the consumer sees what is readable as one or two spans (two
 * when it wraps), parses frames from them and consumes what it is done
 * with. docs/architecture.md, "Shared memory: the ring".
 *
 * Shared layout of one ring: three cache lines of control, then the data.
 *   line 0: head   (u32, written by the producer: bytes ever written)
 *   line 1: tail   (u32, written by the consumer: bytes ever consumed)
 *   line 2: rd_armed (u32, the consumer sleeps until data comes)
 *           wr_armed (u32, the producer sleeps until space comes)
 * head and tail run free modulo 2^32; capacity is a power of two, so a
 * position is (index & (capacity - 1)). Each side keeps its own index in
 * private memory and only ever stores it; it reads the other's.
 *
 * The peer is hostile. Whatever it writes into the segment, at any moment:
 * - every index is read once into a local and checked against the private
 *   one before use (the consumer: head within [last head seen, tail +
 *   capacity]; the producer: tail within [last tail seen, head]); a value
 *   out of range makes the call return RMX_EPROTO, and every later call
 *   too (the ring is broken: close the connection);
 * - no loop depends on a shared value, and every access stays within the
 *   data area whatever the indices say;
 * - the flags are hints: a flag set for nothing costs one eventfd write, a
 *   flag the peer clears costs us a wake-up (the liveness timers of the
 *   connection see that peer as silent).
 * The data itself can change under the consumer's feet. Spans from
 * rmx__shm_ring_peek point into shared memory: good for moving payload
 * bytes to where they belong, never for parsing. Anything the consumer
 * checks (a frame header, a length) it first copies out once with
 * rmx__shm_ring_copy (or rmx__shm_ring_read), then checks and uses the
 * copy only.
 *
 * Sleeping: each process polls one eventfd, its doorbell, which the peer
 * writes. A consumer that finds nothing calls rmx__shm_ring_arm_read: 0
 * means it may sleep on its doorbell until written; a producer that finds
 * no room calls rmx__shm_ring_arm_write likewise. The peer writes the
 * doorbell only when the flag is set, so two sides that spin make no
 * system call. Why no wake-up is lost: ring.c, above rmx__shm_ring_arm_read.
 *
 * Not thread-safe: one thread produces, one consumes (they may differ).
 */
#ifndef RMX_SHM_RING_H
#define RMX_SHM_RING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define RMX_SHM_LINE 64u
#define RMX_SHM_RING_CTRL (3u * RMX_SHM_LINE) /* control bytes before the data */
#define RMX_SHM_RING_MIN 4096u                /* capacity bounds (powers of two) */
#define RMX_SHM_RING_MAX (16u << 20)
#define RMX_SHM_RING_DEFAULT (16u << 10)      /* two of them: an idle connection's 36 KiB */

/* Private state of one side of one ring (never in the segment). */
typedef struct rmx_shm_ring {
  uint8_t *ctrl;     /* the ring's control lines in the segment */
  uint8_t *data;     /* its data area, capacity bytes */
  uint32_t cap;      /* capacity, a power of two */
  uint32_t pos;      /* ours: head (producer) or tail (consumer) */
  uint32_t seen;     /* the peer's index, as last read and checked */
  int producer;      /* 1: we write this ring; 0: we read it */
  int wake_fd;       /* the peer's doorbell (eventfd); -1: none */
  int broken;        /* a check failed: every call returns RMX_EPROTO */
  uint64_t wakes;    /* doorbell writes made (tests and benchmarks) */
} rmx_shm_ring_t;

/* Set up one side of a ring over ctrl (RMX_SHM_RING_CTRL bytes, 64-byte
 * aligned) and data (cap bytes). The creator of a segment zeroes the
 * control lines (rmx__shm_ring_reset) before the peer sees them; the other
 * side takes them as they are and checks every index on use. wake_fd is
 * the peer's doorbell (-1: never signal). Returns 0, or RMX_EINVAL when
 * cap is no power of two within [RMX_SHM_RING_MIN, RMX_SHM_RING_MAX] or
 * ctrl is misaligned. Both private indices start at zero; nothing shared
 * is read here. */
int rmx__shm_ring_init(rmx_shm_ring_t *r, void *ctrl, void *data, uint32_t cap, int producer,
                       int wake_fd);

/* Zero a ring's control lines (the segment's creator, before sharing). */
void rmx__shm_ring_reset(void *ctrl);

/* Producer: copy up to the free room from iov[0..n) in order, publish it
 * and ring the peer's doorbell if it sleeps. Returns the bytes taken (may
 * be fewer than offered; 0: full), or RMX_EPROTO (the peer broke the
 * ring), RMX_EINVAL (a consumer's ring). */
ssize_t rmx__shm_ring_write(rmx_shm_ring_t *r, const struct iovec *iov, int n);

/* Consumer: the readable bytes, as span[0] and span[1] (span[1].iov_len
 * 0 unless they wrap). Returns their total (0: empty), or RMX_EPROTO, or
 * RMX_EINVAL (a producer's ring). The spans stay valid and unchanged by
 * our producer until consumed; the peer may still write over them. */
ssize_t rmx__shm_ring_peek(rmx_shm_ring_t *r, struct iovec span[2]);

/* Consumer: copy n readable bytes starting off bytes past the tail into
 * dst, consuming nothing (the one fetch of a header to parse). Returns 0,
 * or RMX_EINVAL when off + n is more than the last peek (or read) found. */
int rmx__shm_ring_copy(rmx_shm_ring_t *r, size_t off, void *dst, size_t n);

/* Consumer: give n bytes back to the producer, which is woken if it
 * sleeps. n is at most what the last peek found. Returns 0, RMX_EINVAL,
 * or RMX_EPROTO. */
int rmx__shm_ring_consume(rmx_shm_ring_t *r, size_t n);

/* Consumer: peek, copy up to n bytes out and consume them. Returns the
 * bytes copied (0: empty) or an error as peek. */
ssize_t rmx__shm_ring_read(rmx_shm_ring_t *r, void *dst, size_t n);

/* Consumer about to sleep: say so, then look again. Returns 0 (armed:
 * nothing came since the last peek; sleep until the doorbell is written,
 * then drain it and peek), the readable bytes (> 0: more came, not armed,
 * go on), or an error as peek. A consumer holding part of a frame arms
 * too: it is woken when more bytes come. */
ssize_t rmx__shm_ring_arm_read(rmx_shm_ring_t *r);

/* Producer: the free room now (reading the consumer's tail, checked), for
 * a caller that polls instead of arming. The free bytes (0: full), or an
 * error as write. */
ssize_t rmx__shm_ring_room(rmx_shm_ring_t *r);

/* Producer about to sleep for room: likewise. Returns 0 (armed: no room
 * was freed since it last looked), the free bytes (> 0), or an error as
 * write. */
ssize_t rmx__shm_ring_arm_write(rmx_shm_ring_t *r);

/* A doorbell: write one to the eventfd (a counter already full counts as
 * written); read it to zero. 0 or a negative RMX_E* code. */
int rmx__shm_doorbell_ring(int fd);
int rmx__shm_doorbell_drain(int fd);

#endif
