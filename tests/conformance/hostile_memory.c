/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Hostile peers and memory: a read request sent with the FIN that says it
 * was read (the user frees the buffer at once), memory deregistered while a
 * write streams in or a read streams out, and a context destroyed with a
 * registration left.
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
/* 1. Read request then FIN, without reading                            */
/* ------------------------------------------------------------------ */

#define BIG (16u << 20)

static struct {
  uint8_t *a, *b;
  sconn_t *to_cli;
  int sent_a, st_a, sent_b, st_b, send_b_rc;
} C1;

static void c1_sent_b(rmx_conn_t *c, int st, void *arg)
{
  C1.sent_b++;
  C1.st_b = st;
  free(C1.b);
  C1.b = NULL;
}

/* The hostile peer's FIN completes the send: the user frees the buffer at
 * once, and the next message (another connection's) reuses the heap. */
static void c1_sent_a(rmx_conn_t *c, int st, void *arg)
{
  C1.sent_a++;
  C1.st_a = st;
  free(C1.a);
  C1.a = NULL;
  C1.b = malloc(BIG);
  fill(C1.b, BIG, TAG_B, 0);
  C1.send_b_rc = rmx_send(C1.to_cli->c, C1.b, BIG, c1_sent_b, NULL);
  if (C1.send_b_rc) {
    free(C1.b);
    C1.b = NULL;
  }
}

static int s_read_then_fin(peer_t *p)
{
  ev_t *e = malloc(sizeof(*e));
  uint64_t id, addr, size, key, got = 0;
  int32_t end = 0;
  uint8_t out[40 + 32], fin[16];
  int rc = -1;
  if (handshake(p) || wait_rts(p, e, &id, &addr, &size, &key))
    goto out;
  if (size != BIG) {
    pfail(p, "RTS of %llu bytes", (unsigned long long)size);
    goto out;
  }
  /* RD_REQ for the whole message and, in the same write, the FIN that
   * says it was read. */
  size_t n = rd_req_enc(out, 1, addr, size, key);
  p64(fin, id);
  p32(fin + 8, 0);
  p32(fin + 12, 0);
  n += msg_frame(out + n, F_FIN, 0, (uint16_t)p->owed, fin, 16);
  p->owed = 0;
  p->credits--;
  if (wr_full(p, out, n)) {
    pfail(p, "write failed");
    goto out;
  }
  pmark(p, 1);
  if (pwait(p, 1)) /* the user freed it, the other connection sent its own */
    goto out;
  uint8_t *buf = malloc(size);
  rc = rd_collect(p, 1, buf, size, &got, &end, e);
  p->u[0] = got;
  p->u[1] = (uint64_t)(int64_t)end;
  p->u[2] = mismatches(buf, got, TAG_A, 0);
  p->u[3] = foreign_tags(buf, got, 0, TAG_B);
  free(buf);
  if (rc && p->saw_eof && !p->failed) {
    p->u[4] = 1; /* cut off: what came before is checked all the same */
    rc = 0;
  } else if (rc == 0) {
    rc = goodbye(p);
  }
out:
  free(e);
  return rc;
}

void read_request_then_fin(void **state)
{
  srv_start(NULL);
  peer_t *p = peer_start(s_read_then_fin, NULL, 0);
  PUMP_UNTIL(S.nsc == 1);
  sconn_t *hostile = &S.sc[0];
  static cli_t other;
  cli_start(&other);
  other.tag = TAG_B;
  other.expect_len = BIG;
  PUMP_UNTIL(other.connected && S.nsc == 2);
  assert_int_equal(other.status, 0);
  memset(&C1, 0, sizeof(C1));
  C1.to_cli = &S.sc[1];
  C1.a = malloc(BIG);
  fill(C1.a, BIG, TAG_A, 0);
  assert_int_equal(rmx_send(hostile->c, C1.a, BIG, c1_sent_a, NULL), 0);
  wait_step(p, 1);
  PUMP_UNTIL(C1.sent_a == 1 || atomic_load(&p->done));
  assert_int_equal(C1.sent_a, 1);
  assert_int_equal(C1.st_a, 0);
  assert_int_equal(C1.send_b_rc, 0);
  PUMP_UNTIL(C1.sent_b == 1 && other.recvs == 1);
  atomic_store(&main_step, 1);
  peer_join(p);
  PUMP_UNTIL(hostile->disconnects == 1);
  fprintf(stderr, "# read then FIN: the peer got %llu bytes, then %s %d\n",
          (unsigned long long)p->u[0], p->u[4] ? "was cut off; server-side status" : "status",
          p->u[4] ? hostile->disc_status : (int)(int64_t)p->u[1]);
  assert_int_equal(p->u[3], 0); /* not one byte of the other connection's message */
  assert_int_equal(p->u[2], 0); /* every byte it got was its own message's */
  assert_int_equal(C1.st_b, 0);
  assert_int_equal(other.bad, 0);
  PUMP_UNTIL(hostile->disconnects == 1);
  if (p->u[4]) { /* the hostile connection was cut, with the documented error */
    assert_int_equal(hostile->disc_status, RMX_EACCES);
  } else {
    if (p->u[0] < BIG) /* cut short: with the documented error */
      assert_int_equal((int)(int64_t)p->u[1], RMX_EACCES);
    assert_int_equal(hostile->disc_status, 0); /* the peer said BYE */
  }
  pump_for(20);
  assert_int_equal(C1.sent_a, 1);
  assert_int_equal(C1.sent_b, 1);
  assert_int_equal(other.recvs, 1);
  assert_int_equal(hostile->recvs, 0);
}

