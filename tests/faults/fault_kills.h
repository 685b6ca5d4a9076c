/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The kills test (fault_kills.c) and its victims (fault_victim.c): a
 * server that starts transfers toward client processes it then kills,
 * stops or lets go. What the two roles share; tests/faults/README.md.
 */
#ifndef RMX_FAULT_KILLS_H
#define RMX_FAULT_KILLS_H

#include "fault_peer.h"

/* The victim's region: a read area (FK_RSEED's bytes, never written), then
 * a write area the server writes with FK_WSEED's bytes at the same offsets
 * (so any write of any range leaves what a check expects). */
#define FK_AREA ((size_t)4 << 20)
#define FK_REGION (2 * FK_AREA)
#define FK_RSEED 0x52454144u
#define FK_WSEED 0x57524954u
#define FK_SLOT ((size_t)256 << 10) /* most bytes one operation moves */
#define FK_WINDOW 16                /* most operations in flight */
#define FK_RANGES 256               /* most write ranges one verify checks */
#define FK_RPC_VERIFY 3             /* fk_verify_req_t -> fk_verify_rep_t */

/* The victim's first message: FP_KEY_MSG, its pid (u32), its packed key
 * (made for that connection alone). The pid tells the server which of its
 * children a connection is. */
#define FK_KEY_HDR 5

typedef struct fk_range {
  uint32_t off, len; /* in the write area */
} fk_range_t;

typedef struct fk_verify_req {
  uint32_t n;
  fk_range_t r[FK_RANGES];
} fk_verify_req_t;

typedef struct fk_verify_rep {
  uint64_t msgs, bad_msgs;   /* messages delivered, of which wrong */
  uint64_t notes, bad_notes; /* transfer notifications, of which wrong */
  uint64_t bad_ranges;       /* listed ranges that do not hold FK_WSEED's bytes */
} fk_verify_rep_t;

typedef struct fk_opts {
  const char *uri;
  long transfers; /* started toward clients that are then killed */
  long stops;     /* clients stopped past the keepalive limit */
  uint64_t seed;
  int seeded;
} fk_opts_t;

int fp_kills_main(const fk_opts_t *o);
int fp_victim_main(const char *uri);

#endif
