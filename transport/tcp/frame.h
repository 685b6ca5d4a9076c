/*
 * The TCP transport's stream framing (docs/protocol.md, "TCP stream
 * framing"): frame kinds, body layouts, the connection states that allow
 * each kind, and the checks a frame header must pass before its body is
 * looked at. Pure code with no I/O, so it can be tested and fuzzed alone.
 */
#ifndef RMX_TCP_FRAME_H
#define RMX_TCP_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define TF_HDR 8          /* u32 body length, u8 kind, u8 flags (0), u16 reserved (0) */
#define TF_RDREQ_LEN 32   /* id, addr, len, key */
#define TF_RESP_SUB 12    /* id, status: read and write responses */
#define TF_WRREQ_SUB 40   /* id, addr, len, key, flags, imm */
#define TF_ATREQ_LEN 48   /* id, addr, key, op, pad, compare/add, swap */
#define TF_ATRESP_LEN 24  /* id, status, pad, old value */
#define TF_HELLO_MAX 256  /* the core's hello, at most */
#define TF_MAX_IO (1u << 30)  /* largest single remote write */
#define TF_CHUNK (256u << 10) /* read response data per frame */

enum {
  TF_HELLO = 1, TF_HELLO_ACK, TF_REJECT, TF_MSG, TF_RD_REQ, TF_RD_RESP, TF_WR_REQ, TF_WR_RESP,
  TF_AT_REQ, TF_AT_RESP
};

typedef enum {
  TC_CONNECTING,  /* active: TCP connect in flight */
  TC_HELLO_SENT,  /* active: waiting for HELLO_ACK */
  TC_WAIT_HELLO,  /* passive: waiting for the peer's HELLO */
  TC_UP,          /* handshake done (passive: accepted) */
  TC_REJECTING,   /* passive: REJECT being written, then close */
} tc_state_t;

/* Write a frame header. */
void tf_hdr(uint8_t *p, uint32_t blen, uint8_t kind);

/*
 * May a frame with this header come now? hdr: its TF_HDR bytes; state: the
 * connection's; max_frame: the largest MSG body this side accepts. NULL if
 * so, else why not (a static string for the log); *kind and *blen are set
 * either way.
 */
const char *tf_check(const uint8_t *hdr, tc_state_t state, size_t max_frame, uint8_t *kind,
                     uint32_t *blen);

#endif