/* ------------------------------------------------------------------ */
/* 8. Memory deregistered while a write streams in / a read streams out */
/* ------------------------------------------------------------------ */

#define C8_WLEN (4u << 20)
#define C8_RLEN (32u << 20)

static int s_write_dereg(peer_t *p)
{
  ev_t *e = malloc(sizeof(*e));
  uint8_t *data = malloc(8 + 40 + C8_WLEN);
  int rc = -1;
  if (handshake_and_wait(p)) /* the key */
    goto out;
  tf(data, K_WR_REQ, 40 + C8_WLEN);
  p64(data + 8, 1);
  p64(data + 16, K8.addr);
  p64(data + 24, C8_WLEN);
  p64(data + 32, K8.key);
  p32(data + 40, 0);
  p32(data + 44, 0);
  fill(data + 48, C8_WLEN, TAG_A, 0);
  if (wr_full(p, data, 48 + C8_WLEN / 2))
    goto out;
  pmark(p, 2);
  if (pwait(p, 2)) /* deregistered and freed */
    goto out;
  if (wr_full(p, data + 48 + C8_WLEN / 2, C8_WLEN / 2))
    goto out;
  do {
    if (next_ev(p, e))
      goto out;
  } while (e->kind == K_FRAME);
  if (e->kind != K_WR_RESP || e->id != 1) {
    pfail(p, "expected WR_RESP 1, got kind %u", e->kind);
    goto out;
  }
  p->u[0] = (uint64_t)(int64_t)e->status;
  /* the connection is still up: a read with the dead key is refused */
  uint8_t out[40];
  uint64_t got;
  int32_t end;
  if (wr_full(p, out, rd_req_enc(out, 2, K8.addr, 64, K8.key)) ||
      rd_collect(p, 2, NULL, 64, &got, &end, e))
    goto out;
  p->u[1] = (uint64_t)(int64_t)end;
  p->u[2] = got;
  rc = goodbye(p);
out:
  free(data);
  free(e);
  return rc;
}

static int s_read_dereg(peer_t *p)
{
  ev_t *e = malloc(sizeof(*e));
  uint8_t *buf = malloc(C8_RLEN), out[40];
  uint64_t got = 0, more;
  int32_t end = 0;
  int rc = -1;
  if (handshake_and_wait(p))
    goto out;
  if (wr_full(p, out, rd_req_enc(out, 1, K8.addr, C8_RLEN, K8.key)))
    goto out;
  /* the first chunk (at most 256 KiB of it), then stop reading: the
   * answer is mid-way */
  do {
    if (next_ev(p, e))
      goto out;
  } while (e->kind == K_FRAME);
  if (e->kind != K_RD_RESP || e->id != 1 || e->status != 0 || e->dlen == 0) {
    pfail(p, "first answer: kind %u status %d", e->kind, e->status);
    goto out;
  }
  uint32_t first = e->dlen < CHUNK_MAX ? e->dlen : CHUNK_MAX;
  if (rd_data(p, buf, first))
    goto out;
  pmark(p, 2);
  if (pwait(p, 2)) /* deregistered and freed */
    goto out;
  if (rd_data(p, buf + first, e->dlen - first)) /* the old protocol's one big frame */
    goto out;
  got = e->dlen;
  more = 0;
  int cut = 0;
  if (got < C8_RLEN && rd_collect(p, 1, buf + got, C8_RLEN - got, &more, &end, e)) {
    if (!p->saw_eof || p->failed)
      goto out;
    cut = 1; /* cut off: what came before is checked all the same */
  }
  got += more;
  p->u[0] = got;
  p->u[1] = (uint64_t)(int64_t)end;
  p->u[2] = mismatches(buf, got, TAG_A, 0);
  p->u[3] = foreign_tags(buf, got, 0, TAG_STALE);
  p->u[4] = (uint64_t)cut;
  rc = cut ? 0 : goodbye(p);
out:
  free(buf);
  free(e);
  return rc;
}

