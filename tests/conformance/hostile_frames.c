/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Hostile peers and frames: every frame where it is not allowed closes only
 * that connection (or is refused before the handshake); a FIN and an
 * AT_REQ with their reserved words set, a read response chunk over 256 KiB.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "hostile.h"

#ifndef HOSTILE_OLD_PROTOCOL

/* ------------------------------------------------------------------ */
/* 6. Every frame where it is not allowed                               */
/* ------------------------------------------------------------------ */

enum { X_CLOSE, X_REJECT, X_EPROTO, X_CLOSE_OR_REJECT };

typedef struct bad {
  const char *name;
  int after_hello; /* 1: sent after a good handshake */
  int expect;
  int32_t status;  /* X_REJECT: the status */
  size_t (*build)(uint8_t *o);
} bad_t;

static size_t b_data_first(uint8_t *o) { return msg_frame(o, F_DATA, 0, 0, "hi", 2); }
static size_t b_ack_first(uint8_t *o)
{
  hello_t h = hello_default();
  tf(o, K_HELLO_ACK, HELLO_LEN);
  hello_enc(o + 8, &h);
  return 8 + HELLO_LEN;
}
/* A frame of this kind with blen zero bytes for its body. */
static size_t zeroed(uint8_t *o, uint8_t kind, uint32_t blen)
{
  tf(o, kind, blen);
  memset(o + 8, 0, blen);
  return 8 + (size_t)blen;
}
static size_t b_rdresp_first(uint8_t *o) { return zeroed(o, K_RD_RESP, 12); }
static size_t b_rdreq_first(uint8_t *o) { return rd_req_enc(o, 1, 4096, 8, 1); }
static size_t b_hello_tflags(uint8_t *o)
{
  hello_t h = hello_default();
  return hello_frame(o, &h, 1, 0);
}
static size_t b_hello_tres(uint8_t *o)
{
  hello_t h = hello_default();
  return hello_frame(o, &h, 0, 0x100);
}
static size_t b_hello_huge(uint8_t *o)
{
  hello_t h = hello_default();
  tf(o, K_HELLO, 300);
  memset(o + 8, 0, 300);
  hello_enc(o + 8, &h);
  return 308;
}
#define HELLO_VARIANT(fn, field, val)                 \
  static size_t fn(uint8_t *o)                        \
  {                                                   \
    hello_t h = hello_default();                      \
    h.field = val;                                    \
    return hello_frame(o, &h, 0, 0);                  \
  }
HELLO_VARIANT(b_hello_flags, flags, 1)
HELLO_VARIANT(b_hello_flags8000, flags, 0x8000)
HELLO_VARIANT(b_hello_window0, window, 0)
HELLO_VARIANT(b_hello_window5000, window, 5000)
HELLO_VARIANT(b_hello_window4097, window, 4097)
HELLO_VARIANT(b_hello_maxmsg0, max_msg, 0)
HELLO_VARIANT(b_hello_eager255, eager, 255)
HELLO_VARIANT(b_hello_eager_big, eager, (1u << 20) + 1)
HELLO_VARIANT(b_hello_depth3, depth, 3)
HELLO_VARIANT(b_hello_depth_big, depth, 16385)
HELLO_VARIANT(b_hello_magic, magic, 0x31584d53u)
static size_t b_hello_short(uint8_t *o)
{
  hello_t h = hello_default();
  uint8_t full[HELLO_LEN];
  hello_enc(full, &h);
  tf(o, K_HELLO, 20);
  memcpy(o + 8, full, 20);
  return 28;
}
static size_t b_hello_again(uint8_t *o)
{
  hello_t h = hello_default();
  return hello_frame(o, &h, 0, 0);
}
static size_t b_reject(uint8_t *o)
{
  tf(o, K_REJECT, 4);
  p32(o + 8, (uint32_t)RMX_ECONNREFUSED);
  return 12;
}
static size_t b_rdresp_none(uint8_t *o)
{
  size_t n = resp_hdr(o, K_RD_RESP, 16, 1, 0);
  memcpy(o + n, "data", 4);
  return n + 4;
}
static size_t b_rdresp_err_none(uint8_t *o) { return resp_hdr(o, K_RD_RESP, 12, 1, RMX_EACCES); }
static size_t b_wrresp_none(uint8_t *o) { return resp_hdr(o, K_WR_RESP, 12, 1, 0); }
static size_t b_atresp_none(uint8_t *o)
{
  size_t n = zeroed(o, K_AT_RESP, 24);
  p64(o + 8, 1);
  return n;
}
static size_t b_data_rpc_short(uint8_t *o) { return msg_frame(o, F_DATA, 1, 0, "hi", 2); }
static size_t b_type239(uint8_t *o) { return msg_frame(o, 239, 0, 0, NULL, 0); }
static size_t b_rdreq_tflags(uint8_t *o)
{
  size_t n = rd_req_enc(o, 1, 4096, 8, 1);
  o[5] = 0x80;
  return n;
}
static size_t b_kind11(uint8_t *o) { return tf(o, 11, 0); }
/* A direct read's done (kind 13), over TCP, which never agreed to one copy
 * and so holds no read to be done with; and one of the wrong length. */
