/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The soak test (tests/soak): one program in three roles.
 *
 *   rmx-soak [tcp|rdma]                     the driver (soak_driver.c)
 *   rmx-soak server URI NCLIENTS            echo, RPC and memory server (soak_server.c)
 *   rmx-soak client SEED IDX URI...         traffic and bookkeeping (soak_client*.c)
 *
 * The driver fork+execs itself in the other two roles, kills and restarts
 * them at random, and checks what the clients and servers report on their
 * stdout. What goes over the wire, and the pattern every payload carries,
 * are defined here so that both ends can check each other.
 */
#ifndef RMX_TEST_SOAK_H
#define RMX_TEST_SOAK_H

#include <stddef.h>
#include <stdint.h>

#include <rmx/rmx.h>

/* RPC ids the server serves. */
#define SOAK_RPC_XFORM 1 /* answer with the request, every byte ^ SOAK_XOR */
#define SOAK_RPC_KEY 2   /* answer with soak_key_t and the packed key */
#define SOAK_XOR 0x5c

/* The server's region per connection: SOAK_LANES lanes the client writes
 * and reads back (one per operation slot, so concurrent operations never
 * overlap), then one lane the server filled and nobody writes. */
#define SOAK_SLOTS 4
#define SOAK_LANES SOAK_SLOTS
#define SOAK_LANE (1u << 20)
#define SOAK_REGION ((size_t)(SOAK_LANES + 1) * SOAK_LANE)

/* Messages and RPC requests go up to this size; rendezvous starts at the
 * eager size (8 KiB by default). */
#define SOAK_MAX_MSG ((size_t)3 << 20)

/* Payloads of this size and more start with a header naming the operation;
 * the rest is the pattern of that id. Shorter ones are the pattern of their
 * length alone, so that a receiver can check any payload by itself. */
#define SOAK_HDR 16

typedef struct soak_key {
  uint64_t seed;  /* the read-only lane holds soak_pattern(seed, offset) */
  uint32_t lane;  /* SOAK_LANE */
  uint32_t lanes; /* writable lanes; the read-only one follows them */
} soak_key_t;

/* ---- soak_common.c ---- */

uint64_t soak_mix(uint64_t x);
/* A small xorshift generator; each role seeds its own. */
uint64_t soak_rand(uint64_t *state);
/* Uniform in [lo, hi]. */
uint64_t soak_range(uint64_t *state, uint64_t lo, uint64_t hi);

/* Byte @off of the pattern @seed is a function of both alone, so any
 * sub-range can be produced or checked where it lies. */
void soak_pattern(void *buf, size_t n, uint64_t seed, uint64_t off);
/* Bytes of buf that differ from the pattern. */
size_t soak_pattern_check(const void *buf, size_t n, uint64_t seed, uint64_t off);

/* A payload of n bytes for operation id: header (when n >= SOAK_HDR) and
 * pattern. soak_payload_check returns the bytes that are wrong; with id 0
 * it takes the id from the header (a server does not know it). */
void soak_payload(void *buf, size_t n, uint64_t id);
size_t soak_payload_check(const void *buf, size_t n, uint64_t id);
/* The id in a payload's header; 0 for a payload too short to have one. */
uint64_t soak_payload_id(const void *buf, size_t n);

/* Resource use of this process: open descriptors and resident bytes. */
int soak_fds(void);
/* Heap bytes in use outside rmx's buffer pool: the pool keeps what it grew
 * to (its peak of buffers in use) for reuse, which is not a leak. */
size_t soak_rss(rmx_ctx_t *ctx);

/* 1 when built with AddressSanitizer (RSS means little there). */
int soak_sanitized(void);

/* Milliseconds of a monotonic clock. */
uint64_t soak_now_ms(void);

/* ---- roles ---- */
int soak_server_main(int argc, char **argv);
int soak_client_main(int argc, char **argv);
int soak_driver_main(int argc, char **argv);

/* ---- the driver's verdict (soak_check.c), from what it kept (soak_driver.c) ---- */
int soak_check(void);
const char *soak_report_of(int client, int idx); /* "" when none came */
typedef struct soak_counts {
  int nservers, nclients, failed;
  unsigned long kills, stops, client_kills;
  unsigned long server_corrupt, server_resent; /* as the servers said them */
} soak_counts_t;
void soak_counts(soak_counts_t *out);

#endif
