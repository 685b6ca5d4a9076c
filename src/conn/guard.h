/* SPDX-License-Identifier: BSD-3-Clause */
/* The guard (src/conn/guard.c): strikes and bans per peer IP address. */
#ifndef RMX_CONN_GUARD_H
#define RMX_CONN_GUARD_H

#include <stdint.h>
#include <sys/socket.h>

#include "../base/log.h"

#define RMX__GUARD_SLOTS 256
typedef struct rmx__guard_slot {
  uint8_t key[16];        /* the address: 4 (IPv4) or 16 (IPv6) bytes */
  uint8_t len;            /* 0: a free slot */
  uint32_t strikes;       /* in the window that began at win_start */
  uint64_t win_start;     /* loop time, ms */
  uint64_t last;          /* the latest strike: the least recent makes room */
  uint64_t banned_until;  /* new connections refused until then */
} rmx__guard_slot_t;
typedef struct rmx__guard {
  rmx__guard_slot_t slot[RMX__GUARD_SLOTS];
  rmx__ratelimit_t rl; /* every line the guard logs */
} rmx__guard_t;

struct rmx_ctx;
/* A remote access from sa was refused: one strike; enough of them within
 * the window ban the address. */
void rmx__guard_strike(struct rmx_ctx *ctx, const struct sockaddr *sa);
/* How many ms more sa's new connections are refused; 0: not banned. */
uint64_t rmx__guard_banned(struct rmx_ctx *ctx, const struct sockaddr *sa);

#endif