static size_t b_rddone_none(uint8_t *o)
{
  uint8_t id[8];
  p64(id, 1);
  return tframe(o, 13, id, 8);
}
static size_t b_rddone_short(uint8_t *o) { return tf(o, 13, 0); }
static size_t b_kind0(uint8_t *o) { return tf(o, 0, 0); }
static size_t b_data_flag8(uint8_t *o) { return msg_frame(o, F_DATA, 8, 0, "hi", 2); }
static size_t b_data_flag5(uint8_t *o) { return msg_frame(o, F_DATA, 5, 0, "hi", 2); }
static size_t b_credit_flag1(uint8_t *o)
{
  uint8_t rpc[16] = {0};
  return msg_frame(o, F_CREDIT, 1, 0, rpc, 16);
}
static size_t b_rts_flag3(uint8_t *o)
{
  uint8_t body[48] = {0};
  p64(body + 16, 100000);
  return msg_frame(o, F_RTS, 3, 0, body, 48);
}
static size_t b_rts_flag4(uint8_t *o)
{
  uint8_t body[32] = {0};
  p64(body + 16, 100000);
  return msg_frame(o, F_RTS, 4, 0, body, 32);
}
static size_t b_kind15(uint8_t *o) { return tf(o, 15, 0); }
/* Version 2's MSG: a stream frame of kind 4 around a whole rmx frame. */
static size_t b_old_msg(uint8_t *o)
{
  tf(o, K_OLD_MSG, 8 + 2);
  o[8] = F_DATA;
  o[9] = 0;
  p16(o + 10, 0);
  p32(o + 12, 2);
  memcpy(o + 16, "hi", 2);
  return 18;
}
static size_t b_rmx_type0(uint8_t *o) { return msg_frame(o, 0, 0, 0, NULL, 0); }
static size_t b_rmx_type6(uint8_t *o) { return msg_frame(o, 6, 0, 0, NULL, 0); }
static size_t b_fin_none(uint8_t *o)
{
  uint8_t fin[16] = {0};
  p64(fin, 42);
  return msg_frame(o, F_FIN, 0, 0, fin, 16);
}
static size_t b_credit_body(uint8_t *o) { return msg_frame(o, F_CREDIT, 0, 0, "xxxx", 4); }
static size_t b_fin_short(uint8_t *o)
{
  uint8_t fin[12] = {0};
  return msg_frame(o, F_FIN, 0, 0, fin, 12);
}
static size_t b_credits_unowed(uint8_t *o) { return msg_frame(o, F_DATA, 0, 1000, "hi", 2); }
/* BYE spends no credit, but the credits in its header count (protocol.md). */
static size_t b_bye_unowed(uint8_t *o) { return msg_frame(o, F_BYE, 0, 5, NULL, 0); }
static size_t b_msg_over_eager(uint8_t *o)
{
  static uint8_t body[8192];
  return msg_frame(o, F_DATA, 0, 0, body, 8192 - 8 + 1);
}
static size_t b_rts_over_max(uint8_t *o)
{
  uint8_t body[32] = {0};
  p64(body, 1);
  p64(body + 8, 4096);
  p64(body + 16, (64u << 20) + 1);
  p64(body + 24, 5);
  return msg_frame(o, F_RTS, 0, 0, body, 32);
}
static size_t b_wrreq_flags2(uint8_t *o)
{
  size_t n = zeroed(o, K_WR_REQ, 40 + 4);
  p64(o + 8, 1);
  p64(o + 16, 4096);
  p64(o + 24, 4);
  p32(o + 40, 2);
  return n;
}
static size_t b_wrreq_lenmismatch(uint8_t *o)
{
  size_t n = zeroed(o, K_WR_REQ, 40 + 4);
  p64(o + 8, 1);
  p64(o + 24, 5); /* says 5, carries 4 */
  return n;
}
static size_t b_rdreq_31(uint8_t *o) { return zeroed(o, K_RD_REQ, 31); }
static size_t b_rdreq_33(uint8_t *o) { return zeroed(o, K_RD_REQ, 33); }
static size_t b_atreq_47(uint8_t *o) { return zeroed(o, K_AT_REQ, 47); }
static size_t b_wrresp_13(uint8_t *o) { return zeroed(o, K_WR_RESP, 13); }

