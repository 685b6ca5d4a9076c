/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Hostile peers and remote keys: guessed keys, and a key learned on one
 * connection used from another, against messages in flight; bit-flipped
 * packed keys at the API.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "hostile.h"

/* ------------------------------------------------------------------ */
/* 3. Guessed and foreign keys                                          */
/* ------------------------------------------------------------------ */

#define C3_LEN (1u << 20)
static struct {
  uint64_t id, addr, size, key;
} K3[2];
static int c3_sent[2], c3_st[2];

static void c3_sent_cb(rmx_conn_t *c, int st, void *arg)
{
  int i = (int)(intptr_t)arg;
  c3_sent[i]++;
  c3_st[i] = st;
}

/* Pipelined probes: each must be refused with RMX_EACCES and no data. */
static int probe(peer_t *p, ev_t *e, const uint64_t *addr, const uint64_t *len,
                 const uint64_t *key, size_t n, uint64_t *hits, uint64_t *leaked)
{
  enum { BATCH = 32 };
  uint8_t out[BATCH * 40];
  for (size_t i = 0; i < n; i += BATCH) {
    size_t k = n - i < BATCH ? n - i : BATCH, w = 0;
    for (size_t j = 0; j < k; j++)
      w += rd_req_enc(out + w, 1000 + i + j, addr[i + j], len[i + j], key[i + j]);
    PCHECK(p, wr_full(p, out, w) == 0, "probe write failed");
    for (size_t j = 0; j < k; j++) {
      do {
        if (next_ev(p, e))
          return -1;
      } while (e->kind == K_FRAME);
      PCHECK(p, e->kind == K_RD_RESP && e->id == 1000 + i + j, "probe answered by kind %u id %llu",
             e->kind, (unsigned long long)e->id);
      if (e->status == 0) {
        (*hits)++;
        uint64_t got = 0;
        int32_t end;
        *leaked += e->dlen;
        if (rd_data(p, NULL, e->dlen))
          return -1;
        uint64_t rest = len[i + j] - e->dlen;
        if (rest && rd_collect(p, 1000 + i + j, NULL, rest, &got, &end, e))
          return -1;
        *leaked += got;
      } else {
        PCHECK(p, e->status == RMX_EACCES && e->dlen == 0, "probe refused with %d (+%u bytes)",
               e->status, e->dlen);
      }
    }
  }
  return 0;
}

