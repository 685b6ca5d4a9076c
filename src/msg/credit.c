/*
 * Credit flow control as pure bookkeeping (docs/protocol.md, flow control).
 *
 * A credit is one free receive buffer at the peer. Every frame but BYE
 * spends one. User messages and FINs leave the last credit alone; only a
 * CREDIT frame may spend it, so two peers that each owe the other credits
 * can always get one frame through and neither waits forever. Credits come
 * back in the header of every frame, or in a CREDIT frame once half of the
 * receive window is owed for data.
 */
#include "rmx_int.h"

uint32_t rmx__credit_need(int ctrl_type)
{
  return ctrl_type == RMX_FR_BYE ? 0 : ctrl_type == RMX_FR_CREDIT ? 1 : 2;
}

int rmx__credit_frame_ok(const rmx__credit_t *k)
{
  return k->credits >= 2 || (k->credits == 1 && k->owed > 0);
}

uint16_t rmx__credit_take(rmx__credit_t *k)
{
  uint32_t n = k->owed > UINT16_MAX ? UINT16_MAX : k->owed;
  k->owed -= n;
  k->owed_data = k->owed_data > k->owed ? k->owed : k->owed_data;
  k->rx_unreturned -= n;
  return (uint16_t)n;
}

void rmx__credit_untake(rmx__credit_t *k, uint16_t n)
{
  k->owed += n;
  k->rx_unreturned += n;
}

int rmx__credit_returned(rmx__credit_t *k, uint16_t n)
{
  if ((uint64_t)k->credits + n > k->peer_depth)
    return -1;
  k->credits += n;
  return 0;
}

int rmx__credit_rx(rmx__credit_t *k, uint32_t depth, int credit_frame)
{
  if (++k->rx_unreturned <= depth - (credit_frame ? 0 : 1))
    return 0;
  return k->rx_unreturned > depth ? RMX__CREDIT_OVER : RMX__CREDIT_LAST;
}

void rmx__credit_freed(rmx__credit_t *k, int by_credit)
{
  k->owed++;
  if (!by_credit)
    k->owed_data++;
}

int rmx__credit_want_frame(const rmx__credit_t *k, uint32_t depth)
{
  return k->owed_data >= depth / 2;
}
