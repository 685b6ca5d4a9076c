/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A raw rmx peer over TCP, written from docs/protocol.md alone: the byte
 * order, the TCP stream framing, the hello, the rmx frame header, read
 * requests, the packed key's TCP entry and its checksum, and blocking socket
 * helpers. Not src/wire.c nor transport/tcp: an independent client that the
 * hostile-peer and authentication suites share. No cmocka here: these run
 * on helper threads too.
 */
#ifndef RMX_TEST_RAWPEER_H
#define RMX_TEST_RAWPEER_H

#include <stddef.h>
#include <stdint.h>

#include "test_util.h" /* now_ms */

#define MAGIC 0x31584d52u /* "RMX1" */
#ifdef HOSTILE_OLD_PROTOCOL
#define VERSION 1 /* before keepalive */
#else
#define VERSION 4
#endif
#define HELLO_LEN 32
#define CHUNK_MAX (256u << 10) /* RD_RESP data per frame */

/* Peer authentication: a nonce after the hello, a server's proof after that. */
#define NONCE_LEN 16
#define PROOF_LEN 32
#define C_HELLO_LEN (HELLO_LEN + NONCE_LEN)   /* 48 */
#define S_HELLO_LEN (C_HELLO_LEN + PROOF_LEN) /* 80 */

/* TCP stream framing: u32 body length, u8 kind, u8 flags, u16 reserved.
 * Kinds from K_FRAME up: an rmx frame of type kind - K_FRAME, its flags in
 * the flags byte, its credits in the reserved field. */
enum { K_HELLO = 1, K_HELLO_ACK, K_REJECT, K_OLD_MSG, K_RD_REQ, K_RD_RESP, K_WR_REQ, K_WR_RESP,
       K_AT_REQ, K_AT_RESP, K_FRAME = 16 };
/* rmx frames: u8 type, u8 flags, u16 credits, u32 body length. */
enum { F_DATA = 1, F_RTS, F_FIN, F_CREDIT, F_BYE, F_AUTH, F_AUTH_OK };

/* Little-endian stores and loads. */
void p16(uint8_t *p, uint16_t v);
void p32(uint8_t *p, uint32_t v);
void p64(uint8_t *p, uint64_t v);
uint16_t g16(const uint8_t *p);
uint32_t g32(const uint8_t *p);
uint64_t g64(const uint8_t *p);

typedef struct hello {
  uint32_t magic;
  uint16_t version, flags;
  uint32_t eager, depth;
  uint64_t max_msg;
  uint32_t silence, window; /* silence: our keepalive limit (ms), 0 none */
} hello_t;

/* Eager 8192, depth 64, 64 MiB, rendezvous 4, window 64, no flags. */
hello_t hello_default(void);
/* The 32 bytes of a hello. Built with -DHOSTILE_OLD_PROTOCOL, the window's
 * word is written as zero (it was reserved in commit 3149805). */
void hello_enc(uint8_t *o, const hello_t *h);
void hello_dec(const uint8_t *b, hello_t *h);

/* A stream frame header with flags and reserved bits; 8. */
size_t tfx(uint8_t *o, uint8_t kind, uint8_t flags, uint16_t res, uint32_t blen);
/* A plain stream frame header; 8. */
size_t tf(uint8_t *o, uint8_t kind, uint32_t blen);
/* A stream frame header and its body; 8 + blen. */
size_t tframe(uint8_t *o, uint8_t kind, const void *body, uint32_t blen);
/* A HELLO frame with these frame flags and reserved bits; 8 + HELLO_LEN. */
size_t hello_frame(uint8_t *o, const hello_t *h, uint8_t flags, uint16_t res);
/* One rmx frame in its stream frame; 8 + blen. */
size_t msg_frame(uint8_t *o, uint8_t type, uint8_t flags, uint16_t credits, const void *body,
                 uint32_t blen);
/* An RD_REQ frame; 40. */
size_t rd_req_enc(uint8_t *o, uint64_t id, uint64_t addr, uint64_t len, uint64_t key);

/* An RD_RESP or WR_RESP header of blen body bytes: id, then status; 20. */
size_t resp_hdr(uint8_t *o, uint8_t kind, uint32_t blen, uint64_t id, int32_t status);

/* CRC-32C (Castagnoli), reflected, as iSCSI: the packed key's checksum. */
uint32_t crc32c(const uint8_t *p, size_t n);
/* Recompute a packed key's checksum after an edit. */
void rkey_fix_sum(uint8_t *b, size_t len);

/* The TCP entry of a packed key: region address, length, transport key. */
typedef struct tkey {
  uint64_t addr, len, key;
} tkey_t;

/* Decode a packed key's TCP entry; 0, or -1 if it has none or is malformed. */
int rkey_tcp(const uint8_t *b, size_t len, tkey_t *k);

/* ---- blocking sockets, for helper threads ---- */

void set_rcvtimeo(int fd, unsigned ms);
/* A TCP socket with TCP_NODELAY and 10 s send and receive time-outs. */
int tcp_socket(void);
/* Such a socket connected to 127.0.0.1:port, or -1. */
int raw_dial(int port);
/* 0, or -1 if the peer is gone or the write failed. */
int wr_all(int fd, const void *b, size_t n);
/* 0, or -1 at EOF, error or time-out. */
int rd_all(int fd, void *b, size_t n);
/* One stream frame of at most cap body bytes: 0, or -1. An rmx frame
 * comes back as kind K_FRAME, the body the whole frame: its 8-byte header
 * rebuilt (type, flags, credits, body length), then its body. */
int rd_tframe(int fd, uint8_t *kind, uint8_t *body, uint32_t *blen, size_t cap);
/* 1 when the other side closes within ms with no byte more, 0 if a byte
 * came, -1 if it stayed open. */
int wait_eof(int fd, unsigned ms);
/* Read and drop until the other side closes (1), or ms pass (-1). */
int drain_eof(int fd, unsigned ms);
/* Is the other end of fd gone? (EOF or reset, without blocking) */
int hung_up(int fd);

#endif
