/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Completions: arming the completion channel, draining the CQ, and
 * dispatching each completion to its receive buffer or send slot.
 *
 * Progress, event mode: uv_poll on the completion channel; on wake, take
 * the CQ event (one read; acked in batches), re-arm, then drain the CQ. A
 * completion that lands after the re-arm raises a new event, one before it
 * is drained now: none is lost. Poll mode: the CQ is drained from an idle
 * handle every loop iteration (verbs.c). Adaptive mode: after a wake, and
 * after every post, the CQ is polled from the idle handle instead, the
 * channel left unarmed, until nothing has been found for spin_us; then it
 * is armed and the CQ drained once more, so nothing that landed in between
 * waits for an event that will not come.
 */
#include <arpa/inet.h>
#include <string.h>

#include "verbs.h"

/* ---- the device's CQs ---- */

static vb_cq_t *cq_of(vb_dev_t *dev, const struct ibv_cq *cq)
{
  for (int i = 0; i < dev->ncq; i++)
    if (dev->cqs[i].cq == cq)
      return &dev->cqs[i];
  return NULL;
}

static void arm_all(vb_dev_t *dev)
{
  for (int i = 0; i < dev->ncq; i++)
    ibv_req_notify_cq(dev->cqs[i].cq, 0);
}

/* ---- progress ---- */

void rmx__vb_cq_event(uv_poll_t *h, int status, int events)
{
  vb_dev_t *dev = h->data;
  struct ibv_cq *cq;
  void *cq_ctx;
  vb_cq_t *c = NULL;
  /* One read: each CQ raises at most one event per arming, and one still
   * pending would wake the (level-triggered) poll again. */
  if (ibv_get_cq_event(dev->chan, &cq, &cq_ctx) == 0 && (c = cq_of(dev, cq)) != NULL &&
      ++c->unacked >= VB_ACK_EVERY) {
    ibv_ack_cq_events(c->cq, c->unacked);
    c->unacked = 0;
  }
  if (dev->tp->spin_ns) {
    rmx__vb_cq_drain(dev);
    rmx__vb_spin(dev);
    return;
  }
  if (c)
    ibv_req_notify_cq(c->cq, 0);
  rmx__vb_cq_drain(dev);
}

/* Adaptive: there was activity; poll (rather than sleep) for a while. */
void rmx__vb_spin(vb_dev_t *dev)
{
  struct rmx_tp *tp = dev->tp;
  if (!tp->spin_ns)
    return;
  dev->spin_active = 1;
  if (!dev->spinning) {
    dev->spinning = 1;
    dev->spin_quiet = 0;
    dev->spin_empty = 0;
    vb_kick(tp);
  }
}

/*
 * Adaptive, from the idle handler after a poll that found @p found
 * completions: go on, or arm the channel and sleep once it has been quiet
 * for spin_ns. The clock is read once per VB_SPIN_CHECK empty polls, not
 * per poll: where the clock source is slow (an emulated HPET costs about
 * 9 us a read) reading it every time would be most of the spin.
 */
void rmx__vb_spin_poll(vb_dev_t *dev, int found)
{
  if (found || dev->spin_active) {
    dev->spin_active = 0;
    dev->spin_quiet = 0;
    dev->spin_empty = 0;
    return;
  }
  if (++dev->spin_empty % VB_SPIN_CHECK)
    return;
  uint64_t now = uv_hrtime();
  if (!dev->spin_quiet) {
    dev->spin_quiet = now;
    return;
  }
  if (now - dev->spin_quiet < dev->tp->spin_ns)
    return;
  dev->spinning = 0;
  arm_all(dev);
  rmx__vb_cq_drain(dev);
}

/* Completions come in order on an RC QP: a completion for slot s also
 * completes every unsignaled slot before it. The owner hears of each op as
 * its slot is retired, and may post again from there while later slots
 * are still held; a post it was refused hears of the room once all are
 * retired, even where the last says nothing (a bind, a read's first
 * chunks, copied sends). */
