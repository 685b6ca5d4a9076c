/* SPDX-License-Identifier: BSD-3-Clause */
/* The attacks, one per round's kind (shm_hostile_attacker.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm_hostile_attacker.h"

/* ---- the attacks ---- */

static uint32_t some_value(uint32_t cur)
{
  uint32_t r = (uint32_t)sh_rand(&A.seed);
  switch (sh_rand(&A.seed) % 10) {
  case 0: return cur + 1;
  case 1: return cur - 1;
  case 2: return cur + A.ring;
  case 3: return cur + A.ring + 1;
  case 4: return cur + 0x80000000u;
  case 5: return 0;
  case 6: return 0xffffffffu;
  case 7: return cur + r % A.ring; /* forward, within a ring: valid-looking */
  case 8: return cur - r % A.ring;
  default: return r;
  }
}

/* One write somewhere: idx only the four indices, else any word or bytes. */
static void scribble(int idx)
{
  static const unsigned ctl[] = {CTRL_HEAD, CTRL_TAIL, CTRL_RD_ARMED, CTRL_WR_ARMED};
  int r = (int)(sh_rand(&A.seed) & 1);
  uint64_t what = sh_rand(&A.seed) % (idx ? 2 : 8);
  if (what < 4) {
    unsigned off = ctl[what];
    at_st(r, off, some_value(at_ld(r, off)));
  } else if (what == 4) { /* the header */
    unsigned off = 4 * (unsigned)(sh_rand(&A.seed) % (SEG_HDR / 4));
    uint32_t v = (uint32_t)sh_rand(&A.seed);
    memcpy(A.base + off, &v, 4);
  } else if (what == 5) { /* a frame header in a ring's data, often in bytes in flight */
    uint8_t h[TFH];
    uint32_t at = (uint32_t)sh_rand(&A.seed), t = at_ld(r, CTRL_TAIL), fly = at_ld(r, CTRL_HEAD) - t;
    if (fly > 0 && fly <= A.ring && (at & 1))
      at = t + at % fly;
    at_frame_hdr(h, some_value(64), (uint8_t)sh_rand(&A.seed), 0, 0);
    for (unsigned i = 0; i < TFH; i++)
      at_data(r)[(at + i) & (A.ring - 1)] = h[i];
  } else { /* random bytes, likewise */
    uint32_t at = (uint32_t)sh_rand(&A.seed), n = 1 + (uint32_t)(sh_rand(&A.seed) % 64);
    uint32_t t = at_ld(r, CTRL_TAIL), fly = at_ld(r, CTRL_HEAD) - t;
    if (fly > 0 && fly <= A.ring && (at & 1))
      at = t + at % fly;
    for (uint32_t i = 0; i < n; i++)
      at_data(r)[(at + i) & (A.ring - 1)] = (uint8_t)sh_rand(&A.seed);
  }
  if (sh_rand(&A.seed) % 3 == 0)
    at_ring_bells();
}

/* Under load: turns of traffic and writes at random moments between them. */
static void race(int idx)
{
  int n = 20 + (int)(sh_rand(&A.seed) % 200), made = 0;
  A.t.posting = 1;
  for (int i = 0; i < n && !A.ended && at_seg_alive(); i++) {
    int turns = (int)(sh_rand(&A.seed) % 8);
    for (int k = 0; k < turns; k++) {
      sh_turn(A.ctx, NULL, 2);
      sh_traffic_pump(&A.t);
    }
    if (A.ended || !at_seg_alive())
      break;
    for (int k = 1 + (int)(sh_rand(&A.seed) % 3); k > 0; k--, made++)
      scribble(idx);
  }
  snprintf(A.note, sizeof(A.note), "writes=%d", made);
}

/* At the victim's tail, not published: a write request past our region
 * whose data runs 4 GiB, which the victim would refuse and then read off
 * and discard however far it went. A victim that read past a head out of
 * range would find nothing there to end the connection for (and keep
 * waiting for the rest of the data), so the round's RMX_EPROTO can only
 * come from the check of the head itself. It overwrites only bytes the
 * victim consumed already (the ring is at rest). */