static const bad_t bads[] = {
  /* before the handshake: not rmx, closed without a word */
  {"DATA before HELLO", 0, X_CLOSE, 0, b_data_first},
  {"version 2's MSG before HELLO", 0, X_CLOSE, 0, b_old_msg},
  {"HELLO_ACK to a server", 0, X_CLOSE, 0, b_ack_first},
  {"RD_RESP before HELLO", 0, X_CLOSE, 0, b_rdresp_first},
  {"RD_REQ before HELLO", 0, X_CLOSE, 0, b_rdreq_first},
  {"HELLO with frame flags", 0, X_CLOSE, 0, b_hello_tflags},
  {"HELLO with reserved bits", 0, X_CLOSE, 0, b_hello_tres},
  {"HELLO of 300 bytes", 0, X_CLOSE, 0, b_hello_huge},
  {"kind 0 first", 0, X_CLOSE, 0, b_kind0},
  /* hellos refused with REJECT */
  {"hello flag 1", 0, X_REJECT, RMX_EPROTO, b_hello_flags},
  {"hello flag 0x8000", 0, X_REJECT, RMX_EPROTO, b_hello_flags8000},
  {"hello window 0", 0, X_REJECT, RMX_EPROTO, b_hello_window0},
  {"hello window 5000", 0, X_REJECT, RMX_EPROTO, b_hello_window5000},
  {"hello window 4097", 0, X_REJECT, RMX_EPROTO, b_hello_window4097},
  {"hello max message 0", 0, X_REJECT, RMX_EPROTO, b_hello_maxmsg0},
  {"hello eager 255", 0, X_REJECT, RMX_EPROTO, b_hello_eager255},
  {"hello eager 1 MiB + 1", 0, X_REJECT, RMX_EPROTO, b_hello_eager_big},
  {"hello depth 3", 0, X_REJECT, RMX_EPROTO, b_hello_depth3},
  {"hello depth 16385", 0, X_REJECT, RMX_EPROTO, b_hello_depth_big},
  {"hello of 20 bytes", 0, X_REJECT, RMX_EPROTO, b_hello_short},
  {"hello with another magic", 0, X_CLOSE_OR_REJECT, RMX_EPROTO, b_hello_magic},
  /* after the handshake: that connection ends with RMX_EPROTO */
  {"HELLO twice", 1, X_EPROTO, 0, b_hello_again},
  {"HELLO_ACK after the handshake", 1, X_EPROTO, 0, b_ack_first},
  {"REJECT after the handshake", 1, X_EPROTO, 0, b_reject},
  {"RD_RESP for no request", 1, X_EPROTO, 0, b_rdresp_none},
  {"RD_RESP error for no request", 1, X_EPROTO, 0, b_rdresp_err_none},
  {"WR_RESP for no request", 1, X_EPROTO, 0, b_wrresp_none},
  {"AT_RESP for no request", 1, X_EPROTO, 0, b_atresp_none},
  {"DATA with the RPC flag and 2 bytes", 1, X_EPROTO, 0, b_data_rpc_short},
  {"rmx type 239 (kind 255)", 1, X_EPROTO, 0, b_type239},
  {"RD_REQ with frame flags", 1, X_EPROTO, 0, b_rdreq_tflags},
  {"frame kind 11", 1, X_EPROTO, 0, b_kind11},
  {"RD_DONE for no direct read", 1, X_EPROTO, 0, b_rddone_none},
  {"RD_DONE of 0 bytes", 1, X_EPROTO, 0, b_rddone_short},
  {"frame kind 0", 1, X_EPROTO, 0, b_kind0},
  {"DATA with flag 8", 1, X_EPROTO, 0, b_data_flag8},
  {"DATA with flags 5 (notification and RPC request)", 1, X_EPROTO, 0, b_data_flag5},
  {"CREDIT with the RPC flag", 1, X_EPROTO, 0, b_credit_flag1},
  {"RTS with flags 3", 1, X_EPROTO, 0, b_rts_flag3},
  {"RTS with flag 4 (a notification is DATA only)", 1, X_EPROTO, 0, b_rts_flag4},
  {"frame kind 15", 1, X_EPROTO, 0, b_kind15},
  {"version 2's MSG (kind 4)", 1, X_EPROTO, 0, b_old_msg},
  {"rmx type 0", 1, X_EPROTO, 0, b_rmx_type0},
  {"rmx type 6", 1, X_EPROTO, 0, b_rmx_type6},
  {"FIN for no message", 1, X_EPROTO, 0, b_fin_none},
  {"FIN of 12 bytes", 1, X_EPROTO, 0, b_fin_short},
  {"CREDIT with a body", 1, X_EPROTO, 0, b_credit_body},
  {"credits returned that were never owed", 1, X_EPROTO, 0, b_credits_unowed},
  {"BYE returning credits never owed", 1, X_EPROTO, 0, b_bye_unowed},
  {"MSG over the eager size", 1, X_EPROTO, 0, b_msg_over_eager},
  {"RTS over the largest message", 1, X_EPROTO, 0, b_rts_over_max},
  {"WR_REQ with flag 2", 1, X_EPROTO, 0, b_wrreq_flags2},
  {"WR_REQ length disagrees", 1, X_EPROTO, 0, b_wrreq_lenmismatch},
  {"RD_REQ of 31 bytes", 1, X_EPROTO, 0, b_rdreq_31},
  {"RD_REQ of 33 bytes", 1, X_EPROTO, 0, b_rdreq_33},
  {"AT_REQ of 47 bytes", 1, X_EPROTO, 0, b_atreq_47},
  {"WR_RESP of 13 bytes", 1, X_EPROTO, 0, b_wrresp_13},
};

