/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A connection's end, whatever ends it: failure (told to the owner once),
 * close, the drain that makes a close safe (every work request posted is
 * seen completed before the QP and its memory go away), reaping, and the
 * parking of a QP's memory when the drain cannot start. Also where the
 * owner hears of an operation's end (rmx__vb_slot_fire).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

void rmx__vb_raise(struct rmx_tp_conn *tc, rmx_tp_ev_type_t t, int status, void *op,
                   const void *data, size_t len)
{
  rmx_tp_ev_t ev = {.type = t, .status = status, .op = op, .data = data, .len = len};
  tc->tp->env->event(tc->owner, &ev);
}

void rmx__vb_slot_fire(struct rmx_tp_conn *tc, vb_slot_t *s, int status)
{
  uint8_t kind = s->kind;
  void *op = s->op;
  s->kind = SLOT_FREE;
  if (!tc->owner)
    return;
  if (kind == SLOT_SEND) {
    /* A copied send (op NULL) is reported only when it was signaled: the
     * send queue has room again. */
    if (op || s->signaled)
      rmx__vb_raise(tc, RMX_TP_EV_SEND, status, op, NULL, 0);
  }
  else if (kind == SLOT_READ)
    rmx__vb_raise(tc, RMX_TP_EV_READ, status, op, NULL, 0);
  else if (kind == SLOT_WRITE)
    rmx__vb_raise(tc, RMX_TP_EV_WRITE, status, op, NULL, 0);
  else if (kind == SLOT_ATOMIC) {
    if (status == 0)
      memcpy(s->old, s->bounce, 8);
    rmx__vb_raise(tc, RMX_TP_EV_ATOMIC, status, op, NULL, 0);
  }
}

void rmx__vb_fail_slots(struct rmx_tp_conn *tc)
{
  while (tc->tail != tc->head)
    rmx__vb_slot_fire(tc, &tc->slots[tc->tail++ % tc->sq_depth], RMX_ECANCELED);
}

/* The QP alone: no completion is added for it after this returns, but
 * those already in the CQ stay there, naming its slots and buffers. */
void rmx__vb_qp_destroy_qp(struct rmx_tp_conn *tc)
{
  if (tc->qp) {
    rmx__vb_qpn_del(tc->dev, tc); /* completions still in a CQ find no connection */
    rdma_destroy_qp(tc->id);
    tc->qp = NULL;
  }
}

/* The QP and its memory: only once no completion for it can be polled. */
void rmx__vb_qp_destroy(struct rmx_tp_conn *tc)
{
  rmx__vb_qp_destroy_qp(tc);
  rmx__vb_cq_give(tc, 0); /* parked: held until now, its completions may be there */
  if (tc->rx_mr) {
    tc->tp->reg_bytes -= tc->rx_mr->length;
    if (ibv_dereg_mr(tc->rx_mr))
      RMX_TP_LOG(tc->tp->env, WARN, "rdma: deregistering receive buffers failed");
  }
  tc->rx_mr = NULL;
  rmx__vb_pd_conn_release(tc); /* RMX_KEY_SCOPE=pd: after every use of its MRs */
  free(tc->rx_mem);
  free(tc->slots);
  free(tc->rx);
  tc->rx_mem = NULL;
  tc->slots = NULL;
  tc->rx = NULL;
}

/* ---- the drain ---- */

/* Move the QP to the error state: every posted request completes, flushed.
 * A marker on the send queue completes after all earlier sends; receives
 * are counted down to zero. */
static int drain_start(struct rmx_tp_conn *tc)
{
  struct ibv_qp_attr attr = {.qp_state = IBV_QPS_ERR};
  struct ibv_send_wr *bad;

  tc->chain = tc->chain_last = NULL; /* never posted: failed with the ring */
  rmx_list_del(&tc->flush_link);
  if (ibv_modify_qp(tc->qp, &attr, IBV_QP_STATE) != 0)
    return RMX_EIO;
  tc->drain_slot.wr = (struct ibv_send_wr){.wr_id = (uintptr_t)&tc->drain_slot,
                                           .opcode = IBV_WR_SEND,
                                           .send_flags = IBV_SEND_SIGNALED};
  if (ibv_post_send(tc->qp, &tc->drain_slot.wr, &bad) != 0)
    return RMX_EIO;
  tc->state = VC_DRAINING;
  /* What can still complete: the sends in the ring, the receives posted,
   * the marker. The rest of the QP's room in the CQ is free for others. */
  rmx__vb_cq_give(tc, (int)(tc->head - tc->tail + tc->rx_posted + 1));
  return 0;
}

