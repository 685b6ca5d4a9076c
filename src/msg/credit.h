/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Credit flow control as pure bookkeeping (docs/protocol.md, flow control),
 * inline: it runs for every frame sent and received.
 *
 * A credit is one free receive buffer at the peer. Every frame but BYE
 * spends one. User messages and FINs leave the last credit alone; only a
 * CREDIT frame may spend it, so two peers that each owe the other credits
 * can always get one frame through and neither waits forever. Credits come
 * back in the header of every frame, or in a CREDIT frame once half of the
 * receive window is owed for data.
 */
#ifndef RMX_MSG_CREDIT_H
#define RMX_MSG_CREDIT_H

#include <stdint.h>

#include "wire.h"

/* A credit is one free receive buffer at the peer (docs/protocol.md). */
typedef struct rmx__credit {
  uint32_t credits;       /* frames we may still send */
  uint32_t owed;          /* our receive buffers freed, not yet returned */
  uint32_t owed_data;     /* of those, freed by non-CREDIT frames */
  uint32_t peer_depth;    /* the peer's receive buffers */
  uint32_t rx_unreturned; /* frames received whose credit is not yet returned */
} rmx__credit_t;

/* What a frame to send needs: BYE none, CREDIT one (it may use the last),
 * everything else two (the last stays for CREDIT). */
static inline uint32_t rmx__credit_need(int ctrl_type)
{
  return ctrl_type == RMX_FR_BYE ? 0 : ctrl_type == RMX_FR_CREDIT ? 1 : 2;
}

/* May a CREDIT frame (a credit return or a keepalive) go now? It takes the
 * last credit only when it returns some: two sides each spending their
 * last on a frame that returns nothing (crossing keepalives) would both be
 * left with none, each waiting for the other. */
static inline int rmx__credit_frame_ok(const rmx__credit_t *k)
{
  return k->credits >= 2 || (k->credits == 1 && k->owed > 0);
}

/* Take what is owed for an outgoing header; untake when it was not sent. */
static inline uint16_t rmx__credit_take(rmx__credit_t *k)
{
  uint32_t n = k->owed > UINT16_MAX ? UINT16_MAX : k->owed;
  k->owed -= n;
  k->owed_data = k->owed_data > k->owed ? k->owed : k->owed_data;
  k->rx_unreturned -= n;
  return (uint16_t)n;
}

static inline void rmx__credit_untake(rmx__credit_t *k, uint16_t n)
{
  k->owed += n;
  k->rx_unreturned += n;
}

/* The peer returned n in a header: 0, or -1 when that is more than it was
 * ever given (nothing changes then). */
static inline int rmx__credit_returned(rmx__credit_t *k, uint16_t n)
{
  if ((uint64_t)k->credits + n > k->peer_depth)
    return -1;
  k->credits += n;
  return 0;
}

/* The peer used one of our depth receive buffers with a frame (credit_frame:
 * a CREDIT frame). 0, or why it had no right to: RMX__CREDIT_OVER (beyond
 * its credits), RMX__CREDIT_LAST (the last credit, not for a CREDIT). */
enum { RMX__CREDIT_OVER = 1, RMX__CREDIT_LAST = 2 };
static inline int rmx__credit_rx(rmx__credit_t *k, uint32_t depth, int credit_frame)
{
  if (++k->rx_unreturned <= depth - (credit_frame ? 0 : 1))
    return 0;
  return k->rx_unreturned > depth ? RMX__CREDIT_OVER : RMX__CREDIT_LAST;
}

/* One of our receive buffers is free again; by_credit: it held a CREDIT
 * frame (returned, but never a reason to send a CREDIT frame back). */
static inline void rmx__credit_freed(rmx__credit_t *k, int by_credit)
{
  k->owed++;
  if (!by_credit)
    k->owed_data++;
}

/* Half the receive window is owed for data: time for a CREDIT frame. */
static inline int rmx__credit_want_frame(const rmx__credit_t *k, uint32_t depth)
{
  return k->owed_data >= depth / 2;
}

#endif
