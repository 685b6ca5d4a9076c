/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Wire format of rmx frames: encode/decode with bounds checks. Every field is
 * little-endian. See docs/protocol.md for the layout; this file is its code.
 */
#ifndef RMX_WIRE_H
#define RMX_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "base/bytes.h"

#define RMX_WIRE_MAGIC 0x31584d52u /* "RMX1" read as little-endian */
#define RMX_WIRE_VERSION 5 /* the highest this build speaks. 2: the hello announces a
                             * silence limit (keepalive); 3: TCP carries a frame's header
                             * in the stream frame's; 4: DATA frames may carry
                             * RMX_FF_NOTIFY; 5: the hello carries a version range */
#define RMX_WIRE_VERSION_MIN 4 /* the lowest: what the hello's version field says */
#define RMX_WIRE_HELLO_LEN 32
#define RMX_WIRE_HDR_LEN 8

enum rmx_frame_type {
  RMX_FR_DATA = 1,   /* eager message: payload follows the header */
  RMX_FR_RTS = 2,    /* rendezvous request-to-send: where to read the message */
  RMX_FR_FIN = 3,    /* rendezvous done: the sender may release its buffer */
  RMX_FR_CREDIT = 4, /* credits returned, nothing else */
  RMX_FR_BYE = 5,    /* orderly close */
  RMX_FR_AUTH = 6,   /* client's authentication proof: the first frame it sends */
  RMX_FR_AUTH_OK = 7, /* server accepted the proof: the first frame it sends */
  RMX_FR_TYPE_MAX_ = RMX_FR_AUTH_OK
};

/* Header flags, one at most: RPC_REQ and RPC_REP, the frame carries an RPC
 * extension (rmx_wire_rpc_t) right after the header (DATA) or after the RTS
 * body (RTS); NOTIFY (DATA only, no extension), the payload is a transfer
 * request's notification. */
enum { RMX_FF_RPC_REQ = 1, RMX_FF_RPC_REP = 2, RMX_FF_NOTIFY = 4 };
#define RMX_FF_RPC (RMX_FF_RPC_REQ | RMX_FF_RPC_REP)

typedef struct rmx_wire_rpc {
  uint64_t call_id;
  uint32_t handler; /* requests: which handler */
  int32_t status;   /* replies: 0 or the error */
} rmx_wire_rpc_t;

#define RMX_WIRE_RPC_LEN 16

/* Hello flags. AUTH: peer authentication with a shared secret (src/auth.c).
 * The connecting side's hello is followed by its nonce (48 bytes in all),
 * the accepting side's by its nonce and its proof (80 bytes in all).
 * RAIL (connecting side only): the connection is a rail of another one
 * (src/rails.c); the 8-byte token its peer gave for it follows the hello,
 * after the nonce where AUTH is set (56 bytes at most: an rdma_cm connect
 * request carries 56). */
enum { RMX_HELLO_F_AUTH = 1, RMX_HELLO_F_RAIL = 2 };
#define RMX_WIRE_RAIL_TOKEN_LEN 8
#define RMX_WIRE_AUTH_NONCE_LEN 16
#define RMX_WIRE_AUTH_PROOF_LEN 32
#define RMX_WIRE_HELLO_AUTH_CONNECT_LEN (RMX_WIRE_HELLO_LEN + RMX_WIRE_AUTH_NONCE_LEN)
#define RMX_WIRE_HELLO_AUTH_ACCEPT_LEN (RMX_WIRE_HELLO_AUTH_CONNECT_LEN + RMX_WIRE_AUTH_PROOF_LEN)

/* The connection handshake, carried by the transport's connection setup. */
typedef struct rmx_wire_hello {
  uint32_t magic;
  uint16_t version;
  uint16_t flags;
  uint32_t eager_size;  /* receive buffer size, header included */
  uint32_t rx_depth;    /* receive buffers = initial credits for the peer */
  uint64_t max_msg;     /* largest message this side accepts */
  uint32_t silence_ms;  /* this side declares the peer lost after this long without a
                           frame from it; 0: never. The peer sends a frame at least
                           every silence_ms / 3 (docs/protocol.md, keepalive). */
  uint32_t rma_window;  /* remote read/write/atomic requests this side serves at once */
} rmx_wire_hello_t;

typedef struct rmx_wire_rts {
  uint64_t id;   /* sender's handle for the FIN */
  uint64_t addr; /* where the receiver reads from */
  uint64_t size; /* message length */
  uint64_t rkey; /* transport key for that memory */
} rmx_wire_rts_t;

