/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx__wire_decode: one core frame (header, RTS/FIN bodies, RPC extension).
 * Besides not crashing, what it accepts must be what the encoders write:
 * re-encoding the decoded fields gives the same bytes back.
 */
#include <string.h>

#include "fuzz.h"
#include "rmx_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  rmx_frame_t f;
  const char *why = NULL;
  int rc = rmx__wire_decode(data, size, &f, &why);
  if (rc) {
    FUZZ_CHECK(rc == RMX_EPROTO && why && *why);
    return 0;
  }
  FUZZ_CHECK(size >= RMX_WIRE_HDR_LEN && size - RMX_WIRE_HDR_LEN == rmx_get32(data + 4));
  FUZZ_CHECK(f.type >= RMX_FR_DATA && f.type <= RMX_FR_TYPE_MAX_);
  size_t ext = f.flags & RMX_FF_RPC ? RMX_WIRE_RPC_LEN : 0;
  FUZZ_CHECK(f.flags == 0 || ((f.flags == RMX_FF_RPC_REQ || f.flags == RMX_FF_RPC_REP) &&
                              (f.type == RMX_FR_DATA || f.type == RMX_FR_RTS)) ||
             (f.flags == RMX_FF_NOTIFY && f.type == RMX_FR_DATA)); /* no extension */

  uint8_t out[RMX_WIRE_CTRL_MAX];
  rmx_frame_t g;
  switch (f.type) {
  case RMX_FR_DATA:
    FUZZ_CHECK(f.payload == data + RMX_WIRE_HDR_LEN + ext);
    FUZZ_CHECK(f.payload_len == size - RMX_WIRE_HDR_LEN - ext);
    rmx__wire_hdr_encode(out, RMX_FR_DATA, f.credits, (uint32_t)f.payload_len);
    if (ext)
      rmx__wire_rpc_add(out, f.flags, out + RMX_WIRE_HDR_LEN, &f.rpc);
    if (f.flags == RMX_FF_NOTIFY)
      rmx__wire_notify_mark(out);
    FUZZ_CHECK(memcmp(out, data, RMX_WIRE_HDR_LEN + ext) == 0);
    break;
  case RMX_FR_RTS: {
    /* every byte of an RTS is a field: the round trip is exact */
    size_t n = rmx__wire_rts_encode(out, f.credits, &f.u.rts);
    if (ext) {
      rmx__wire_rpc_add(out, f.flags, out + n, &f.rpc);
      n += ext;
    }
    FUZZ_CHECK(n == size && memcmp(out, data, n) == 0);
    FUZZ_CHECK(rmx__wire_decode(out, n, &g, &why) == 0);
    FUZZ_CHECK(g.u.rts.id == f.u.rts.id && g.u.rts.addr == f.u.rts.addr &&
               g.u.rts.size == f.u.rts.size && g.u.rts.rkey == f.u.rts.rkey);
    FUZZ_CHECK(f.payload == NULL && f.payload_len == 0);
    break;
  }
  case RMX_FR_FIN: {
    /* exact too: the reserved word must be zero */
    size_t n = rmx__wire_fin_encode(out, f.credits, &f.u.fin);
    FUZZ_CHECK(n == size && memcmp(out, data, n) == 0);
    FUZZ_CHECK(rmx__wire_decode(out, n, &g, &why) == 0);
    FUZZ_CHECK(g.type == RMX_FR_FIN && g.credits == f.credits && g.u.fin.id == f.u.fin.id &&
               g.u.fin.status == f.u.fin.status);
    break;
  }
  case RMX_FR_CREDIT:
  case RMX_FR_BYE: /* a bare header */
    FUZZ_CHECK(size == RMX_WIRE_HDR_LEN);
    rmx__wire_hdr_encode(out, f.type, f.credits, 0);
    FUZZ_CHECK(memcmp(out, data, size) == 0);
    break;
  default: /* types added later: what they point at is the frame's body */
    FUZZ_CHECK(!f.payload || (f.payload >= data + RMX_WIRE_HDR_LEN &&
                              f.payload + f.payload_len == data + size));
    break;
  }
  /* patching the credits of an accepted header changes nothing else */
  if (size <= sizeof(out)) {
    memcpy(out, data, size);
    rmx__wire_set_credits(out, (uint16_t)~f.credits);
    FUZZ_CHECK(rmx__wire_decode(out, size, &g, &why) == 0);
    FUZZ_CHECK(g.type == f.type && g.flags == f.flags && g.credits == (uint16_t)~f.credits);
  }
  return 0;
}