static int s_bad(peer_t *p)
{
  const bad_t *b = p->arg;
  static _Thread_local uint8_t out[16 + 8192 + 64];
  if (b->after_hello && handshake(p))
    return -1;
  size_t n = b->build(out);
  wr_full(p, out, n); /* the server may hang up mid-way */
  drain(p, 3000);
  return 0;
}

/* The good connection still works, both ways, data intact. */
static void good_still_works(cli_t *k, sconn_t *ks, int round)
{
  uint8_t msg[40];
  fill(msg, sizeof(msg), (uint8_t)round, 0);
  int before = ks->recvs;
  assert_int_equal(rmx_send(k->c, msg, sizeof(msg), NULL, NULL), 0);
  PUMP_UNTIL(ks->recvs == before + 1);
  if (before < KEEP_MSGS)
    assert_memory_equal(ks->msgs[before], msg, sizeof(msg));
  assert_int_equal(k->disconnects, 0);
}

void bad_frames_close_only_that_connection(void **state)
{
  srv_start(NULL);
  static cli_t good;
  cli_start(&good);
  PUMP_UNTIL(good.connected && S.nsc == 1);
  sconn_t *gs = &S.sc[0];
  for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
    const bad_t *b = &bads[i];
    int before = S.nsc;
    peer_t *p = peer_start(s_bad, (void *)b, 0);
    peer_join(p);
    if (!p->saw_eof)
      fail_msg("%s: the server did not hang up", b->name);
    int want_reject = b->expect == X_REJECT || (b->expect == X_CLOSE_OR_REJECT && p->reply_len);
    if (want_reject) {
      if (p->reply_len != 12 || p->reply[4] != K_REJECT ||
          (int32_t)g32(p->reply + 8) != b->status)
        fail_msg("%s: expected REJECT %d, got %zu bytes (kind %u, status %d)", b->name,
                 b->status, p->reply_len, p->reply_len > 4 ? p->reply[4] : 0,
                 p->reply_len >= 12 ? (int32_t)g32(p->reply + 8) : 0);
    } else if (p->reply_len) {
      fail_msg("%s: %zu bytes came back (kind %u)", b->name, p->reply_len,
               p->reply_len > 4 ? p->reply[4] : 0);
    }
    if (b->after_hello) {
      PUMP_UNTIL(S.nsc == before + 1 && S.sc[before].disconnects == 1);
      sconn_t *s = &S.sc[before];
      if (s->disc_status != RMX_EPROTO)
        fail_msg("%s: disconnect status %d", b->name, s->disc_status);
      assert_int_equal(s->recvs, 0);
    } else {
      pump_for(5);
      if (S.nsc != before)
        fail_msg("%s: the server accepted it", b->name);
    }
    good_still_works(&good, gs, (int)i + 1);
  }
  pump_for(20);
  for (int i = 1; i < S.nsc; i++)
    assert_int_equal(S.sc[i].disconnects, 1);
}

