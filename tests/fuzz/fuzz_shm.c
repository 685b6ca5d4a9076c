/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared-memory segment header check and the byte ring
 * (transport/shm/seg.c, ring.c) under inputs a hostile peer controls.
 * First byte even: the rest is a segment header and a file size; a header
 * that passes must describe a layout that fits the file. First byte odd:
 * the rest is a program of ring calls and writes of the shared words (by
 * value or by a step from what is there). Properties: no access outside
 * the data area (a heap block of exactly the capacity), results within
 * the ring's bounds, a broken ring stays broken, and while nobody wrote
 * the shared words the bytes come out as they went in.
 */
#include <string.h>

#include "fuzz.h"
#include "../../transport/shm/seg.h"

#define CAP 4096u

static void header(const uint8_t *d, size_t n)
{
  uint8_t h[RMX_SHM_HDR] = {0};
  uint32_t size = 0;
  memcpy(h, d, n < sizeof(h) ? n : sizeof(h));
  if (n > sizeof(h))
    memcpy(&size, d + sizeof(h), n - sizeof(h) < 4 ? n - sizeof(h) : 4);
  rmx_shm_layout_t l;
  if (rmx__shm_hdr_check(h, size, &l) != NULL)
    return;
  FUZZ_CHECK(l.seg_size == size && (l.ring_size & (l.ring_size - 1)) == 0);
  FUZZ_CHECK(l.ctrl_off[1] + RMX_SHM_RING_CTRL <= l.data_off[0]);
  FUZZ_CHECK(l.data_off[0] + l.ring_size <= l.data_off[1]);
  FUZZ_CHECK(l.data_off[1] + l.ring_size <= l.seg_size);
}

struct prog {
  const uint8_t *d;
  size_t n, at;
};

static uint32_t take(struct prog *p, int bytes)
{
  uint32_t v = 0;
  for (int i = 0; i < bytes && p->at < p->n; i++)
    v |= (uint32_t)p->d[p->at++] << (8 * i);
  return v;
}

static void ring(const uint8_t *d, size_t n)
{
  uint8_t *ctrl = aligned_alloc(RMX_SHM_LINE, RMX_SHM_RING_CTRL), *data = malloc(CAP);
  static uint8_t src[2 * CAP + 256], out[2 * CAP];
  rmx_shm_ring_t tx, rx;
  rmx__shm_ring_reset(ctrl);
  FUZZ_CHECK(rmx__shm_ring_init(&tx, ctrl, data, CAP, 1, -1) == 0);
  FUZZ_CHECK(rmx__shm_ring_init(&rx, ctrl, data, CAP, 0, -1) == 0);
  struct prog p = {d, n, 0};
  uint64_t wpos = 0, rpos = 0; /* the honest stream, while no word is written */
  int honest = 1;
  while (p.at < p.n) {
    int was_broken = tx.broken || rx.broken;
    uint8_t op = (uint8_t)take(&p, 1);
    ssize_t k;
    struct iovec sp[2], v[2];
    switch (op % 8) {
    case 0: { /* write */
      size_t a = take(&p, 2) % (2 * CAP), b = take(&p, 1);
      for (size_t i = 0; i < a + b; i++)
        src[i] = (uint8_t)(wpos + i);
      v[0] = (struct iovec){src, a};
      v[1] = (struct iovec){src + a, b};
      k = rmx__shm_ring_write(&tx, v, 2);
      FUZZ_CHECK(k == RMX_EPROTO || (k >= 0 && (size_t)k <= a + b && k <= (ssize_t)CAP));
      FUZZ_CHECK(!tx.broken || k == RMX_EPROTO);
      if (honest && k >= 0) {
        FUZZ_CHECK((uint64_t)k == (a + b < CAP - (wpos - rpos) ? a + b : CAP - (wpos - rpos)));
        wpos += (uint64_t)k;
      }
      break;
    }
    case 1: /* peek */
      k = rmx__shm_ring_peek(&rx, sp);
      if (k == RMX_EPROTO)
        break;
      FUZZ_CHECK(k >= 0 && k <= (ssize_t)CAP);
      FUZZ_CHECK(sp[0].iov_len + sp[1].iov_len == (size_t)k);
      FUZZ_CHECK((uint8_t *)sp[0].iov_base >= data &&
                 (uint8_t *)sp[0].iov_base + sp[0].iov_len <= data + CAP);
      FUZZ_CHECK(sp[1].iov_base == data && sp[1].iov_len <= CAP);
      FUZZ_CHECK(!honest || (uint64_t)k == wpos - rpos);
      break;
    case 2: { /* copy */
      size_t off = take(&p, 2), len = take(&p, 2);
      int rc = rmx__shm_ring_copy(&rx, off, out, len);
      FUZZ_CHECK(rc == 0 || rc == RMX_EINVAL || rc == RMX_EPROTO);
      if (honest && rc == 0)
        for (size_t i = 0; i < len; i++)
          FUZZ_CHECK(out[i] == (uint8_t)(rpos + off + i));
      break;
    }
    case 3: { /* consume */
      size_t len = take(&p, 2);
      int rc = rmx__shm_ring_consume(&rx, len);
      FUZZ_CHECK(rc == 0 || rc == RMX_EINVAL || rc == RMX_EPROTO);
      if (honest && rc == 0)
        rpos += len;
      break;
    }
    case 4: { /* read */
      size_t len = take(&p, 2) % (2 * CAP);
      k = rmx__shm_ring_read(&rx, out, len);
      FUZZ_CHECK(k == RMX_EPROTO || (k >= 0 && (size_t)k <= len && k <= (ssize_t)CAP));
      if (honest && k >= 0) {
        for (ssize_t i = 0; i < k; i++)
          FUZZ_CHECK(out[i] == (uint8_t)(rpos + (uint64_t)i));
        rpos += (uint64_t)k;
      }
      break;
    }
    case 5: /* arm either side */
      k = (op & 8) ? rmx__shm_ring_arm_write(&tx) : rmx__shm_ring_arm_read(&rx);
      FUZZ_CHECK(k == RMX_EPROTO || (k >= 0 && k <= (ssize_t)CAP));
      break;
    default: { /* the peer writes a word: a value, or a step from what is there */
      static const unsigned at[] = {0, RMX_SHM_LINE, 2 * RMX_SHM_LINE, 2 * RMX_SHM_LINE + 4};
      uint32_t *w = (uint32_t *)(ctrl + at[(op >> 3) & 3]);
      uint32_t val = take(&p, 4);
      *w = (op % 8 == 6) ? val : *w + (uint32_t)(int16_t)val;
      honest = 0;
      break;
    }
    }
    if (was_broken) /* broken stays broken */
      FUZZ_CHECK(rmx__shm_ring_peek(&rx, sp) == RMX_EPROTO ||
                 rmx__shm_ring_arm_write(&tx) == RMX_EPROTO);
    FUZZ_CHECK(honest ? !tx.broken && !rx.broken : 1);
  }
  free(ctrl);
  free(data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size == 0)
    return 0;
  if (data[0] & 1)
    ring(data + 1, size - 1);
  else
    header(data + 1, size - 1);
  return 0;
}