typedef struct rmx_wire_fin {
  uint64_t id;
  int32_t status;
} rmx_wire_fin_t;

/* A decoded frame: the header plus a view of what follows it. */
typedef struct rmx_frame {
  uint8_t type;
  uint8_t flags;
  uint16_t credits;
  rmx_wire_rpc_t rpc; /* when flags has RMX_FF_RPC_* */
  const uint8_t *payload; /* DATA; AUTH: the proof */
  size_t payload_len;
  union {
    rmx_wire_rts_t rts;
    rmx_wire_fin_t fin;
  } u;
} rmx_frame_t;

#define RMX_WIRE_RTS_LEN 32
#define RMX_WIRE_FIN_LEN 16
/* Largest control frame: header plus the longest extension. */
#define RMX_WIRE_CTRL_MAX (RMX_WIRE_HDR_LEN + RMX_WIRE_RTS_LEN + RMX_WIRE_RPC_LEN)

void rmx__wire_hello_encode(const rmx_wire_hello_t *h, uint8_t out[RMX_WIRE_HELLO_LEN]);
/* 0, RMX_EPROTO (short or not rmx), RMX_EVERSION (rmx, a lowest version
 * above this build's highest: nothing in common). */
int rmx__wire_hello_decode(const void *buf, size_t len, rmx_wire_hello_t *h);

/* The range extension (version 5 on): 8 bytes after the hello and what
 * authentication appends to it (nonce; the accepting side's proof), never
 * on a rail's hello (its token sits there). A peer without one, or with
 * zeros there (rdma_cm pads private data), speaks its version field only,
 * with that version's features. */
#define RMX_WIRE_RANGE_LEN 8
#define RMX_WIRE_RANGE_TAG 0x6772u /* "rg" read as little-endian */
enum { RMX_FEAT_NOTIFY = 1, RMX_FEAT_RAILS = 2 };
#define RMX_FEAT_ALL (RMX_FEAT_NOTIFY | RMX_FEAT_RAILS) /* what this build has */
typedef struct rmx_wire_range {
  uint16_t highest;  /* the highest version the sender speaks */
  uint32_t features; /* RMX_FEAT_* the sender has */
} rmx_wire_range_t;

void rmx__wire_range_encode(const rmx_wire_range_t *r, uint8_t out[RMX_WIRE_RANGE_LEN]);
/* 1 and *r when len bytes at p hold a range; 0 when they hold none. */
int rmx__wire_range_decode(const void *p, size_t len, rmx_wire_range_t *r);
/* The version two sides agree on: the highest both speak, from the peer's
 * hello version field (its lowest) and its range (NULL: none sent), and the
 * features both have. 0, or RMX_EVERSION when the ranges do not meet. */
int rmx__wire_version_agree(uint16_t peer_lowest, const rmx_wire_range_t *peer, uint16_t *version,
                            uint32_t *features);

/* Writes the 8-byte header; returns its length. */
size_t rmx__wire_hdr_encode(uint8_t *out, uint8_t type, uint16_t credits, uint32_t body_len);
/* Writes header + RTS body; returns the frame length. */
size_t rmx__wire_rts_encode(uint8_t *out, uint16_t credits, const rmx_wire_rts_t *rts);
size_t rmx__wire_fin_encode(uint8_t *out, uint16_t credits, const rmx_wire_fin_t *fin);
/* Mark an encoded DATA or RTS frame as RPC and write its extension at ext
 * (after the header for DATA, after the RTS body for RTS); the body length
 * grows by RMX_WIRE_RPC_LEN. */
void rmx__wire_rpc_add(uint8_t *hdr, uint8_t flag, uint8_t *ext, const rmx_wire_rpc_t *rpc);
/* Mark an encoded DATA frame as a notification. */
static inline void rmx__wire_notify_mark(uint8_t *hdr) { hdr[1] = RMX_FF_NOTIFY; }
/* Patch the credits field of an encoded header. */
void rmx__wire_set_credits(uint8_t *hdr, uint16_t credits);

/*
 * Decode one whole frame of exactly len bytes. 0, or RMX_EPROTO with *why
 * set to a static reason. The payload view points into buf.
 */
int rmx__wire_decode(const void *buf, size_t len, rmx_frame_t *f, const char **why);

#endif