void rmx__vb_check_drained(struct rmx_tp_conn *tc)
{
  if (tc->drain_send_seen && tc->rx_posted == 0 && tc->state == VC_DRAINING) {
    rmx__vb_fail_slots(tc);
    tc->state = VC_DONE;
    vb_kick(tc->tp);
  }
}

/* ---- reaping ---- */

/*
 * A QP whose drain could not start was destroyed with completions possibly
 * still in the shared CQ (flushed, or finished just before), and those name
 * its slots and receive buffers through wr_id. Its memory (tc, slots,
 * buffers) stays parked, owner-less and closing, so on_wc finds a
 * connection that ignores them, until a poll of the CQ that began after the
 * destroy has found it empty: nothing more can come for it then. The idle
 * handler polls while anything is parked; tp_free frees what is left (no
 * poll happens after fini, and the CQ goes with the device).
 */
void rmx__vb_parked_sweep(struct rmx_tp *tp, int all)
{
  rmx_list_t *n, *next;
  for (n = tp->parked.next; n != &tp->parked; n = next) {
    next = n->next;
    struct rmx_tp_conn *tc = rmx_container_of(n, struct rmx_tp_conn, link);
    if (all || tc->dev->cq_empty_gen != tc->park_gen) {
      rmx_list_del(&tc->link);
      rmx__vb_qp_destroy(tc); /* the memory; the QP is long gone */
      free(tc);
    }
  }
}

static void tc_timer_closed(uv_handle_t *h)
{
  struct rmx_tp_conn *tc = h->data;
  struct rmx_tp *tp = tc->tp;
  if (tc->owner)
    rmx__vb_raise(tc, RMX_TP_EV_CLOSED, 0, NULL, NULL, 0);
  tc->owner = NULL; /* the core's handle is gone */
  if (tc->undrained && tc->slots) {
    rmx_list_push(&tp->parked, &tc->link);
    vb_kick(tp);
  } else {
    free(tc);
  }
  vb_tp_unlive(tp);
}

/* Drained (or never had a QP, or could not be drained): release
 * everything, then CLOSED. */
/* The windows bound to the QP go before it: no peer can use them any more,
 * and a bound window holds its QP (SoftRoCE's destroy then waits for it,
 * warns and fails). Their owners still release them (mem_dereg), finding
 * no window left. */
static void windows_detach(struct rmx_tp_conn *tc)
{
  rmx_list_t *n;
  while ((n = rmx_list_pop(&tc->windows)) != NULL) {
    rmx_tp_mem_t *m = rmx_container_of(n, rmx_tp_mem_t, link);
    rmx_list_del(&m->wait_link);
    m->waiting = 0;
    m->tc = NULL;
    if (m->mw && ibv_dealloc_mw(m->mw))
      RMX_TP_LOG(tc->tp->env, WARN, "rdma: ibv_dealloc_mw failed: %s", strerror(errno));
    m->mw = NULL;
  }
}

/*
 * The id of a connection whose live peer this side refused outlives it by
 * VB_REFUSED_LINGER_MS: destroying it sends the DREQ, which the peer
 * would read as this side going away rather than as its own bad key
 * (cq.c, "Whose refusal"). Its QP is gone already; events for it find no
 * connection (context NULL). The connection itself ends at once.
 */
typedef struct vb_linger {
  uv_timer_t t;
  struct rdma_cm_id *id;
  struct rmx_tp *tp;
  rmx_list_t link;
} vb_linger_t;

static void linger_closed(uv_handle_t *h)
{
  vb_linger_t *l = h->data;
  struct rmx_tp *tp = l->tp;
  free(l);
  if (--tp->handles == 0 && tp->live == 0) /* as verbs.c's handles */
    tp->free_cb(tp);
}

static void linger_end(vb_linger_t *l)
{
  rmx_list_del(&l->link);
  if (rdma_destroy_id(l->id))
    RMX_TP_LOG(l->tp->env, WARN, "rdma: rdma_destroy_id failed: %s", strerror(errno));
  uv_close((uv_handle_t *)&l->t, linger_closed);
}

static void linger_expired(uv_timer_t *t) { linger_end(t->data); }

void rmx__vb_linger_end_all(struct rmx_tp *tp)
{
  rmx_list_t *n;
  while ((n = tp->lingering.next) != &tp->lingering)
    linger_end(rmx_container_of(n, vb_linger_t, link));
}

