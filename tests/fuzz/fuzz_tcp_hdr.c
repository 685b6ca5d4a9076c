/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx__tf_check and rmx__tf_buffered (transport/tcp/frame.c): the stream
 * frame header that the TCP and shm transports parse first from every
 * peer's bytes, alone, in every connection state and with every frame
 * limit a configuration allows. Input: byte 0 the state, bytes 1..4 the
 * limit (within RMX_EAGER_MIN..RMX_EAGER_MAX), then the 8-byte header.
 * Property: a header is taken exactly when docs/protocol.md ("TCP stream
 * framing") allows it, and what it makes the parser buffer before the
 * frame is handled is bounded by that limit or a fixed size of its kind.
 */
#include <string.h>

#include "fuzz.h"
#include "rmx_int.h"
#include "base/bytes.h"
#include "../../transport/tcp/frame.h"

/* What the protocol allows, written from the document, not the code. */
static int allowed(tc_state_t st, const uint8_t *h, size_t max_frame)
{
  uint32_t blen = rmx_get32(h);
  uint8_t kind = h[4];
  if (kind >= TF_FRAME)
    return st == TC_UP && (uint64_t)blen + TF_HDR <= max_frame;
  if (h[5] || h[6] || h[7])
    return 0;
  switch (kind) {
  case TF_HELLO: return st == TC_WAIT_HELLO && blen <= TF_HELLO_MAX;
  case TF_HELLO_ACK: return st == TC_HELLO_SENT && blen <= TF_HELLO_MAX;
  case TF_REJECT: return st == TC_HELLO_SENT && blen == TF_REJECT_LEN;
  case TF_RD_REQ: return st == TC_UP && blen == TF_RDREQ_LEN;
  case TF_RD_RESP: return st == TC_UP && blen >= TF_RESP_SUB && blen - TF_RESP_SUB <= TF_CHUNK;
  case TF_WR_REQ: return st == TC_UP && blen >= TF_WRREQ_SUB;
  case TF_WR_RESP: return st == TC_UP && blen == TF_RESP_SUB;
  case TF_AT_REQ: return st == TC_UP && blen == TF_ATREQ_LEN;
  case TF_AT_RESP: return st == TC_UP && blen == TF_ATRESP_LEN;
  /* the direct requests' frames; whether the connection agreed to them is
   * the target's to check, not the header's */
  case TF_RD_DIR: return st == TC_UP && blen == TF_RDDIR_LEN;
  case TF_WR_DIR: return st == TC_UP && blen == TF_WRDIR_LEN;
  case TF_RD_DONE: return st == TC_UP && blen == TF_RDDONE_LEN;
  default: return 0;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1 + 4 + TF_HDR)
    return 0;
  tc_state_t st = (tc_state_t)(data[0] % (TC_FINISHING + 1));
  size_t max_frame = RMX_EAGER_MIN + rmx_get32(data + 1) % (RMX_EAGER_MAX - RMX_EAGER_MIN + 1);
  const uint8_t *h = data + 5;
  uint8_t kind;
  uint32_t blen;
  const char *why = rmx__tf_check(h, st, max_frame, &kind, &blen);
  FUZZ_CHECK(blen == rmx_get32(h));
  FUZZ_CHECK(kind == (h[4] >= TF_FRAME ? TF_FRAME : h[4]));
  FUZZ_CHECK((why == NULL) == allowed(st, h, max_frame));
  FUZZ_CHECK(why == NULL || *why);
  if (why)
    return 0;
  size_t held = rmx__tf_buffered(kind, blen);
  if (kind == TF_RD_RESP)
    FUZZ_CHECK(held == TF_RESP_SUB);
  else if (kind == TF_WR_REQ)
    FUZZ_CHECK(held == TF_WRREQ_SUB);
  else
    FUZZ_CHECK(held == blen);
  FUZZ_CHECK(held + TF_HDR <= (max_frame > TF_HDR + TF_HELLO_MAX ? max_frame
                                                                 : TF_HDR + TF_HELLO_MAX));
  return 0;
}
