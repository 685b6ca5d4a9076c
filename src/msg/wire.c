/* SPDX-License-Identifier: BSD-3-Clause */
#include "wire.h"

#include <rmx/rmx.h>

void rmx__wire_hello_encode(const rmx_wire_hello_t *h, uint8_t out[RMX_WIRE_HELLO_LEN])
{
  rmx_put32(out + 0, h->magic);
  rmx_put16(out + 4, h->version);
  rmx_put16(out + 6, h->flags);
  rmx_put32(out + 8, h->eager_size);
  rmx_put32(out + 12, h->rx_depth);
  rmx_put64(out + 16, h->max_msg);
  rmx_put32(out + 24, h->silence_ms);
  rmx_put32(out + 28, h->rma_window);
}

int rmx__wire_hello_decode(const void *buf, size_t len, rmx_wire_hello_t *h)
{
  const uint8_t *p = buf;
  /* The magic and version are read first so a newer peer with a longer
   * hello is told apart from a stranger. */
  if (len < 6 || rmx_get32(p) != RMX_WIRE_MAGIC)
    return RMX_EPROTO;
  h->magic = rmx_get32(p);
  h->version = rmx_get16(p + 4);
  if (h->version > RMX_WIRE_VERSION)
    return RMX_EVERSION;
  if (len < RMX_WIRE_HELLO_LEN)
    return RMX_EPROTO;
  h->flags = rmx_get16(p + 6);
  h->eager_size = rmx_get32(p + 8);
  h->rx_depth = rmx_get32(p + 12);
  h->max_msg = rmx_get64(p + 16);
  h->silence_ms = rmx_get32(p + 24);
  h->rma_window = rmx_get32(p + 28);
  return 0;
}

void rmx__wire_range_encode(const rmx_wire_range_t *r, uint8_t out[RMX_WIRE_RANGE_LEN])
{
  rmx_put16(out + 0, RMX_WIRE_RANGE_TAG);
  rmx_put16(out + 2, r->highest);
  rmx_put32(out + 4, r->features);
}

int rmx__wire_range_decode(const void *buf, size_t len, rmx_wire_range_t *r)
{
  const uint8_t *p = buf;
  if (len < RMX_WIRE_RANGE_LEN || rmx_get16(p) != RMX_WIRE_RANGE_TAG)
    return 0;
  r->highest = rmx_get16(p + 2);
  r->features = rmx_get32(p + 4);
  return 1;
}

/* What a peer of a version before 5 (no range) has: version 4 brought
 * notifications; rails came with 4 too. */
static uint32_t features_of(uint16_t version)
{
  return version >= 4 ? RMX_FEAT_NOTIFY | RMX_FEAT_RAILS : 0;
}

int rmx__wire_version_agree(uint16_t peer_lowest, const rmx_wire_range_t *peer, uint16_t *version,
                            uint32_t *features)
{
  uint16_t high = peer && peer->highest > peer_lowest ? peer->highest : peer_lowest;
  uint16_t v = high < RMX_WIRE_VERSION ? high : RMX_WIRE_VERSION;
  if (v < peer_lowest || v < RMX_WIRE_VERSION_MIN)
    return RMX_EVERSION;
  *version = v;
  *features = RMX_FEAT_ALL & (peer ? peer->features : features_of(v));
  return 0;
}

size_t rmx__wire_hdr_encode(uint8_t *out, uint8_t type, uint16_t credits, uint32_t body_len)
{
  out[0] = type;
  out[1] = 0;
  rmx_put16(out + 2, credits);
  rmx_put32(out + 4, body_len);
  return RMX_WIRE_HDR_LEN;
}

void rmx__wire_set_credits(uint8_t *hdr, uint16_t credits) { rmx_put16(hdr + 2, credits); }

void rmx__wire_rpc_add(uint8_t *hdr, uint8_t flag, uint8_t *ext, const rmx_wire_rpc_t *rpc)
{
  hdr[1] = flag;
  rmx_put32(hdr + 4, rmx_get32(hdr + 4) + RMX_WIRE_RPC_LEN);
  rmx_put64(ext, rpc->call_id);
  rmx_put32(ext + 8, rpc->handler);
  rmx_put32(ext + 12, (uint32_t)rpc->status);
}

static void rpc_decode(const uint8_t *p, rmx_wire_rpc_t *rpc)
{
  rpc->call_id = rmx_get64(p);
  rpc->handler = rmx_get32(p + 8);
  rpc->status = (int32_t)rmx_get32(p + 12);
}

