/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The TCP transport's stream framing (docs/protocol.md, "TCP stream
 * framing"): frame kinds, body layouts, the connection states that allow
 * each kind, the checks a frame header must pass before its body is looked
 * at, and the codecs of the bodies: every offset of the format is written
 * here and nowhere else. Pure code with no I/O, so it can be tested and
 * fuzzed alone.
 */
#ifndef RMX_TCP_FRAME_H
#define RMX_TCP_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define TF_HDR 8          /* u32 body length, u8 kind, u8 flags, u16 reserved */
#define TF_REJECT_LEN 4   /* status */
#define TF_RDREQ_LEN 32   /* id, addr, len, key */
#define TF_RESP_SUB 12    /* id, status: read and write responses */
#define TF_WRREQ_SUB 40   /* id, addr, len, key, flags, imm */
#define TF_ATREQ_LEN 48   /* id, addr, key, op, pad, compare/add, swap */
#define TF_ATRESP_LEN 24  /* id, status, pad, old value */
#define TF_RDDIR_LEN 40   /* RD_REQ's body, then the initiator's address */
#define TF_WRDIR_LEN 48   /* WR_REQ's fixed part, then the initiator's address; no data */
#define TF_RDDONE_LEN 8   /* the direct read's id */
#define TF_HELLO_MAX 256  /* the core's hello, at most */
#define TF_MAX_IO (1u << 30)  /* largest single remote write */
#define TF_CHUNK (256u << 10) /* read response data per frame, at most (more: malformed) */

/* Kinds 1..13 are the transport's own, with flags and reserved 0 (4 was
 * protocol version 2's MSG, which wrapped a whole rmx frame). A kind from
 * TF_FRAME up is an rmx frame of type kind - TF_FRAME: the flags byte is
 * the frame's flags, the reserved field its credits, the body its body, so
 * a message costs one 8-byte header, not two. */
enum {
  TF_HELLO = 1, TF_HELLO_ACK, TF_REJECT, TF_RD_REQ = 5, TF_RD_RESP, TF_WR_REQ, TF_WR_RESP,
  TF_AT_REQ, TF_AT_RESP, TF_RD_DIR, TF_WR_DIR, TF_RD_DONE, TF_FRAME = 16
};
/* TF_RD_DIR and TF_WR_DIR are a read and a write by one copy (shm's
 * process_vm_readv, pipe ops `direct` and `pull`): the request names the
 * initiator's buffer (`from`) and no data follows a write. A write's
 * target pulls the bytes from `from`, then answers (WR_RESP). A read's
 * target checks, answers (RD_RESP without data) and keeps the memory
 * until the initiator, having pulled the bytes itself, says so with
 * TF_RD_DONE (its id; reads are done in the order answered). Only a
 * connection whose pipe agreed to it carries them. */

typedef enum {
  TC_CONNECTING,  /* active: TCP connect in flight */
  TC_HELLO_SENT,  /* active: waiting for HELLO_ACK */
  TC_WAIT_HELLO,  /* passive: waiting for the peer's HELLO */
  TC_UP,          /* handshake done (passive: accepted) */
  TC_REJECTING,   /* passive: REJECT being written, then close */
  TC_FINISHING,   /* orderly end: our writes flushed, then FIN; the peer's
                     bytes dropped until it ends its side */
} tc_state_t;

/* Write a frame header. */
void rmx__tf_hdr(uint8_t *p, uint32_t blen, uint8_t kind);

/* The stream header of an rmx frame, from the frame's own header (8 bytes,
 * its body length already checked by the caller), and back: in place, the
 * stream header becomes the frame's header. */
void rmx__tf_frame_hdr(uint8_t *p, const uint8_t *frame);
void rmx__tf_frame_unhdr(uint8_t *p);

/*
 * How much of a body (blen bytes, checked by rmx__tf_check) is buffered before
 * its frame is handled: all of it, but for the payloads that stream (a
 * read response's data, a write request's data), which go from the socket
 * straight to where they belong: of those, only the part before the data.
 */
size_t rmx__tf_buffered(uint8_t kind, uint32_t blen);

/* A request's fixed part (RD_REQ, WR_REQ, AT_REQ, RD_DIR, WR_DIR); each kind has the
 * fields its body has. */
typedef struct tf_req {
  uint64_t id, addr;
  uint64_t len;          /* RD_REQ, WR_REQ (the data that follows) */
  uint64_t key;
  uint32_t flags, imm;   /* WR_REQ: bit 0 says imm is raised after the data */
  uint32_t op, pad;      /* AT_REQ: rmx_tp_atomic_t, and 0 */
  uint64_t cmp_add, swap; /* AT_REQ */
  uint64_t from;         /* RD_DIR, WR_DIR: the initiator's buffer, in its memory */
} tf_req_t;

/* A response's fixed part (RD_RESP, WR_RESP, AT_RESP). */
typedef struct tf_resp {
  uint64_t id;
  int32_t status; /* 0 or RMX_E* */
  uint64_t old;   /* AT_RESP: the value found */
} tf_resp_t;

/* Write the header and fixed part of a request at p (room for TF_HDR +
 * TF_ATREQ_LEN); a write's len bytes of data follow it on the stream.
 * Returns the bytes written. */
size_t rmx__tf_req_put(uint8_t *p, uint8_t kind, const tf_req_t *r);
/* Read the fixed part of a request's body. */
void rmx__tf_req_get(const uint8_t *b, uint8_t kind, tf_req_t *r);
/* Write the header and fixed part of a response at p, with dlen bytes of
 * read data after it on the stream. Returns the bytes written. */
size_t rmx__tf_resp_put(uint8_t *p, uint8_t kind, const tf_resp_t *r, size_t dlen);
/* Read the fixed part of a response's body. */
void rmx__tf_resp_get(const uint8_t *b, uint8_t kind, tf_resp_t *r);

/* A RD_DONE's body: the direct read's id. */
void rmx__tf_done_put(uint8_t *b, uint64_t id);
uint64_t rmx__tf_done_get(const uint8_t *b);

/* A REJECT's body. */
void rmx__tf_reject_put(uint8_t *b, int32_t status);
int32_t rmx__tf_reject_get(const uint8_t *b);

/*
 * May a frame with this header come now? hdr: its TF_HDR bytes; state: the
 * connection's; max_frame: the largest rmx frame (header included) this
 * side accepts. NULL if so, else why not (a static string for the log);
 * *kind and *blen are set either way, *kind to TF_FRAME for any rmx frame.
 */
const char *rmx__tf_check(const uint8_t *hdr, tc_state_t state, size_t max_frame, uint8_t *kind,
                          uint32_t *blen);

#endif