static int s_keys(peer_t *p)
{
  int me = p->iarg;
  ev_t *e = malloc(sizeof(*e));
  uint8_t *buf = malloc(C3_LEN);
  uint64_t got;
  int32_t end;
  int rc = -1;
  uint8_t out[64];
  if (handshake(p) || wait_rts(p, e, &K3[me].id, &K3[me].addr, &K3[me].size, &K3[me].key))
    goto out;
  pmark(p, 1);
  if (me == 0) {
    if (pwait(p, 1))
      goto out;
    /* its own key works (so the refusals below are the scope, not a
     * broken key): the first half */
    if (wr_full(p, out, rd_req_enc(out, 1, K3[0].addr, C3_LEN / 2, K3[0].key)) ||
        rd_collect(p, 1, buf, C3_LEN / 2, &got, &end, e))
      goto out;
    if (end || mismatches(buf, C3_LEN / 2, TAG_A, 0)) {
      pfail(p, "own read: status %d, %zu bytes wrong", end,
            mismatches(buf, got, TAG_A, 0));
      goto out;
    }
    /* Guesses aimed at the other connection's message in flight: the
     * neighbours of the key seen, the same high 32 bits with other low
     * bits, every single-bit change. */
    enum { NG = 2000 + 1000 + 64 + 2 };
    uint64_t *ga = malloc(NG * 8), *gl = malloc(NG * 8), *gk = malloc(NG * 8);
    size_t n = 0;
    uint64_t ka = K3[0].key, x = 0x9e3779b97f4a7c15ull;
    for (uint64_t d = 1; d <= 1000; d++)
      gk[n++] = ka + d, gk[n++] = ka - d;
    for (int i = 0; i < 1000; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      gk[n++] = (ka & 0xffffffff00000000ull) | (uint32_t)x;
    }
    for (int b = 0; b < 64; b++)
      gk[n++] = ka ^ (1ull << b);
    gk[n++] = 0;
    gk[n++] = ~0ull;
    for (size_t i = 0; i < n; i++)
      ga[i] = K3[1].addr, gl[i] = K3[1].size;
    uint64_t hits = 0, leaked = 0;
    rc = probe(p, e, ga, gl, gk, n, &hits, &leaked);
    p->u[0] = hits;
    p->u[1] = leaked;
    p->u[2] = n;
    free(ga), free(gl), free(gk);
    if (rc)
      goto out;
    rc = -1;
    pmark(p, 2);
    if (pwait(p, 3)) /* the other connection tried our key meanwhile */
      goto out;
    /* the rest of our message, then FIN */
    if (wr_full(p, out, rd_req_enc(out, 2, K3[0].addr + C3_LEN / 2, C3_LEN / 2, K3[0].key)) ||
        rd_collect(p, 2, buf, C3_LEN / 2, &got, &end, e))
      goto out;
    if (end || mismatches(buf, C3_LEN / 2, TAG_A, C3_LEN / 2)) {
      pfail(p, "own read of the second half: status %d", end);
      goto out;
    }
  } else {
    if (pwait(p, 2))
      goto out;
    /* A's key, learned on A, used from B while A's read is in flight */
    uint64_t ga[4] = {K3[0].addr, K3[0].addr, K3[0].addr + C3_LEN - 8, K3[0].addr + 4096};
    uint64_t gl[4] = {C3_LEN, 1, 8, 4096};
    uint64_t gk[4] = {K3[0].key, K3[0].key, K3[0].key, K3[0].key};
    uint64_t hits = 0, leaked = 0;
    if (probe(p, e, ga, gl, gk, 4, &hits, &leaked))
      goto out;
    p->u[0] = hits;
    p->u[1] = leaked;
    /* and its own message still reads fine */
    if (wr_full(p, out, rd_req_enc(out, 1, K3[1].addr, C3_LEN, K3[1].key)) ||
        rd_collect(p, 1, buf, C3_LEN, &got, &end, e))
      goto out;
    if (end || mismatches(buf, C3_LEN, TAG_B, 0)) {
      pfail(p, "own read: status %d", end);
      goto out;
    }
  }
  if (send_fin(p, K3[me].id, 0))
    goto out;
  pmark(p, me == 0 ? 3 : 2);
  rc = goodbye(p);
out:
  free(buf);
  free(e);
  return rc;
}

void guessed_and_foreign_keys_are_refused(void **state)
{
  srv_start(NULL);
  peer_t *a = peer_start(s_keys, NULL, 0);
  PUMP_UNTIL(S.nsc == 1);
  peer_t *b = peer_start(s_keys, NULL, 1);
  PUMP_UNTIL(S.nsc == 2);
  uint8_t *ma = malloc(C3_LEN), *mb = malloc(C3_LEN);
  fill(ma, C3_LEN, TAG_A, 0);
  fill(mb, C3_LEN, TAG_B, 0);
  c3_sent[0] = c3_sent[1] = 0;
  assert_int_equal(rmx_send(S.sc[0].c, ma, C3_LEN, c3_sent_cb, (void *)0), 0);
  assert_int_equal(rmx_send(S.sc[1].c, mb, C3_LEN, c3_sent_cb, (void *)1), 0);
  wait_step(a, 1);
  wait_step(b, 1);
  atomic_store(&main_step, 1);
  wait_step(a, 2);
  atomic_store(&main_step, 2);
  wait_step(b, 2);
  atomic_store(&main_step, 3);
  peer_join(a);
  peer_join(b);
  fprintf(stderr, "# %llu guessed keys, %llu accepted, %llu bytes leaked; foreign key: %llu "
          "accepted\n", (unsigned long long)a->u[2], (unsigned long long)a->u[0],
          (unsigned long long)a->u[1], (unsigned long long)b->u[0]);
  assert_int_equal(a->u[0], 0);
  assert_int_equal(a->u[1], 0);
  assert_int_equal(b->u[0], 0);
  assert_int_equal(b->u[1], 0);
  PUMP_UNTIL(c3_sent[0] == 1 && c3_sent[1] == 1);
  assert_int_equal(c3_st[0], 0);
  assert_int_equal(c3_st[1], 0);
  PUMP_UNTIL(S.sc[0].disconnects == 1 && S.sc[1].disconnects == 1);
  assert_int_equal(S.sc[0].disc_status, 0);
  assert_int_equal(S.sc[1].disc_status, 0);
  pump_for(20);
  assert_int_equal(c3_sent[0], 1);
  assert_int_equal(c3_sent[1], 1);
  free(ma);
  free(mb);
}