size_t rmx__wire_rts_encode(uint8_t *out, uint16_t credits, const rmx_wire_rts_t *rts)
{
  uint8_t *p = out + rmx__wire_hdr_encode(out, RMX_FR_RTS, credits, RMX_WIRE_RTS_LEN);
  rmx_put64(p + 0, rts->id);
  rmx_put64(p + 8, rts->addr);
  rmx_put64(p + 16, rts->size);
  rmx_put64(p + 24, rts->rkey);
  return RMX_WIRE_HDR_LEN + RMX_WIRE_RTS_LEN;
}

size_t rmx__wire_fin_encode(uint8_t *out, uint16_t credits, const rmx_wire_fin_t *fin)
{
  uint8_t *p = out + rmx__wire_hdr_encode(out, RMX_FR_FIN, credits, RMX_WIRE_FIN_LEN);
  rmx_put64(p + 0, fin->id);
  rmx_put32(p + 8, (uint32_t)fin->status);
  rmx_put32(p + 12, 0);
  return RMX_WIRE_HDR_LEN + RMX_WIRE_FIN_LEN;
}

int rmx__wire_decode(const void *buf, size_t len, rmx_frame_t *f, const char **why)
{
  const uint8_t *p = buf;
  static const size_t body_len[] = {
    [RMX_FR_RTS] = RMX_WIRE_RTS_LEN, [RMX_FR_FIN] = RMX_WIRE_FIN_LEN,
    [RMX_FR_CREDIT] = 0, [RMX_FR_BYE] = 0,
    [RMX_FR_AUTH] = RMX_WIRE_AUTH_PROOF_LEN, [RMX_FR_AUTH_OK] = 0,
  };

  if (len < RMX_WIRE_HDR_LEN) {
    *why = "frame shorter than its header";
    return RMX_EPROTO;
  }
  f->type = p[0];
  f->flags = p[1];
  f->credits = rmx_get16(p + 2);
  uint32_t blen = rmx_get32(p + 4);
  if (blen != len - RMX_WIRE_HDR_LEN) {
    *why = "frame length field disagrees with the bytes received";
    return RMX_EPROTO;
  }
  if (f->type < RMX_FR_DATA || f->type > RMX_FR_TYPE_MAX_) {
    *why = "unknown frame type";
    return RMX_EPROTO;
  }
  size_t ext = 0;
  if (f->flags == RMX_FF_NOTIFY) {
    if (f->type != RMX_FR_DATA) {
      *why = "a notification flag on a frame other than DATA";
      return RMX_EPROTO;
    }
  } else if (f->flags) {
    if ((f->flags != RMX_FF_RPC_REQ && f->flags != RMX_FF_RPC_REP) ||
        (f->type != RMX_FR_DATA && f->type != RMX_FR_RTS)) {
      *why = "unknown frame flags";
      return RMX_EPROTO;
    }
    ext = RMX_WIRE_RPC_LEN;
  }
  if (f->type == RMX_FR_DATA ? blen < ext : blen != body_len[f->type] + ext) {
    *why = "control frame of the wrong length";
    return RMX_EPROTO;
  }
  p += RMX_WIRE_HDR_LEN;
  f->payload = NULL;
  f->payload_len = 0;
  switch (f->type) {
  case RMX_FR_DATA:
    if (ext)
      rpc_decode(p, &f->rpc);
    f->payload = p + ext;
    f->payload_len = blen - ext;
    break;
  case RMX_FR_RTS:
    f->u.rts.id = rmx_get64(p);
    f->u.rts.addr = rmx_get64(p + 8);
    f->u.rts.size = rmx_get64(p + 16);
    f->u.rts.rkey = rmx_get64(p + 24);
    if (ext)
      rpc_decode(p + RMX_WIRE_RTS_LEN, &f->rpc);
    break;
  case RMX_FR_FIN:
    f->u.fin.id = rmx_get64(p);
    f->u.fin.status = (int32_t)rmx_get32(p + 8);
    if (rmx_get32(p + 12) != 0) {
      *why = "FIN with nonzero reserved bytes";
      return RMX_EPROTO;
    }
    break;
  case RMX_FR_AUTH:
    f->payload = p;
    f->payload_len = blen;
    break;
  default:
    break;
  }
  return 0;
}
