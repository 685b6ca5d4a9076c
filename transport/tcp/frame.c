/* SPDX-License-Identifier: BSD-3-Clause */
/* The TCP stream framing's header checks and body codecs: see frame.h. */
#include "frame.h"

#include <string.h>

#include "../../src/base/bytes.h"

void rmx__tf_hdr(uint8_t *p, uint32_t blen, uint8_t kind)
{
  rmx_put32(p, blen);
  p[4] = kind;
  p[5] = 0;
  rmx_put16(p + 6, 0);
}

/* The rmx frame header: u8 type, u8 flags, u16 credits, u32 body length. */
void rmx__tf_frame_hdr(uint8_t *p, const uint8_t *frame)
{
  rmx_put32(p, rmx_get32(frame + 4));
  p[4] = (uint8_t)(TF_FRAME + frame[0]);
  p[5] = frame[1];
  memcpy(p + 6, frame + 2, 2);
}

void rmx__tf_frame_unhdr(uint8_t *p)
{
  uint8_t h[TF_HDR];
  h[0] = (uint8_t)(p[4] - TF_FRAME);
  h[1] = p[5];
  memcpy(h + 2, p + 6, 2);
  memcpy(h + 4, p, 4);
  memcpy(p, h, sizeof(h));
}

/* Is this kind allowed in this state, with this body length? */
static const char *kind_check(tc_state_t state, uint8_t kind, uint32_t blen, size_t max_frame)
{
  if (kind >= TF_RD_REQ && kind <= TF_RD_DONE && state != TC_UP)
    return "remote operation before the handshake";
  switch (kind) {
  case TF_HELLO:
    if (state != TC_WAIT_HELLO)
      return "unexpected HELLO";
    return blen > TF_HELLO_MAX ? "oversized HELLO" : NULL;
  case TF_HELLO_ACK:
    if (state != TC_HELLO_SENT)
      return "unexpected HELLO_ACK";
    return blen > TF_HELLO_MAX ? "oversized HELLO_ACK" : NULL;
  case TF_REJECT:
    if (state != TC_HELLO_SENT)
      return "unexpected REJECT";
    return blen != TF_REJECT_LEN ? "malformed REJECT" : NULL;
  case TF_RD_REQ:
    return blen != TF_RDREQ_LEN ? "malformed read request" : NULL;
  case TF_RD_RESP:
    if (blen < TF_RESP_SUB)
      return "malformed read response";
    return blen - TF_RESP_SUB > TF_CHUNK ? "read response chunk over 256 KiB" : NULL;
  case TF_WR_REQ:
    return blen < TF_WRREQ_SUB ? "malformed write request" : NULL;
  case TF_WR_RESP:
    return blen != TF_RESP_SUB ? "malformed write response" : NULL;
  case TF_AT_REQ:
    return blen != TF_ATREQ_LEN ? "malformed atomic request" : NULL;
  case TF_AT_RESP:
    return blen != TF_ATRESP_LEN ? "malformed atomic response" : NULL;
  case TF_RD_DIR:
    return blen != TF_RDDIR_LEN ? "malformed direct read request" : NULL;
  case TF_WR_DIR:
    return blen != TF_WRDIR_LEN ? "malformed direct write request" : NULL;
  case TF_RD_DONE:
    return blen != TF_RDDONE_LEN ? "malformed direct read's done" : NULL;
  default:
    return state == TC_WAIT_HELLO ? "not an rmx peer (bad first frame)" : "unknown frame kind";
  }
}

const char *rmx__tf_check(const uint8_t *hdr, tc_state_t state, size_t max_frame, uint8_t *kind,
                          uint32_t *blen)
{
  *blen = rmx_get32(hdr);
  *kind = hdr[4];
  if (*kind >= TF_FRAME) { /* flags and reserved are the frame's own */
    *kind = TF_FRAME;
    if (state != TC_UP)
      return state == TC_WAIT_HELLO ? "not an rmx peer (bad first frame)"
                                    : "message before the handshake";
    /* the frame's header is TF_HDR too */
    return *blen > max_frame - TF_HDR ? "message frame larger than the receive buffers" : NULL;
  }
  if (hdr[5] || rmx_get16(hdr + 6))
    return "frame flags or reserved bits set";
  return kind_check(state, *kind, *blen, max_frame);
}

