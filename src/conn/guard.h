/* SPDX-License-Identifier: BSD-3-Clause */
/* The guard (src/conn/guard.c): strikes and bans per peer IP address,
 * and what a connection's refused keys were. */
#ifndef RMX_CONN_GUARD_H
#define RMX_CONN_GUARD_H

#include <stdint.h>
#include <stdlib.h>
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
#define RMX__GUARD_STALE 256 /* withdrawn keys remembered per connection, and capabilities */
#define RMX__GUARD_RECENT 4  /* refused keys that struck, remembered per connection */
typedef struct rmx__guard {
  rmx__guard_slot_t slot[RMX__GUARD_SLOTS];
  rmx__ratelimit_t rl; /* every line the guard logs */
  uint64_t caps[RMX__GUARD_STALE]; /* capability keys deregistered, the latest last */
  uint32_t ncaps;                  /* ever recorded: the next goes at ncaps % RMX__GUARD_STALE */
} rmx__guard_t;
/* One connection's part: keys its peer held that were withdrawn since
 * (stale: refused, never a strike), and keys refused lately (struck once). */
typedef struct rmx__guard_conn {
  uint64_t *stale;  /* RMX__GUARD_STALE of them, allocated at the first; or NULL */
  uint32_t nstale;  /* ever recorded: the next goes at nstale % RMX__GUARD_STALE */
  uint32_t nrecent; /* ever recorded, likewise */
  uint64_t recent[RMX__GUARD_RECENT];
} rmx__guard_conn_t;

struct rmx_ctx;
/* A remote access from sa was refused: one strike; enough of them within
 * the window ban the address. */
void rmx__guard_strike(struct rmx_ctx *ctx, const struct sockaddr *sa);
/* How many ms more sa's new connections are refused; 0: not banned. */
uint64_t rmx__guard_banned(struct rmx_ctx *ctx, const struct sockaddr *sa);

/* Put key in a ring of cap keys of which *n were ever put there; *n wraps
 * back to cap once past 2 * cap, so it says how many are filled. Inline
 * here: the layers below (src/mem, src/rt) record and free these. */
static inline void rmx__guard_ring_put(uint64_t *ring, uint32_t *n, uint32_t cap, uint64_t key)
{
  ring[*n % cap] = key;
  if (++*n == 2 * cap)
    *n = cap;
}

/* The transport key a connection's peer held is withdrawn (revoked,
 * deregistered, ended with its transport connection): stale on that
 * connection (g, its guard) from now on. */
static inline void rmx__guard_withdrawn(rmx__guard_conn_t *g, uint64_t key)
{
  if (!g->stale && !(g->stale = malloc(RMX__GUARD_STALE * sizeof(*g->stale))))
    return; /* a use of it will strike: the table of addresses still bounds that */
  rmx__guard_ring_put(g->stale, &g->nstale, RMX__GUARD_STALE, key);
}

/* A capability key (rmx_mem_pack) is deregistered: stale on every
 * connection of the context whose guard is g. */
static inline void rmx__guard_cap_gone(rmx__guard_t *g, uint64_t key)
{
  rmx__guard_ring_put(g->caps, &g->ncaps, RMX__GUARD_STALE, key);
}

static inline void rmx__guard_conn_free(rmx__guard_conn_t *g)
{
  free(g->stale);
  g->stale = NULL;
}

#endif
