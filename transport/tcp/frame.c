/* The TCP stream framing's header checks: see frame.h. */
#include "frame.h"

#include "../../src/base/bytes.h"

void tf_hdr(uint8_t *p, uint32_t blen, uint8_t kind)
{
  rmx_put32(p, blen);
  p[4] = kind;
  p[5] = 0;
  rmx_put16(p + 6, 0);
}

/* Is this kind allowed in this state, with this body length? */
static const char *kind_check(tc_state_t state, uint8_t kind, uint32_t blen, size_t max_frame)
{
  if (kind > TF_MSG && kind <= TF_AT_RESP && state != TC_UP)
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
    return blen != 4 ? "malformed REJECT" : NULL;
  case TF_MSG:
    if (state != TC_UP)
      return "message before the handshake";
    return blen > max_frame ? "message frame larger than the receive buffers" : NULL;
  case TF_RD_REQ:
    return blen != TF_RDREQ_LEN ? "malformed read request" : NULL;
  case TF_RD_RESP:
    return blen < TF_RESP_SUB ? "malformed read response" : NULL;
  case TF_WR_REQ:
    return blen < TF_WRREQ_SUB ? "malformed write request" : NULL;
  case TF_WR_RESP:
    return blen != TF_RESP_SUB ? "malformed write response" : NULL;
  case TF_AT_REQ:
    return blen != TF_ATREQ_LEN ? "malformed atomic request" : NULL;
  case TF_AT_RESP:
    return blen != TF_ATRESP_LEN ? "malformed atomic response" : NULL;
  default:
    return state == TC_WAIT_HELLO ? "not an rmx peer (bad first frame)" : "unknown frame kind";
  }
}

const char *tf_check(const uint8_t *hdr, tc_state_t state, size_t max_frame, uint8_t *kind,
                     uint32_t *blen)
{
  *blen = rmx_get32(hdr);
  *kind = hdr[4];
  if (hdr[5] || rmx_get16(hdr + 6))
    return "frame flags or reserved bits set";
  return kind_check(state, *kind, *blen, max_frame);
}