static void sink_filler(uint32_t tail)
{
  uint8_t f[TFH + 40] = {0};
  uint64_t addr, key, id = 1, len = 0xffffffffu - 40;
  at_region_of(&addr, &key);
  addr += SH_REGION;
  at_frame_hdr(f, 0xffffffffu, TK_WR_REQ, 0, 0);
  memcpy(f + TFH, &id, 8);
  memcpy(f + TFH + 8, &addr, 8);
  memcpy(f + TFH + 16, &len, 8);
  memcpy(f + TFH + 24, &key, 8);
  for (uint32_t i = 0; i < sizeof(f); i++)
    at_data(1)[(tail + i) & (A.ring - 1)] = f[i];
}

/* Ring 0 full of what the victim sends (a read of our whole region), the
 * victim waiting for room, then its tail changed. 1 when it got full. */
int at_ring0_full(void)
{
  rmx_iov_t v = {.addr = A.big, .len = sizeof(A.big)};
  if (rmx_read(A.c, &v, 1, A.t.rk, 0, at_big_done, NULL) != 0)
    return 0;
  rmx_ctx_flush(A.ctx);
  uint64_t end = sh_now_ms() + QUIET_MS;
  while (sh_now_ms() < end) {
    if (at_ld(0, CTRL_HEAD) - at_ld(0, CTRL_TAIL) == A.ring)
      return 1;
    usleep(200);
  }
  return 0;
}

static void frame_attack(sh_kind_t k)
{
  uint8_t f[TFH + 256];
  uint64_t addr, key, id = 0x5348484f53544cull + sh_rand(&A.seed) % 1000; /* ours alone */
  size_t n = TFH;
  memset(f, 0, sizeof(f));
  at_region_of(&addr, &key);
  switch (k) {
  case F_LEN_MAX: at_frame_hdr(f, 0xffffffffu, TK_FRAME + 1, 0, 0); break;
  case F_LEN_RING: at_frame_hdr(f, A.ring + 1, TK_FRAME + 1, 0, 0); break;
  case F_LEN_LIMIT: at_frame_hdr(f, SH_EAGER - TFH + 1, TK_FRAME + 1, 0, 0); break;
  case F_LEN_SMALL: {
    uint32_t one = sh_rand(&A.seed) & 1;
    at_frame_hdr(f, one, TK_FRAME + 1, 0, 0);
    n += one;
    break;
  }
  case F_PARTIAL:
  case K_DIE:
    at_frame_hdr(f, 100, TK_FRAME + 1, 0, 1);
    n += 10; /* of 100 */
    break;
  case F_KIND: {
    static const uint8_t kinds[] = {0, 4, 11, 12, 13, 14, 15};
    at_frame_hdr(f, (uint32_t)(sh_rand(&A.seed) % 64), kinds[sh_rand(&A.seed) % sizeof(kinds)], 0,
              0);
    break;
  }
  case F_RESERVED:
    at_frame_hdr(f, 12, TK_WR_RESP, (uint8_t)(1 + sh_rand(&A.seed) % 255),
              (uint16_t)sh_rand(&A.seed));
    n += 12;
    break;
  case F_HELLO:
    at_frame_hdr(f, 32, TK_HELLO, 0, 0);
    n += 32;
    break;
  case F_RD_OOB:
  case F_RD_WRAP: {
    uint64_t len = 64, at = addr + SH_REGION - 8;
    if (k == F_RD_WRAP) {
      int whole = sh_rand(&A.seed) & 1;
      at = whole ? addr : UINT64_MAX - 15;
      len = whole ? UINT64_MAX : 64;
    }
    at_frame_hdr(f, 32, TK_RD_REQ, 0, 0);
    memcpy(f + TFH, &id, 8);
    memcpy(f + TFH + 8, &at, 8);
    memcpy(f + TFH + 16, &len, 8);
    memcpy(f + TFH + 24, &key, 8);
    n += 32;
    break;
  }
  case F_WR_OOB: {
    uint64_t len = 64, at = addr + SH_REGION - 16;
    at_frame_hdr(f, 40 + 64, TK_WR_REQ, 0, 0);
    memcpy(f + TFH, &id, 8);
    memcpy(f + TFH + 8, &at, 8);
    memcpy(f + TFH + 16, &len, 8);
    memcpy(f + TFH + 24, &key, 8);
    memset(f + TFH + 40, 0xee, 64); /* flags and immediate 0, then the data */
    n += 40 + 64;
    break;
  }
  default: /* F_GARBAGE */
    n = 1 + sh_rand(&A.seed) % sizeof(f);
    for (size_t i = 0; i < n; i++)
      f[i] = (uint8_t)sh_rand(&A.seed);
    break;
  }
  at_publish(f, n);
  if (k == F_RD_OOB || k == F_RD_WRAP || k == F_WR_OOB) {
    int st = at_response(k == F_WR_OOB ? TK_WR_RESP : TK_RD_RESP, id);
    snprintf(A.note, sizeof(A.note), "resp=%d", st);
  }
}

