/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One copy's agreement (chan.h, cma.h): once the channel is up, and only
 * when both set-up messages carried RMX_SHM_FEAT_COPY, each side sends an
 * offer on the liveness socket (the address of 32 random bytes of its
 * own), reads the peer's bytes at the peer's pid (the socket's
 * credentials, never a pid the peer names), writes them back, and sends a
 * verdict: whether that worked. One copy is used only when both verdicts
 * say yes: a side then lets its peer move bytes in and out of it only if
 * it may do the same to the peer, so a peer that could stall or spoil a
 * copy could as well stop or trace this process, and nothing is widened.
 * docs/protocol.md, "One copy"; docs/security.md.
 */
#include <string.h>
#include <sys/socket.h>

#include <rmx/rmx.h>

#include "../../src/base/bytes.h"
#include "chan.h"

/* The offer: the set-up format's head (word: the probe's length, status
 * 0), then at 16 the probe's address (u64), at 24 its bytes, zeros after. */
#define OFFER_ADDR 16
#define OFFER_BYTES 24

static void tell(rmx_shm_chan_t *ch, const char *why)
{
  ch->copy.why = why;
  if (ch->copy.told)
    return;
  ch->copy.told = 1;
  if (ch->cbs.copy)
    ch->cbs.copy(ch, why == NULL, why);
}

/* Both verdicts are in: the agreement is known. */
static void settle(rmx_shm_chan_t *ch)
{
  if (ch->copy.mine < 0 || ch->copy.theirs < 0)
    return;
  if (ch->copy.theirs == 0 && !ch->copy.why)
    ch->copy.why = "the peer cannot reach this process's memory (its log says why)";
  tell(ch, ch->copy.mine && ch->copy.theirs ? NULL : ch->copy.why);
}

/* Two messages on a socket that carries nothing else fit its buffer; one
 * that does not go means the peer is gone, which the socket's end reports. */
static void send_msg(rmx_shm_chan_t *ch, const uint8_t *m)
{
  (void)rmx__shm_fds_send(ch->sock, m, RMX_SHM_MSG, NULL, 0);
}

void rmx__shm_copy_up(rmx_shm_chan_t *ch)
{
  uint8_t m[RMX_SHM_MSG];
  struct ucred cr;
  socklen_t len = sizeof(cr);
  ch->copy.mine = ch->copy.theirs = -1;
  if (!ch->copy.offered) {
    tell(ch, ch->cfg.copy ? "the peer offers no one copy (an older build, or its RMX_SHM_COPY=0)"
                          : "one copy is off here (RMX_SHM_COPY=0)");
    return;
  }
  ch->copy.pid = getsockopt(ch->sock, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 ? cr.pid : 0;
  /* Without random bytes the offer has no probe: the peer then says no. */
  int have = rmx__shm_cma_probe_init(&ch->copy.probe) == 0;
  rmx__shm_msg_put(m, RMX_SHM_OFFER_MAGIC, have ? RMX_SHM_CMA_PROBE_LEN : 0, 0, NULL);
  if (have) {
    rmx_put64(m + OFFER_ADDR, rmx__shm_cma_probe_addr(&ch->copy.probe));
    memcpy(m + OFFER_BYTES, ch->copy.probe.bytes, RMX_SHM_CMA_PROBE_LEN);
  }
  send_msg(ch, m);
}

/* The peer's offer: probe it, say what we found. */
static const char *offer_in(rmx_shm_chan_t *ch, const uint8_t *m)
{
  uint8_t head[RMX_SHM_MSG], v[RMX_SHM_MSG];
  uint32_t plen;
  int32_t st;
  if (ch->copy.mine >= 0)
    return "the peer offered one copy twice";
  memcpy(head, m, RMX_SHM_MSG); /* the probe's fields checked apart */
  memset(head + OFFER_ADDR, 0, OFFER_BYTES + RMX_SHM_CMA_PROBE_LEN - OFFER_ADDR);
  const char *bad = rmx__shm_msg_check(head, RMX_SHM_MSG, RMX_SHM_OFFER_MAGIC, &plen, &st, NULL);
  if (bad)
    return bad;
  if (st != 0 || (plen != 0 && plen != RMX_SHM_CMA_PROBE_LEN))
    return "the peer's offer of one copy is malformed";
  const char *why = NULL;
  if (plen == 0)
    why = "the peer made no probe";
  else if (ch->copy.pid <= 0)
    why = "the peer's pid is not visible here (another pid namespace)";
  else
    rmx__shm_cma_probe(ch->copy.pid, rmx_get64(m + OFFER_ADDR), plen, m + OFFER_BYTES, &why);
  ch->copy.mine = why == NULL;
  ch->copy.why = why;
  rmx__shm_msg_put(v, RMX_SHM_VERDICT_MAGIC, (uint32_t)ch->copy.mine, 0, NULL);
  send_msg(ch, v);
  return NULL;
}

static const char *verdict_in(rmx_shm_chan_t *ch, const uint8_t *m)
{
  uint32_t yes;
  int32_t st;
  if (ch->copy.theirs >= 0)
    return "the peer sent its verdict on one copy twice";
  const char *bad = rmx__shm_msg_check(m, RMX_SHM_MSG, RMX_SHM_VERDICT_MAGIC, &yes, &st, NULL);
  if (bad)
    return bad;
  if (st != 0 || yes > 1)
    return "the peer's verdict on one copy is malformed";
  ch->copy.theirs = (int8_t)yes;
  return NULL;
}

const char *rmx__shm_copy_in(rmx_shm_chan_t *ch, const uint8_t *m, ssize_t k, int *taken)
{
  *taken = 0;
  if (k != RMX_SHM_MSG)
    return NULL;
  uint32_t magic = rmx_get32(m);
  if (magic != RMX_SHM_OFFER_MAGIC && magic != RMX_SHM_VERDICT_MAGIC)
    return NULL;
  *taken = 1;
  const char *why = !ch->copy.offered ? "the peer sent one copy's messages it never offered"
                    : magic == RMX_SHM_OFFER_MAGIC ? offer_in(ch, m)
                                                   : verdict_in(ch, m);
  if (!why)
    settle(ch);
  return why;
}

int rmx__shm_copy_agreed(const rmx_shm_chan_t *ch)
{
  return ch->copy.offered && ch->copy.mine == 1 && ch->copy.theirs == 1;
}