static void complete_upto(struct rmx_tp_conn *tc, vb_slot_t *upto, int status)
{
  while (tc->tail != tc->head) {
    vb_slot_t *s = &tc->slots[tc->tail++ % tc->sq_depth];
    if (s == upto) {
      rmx__vb_slot_fire(tc, s, status);
      break;
    }
    if (s->kind == SLOT_SEND && !s->op) { /* a copied send: nothing to report */
      s->kind = SLOT_FREE;
      continue;
    }
    /* before a failure we cannot tell delivered from flushed */
    rmx__vb_slot_fire(tc, s, status ? RMX_ECANCELED : 0);
  }
  if (tc->want_room && tc->owner && !tc->dead && !tc->closing &&
      tc->head - tc->tail < tc->sq_depth) {
    tc->want_room = 0;
    if (tc->state == VC_UP)
      rmx__vb_binds_chain(tc); /* windows first: what is sent may carry their keys */
    rmx__vb_raise(tc, RMX_TP_EV_SEND, 0, NULL, NULL, 0);
  }
}

/* The QP of a live connection went to the error state under us. Our
 * device does that when it refused a request of the peer (a remote read,
 * write or atomic with a bad key or out of bounds, or a malformed one);
 * the peer's side hears of it as a remote error. The same status whichever
 * the device reports first: a flush, the QP's async event, or (on the SRQ,
 * where no receive is flushed) the state found at the peer's disconnect. */
void rmx__vb_went_error(struct rmx_tp_conn *tc)
{
  RMX_TP_LOG_LIMITED(tc->tp->env, &tc->tp->rl_refused, uv_now(tc->tp->loop), ERROR,
                     "rdma: QP 0x%x to %s went into the error state: this side refused a "
                     "request of the peer (bad key, bounds or rights) or the device failed",
                     tc->qpn, tc->peer);
  rmx__vb_refused(tc); /* counted once: the async event sees tc->dead */
  rmx__vb_fail(tc, RMX_EPROTO);
}

/* This side refused the peer: a strike, and where the connection was live
 * (not closed by this side), its DREQ lingers (rmx__vb_close). */
void rmx__vb_refused(struct rmx_tp_conn *tc)
{
  if (tc->owner && tc->tp->env->strike(tc->owner, NULL))
    tc->refused = 1;
}

/*
 * Whose refusal. Over verbs a remote access error names no key and ends
 * both QPs, and it reads the same whether our key was bad (forged, or
 * revoked on a live connection) or the peer's keys ended because it went
 * away. A peer that closes keeps its keys until its BYE is acknowledged,
 * so that BYE is ahead of the error in our CQ and we are closing already;
 * but a peer that was killed, or released a registration under a closing
 * connection, ends them at once. So the first such error on a live
 * connection is held, unreported with every slot after it, for
 * VB_REFUSAL_HOLD_MS: the peer's DREQ within it means the peer went
 * (lost(), cm.c: the connection's end, RMX_ECONNRESET), none means our
 * key (RMX_EACCES). A side that refused a live peer sends its DREQ only
 * VB_REFUSED_LINGER_MS later (ep.c), so a live refusal never reads as a
 * departure; a dying process's DREQ goes at once (its kernel's).
 */
static void hold_expired(uv_timer_t *t)
{
  struct rmx_tp_conn *tc = t->data;
  if (!tc->held)
    return;
  if (tc->held == 1) {
    /* Once more after this turn's I/O: a DREQ that waited while the loop
     * was late goes first (timers run before I/O in a libuv turn). */
    tc->held = 2;
    uv_timer_start(&tc->timer, hold_expired, 0, 0);
    return;
  }
  RMX_TP_LOG(tc->tp->env, ERROR, "rdma: QP 0x%x to %s: %s, and the peer is still there: a "
             "key, range or right it does not grant", tc->qpn, tc->peer,
             ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR));
  rmx__vb_hold_end(tc, RMX_EACCES);
}

static int hold(struct rmx_tp_conn *tc, vb_slot_t *s, const struct ibv_wc *wc)
{
  if (tc->held) {
    tc->held_upto = s;
    return 1;
  }
  if (wc->status != IBV_WC_REM_ACCESS_ERR || tc->dead || tc->closing || !tc->established)
    return 0;
  tc->held = 1;
  tc->held_slot = s;
  tc->held_upto = NULL;
  uv_timer_stop(&tc->timer);
  uv_timer_start(&tc->timer, hold_expired, VB_REFUSAL_HOLD_MS, 0);
  return 1;
}