void at_attack(sh_kind_t k)
{
  uint32_t t, h;
  strcpy(A.note, "-");
  if (A.ended || !at_seg_alive()) { /* over before we began: nothing to write into */
    strcpy(A.note, "noquiet");
    return;
  }
  switch (k) {
  case K_HEAD_PAST: case K_HEAD_BACK: case K_HEAD_HUGE: case K_HEAD_WRAP: case K_HEAD_CLAIM: {
    if (!at_quiesce()) {
      strcpy(A.note, "noquiet");
      return;
    }
    t = at_ld(1, CTRL_TAIL);
    h = at_ld(1, CTRL_HEAD);
    if (k == K_HEAD_PAST || k == K_HEAD_BACK || k == K_HEAD_HUGE)
      sink_filler(t);
    uint32_t r = (uint32_t)sh_rand(&A.seed);
    at_st(1, CTRL_HEAD, k == K_HEAD_PAST   ? t + A.ring + TFH * (1 + r % 64)
                     : k == K_HEAD_BACK ? h - 1 - r % A.ring
                     : k == K_HEAD_HUGE ? t + 0x80000000u + r % A.ring
                     : k == K_HEAD_WRAP ? t + A.ring /* a whole ring of old bytes */
                                        : t + 1 + r % (A.ring - 1));
    at_ring_bells();
    return;
  }
  case K_TAIL_PAST: case K_TAIL_BACK: case K_TAIL_CLAIM:
    if (!at_quiesce() || !at_ring0_full()) {
      strcpy(A.note, "noquiet");
      return;
    }
    t = at_ld(0, CTRL_TAIL);
    h = at_ld(0, CTRL_HEAD);
    at_st(0, CTRL_TAIL, k == K_TAIL_PAST   ? h + 1 + (uint32_t)(sh_rand(&A.seed) % A.ring)
                     : k == K_TAIL_BACK ? t - 1 - (uint32_t)(sh_rand(&A.seed) % A.ring)
                                        : h);
    at_ring_bells();
    return;
  case K_FLAGS:
    A.t.posting = 1;
    for (int i = 0; i < 40 && !A.ended && at_seg_alive(); i++) {
      static const uint32_t vals[] = {0, 1, 0xffffffffu, 2};
      at_st((int)(sh_rand(&A.seed) & 1), sh_rand(&A.seed) & 1 ? CTRL_RD_ARMED : CTRL_WR_ARMED,
         vals[sh_rand(&A.seed) % 4]);
      if (i % 4 == 0)
        at_ring_bells();
      sh_turn(A.ctx, NULL, 2);
      sh_traffic_pump(&A.t);
    }
    return;
  case K_HDR:
    for (unsigned off = 0; off < SEG_HDR; off += 4) {
      uint32_t v = (uint32_t)sh_rand(&A.seed);
      memcpy(A.base + off, &v, 4);
    }
    at_ring_bells();
    return;
  case K_DATA0:
    for (uint32_t i = 0; i < A.ring; i++)
      at_data(0)[i] = (uint8_t)sh_rand(&A.seed);
    at_ring_bells();
    return;
  case R_ANY: case R_IDX:
    race(k == R_IDX);
    return;
  default: /* frames, and the stall the dying attacker leaves */
    if (!at_quiesce()) {
      strcpy(A.note, "noquiet");
      return;
    }
    frame_attack(k);
    return;
  }
}