/* The FIN's u32 after the status is documented as zero; a FIN that is
 * otherwise right but has it set is a frame with reserved bits set. */
static int s_fin_pad(peer_t *p)
{
  ev_t *e = malloc(sizeof(*e));
  uint64_t id, addr, size, key, got;
  int32_t end;
  uint8_t out[40];
  int rc = -1;
  if (handshake(p) || wait_rts(p, e, &id, &addr, &size, &key))
    goto out;
  uint8_t *buf = malloc(size);
  rc = wr_full(p, out, rd_req_enc(out, 1, addr, size, key)) == 0 &&
               rd_collect(p, 1, buf, size, &got, &end, e) == 0 && end == 0
           ? 0
           : -1;
  p->u[1] = mismatches(buf, size, TAG_A, 0);
  free(buf);
  if (rc)
    goto out;
  if (send_fin(p, id, 0xdeadbeef))
    goto out;
  drain(p, 1000);
  p->u[0] = p->saw_eof;
  rc = 0;
out:
  free(e);
  return rc;
}

static int c6_sent, c6_st;
static void c6_sent_cb(rmx_conn_t *c, int st, void *a) { c6_sent++, c6_st = st; }

void fin_with_reserved_bits_is_refused(void **state)
{
  srv_start(NULL);
  peer_t *p = peer_start(s_fin_pad, NULL, 0);
  PUMP_UNTIL(S.nsc == 1);
  static uint8_t msg[20000];
  fill(msg, sizeof(msg), TAG_A, 0);
  c6_sent = 0;
  assert_int_equal(rmx_send(S.sc[0].c, msg, sizeof(msg), c6_sent_cb, NULL), 0);
  peer_join(p);
  assert_int_equal(p->u[1], 0);
  PUMP_UNTIL(c6_sent == 1);
  if (!p->u[0])
    fail_msg("a FIN with its reserved u32 set (0xdeadbeef) was accepted: the send completed "
             "with %d and the connection stayed up", c6_st);
  assert_int_equal(c6_st, RMX_EPROTO);
  PUMP_UNTIL(S.sc[0].disconnects == 1);
  assert_int_equal(S.sc[0].disc_status, RMX_EPROTO);
}

/* "at most 256 KiB each": a read response whose one chunk is larger is
 * malformed. The peer announces a 1 MiB message and answers the server's
 * read of it with a single 1 MiB chunk; the server must cut it off with
 * RMX_EPROTO, not deliver the message and send the FIN. */
