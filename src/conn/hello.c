/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hello both sides exchange in the transport's connection set-up: ours,
 * the checks of a peer's (docs/protocol.md, "Handshake"), and the version
 * and features two builds agree on ("Versions and features"). The version
 * field says the sender's lowest version, so a build one version behind
 * still accepts it; the range after it says the highest and the features.
 */
#include "hello.h"

#include <stdio.h>

#include <string.h>

void rmx__hello_local(rmx_ctx_t *ctx, uint8_t out[RMX_WIRE_HELLO_LEN])
{
  rmx_wire_hello_t h = {
    .magic = RMX_WIRE_MAGIC,
    .version = RMX_WIRE_VERSION_MIN, /* our lowest: the range says our highest */
    .eager_size = ctx->cfg.eager_size,
    .rx_depth = ctx->cfg.rx_depth,
    .max_msg = ctx->cfg.max_msg_size,
    .silence_ms = rmx__alive_limit(&ctx->cfg),
    .rma_window = ctx->cfg.rma_window,
  };
  rmx__wire_hello_encode(&h, out);
}

/* Why a hello is refused: through the context's refusal limiter for an
 * incoming peer (rl), which may send any number of them. */
#define HELLO_LOG(ctx, rl, ...)                \
  do {                                         \
    if (rl)                                    \
      RMX_LOG_LIMITED(ctx, rl, ERROR, __VA_ARGS__); \
    else                                       \
      RMX_LOG(ctx, ERROR, __VA_ARGS__);        \
  } while (0)

/* Where a hello's range sits: after the hello and what authentication
 * appends to it (the nonce; the accepting side's proof as well). A rail's
 * hello has none: its token sits there. 0: none to look for. */
static size_t range_at(const rmx_wire_hello_t *h, int acceptor)
{
  if (h->flags & RMX_HELLO_F_RAIL)
    return 0;
  if (!(h->flags & RMX_HELLO_F_AUTH))
    return RMX_WIRE_HELLO_LEN;
  return acceptor ? RMX_WIRE_HELLO_AUTH_ACCEPT_LEN : RMX_WIRE_HELLO_AUTH_CONNECT_LEN;
}

int rmx__hello_check(rmx_ctx_t *ctx, rmx__ratelimit_t *rl, const char *who, const void *data,
                     size_t len, unsigned flags, int acceptor, rmx_wire_hello_t *h,
                     rmx__hello_terms_t *t)
{
  int rc = rmx__wire_hello_decode(data, len, h);
  if (rc == RMX_EVERSION) {
    HELLO_LOG(ctx, rl, "%s speaks rmx protocol version %u and later, this side speaks %u to "
              "%u: refused", who, h->version, RMX_WIRE_VERSION_MIN, RMX_WIRE_VERSION);
    return rc;
  }
  if (rc) {
    HELLO_LOG(ctx, rl, "%s sent a handshake that is not rmx's (%zu bytes): refused", who, len);
    return rc;
  }
  if (h->eager_size < RMX_EAGER_MIN || h->eager_size > RMX_EAGER_MAX ||
      h->rx_depth < RMX_DEPTH_MIN || h->rx_depth > RMX_DEPTH_MAX || h->max_msg == 0 ||
      h->rma_window == 0 || h->rma_window > RMX_RMA_WINDOW_MAX ||
      (h->silence_ms && h->silence_ms < RMX_SILENCE_MIN)) {
    HELLO_LOG(ctx, rl, "%s announced impossible limits (eager %u B, depth %u, largest message "
              "%llu B, remote window %u, silence limit %u ms): refused", who, h->eager_size,
              h->rx_depth, (unsigned long long)h->max_msg, h->rma_window, h->silence_ms);
    return RMX_EPROTO;
  }
  if (h->flags & ~flags) {
    HELLO_LOG(ctx, rl, "%s set handshake flags 0x%x that this version does not know: refused",
              who, h->flags);
    return RMX_EPROTO;
  }
  rmx_wire_range_t r;
  size_t at = range_at(h, acceptor);
  const uint8_t *p = data;
  t->range = at && len >= at && rmx__wire_range_decode(p + at, len - at, &r) ? p + at : NULL;
  if (rmx__wire_version_agree(h->version, t->range ? &r : NULL, &t->version, &t->features)) {
    HELLO_LOG(ctx, rl, "%s speaks rmx protocol versions %u to %u, this side speaks %u to %u: "
              "refused", who, h->version, t->range && r.highest > h->version ? r.highest
              : h->version, RMX_WIRE_VERSION_MIN, RMX_WIRE_VERSION);
    return RMX_EVERSION;
  }
  return 0;
}

/* This side's range, as it goes on the wire and into the transcript. */
void rmx__hello_range_local(uint8_t out[RMX_WIRE_RANGE_LEN])
{
  rmx_wire_range_t r = {.highest = RMX_WIRE_VERSION, .features = RMX_FEAT_ALL};
  rmx__wire_range_encode(&r, out);
}

void rmx__hello_terms_keep(rmx_conn_t *c, const rmx__hello_terms_t *t)
{
  c->wire_version = t->version;
  c->features = t->features;
}

/* A rail's hello (RMX_HELLO_F_RAIL) carries the token its peer gave for it
 * on the connection it serves, after the nonce where AUTH is set: one the
 * context has on offer, or the hello is refused (src/rails.c). */
int rmx__hello_rail_token(rmx_ctx_t *ctx, const char *who, const uint8_t *hello, size_t len,
                          const rmx_wire_hello_t *h, uint64_t *token)
{
  size_t at = h->flags & RMX_HELLO_F_AUTH ? RMX_WIRE_HELLO_AUTH_CONNECT_LEN : RMX_WIRE_HELLO_LEN;
  if (!(h->flags & RMX_HELLO_F_RAIL))
    return 0;
  if (len < at + RMX_WIRE_RAIL_TOKEN_LEN) {
    RMX_LOG_LIMITED(ctx, &ctx->rl_refused, ERROR, "%s: a rail's hello without its token "
                    "(%zu bytes): refused", who, len);
    return RMX_EPROTO;
  }
  *token = rmx_get64(hello + at);
  if (!*token || !ctx->up.rail_offered(ctx, *token)) {
    RMX_LOG_LIMITED(ctx, &ctx->rl_refused, WARN, "%s: a rail whose token is on offer for no "
                    "connection here: refused", who);
    return RMX_EACCES;
  }
  return 0;
}