/* The verdict on a held error: status for the connection and the slot,
 * RMX_ECANCELED for the slots after it. */
void rmx__vb_hold_end(struct rmx_tp_conn *tc, int status)
{
  vb_slot_t *s = tc->held_slot, *upto = tc->held_upto;
  if (!tc->held)
    return;
  tc->held = 0;
  tc->held_slot = tc->held_upto = NULL;
  uv_timer_stop(&tc->timer);
  rmx__vb_fail(tc, status);
  complete_upto(tc, s, status);
  if (upto)
    complete_upto(tc, upto, RMX_ECANCELED);
}

/* An error completion on a live connection: the connection's error. Which
 * side is at fault is in the status; the log names the peer. */
static void qp_error(struct rmx_tp_conn *tc, const struct ibv_wc *wc)
{
  if (tc->dead || tc->closing || tc->held)
    return;
  int st = rmx__vb_wc_status(wc->status);
  if (wc->status == IBV_WC_WR_FLUSH_ERR) {
    if (!tc->established)
      return; /* the CM gave up on the connect: its event says why */
    /* Flushed with no error of ours before it: the QP went to the error
     * state under us. */
    rmx__vb_went_error(tc);
    return;
  }
  if (wc->status == IBV_WC_RETRY_EXC_ERR)
    RMX_TP_LOG(tc->tp->env, ERROR, "rdma: QP 0x%x: %s did not acknowledge within %u resends "
               "of %u ms: the peer, its host or the path to it is lost", wc->qp_num, tc->peer,
               tc->tp->env->cfg->rc_retry, tc->tp->env->cfg->rc_timeout_ms);
  else
    RMX_TP_LOG(tc->tp->env, ERROR, "rdma: QP 0x%x to %s: %s (vendor error 0x%x)", wc->qp_num,
               tc->peer, ibv_wc_status_str(wc->status), wc->vendor_err);
  rmx__vb_fail(tc, st);
}

/* A message in rx for tc: 1 when the buffer may be given back (the
 * connection lives on), 0 when its QP is going. */
static int on_recv(struct rmx_tp_conn *tc, vb_rx_t *rx, const struct ibv_wc *wc)
{
  if (wc->status != IBV_WC_SUCCESS) {
    qp_error(tc, wc);
    return 0;
  }
  if (tc->dead || tc->closing || !tc->owner)
    return 0;
  if (wc->wc_flags & IBV_WC_WITH_INV) {
    /* The peer sent with invalidate, which rmx never does: the device has
     * already invalidated the key it named, which may be one of another
     * connection's windows (SoftRoCE checks only the protection domain).
     * Nothing can undo that; the peer is cut and counted. */
    RMX_TP_LOG_LIMITED(tc->tp->env, &tc->tp->rl_refused, uv_now(tc->tp->loop), ERROR,
                       "rdma: QP 0x%x: %s sent with invalidate (key 0x%x), which rmx never "
                       "does: connection closed", wc->qp_num, tc->peer, wc->invalidated_rkey);
    rmx__vb_refused(tc);
    rmx__vb_fail(tc, RMX_EPROTO);
    return 0;
  }
  if (!tc->established) { /* the peer's first message beat the CM event */
    tc->established = 1;
    tc->state = VC_UP;
    rmx__vb_raise(tc, RMX_TP_EV_ESTABLISHED, 0, NULL, NULL, 0);
    if (tc->dead || tc->closing)
      return 0;
  }
  if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) { /* the data is already in place */
    rmx_tp_ev_t ev = {.type = RMX_TP_EV_IMM, .imm = ntohl(wc->imm_data), .len = wc->byte_len};
    tc->tp->env->event(tc->owner, &ev);
  } else {
    tc->tp->env->recv(tc->owner, (const void *)(uintptr_t)rx->sge.addr, wc->byte_len);
  }
  return !tc->dead && !tc->closing;
}