size_t rmx__tf_buffered(uint8_t kind, uint32_t blen)
{
  return kind == TF_RD_RESP ? TF_RESP_SUB : kind == TF_WR_REQ ? TF_WRREQ_SUB : blen;
}

/* The fixed part's length of a request kind. */
static size_t req_sub(uint8_t kind)
{
  switch (kind) {
  case TF_RD_REQ: return TF_RDREQ_LEN;
  case TF_WR_REQ: return TF_WRREQ_SUB;
  case TF_RD_DIR: return TF_RDDIR_LEN;
  case TF_WR_DIR: return TF_WRDIR_LEN;
  default: return TF_ATREQ_LEN;
  }
}

/* RD_REQ and WR_REQ: id, addr, len, key, then WR_REQ's flags, imm. AT_REQ:
 * id, addr, key, op, pad, compare/add, swap. RD_DIR and WR_DIR: RD_REQ's
 * and WR_REQ's fields, then from. */
size_t rmx__tf_req_put(uint8_t *p, uint8_t kind, const tf_req_t *r)
{
  uint8_t *b = p + TF_HDR;
  size_t sub = req_sub(kind);
  rmx__tf_hdr(p, (uint32_t)(kind == TF_WR_REQ ? sub + r->len : sub), kind);
  rmx_put64(b, r->id);
  rmx_put64(b + 8, r->addr);
  if (kind == TF_AT_REQ) {
    rmx_put64(b + 16, r->key);
    rmx_put32(b + 24, r->op);
    rmx_put32(b + 28, 0);
    rmx_put64(b + 32, r->cmp_add);
    rmx_put64(b + 40, r->swap);
  } else {
    rmx_put64(b + 16, r->len);
    rmx_put64(b + 24, r->key);
  }
  if (kind == TF_WR_REQ || kind == TF_WR_DIR) {
    rmx_put32(b + 32, r->flags);
    rmx_put32(b + 36, r->imm);
  }
  if (kind == TF_RD_DIR || kind == TF_WR_DIR)
    rmx_put64(b + sub - 8, r->from);
  return TF_HDR + sub;
}

void rmx__tf_req_get(const uint8_t *b, uint8_t kind, tf_req_t *r)
{
  *r = (tf_req_t){.id = rmx_get64(b), .addr = rmx_get64(b + 8)};
  if (kind == TF_AT_REQ) {
    r->key = rmx_get64(b + 16);
    r->op = rmx_get32(b + 24);
    r->pad = rmx_get32(b + 28);
    r->cmp_add = rmx_get64(b + 32);
    r->swap = rmx_get64(b + 40);
    return;
  }
  r->len = rmx_get64(b + 16);
  r->key = rmx_get64(b + 24);
  if (kind == TF_WR_REQ || kind == TF_WR_DIR) {
    r->flags = rmx_get32(b + 32);
    r->imm = rmx_get32(b + 36);
  }
  if (kind == TF_RD_DIR || kind == TF_WR_DIR)
    r->from = rmx_get64(b + req_sub(kind) - 8);
}

/* id, status, then AT_RESP's pad (0) and old value. */
size_t rmx__tf_resp_put(uint8_t *p, uint8_t kind, const tf_resp_t *r, size_t dlen)
{
  uint8_t *b = p + TF_HDR;
  size_t sub = kind == TF_AT_RESP ? TF_ATRESP_LEN : TF_RESP_SUB;
  rmx__tf_hdr(p, (uint32_t)(sub + dlen), kind);
  rmx_put64(b, r->id);
  rmx_put32(b + 8, (uint32_t)r->status);
  if (kind == TF_AT_RESP) {
    rmx_put32(b + 12, 0);
    rmx_put64(b + 16, r->old);
  }
  return TF_HDR + sub;
}

void rmx__tf_resp_get(const uint8_t *b, uint8_t kind, tf_resp_t *r)
{
  r->id = rmx_get64(b);
  r->status = (int32_t)rmx_get32(b + 8);
  r->old = kind == TF_AT_RESP ? rmx_get64(b + 16) : 0;
}

void rmx__tf_done_put(uint8_t *b, uint64_t id) { rmx_put64(b, id); }

uint64_t rmx__tf_done_get(const uint8_t *b) { return rmx_get64(b); }

void rmx__tf_reject_put(uint8_t *b, int32_t status) { rmx_put32(b, (uint32_t)status); }

int32_t rmx__tf_reject_get(const uint8_t *b) { return (int32_t)rmx_get32(b); }