#ifndef HOSTILE_OLD_PROTOCOL

/* ------------------------------------------------------------------ */
/* 4. Bit-flipped packed keys (API level)                               */
/* ------------------------------------------------------------------ */

void flipped_packed_keys_are_refused(void **state)
{
  srv_start(NULL);
  static cli_t k;
  cli_start(&k);
  PUMP_UNTIL(k.connected);
  assert_int_equal(k.status, 0);
  uint8_t mem[256], blob[RMX_RKEY_MAX], bad[RMX_RKEY_MAX];
  size_t len = sizeof(blob);
  rmx_mem_t *m;
  rmx_rkey_t *rk = NULL;
  assert_int_equal(rmx_mem_reg(S.ctx, mem, sizeof(mem), RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE,
                               &m), 0);
  reg_track(m);
  assert_int_equal(rmx_mem_pack(m, blob, &len), 0);
  /* the checksum is the doc's CRC-32C */
  memcpy(bad, blob, len);
  rkey_fix_sum(bad, len);
  assert_memory_equal(bad, blob, len);
  assert_int_equal(rmx_rkey_unpack(k.c, blob, len, &rk), 0);
  rmx_rkey_release(rk);
  /* every pair of bits flipped */
  size_t bits = len * 8, pairs = 0;
  for (size_t i = 0; i < bits; i++)
    for (size_t j = i + 1; j < bits; j++) {
      memcpy(bad, blob, len);
      bad[i / 8] ^= (uint8_t)(1u << (i % 8));
      bad[j / 8] ^= (uint8_t)(1u << (j % 8));
      int rc = rmx_rkey_unpack(k.c, bad, len, &rk);
      if (rc == 0)
        fail_msg("bits %zu and %zu flipped: accepted", i, j);
      if (i < 8) /* another version: either refusal will do */
        assert_true(rc == RMX_EVERSION || rc == RMX_EINVAL);
      else
        assert_int_equal(rc, RMX_EINVAL);
      pairs++;
    }
  /* well-formed checksums over bad content: reserved bytes, transport,
   * rights, count, an empty or wrapping region */
  for (size_t e = 0; e < (len - 24) / 16; e++)
    /* byte 1 is the lane: another lane of the first entry (this
     * connection's transport) leaves it no lane 0; another of a second
     * transport's entry (shm's, opened by the listener's alias) is a
     * well-formed key of that transport */
    for (int r = e == 0 ? 1 : 2; r < 8; r++) {
      memcpy(bad, blob, len);
      bad[24 + 16 * e + (size_t)r] = 1;
      rkey_fix_sum(bad, len);
      assert_int_equal(rmx_rkey_unpack(k.c, bad, len, &rk), RMX_EINVAL);
    }
  struct {
    size_t off;
    uint8_t v;
  } edits[] = {{2, 0}, {2, 0x10}, {3, 1}, {1, 0}, {1, 3}, {24, 0}, {24, 3}, {24, 9},
               {16, 0}, {8, 0xff}};
  for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
    memcpy(bad, blob, len);
    if (edits[i].off == 16)
      memset(bad + 16, 0, 8); /* region length 0 */
    else if (edits[i].off == 8)
      p64(bad + 8, ~0ull - 16); /* a region that wraps */
    else
      bad[edits[i].off] = edits[i].v;
    rkey_fix_sum(bad, len);
    assert_int_equal(rmx_rkey_unpack(k.c, bad, len, &rk), RMX_EINVAL);
  }
  /* two entries for one transport */
  uint8_t two[RMX_RKEY_MAX];
  memcpy(two, blob, 40);
  memcpy(two + 40, blob + 24, 16);
  two[1] = 2;
  rkey_fix_sum(two, 56);
  assert_int_equal(rmx_rkey_unpack(k.c, two, 56, &rk), RMX_EINVAL);
  fprintf(stderr, "# %zu two-bit flips refused\n", pairs);
  reg_drop(m);
}

#endif /* !HOSTILE_OLD_PROTOCOL */
