/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The key-forging attack test (tests/security): one program in four roles.
 *
 *   rmx-key-forge tcp|rdma                   the driver (key_forge.c)
 *   rmx-key-forge --server URI               registers memory, packs keys, streams
 *                                            16 MiB messages to the victim
 *   rmx-key-forge --victim URI               a client the attacker must not reach
 *   rmx-key-forge --attacker URI SCHEME      forges keys (key_forge_attacker.c)
 *   rmx-key-forge --server-on HOST:PORT URI [READY_FILE]
 *                                            the server role for a driver on
 *                                            another host (key_forge.c)
 *
 * Everything here uses the public API only; the packed key's layout comes
 * from docs/protocol.md ("Remote keys") and is checked against what the
 * library packs before any attack runs.
 *
 * The roles talk to each other over rmx (the RPCs below) and to the driver
 * over pipes (a TCP socket for a server on another host): each prints
 * control lines on its stdout ("word args..."), and the server and victim
 * end when their stdin reaches EOF.
 */
#ifndef RMX_TEST_KEY_FORGE_H
#define RMX_TEST_KEY_FORGE_H

#include <stddef.h>
#include <stdint.h>

#include <rmx/rmx.h>

/* RPCs the server serves. */
#define KF_RPC_REGISTER 1 /* request: "victim" or "attacker"; reply: the packed key of a
                             new KF_REGION registration filled with that client's tag */
#define KF_RPC_PROBE 2    /* reply: the packed key of a fresh KF_PROBE registration,
                             released before the reply goes (what any client may learn
                             from keys it is given, as often as it likes) */
#define KF_RPC_STREAM 3   /* the caller gets KF_MSG messages, KF_STREAM_DEPTH at a time,
                             from one buffer holding the victim's tag, until it goes */
#define KF_RPC_PING 4     /* empty reply: the connection still carries traffic */
#define KF_RPC_STATS 5    /* reply: kf_stats_t (the test's bookkeeping, not the attack's) */

#define KF_REGION ((size_t)1 << 20)
#define KF_PROBE ((size_t)4096)
#define KF_MSG ((size_t)16 << 20)
#define KF_STREAM_DEPTH 4

/* Every 8-byte word of a role's memory holds its tag in the top 48 bits
 * and the word's index in the low 16: a victim's byte read by anyone else
 * is recognized wherever it lands. The attacker's buffers start zeroed. */
#define KF_TAG_MASK 0xffffffffffff0000ull
#define KF_TAG_VICTIM 0x56494354494d0000ull   /* "VICTIM": its registration and messages */
#define KF_TAG_ATTACKER 0x41545441434b0000ull /* "ATTACK": the attacker's registration */
#define KF_TAG_PROBE 0x50524f4245210000ull    /* "PROBE!": probe registrations */

typedef struct kf_stats {
  uint64_t sent;     /* messages to the victim whose send completed */
  uint64_t inflight; /* sends to the victim outstanding now */
} kf_stats_t;

/* A packed remote key's fields (docs/protocol.md, "Remote keys"), for the
 * entry of one transport. */
typedef struct kf_key {
  uint16_t rights; /* RMX_MEM_* */
  uint64_t addr;   /* the region's address at its owner */
  uint64_t len;
  uint8_t tp;      /* 1 tcp, 2 rdma */
  uint64_t key;    /* the transport's key */
} kf_key_t;

#define KF_WIRE_TCP 1
#define KF_WIRE_RDMA 2

/* ---- key_forge_common.c ---- */

/* Decode blob's entry for transport tp. 0, or a negative value naming
 * what is wrong (-1 length or version, -2 checksum, -3 no entry for tp). */
int kf_key_decode(const uint8_t *blob, size_t len, uint8_t tp, kf_key_t *k);
/* A one-transport blob for k, checksum and all; returns its length. */
size_t kf_key_encode(const kf_key_t *k, uint8_t *blob);
void kf_hex(const uint8_t *p, size_t n, char *out);   /* out: 2n + 1 bytes */
size_t kf_unhex(const char *s, uint8_t *out, size_t max); /* 0 on bad input */

void kf_fill(void *buf, size_t n, uint64_t tag);
/* Bytes of buf (n a multiple of 8, buf 8-aligned) in words carrying tag. */
size_t kf_count(const void *buf, size_t n, uint64_t tag);

uint64_t kf_env_u64(const char *name, uint64_t def);
uint64_t kf_now_ms(void);
/* A page-aligned, zeroed mapping of n bytes (exits on failure). */
void *kf_map(size_t n);
void kf_unmap(void *p, size_t n);
rmx_ctx_t *kf_ctx(void);
/* Run the context's loop until *flag is nonzero. */
void kf_run_until(rmx_ctx_t *ctx, const int *flag);

/* stdin, watched from the context's loop: lines and EOF. */
typedef void (*kf_line_fn)(const char *line);
void kf_stdin_watch(rmx_ctx_t *ctx, kf_line_fn on_line, int *eof);
void kf_stdin_stop(void);
/* A control line to the driver (stdout, flushed). */
void kf_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

int kf_server_main(const char *uri);
int kf_victim_main(const char *uri);
int kf_attacker_main(const char *uri, const char *scheme);

#endif