void write_into_deregistered_memory(void **state)
{
  srv_start(NULL);
  peer_t *p = peer_start(s_write_dereg, NULL, 0);
  wait_step(p, 1);
  PUMP_UNTIL(S.nsc == 1);
  uint8_t *mem = calloc(1, C8_WLEN), *half = malloc(C8_WLEN / 2);
  fill(half, C8_WLEN / 2, TAG_A, 0);
  rmx_mem_t *m = reg_and_publish(mem, C8_WLEN, RMX_MEM_REMOTE_WRITE | RMX_MEM_REMOTE_READ);
  atomic_store(&main_step, 1);
  wait_step(p, 2);
  /* the first half has landed: the rest is still to come */
  PUMP_UNTIL(memcmp(mem, half, C8_WLEN / 2) == 0 || atomic_load(&p->done));
  assert_int_equal(memcmp(mem, half, C8_WLEN / 2), 0);
  reg_drop(m);
  free(mem); /* ASan: any later write into it is a use after free */
  free(half);
  atomic_store(&main_step, 2);
  peer_join(p);
  assert_int_equal((int)(int64_t)p->u[0], RMX_EACCES);
  assert_int_equal((int)(int64_t)p->u[1], RMX_EACCES);
  assert_int_equal(p->u[2], 0);
  PUMP_UNTIL(S.sc[0].disconnects == 1);
  assert_int_equal(S.sc[0].disc_status, 0);
}

void read_of_deregistered_memory(void **state)
{
  srv_start(NULL);
  peer_t *p = peer_start(s_read_dereg, NULL, 0);
  wait_step(p, 1);
  PUMP_UNTIL(S.nsc == 1);
  uint8_t *mem = malloc(C8_RLEN);
  fill(mem, C8_RLEN, TAG_A, 0);
  rmx_mem_t *m = reg_and_publish(mem, C8_RLEN, RMX_MEM_REMOTE_READ);
  atomic_store(&main_step, 1);
  wait_step(p, 2);
  pump_for(100); /* the server fills the socket and waits */
  /* From here the memory is not the peer's: what it holds now must never
   * reach it. No loop turn runs between these three lines. */
  memset(mem, TAG_STALE, C8_RLEN);
  reg_drop(m);
  free(mem);
  atomic_store(&main_step, 2);
  peer_join(p);
  PUMP_UNTIL(S.sc[0].disconnects == 1);
  fprintf(stderr, "# read of deregistered memory: %llu of %u bytes, then %s %d\n",
          (unsigned long long)p->u[0], C8_RLEN,
          p->u[4] ? "cut off; server-side status" : "status",
          p->u[4] ? S.sc[0].disc_status : (int)(int64_t)p->u[1]);
  assert_int_equal(p->u[3], 0); /* nothing the memory held after it was released */
  assert_int_equal(p->u[2], 0);
  assert_true(p->u[0] < C8_RLEN);
  if (p->u[4]) { /* the connection was cut, with the documented error */
    assert_int_equal(S.sc[0].disc_status, RMX_EACCES);
  } else { /* the read ended with an error frame; the connection lives */
    assert_int_equal((int)(int64_t)p->u[1], RMX_EACCES);
    assert_int_equal(S.sc[0].disc_status, 0);
  }
}

#ifndef HOSTILE_OLD_PROTOCOL

/*
 * A context on the caller's loop destroyed with a user registration still
 * registered: in 3149805 the transport outlived the context (the listener's
 * socket was still closing, and libuv runs close callbacks
 * last-closed-first), and its "registration was never released" warning
 * read the freed context (heap-use-after-free in tp_free). Now destroy
 * refuses while a registration is left, like it does for connections.
 */
void destroy_with_a_registration_left(void **state)
{
  static uint8_t mem[64];
  rmx_mem_t *m;
  srv_start(NULL);
  assert_int_equal(rmx_mem_reg(S.ctx, mem, sizeof(mem), RMX_MEM_REMOTE_READ, &m), 0);
  rmx_listener_close(S.l);
  S.l = NULL;
  assert_int_equal(rmx_ctx_destroy(S.ctx), RMX_EBUSY);
  rmx_mem_dereg(m);
  srv_stop();
}


#endif /* !HOSTILE_OLD_PROTOCOL */