/* A buffer of the connection's own: given back in one list per connection
 * at the end of the batch. */
static void own_recv(struct rmx_tp_conn *tc, vb_rx_t *rx, const struct ibv_wc *wc)
{
  tc->rx_posted--;
  if (tc->state == VC_DRAINING) {
    rmx__vb_check_drained(tc);
    return;
  }
  if (!on_recv(tc, rx, wc))
    return; /* flushed or the QP is going: not given back */
  rx->wr.next = NULL;
  if (tc->repost_last)
    tc->repost_last->next = &rx->wr;
  else {
    tc->repost = &rx->wr;
    rmx_list_push(&tc->tp->repost, &tc->repost_link);
  }
  tc->repost_last = &rx->wr;
}

/* A shared buffer (RMX_SRQ): its connection is found by QP number, and the
 * buffer always goes back, whatever became of the connection. A flush
 * says nothing (the SRQ keeps its buffers when a QP fails; one taken for
 * a message cut short comes back flushed), and a QP already gone, or a
 * completion for it still in the CQ, finds no connection. */
static void shared_recv(vb_rx_t *rx, const struct ibv_wc *wc)
{
  vb_dev_t *dev = rx->dev;
  struct rmx_tp_conn *tc = rmx__vb_qpn_find(dev, wc->qp_num);
  if (tc && tc->state != VC_DRAINING && wc->status != IBV_WC_WR_FLUSH_ERR)
    (void)on_recv(tc, rx, wc);
  rmx__vb_srq_give(dev, rx);
}

static void on_wc(const struct ibv_wc *wc)
{
  if (wc->wr_id & VB_RX_TAG) {
    vb_rx_t *rx = (vb_rx_t *)(uintptr_t)(wc->wr_id & ~(uint64_t)VB_RX_TAG);
    if (rx->tc)
      own_recv(rx->tc, rx, wc);
    else
      shared_recv(rx, wc);
    return;
  }
  vb_slot_t *s = (vb_slot_t *)(uintptr_t)wc->wr_id;
  struct rmx_tp_conn *tc = s->tc;
  if (s == &tc->drain_slot) {
    tc->drain_send_seen = 1;
    rmx__vb_check_drained(tc);
    return;
  }
  int st = rmx__vb_wc_status(wc->status);
  if (wc->status != IBV_WC_SUCCESS) {
    if (hold(tc, s, wc))
      return; /* a remote access error: whose, the peer's DREQ will tell */
    if (tc->closing && st == RMX_EACCES)
      st = RMX_ECANCELED; /* the peer's keys ended with the close we are in */
    qp_error(tc, wc); /* before the ops hear: DISCONNECTED carries the cause */
  }
  complete_upto(tc, s, st);
}

/*
 * Poll every CQ until it is empty, then give back receive buffers and post
 * what the completions' callbacks built (rmx__vb_flush_all); returns how
 * many completions were found. A poll that returns fewer than it asked for
 * found its CQ empty: no second, empty poll before the replies leave.
 */
int rmx__vb_cq_drain(vb_dev_t *dev)
{
  struct ibv_wc wc[VB_POLL_BATCH];
  int n, found = 0, failed = 0;
  for (int i = 0; i < dev->ncq; i++) {
    do {
      n = ibv_poll_cq(dev->cqs[i].cq, VB_POLL_BATCH, wc);
      for (int j = 0; j < n; j++)
        on_wc(&wc[j]);
      if (n > 0)
        found += n;
    } while (n == VB_POLL_BATCH);
    failed |= n < 0;
  }
  if (!failed)
    dev->cq_empty_gen++; /* what was queued before this pass is all seen */
  else
    RMX_TP_LOG(dev->tp->env, ERROR, "rdma: polling a completion queue of %s failed", dev->name);
  struct rmx_tp *tp = dev->tp; /* most polls find nothing to give back or post */
  if (dev->srq_repost)
    rmx__vb_srq_repost(dev);
  if (!rmx_list_empty(&tp->repost))
    rmx__vb_repost_all(tp);
  if (!rmx_list_empty(&tp->unflushed))
    rmx__vb_flush_all(tp);
  return found;
}