/* 0 when the id is kept for later, -1 when it is to go now. */
static int id_linger(struct rmx_tp_conn *tc)
{
  vb_linger_t *l;
  if (!tc->refused || !tc->established || tc->tp->finishing || !(l = calloc(1, sizeof(*l))))
    return -1;
  l->id = tc->id;
  l->tp = tc->tp;
  l->t.data = l;
  tc->id->context = NULL;
  uv_timer_init(tc->tp->loop, &l->t);
  uv_timer_start(&l->t, linger_expired, VB_REFUSED_LINGER_MS, 0);
  uv_unref((uv_handle_t *)&l->t);
  tc->tp->handles++;
  rmx_list_push(&tc->tp->lingering, &l->link);
  return 0;
}

void rmx__vb_conn_reap(struct rmx_tp_conn *tc)
{
  if (tc->reaped)
    return;
  tc->reaped = 1;
  windows_detach(tc);
  if (tc->undrained && tc->qp) {
    /* The QP may still be live (it never reached the error state): destroy
     * it before reporting its operations, whose buffers their owners may
     * free as soon as they hear. */
    rmx__vb_qp_destroy_qp(tc);
    tc->park_gen = tc->dev->cq_empty_gen;
    rmx__vb_fail_slots(tc);
  } else {
    rmx__vb_fail_slots(tc);
    rmx__vb_qp_destroy(tc);
  }
  if (tc->id && id_linger(tc) != 0 && rdma_destroy_id(tc->id))
    RMX_TP_LOG(tc->tp->env, WARN, "rdma: rdma_destroy_id failed: %s", strerror(errno));
  tc->id = NULL;
  rmx_list_del(&tc->link);
  rmx_list_del(&tc->repost_link);
  rmx_list_del(&tc->flush_link);
  uv_close((uv_handle_t *)&tc->timer, tc_timer_closed);
}

/* ---- close and failure ---- */

/* The flush never came: the device kept work it was told to drop (seen as
 * a hazard after a link went down under a QP). Give up as when the drain
 * cannot start: the QP goes, its memory waits, parked, until the CQ can no
 * longer name it, and what was posted fails now. */
static void drain_expired(uv_timer_t *t)
{
  struct rmx_tp_conn *tc = t->data;
  if (tc->state != VC_DRAINING)
    return;
  RMX_TP_LOG(tc->tp->env, WARN, "rdma: QP 0x%x to %s: the device did not flush it within %u ms; "
             "destroying it, its memory kept until the completion queue is clear of it",
             tc->qp ? tc->qp->qp_num : 0, tc->peer, tc->tp->env->cfg->close_timeout_ms);
  tc->undrained = 1;
  tc->state = VC_DONE;
  vb_kick(tc->tp);
}

void rmx__vb_close(struct rmx_tp_conn *tc)
{
  if (tc->closing)
    return;
  tc->closing = 1;
  uv_timer_stop(&tc->timer);
  tc->held = 0; /* closed here while an error was held: its slots fail with the rest */
  if (tc->qp) {
    /* Tells the peer; the QP goes to error. Not where this side refused a
     * live peer: its QP is in the error state already, and its DREQ waits
     * (id_linger). */
    if (tc->established && !tc->refused)
      rdma_disconnect(tc->id);
    if (drain_start(tc) == 0) {
      /* A close ends in bounded time even if the device never flushes. */
      uv_timer_start(&tc->timer, drain_expired, tc->tp->env->cfg->close_timeout_ms, 0);
      vb_kick(tc->tp); /* poll mode drains from the idle handler */
      return;
    }
    RMX_TP_LOG(tc->tp->env, WARN, "rdma: cannot drain QP 0x%x; destroying it, its memory kept "
            "until the completion queue is clear of it", tc->qp->qp_num);
    tc->undrained = 1;
  }
  tc->state = VC_DONE;
  vb_kick(tc->tp);
}

/* I/O is over: tell the owner once (it will close), or close. */
void rmx__vb_fail(struct rmx_tp_conn *tc, int status)
{
  if (tc->dead || tc->closing)
    return;
  tc->dead = 1;
  uv_timer_stop(&tc->timer);
  if (tc->owner)
    rmx__vb_raise(tc, RMX_TP_EV_DISCONNECTED, status, NULL, NULL, 0);
  else
    rmx__vb_close(tc);
}
