/* SPDX-License-Identifier: BSD-3-Clause */
/* The handshake's hello (src/conn/hello.c): ours, the checks of a peer's,
 * and the version both agree on. */
#ifndef RMX_CONN_HELLO_H
#define RMX_CONN_HELLO_H

#include "../rmx_int.h"

/* What a peer's hello and this build agreed on (docs/protocol.md,
 * "Versions and features"); range: the peer's range as it sent it, NULL
 * when it sent none. */
typedef struct rmx__hello_terms {
  uint16_t version;
  uint32_t features;
  const uint8_t *range;
} rmx__hello_terms_t;

/* Our 32-byte hello; its version field is our lowest version. */
void rmx__hello_local(rmx_ctx_t *ctx, uint8_t out[RMX_WIRE_HELLO_LEN]);
/* Decode and check a peer's hello (acceptor: it is the accepting side's
 * answer; flags: the flags it may set) and agree on a version: 0,
 * RMX_EPROTO or RMX_EVERSION, logged, through rl for an incoming peer
 * (which may send any number of them), at once for our own connect. */
int rmx__hello_check(rmx_ctx_t *ctx, rmx__ratelimit_t *rl, const char *who, const void *data,
                     size_t len, unsigned flags, int acceptor, rmx_wire_hello_t *h,
                     rmx__hello_terms_t *t);
/* A rail's token from its hello (0 where it is none): 0, RMX_EPROTO or
 * RMX_EACCES (logged). */
int rmx__hello_rail_token(rmx_ctx_t *ctx, const char *who, const uint8_t *hello, size_t len,
                          const rmx_wire_hello_t *h, uint64_t *token);
/* This side's range, as it goes on the wire and into the transcript. */
void rmx__hello_range_local(uint8_t out[RMX_WIRE_RANGE_LEN]);
/* The agreed version and features become the connection's. */
void rmx__hello_terms_keep(rmx_conn_t *c, const rmx__hello_terms_t *t);

#endif