#define BIG_CHUNK (1u << 20)
static int s_big_chunk(peer_t *p)
{
  ev_t *e = malloc(sizeof(*e));
  uint8_t rts[32], *data = NULL;
  int rc = -1;
  if (handshake(p))
    goto out;
  p64(rts, 7);
  p64(rts + 8, 0x10000);
  p64(rts + 16, BIG_CHUNK);
  p64(rts + 24, 9);
  if (send_rmx(p, F_RTS, 0, rts, sizeof(rts)))
    goto out;
  do {
    if (next_ev(p, e))
      goto out;
  } while (e->kind == K_FRAME);
  if (e->kind != K_RD_REQ || e->len != BIG_CHUNK) {
    pfail(p, "expected the read of our 1 MiB message, got kind %u (%llu bytes)", e->kind,
          (unsigned long long)e->len);
    goto out;
  }
  data = malloc(20 + BIG_CHUNK);
  resp_hdr(data, K_RD_RESP, 12 + BIG_CHUNK, e->id, 0);
  fill(data + 20, BIG_CHUNK, TAG_A, 0);
  wr_full(p, data, 20 + BIG_CHUNK); /* the server may hang up mid-way */
  /* A FIN says the chunk was taken; the end of the stream that it was not. */
  set_rcvtimeo(p->fd, 3000);
  while (next_ev(p, e) == 0)
    if (e->kind == K_FRAME && e->ftype == F_FIN) {
      p->u[1] = 1;
      rc = goodbye(p);
      goto out;
    }
  p->failed = 0; /* reading into the hang-up is what we expect */
  p->u[0] = p->saw_eof;
  rc = 0;
out:
  free(data);
  free(e);
  return rc;
}

void oversized_read_chunk_is_refused(void **state)
{
  srv_start(NULL);
  peer_t *p = peer_start(s_big_chunk, NULL, 0);
  PUMP_UNTIL(S.nsc == 1);
  peer_join(p);
  if (p->u[1])
    fail_msg("a read response chunk of %u bytes (the limit is %u) was accepted: the message "
             "was delivered and its FIN sent", BIG_CHUNK, CHUNK_MAX);
  assert_true(p->u[0]);
  PUMP_UNTIL(S.sc[0].disconnects == 1);
  assert_int_equal(S.sc[0].disc_status, RMX_EPROTO);
  assert_int_equal(S.sc[0].recvs, 0);
}

/* "a nonzero AT_REQ pad [is] malformed": the word is not touched. */
static tkey_t K6;
static int s_at_pad(peer_t *p)
{
  ev_t *e = malloc(sizeof(*e));
  uint8_t o[8 + 48];
  int rc = -1;
  if (handshake_and_wait(p))
    goto out;
  tf(o, K_AT_REQ, 48);
  p64(o + 8, 1);
  p64(o + 16, K6.addr);
  p64(o + 24, K6.key);
  p32(o + 32, 0); /* fetch-add */
  p32(o + 36, 1); /* the pad */
  p64(o + 40, 5);
  p64(o + 48, 0);
  if (wr_full(p, o, sizeof(o)))
    goto out;
  set_rcvtimeo(p->fd, 2000);
  if (next_ev(p, e) == 0) {
    p->u[0] = e->kind;
    p->u[1] = (uint64_t)(int64_t)e->status;
    rc = goodbye(p);
  } else {
    p->failed = 0;
    p->u[0] = 0;
    p->u[2] = p->saw_eof;
    rc = 0;
  }
out:
  free(e);
  return rc;
}

void atomic_with_pad_is_refused(void **state)
{
  srv_start(NULL);
  static uint64_t word[2] = {100, 0};
  rmx_mem_t *m;
  uint8_t blob[RMX_RKEY_MAX];
  size_t bl = sizeof(blob);
  peer_t *p = peer_start(s_at_pad, NULL, 0);
  wait_step(p, 1);
  assert_int_equal(rmx_mem_reg(S.ctx, word, sizeof(word), RMX_MEM_REMOTE_ATOMIC, &m), 0);
  reg_track(m);
  assert_int_equal(rmx_mem_pack(m, blob, &bl), 0);
  assert_int_equal(rkey_tcp(blob, bl, &K6), 0);
  atomic_store(&main_step, 1);
  peer_join(p);
  assert_int_equal(word[0], 100); /* not touched */
  if (p->u[0] == K_AT_RESP)
    fprintf(stderr, "# AT_REQ with its pad set: answered with status %d, connection kept\n",
            (int)(int64_t)p->u[1]);
  else
    fprintf(stderr, "# AT_REQ with its pad set: connection closed\n");
  assert_true((p->u[0] == K_AT_RESP && (int)(int64_t)p->u[1] == RMX_EINVAL) ||
              (p->u[0] == 0 && p->u[2]));
  reg_drop(m);
}

#endif /* !HOSTILE_OLD_PROTOCOL */
