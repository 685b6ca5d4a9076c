/* SPDX-License-Identifier: BSD-3-Clause */
/* What the shared-memory ring tests share: a ring pair over private
 * memory sized exactly (so that the sanitizer sees any access outside
 * it), a byte stream anyone can regenerate from its position, and a small
 * random generator. */
#ifndef RMX_TEST_SHM_H
#define RMX_TEST_SHM_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../transport/shm/ring.h"

/* One ring, both ends, in one process. */
typedef struct shm_pair {
  uint8_t *ctrl, *data;
  uint32_t cap;
  rmx_shm_ring_t tx, rx;
} shm_pair_t;

static inline int shm_pair_open(shm_pair_t *p, uint32_t cap, int tx_bell, int rx_bell)
{
  p->cap = cap;
  p->ctrl = aligned_alloc(RMX_SHM_LINE, RMX_SHM_RING_CTRL);
  p->data = malloc(cap);
  if (!p->ctrl || !p->data)
    return -1;
  rmx__shm_ring_reset(p->ctrl);
  memset(p->data, 0, cap);
  if (rmx__shm_ring_init(&p->tx, p->ctrl, p->data, cap, 1, tx_bell) != 0 ||
      rmx__shm_ring_init(&p->rx, p->ctrl, p->data, cap, 0, rx_bell) != 0)
    return -1;
  return 0;
}

static inline void shm_pair_close(shm_pair_t *p)
{
  free(p->ctrl);
  free(p->data);
}

/* The shared words, as a peer would reach them (ring.h's layout). */
static inline uint32_t *shm_word(shm_pair_t *p, int which)
{
  static const unsigned at[] = {0, RMX_SHM_LINE, 2 * RMX_SHM_LINE, 2 * RMX_SHM_LINE + 4};
  return (uint32_t *)(p->ctrl + at[which]);
}
enum { W_HEAD, W_TAIL, W_RD_ARMED, W_WR_ARMED };

static inline uint64_t shm_mix(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* The stream's bytes [pos, pos + n). */
static inline void shm_stream(uint64_t pos, uint8_t *dst, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    uint64_t p = pos + i;
    dst[i] = (uint8_t)(shm_mix(p >> 3) >> ((p & 7) * 8));
  }
}

/* 1 when dst holds the stream's bytes [pos, pos + n). */
static inline int shm_stream_ok(uint64_t pos, const uint8_t *src, size_t n)
{
  uint8_t tmp[256];
  for (size_t done = 0; done < n;) {
    size_t k = n - done < sizeof(tmp) ? n - done : sizeof(tmp);
    shm_stream(pos + done, tmp, k);
    if (memcmp(tmp, src + done, k) != 0)
      return 0;
    done += k;
  }
  return 1;
}

static inline uint64_t shm_rand(uint64_t *s)
{
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* FNV-1a, 64 bits, continued from h. */
static inline uint64_t shm_fnv(uint64_t h, const uint8_t *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
#define SHM_FNV_INIT 0xcbf29ce484222325ull

#endif
