/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-fault-peer: a server and a client that count every callback, for
 * tests that kill, power off or cut the peer mid-transfer (issue 10).
 * Public API only: what it checks is the contract rmx.h promises.
 */
#ifndef RMX_FAULT_PEER_H
#define RMX_FAULT_PEER_H

#include <stddef.h>
#include <stdint.h>

#include <rmx/rmx.h>

/* Application protocol between the two roles (nothing of rmx's own). */
#define FP_KEY_MSG 'K'    /* server -> client on accept: 'K' + packed key */
#define FP_RPC_ECHO 1     /* reply with the request's bytes */
#define FP_RPC_VERIFY 2   /* fp_verify_req_t -> fp_verify_rep_t */
#define FP_SLOTS 16       /* the write region: FP_SLOTS slots of FP_SLOT bytes */
#define FP_SLOT (1u << 20)
#define FP_REGION ((size_t)FP_SLOTS * FP_SLOT)
#define FP_BIG ((size_t)64 << 20) /* the 64 MiB message */
#define FP_NO_SEED 0xffffffffu    /* a slot never written */

/* A message carries its own seed and length; the rest is fp_fill(seed). */
typedef struct fp_msg_hdr {
  uint32_t seed;
  uint32_t len;
} fp_msg_hdr_t;

typedef struct fp_verify_req {
  uint32_t nseeds;          /* 0, or FP_SLOTS: check the region too */
  uint32_t seeds[FP_SLOTS]; /* what the last completed write put in each slot */
} fp_verify_req_t;

typedef struct fp_verify_rep {
  uint64_t msgs;      /* messages this connection delivered */
  uint64_t bad_msgs;  /* of which did not match their seed */
  uint64_t bad_slots; /* region slots that did not match */
} fp_verify_rep_t;

/* Fill or check bytes [off, off+len) of the stream a seed names. Any
 * offset works, so a region slot and a message share the generator. */
void fp_fill(uint8_t *p, size_t len, uint32_t seed, size_t off);
int fp_check(const uint8_t *p, size_t len, uint32_t seed, size_t off);

/* A message of len bytes (at least sizeof(fp_msg_hdr_t)): its header, then
 * fp_fill(seed); and whether one received is such a message, whole. */
void fp_msg_fill(uint8_t *p, size_t len, uint32_t seed);
int fp_msg_ok(const void *data, size_t len);

double fp_now_ms(void);
/* Write @p text to @p path atomically (a temporary name, then rename), so
 * a reader polling over 9p never sees half a file. */
int fp_write_file(const char *path, const char *text);

int fp_server_main(const char *uri, const char *ready_file);

typedef struct fp_client_opts {
  const char *uri;
  const char *workload;   /* msgs | rpc | write | idle */
  long ops;               /* operations to run, then verify and close; 0: until a fault */
  const char *loaded_file;/* created once the workload is in full swing */
  const char *fault_file; /* appears when the fault is injected (polled) */
  long deadline_ms;       /* give up waiting for the end after this */
  long after_fault_ms;    /* ... or after this once the fault is noticed (0: no limit) */
} fp_client_opts_t;

int fp_client_main(const fp_client_opts_t *o);
/* The reconnecting client (fault_reconnect.c): workload is ignored; ops
 * counts the calls that must succeed after the reconnect. */
int fp_reconnect_main(const fp_client_opts_t *o);

#endif
