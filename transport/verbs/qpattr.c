/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a QP is given besides its creation (qp.c): the parameters the
 * connection manager passes at connect and accept, the local ACK timeout,
 * the RNR timer on the shared receive queue, and a log of what the device
 * really took.
 */
#include <errno.h>
#include <string.h>

#include "verbs.h"

#define RD_ATOMIC 16 /* RDMA READs in flight per QP, each way */

void rmx__vb_qp_conn_param(struct rmx_tp_conn *tc, struct rdma_conn_param *p)
{
  int rd = RD_ATOMIC;
  if (tc->dev->attr.max_qp_rd_atom < rd)
    rd = tc->dev->attr.max_qp_rd_atom;
  if (tc->dev->attr.max_qp_init_rd_atom < rd)
    rd = tc->dev->attr.max_qp_init_rd_atom;
  memset(p, 0, sizeof(*p));
  p->private_data = tc->hello;
  p->private_data_len = (uint8_t)tc->hello_len;
  p->responder_resources = (uint8_t)rd;
  p->initiator_depth = (uint8_t)rd;
  /* Never 7: devices read it as "retry forever", and a lost host would
   * then never be detected. The accepting side's QP takes the connecting
   * side's value from the request; what it puts here is not used. */
  p->retry_count = (uint8_t)tc->tp->env->cfg->rc_retry;
  /* What the peer's QP does when our receive queue is empty (each side's
   * value goes to the other's QP). A shared one can run empty under a
   * burst from many peers while each keeps within its credits: the peer
   * then retries for as long as it takes (7: for ever), never fails. */
  p->rnr_retry_count = tc->srq ? 7 : (uint8_t)tc->tp->env->cfg->rnr_retry;
}

/* The local ACK timeout, on both sides before connect or accept: the CM
 * applies it when it moves the QP to RTS (else it derives one from the
 * path, about a second on RoCE). Failing here leaves the CM's own. */
void rmx__vb_qp_ack_timeout(struct rmx_tp_conn *tc)
{
  uint8_t t = rmx__vb_ack_timeout_exp(tc->tp->env->cfg->rc_timeout_ms);
  if (rdma_set_option(tc->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof(t)))
    RMX_TP_LOG(tc->tp->env, WARN, "rdma: cannot set the ACK timeout of the connection to %s "
               "(%s): the connection manager's default applies", tc->peer, strerror(errno));
}

/* On the SRQ, a peer told "not ready" waits longer before it sends again
 * than the connection manager's default (0.64 ms): under a burst from many
 * peers into an empty queue, resends at that pace would take the CPU the
 * receiver needs to refill it (SoftRoCE then drops packets, and senders
 * run out of retries). RTS to RTS; the CM has no option for it. */
#define VB_SRQ_RNR_TIMER 20 /* 10.24 ms */
void rmx__vb_qp_srq_timer(struct rmx_tp_conn *tc)
{
  struct ibv_qp_attr a = {.min_rnr_timer = VB_SRQ_RNR_TIMER};
  if (tc->srq && tc->qp && ibv_modify_qp(tc->qp, &a, IBV_QP_MIN_RNR_TIMER))
    RMX_TP_LOG(tc->tp->env, DEBUG, "rdma: QP 0x%x: cannot lengthen its RNR timer: %s",
               tc->qp->qp_num, strerror(errno));
}

/* What the device really took, for whoever measures detection times. */
void rmx__vb_qp_log_timers(struct rmx_tp_conn *tc)
{
  struct ibv_qp_attr a;
  struct ibv_qp_init_attr ia;
  if (tc->tp->env->log_level < RMX_LOG_DEBUG || !tc->qp ||
      ibv_query_qp(tc->qp, &a, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY, &ia))
    return;
  RMX_TP_LOG(tc->tp->env, DEBUG, "rdma: QP 0x%x to %s: ACK timeout exponent %u (%.0f ms), "
             "retry %u, RNR retry %u", tc->qp->qp_num, tc->peer, a.timeout,
             a.timeout ? 4.096e-3 * (double)(1ull << a.timeout) : 0.0, a.retry_cnt, a.rnr_retry);
}
