/*
 * Queue pairs and the data path: receive buffers posted as lists, a ring of
 * send slots with selective signaling, RDMA READ, completion handling, and
 * the drain that makes a close safe (every work request posted is seen
 * completed before the QP and its memory go away).
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

#define RX_TAG 1u /* low bit of wr_id: a receive buffer, not a send slot */

static int wc_status(enum ibv_wc_status s)
{
  switch (s) {
  case IBV_WC_SUCCESS: return 0;
  case IBV_WC_WR_FLUSH_ERR: return RMX_ECANCELED;
  case IBV_WC_REM_ACCESS_ERR:
  case IBV_WC_LOC_ACCESS_ERR:
  case IBV_WC_LOC_PROT_ERR: return RMX_EACCES;
  case IBV_WC_RETRY_EXC_ERR:
  case IBV_WC_RNR_RETRY_EXC_ERR: return RMX_ECONNRESET;
  case IBV_WC_LOC_LEN_ERR:
  case IBV_WC_REM_INV_REQ_ERR:
  case IBV_WC_REM_OP_ERR: return RMX_EPROTO;
  default: return RMX_EIO;
  }
}

/* ---- creation ---- */

static void rx_init(struct rmx_tp_conn *tc, uint32_t i)
{
  vb_rx_t *rx = &tc->rx[i];
  rx->tc = tc;
  rx->sge.addr = (uintptr_t)(tc->rx_mem + (size_t)i * tc->rx_size);
  rx->sge.length = (uint32_t)tc->rx_size;
  rx->sge.lkey = tc->rx_mr->lkey;
  rx->wr.wr_id = (uintptr_t)rx | RX_TAG;
  rx->wr.sg_list = &rx->sge;
  rx->wr.num_sge = 1;
  rx->wr.next = i + 1 < tc->rx_count ? &tc->rx[i + 1].wr : NULL;
}

int vb_qp_create(struct rmx_tp_conn *tc)
{
  struct rmx_tp *tp = tc->tp;
  vb_dev_t *dev = tc->dev;
  const rmx_config_t *cfg = tp->env->cfg;
  uint32_t sq = 2 * cfg->rx_depth + 2 * cfg->rndv_depth + 8;
  uint32_t rq = cfg->rx_depth + 2; /* + BYE and one of slack */
  struct ibv_port_attr pattr;
  struct ibv_recv_wr *bad;
  int rc;

  if (sq + 1 > (uint32_t)dev->attr.max_qp_wr)
    sq = (uint32_t)dev->attr.max_qp_wr - 1;
  int need = (int)(sq + rq + 2);
  if (dev->cq_used + need > dev->cq_size) {
    int want = dev->cq_size * 2 > dev->attr.max_cqe ? dev->attr.max_cqe : dev->cq_size * 2;
    if (dev->cq_used + need > want || ibv_resize_cq(dev->cq, want) != 0) {
      RMX_TP_LOG(tp->env, ERROR, "rdma: completion queue of %s is full (%d entries): too many "
              "connections on one device", dev->name, dev->cq_size);
      return RMX_ENOMEM;
    }
    dev->cq_size = dev->cq->cqe;
  }
  tc->sq_depth = sq;
  tc->rx_count = rq;
  tc->rx_size = cfg->eager_size;
  size_t bytes = ((size_t)rq * tc->rx_size + (size_t)sq * VB_BOUNCE + 4095) & ~(size_t)4095;
  tc->rx_mem = aligned_alloc(4096, bytes);
  tc->slots = calloc(sq, sizeof(*tc->slots));
  tc->rx = calloc(rq, sizeof(*tc->rx));
  if (!tc->rx_mem || !tc->slots || !tc->rx) {
    rc = RMX_ENOMEM;
    goto err;
  }
  tc->bounce = tc->rx_mem + (size_t)rq * tc->rx_size;
  tc->rx_mr = ibv_reg_mr(dev->pd, tc->rx_mem, bytes, IBV_ACCESS_LOCAL_WRITE);
  if (!tc->rx_mr) {
    rc = vb_reg_err(tp, bytes, errno);
    goto err;
  }
  for (uint32_t i = 0; i < sq; i++)
    tc->slots[i].tc = tc;

  struct ibv_qp_init_attr qa = {
    .qp_context = tc, .send_cq = dev->cq, .recv_cq = dev->cq, .qp_type = IBV_QPT_RC,
    .cap = {.max_send_wr = sq + 1, .max_recv_wr = rq + 1, .max_send_sge = RMX_TP_MAX_SGE,
            .max_recv_sge = 1, .max_inline_data = VB_INLINE_WANT},
  };
  /* Devices differ in how much they inline; ask for less until one fits. */
  static const uint32_t inl[] = {VB_INLINE_WANT, 64, 0};
  for (size_t i = 0; i < sizeof(inl) / sizeof(inl[0]); i++) {
    qa.cap.max_inline_data = inl[i];
    if ((rc = rdma_create_qp(tc->id, dev->pd, &qa)) == 0)
      break;
  }
  if (rc) {
    rc = vb_err_from_errno(errno);
    RMX_TP_LOG(tp->env, ERROR, "rdma: cannot create a queue pair on %s: %s", dev->name,
            rmx_strerror(rc));
    goto err;
  }
  tc->qp = tc->id->qp;
  dev->cq_used += need;
  tc->max_inline = qa.cap.max_inline_data;
  tc->max_msg = 1u << 30;
  if (ibv_query_port(dev->verbs, tc->id->port_num, &pattr) == 0 && pattr.max_msg_sz)
    tc->max_msg = pattr.max_msg_sz;

  for (uint32_t i = 0; i < rq; i++)
    rx_init(tc, i);
  if ((rc = ibv_post_recv(tc->qp, &tc->rx[0].wr, &bad)) != 0) {
    rc = vb_err_from_errno(rc);
    goto err;
  }
  tc->rx_posted = rq;
  tc->drain_slot.tc = tc;
  tc->drain_slot.kind = SLOT_DRAIN;
  return 0;

err:
  vb_qp_destroy(tc);
  return rc;
}

/* The QP alone: no completion is added for it after this returns, but
 * those already in the CQ stay there, naming its slots and buffers. */
void vb_qp_destroy_qp(struct rmx_tp_conn *tc)
{
  if (tc->qp) {
    rdma_destroy_qp(tc->id);
    tc->qp = NULL;
    tc->dev->cq_used -= (int)(tc->sq_depth + tc->rx_count + 2);
  }
}

/* The QP and its memory: only once no completion for it can be polled. */
void vb_qp_destroy(struct rmx_tp_conn *tc)
{
  vb_qp_destroy_qp(tc);
  if (tc->rx_mr && ibv_dereg_mr(tc->rx_mr))
    RMX_TP_LOG(tc->tp->env, WARN, "rdma: deregistering receive buffers failed");
  tc->rx_mr = NULL;
  free(tc->rx_mem);
  free(tc->slots);
  free(tc->rx);
  tc->rx_mem = NULL;
  tc->slots = NULL;
  tc->rx = NULL;
}

static void repost(struct rmx_tp_conn *tc);

/* ---- posting ---- */

static vb_slot_t *slot_take(struct rmx_tp_conn *tc, slot_kind_t kind, void *op)
{
  vb_slot_t *s = &tc->slots[tc->head++ % tc->sq_depth];
  s->kind = (uint8_t)kind;
  s->op = op;
  s->signaled = 0;
  memset(&s->wr, 0, sizeof(s->wr));
  s->wr.wr_id = (uintptr_t)s;
  s->wr.sg_list = s->sge;
  return s;
}

/* Chain a built request; every VB_SIG_EVERY-th is signaled so the ring
 * cannot fill with requests nobody will hear about. */
static void chain(struct rmx_tp_conn *tc, vb_slot_t *s, int must_signal)
{
  if (must_signal || ++tc->posted_unsig >= VB_SIG_EVERY) {
    s->wr.send_flags |= IBV_SEND_SIGNALED;
    s->signaled = 1;
    tc->posted_unsig = 0;
  }
  if (tc->chain_last)
    tc->chain_last->next = &s->wr;
  else
    tc->chain = &s->wr;
  tc->chain_last = &s->wr;
}

int vb_send(struct rmx_tp_conn *tc, const rmx_tp_sge_t *sge, int n, void *op)
{
  size_t total = 0;
  int need_lkey = 0;

  if (tc->dead || tc->closing || tc->state != VC_UP)
    return RMX_ENOTCONN;
  if (n < 1 || n > RMX_TP_MAX_SGE)
    return RMX_EINVAL;
  if (tc->head - tc->tail >= tc->sq_depth)
    return RMX_EAGAIN;
  for (int i = 0; i < n; i++) {
    total += sge[i].len;
    need_lkey |= sge[i].mem == NULL;
  }
  if (total > tc->rx_size)
    return RMX_EMSGSIZE;
  int inl = total <= tc->max_inline;
  if (need_lkey && !inl && total > VB_BOUNCE)
    return RMX_EINVAL; /* unregistered memory is only for small frames */

  uint32_t idx = tc->head % tc->sq_depth;
  vb_slot_t *s = slot_take(tc, SLOT_SEND, op);
  s->wr.opcode = IBV_WR_SEND;
  if (inl) {
    s->wr.send_flags = IBV_SEND_INLINE;
  } else if (need_lkey) { /* copy into this slot's registered bounce area */
    uint8_t *b = tc->bounce + (size_t)idx * VB_BOUNCE, *p = b;
    for (int i = 0; i < n; i++) {
      memcpy(p, sge[i].addr, sge[i].len);
      p += sge[i].len;
    }
    s->sge[0] = (struct ibv_sge){.addr = (uintptr_t)b, .length = (uint32_t)total,
                                 .lkey = tc->rx_mr->lkey};
    s->wr.num_sge = 1;
    chain(tc, s, 0);
    return 0;
  }
  for (int i = 0; i < n; i++)
    s->sge[i] = (struct ibv_sge){.addr = (uintptr_t)sge[i].addr, .length = (uint32_t)sge[i].len,
                                 .lkey = sge[i].mem ? sge[i].mem->mr->lkey : 0};
  s->wr.num_sge = n;
  chain(tc, s, 0);
  return 0;
}

/* A read or write of any length: split at the device's largest message, the
 * last part signaled and carrying the op (and the immediate). */
static int rdma_rw(struct rmx_tp_conn *tc, enum ibv_wr_opcode opc, slot_kind_t kind, void *local,
                   size_t len, rmx_tp_mem_t *mem, uint64_t raddr, uint64_t rkey,
                   const uint32_t *imm, void *op)
{
  if (tc->dead || tc->closing || tc->state != VC_UP)
    return RMX_ENOTCONN;
  if (rkey > UINT32_MAX || (!mem && len > tc->max_inline) ||
      (!mem && opc == IBV_WR_RDMA_READ && len))
    return RMX_EINVAL;
  size_t chunks = len ? (len + tc->max_msg - 1) / tc->max_msg : 1;
  if (chunks > tc->sq_depth)
    return RMX_EMSGSIZE;
  if (tc->head - tc->tail + chunks > tc->sq_depth)
    return RMX_EAGAIN;
  for (size_t i = 0; i < chunks; i++) {
    size_t off = i * tc->max_msg, clen = len - off < tc->max_msg ? len - off : tc->max_msg;
    int last = i + 1 == chunks;
    vb_slot_t *s = slot_take(tc, last ? kind : SLOT_INTERNAL, last ? op : NULL);
    s->wr.opcode = opc;
    if (last && imm) {
      s->wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      s->wr.imm_data = htonl(*imm);
    }
    s->wr.wr.rdma.remote_addr = raddr + off;
    s->wr.wr.rdma.rkey = (uint32_t)rkey;
    s->sge[0] = (struct ibv_sge){.addr = (uintptr_t)local + off, .length = (uint32_t)clen,
                                 .lkey = mem ? mem->mr->lkey : 0};
    s->wr.num_sge = len ? 1 : 0;
    if (!mem && opc == IBV_WR_RDMA_WRITE)
      s->wr.send_flags = IBV_SEND_INLINE;
    chain(tc, s, last);
  }
  return 0;
}

int vb_read(struct rmx_tp_conn *tc, void *dst, size_t len, rmx_tp_mem_t *dst_mem,
            uint64_t raddr, uint64_t rkey, void *op)
{
  return rdma_rw(tc, IBV_WR_RDMA_READ, SLOT_READ, dst, len, dst_mem, raddr, rkey, NULL, op);
}

int vb_write(struct rmx_tp_conn *tc, const void *src, size_t len, rmx_tp_mem_t *src_mem,
             uint64_t raddr, uint64_t rkey, const uint32_t *imm, void *op)
{
  return rdma_rw(tc, IBV_WR_RDMA_WRITE, SLOT_WRITE, (void *)(uintptr_t)src, len, src_mem, raddr,
                 rkey, imm, op);
}

unsigned vb_caps(struct rmx_tp_conn *tc)
{
  return tc->dev && tc->dev->attr.atomic_cap != IBV_ATOMIC_NONE ? RMX_TP_CAP_ATOMIC : 0;
}

int vb_atomic(struct rmx_tp_conn *tc, rmx_tp_atomic_t kind, uint64_t raddr, uint64_t rkey,
              uint64_t cmp_add, uint64_t swap, uint64_t *old, void *op)
{
  if (tc->dead || tc->closing || tc->state != VC_UP)
    return RMX_ENOTCONN;
  if (!(vb_caps(tc) & RMX_TP_CAP_ATOMIC))
    return RMX_ENOTSUP;
  if (rkey > UINT32_MAX)
    return RMX_EINVAL;
  if (tc->head - tc->tail >= tc->sq_depth)
    return RMX_EAGAIN;
  uint32_t idx = tc->head % tc->sq_depth;
  vb_slot_t *s = slot_take(tc, SLOT_ATOMIC, op);
  s->old = old;
  s->bounce = tc->bounce + (size_t)idx * VB_BOUNCE; /* registered, 8-aligned */
  s->wr.opcode = kind == RMX_TP_FADD ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
  s->wr.wr.atomic.remote_addr = raddr;
  s->wr.wr.atomic.rkey = (uint32_t)rkey;
  s->wr.wr.atomic.compare_add = cmp_add;
  s->wr.wr.atomic.swap = swap;
  s->sge[0] = (struct ibv_sge){.addr = (uintptr_t)s->bounce, .length = 8,
                               .lkey = tc->rx_mr->lkey};
  s->wr.num_sge = 1;
  chain(tc, s, 1);
  return 0;
}

void vb_flush(struct rmx_tp_conn *tc)
{
  struct ibv_send_wr *bad;
  /* Credits reach the peer only in what we send: buffers whose credit may
   * be in this batch go back on the receive queue first, or the peer's next
   * send could find the queue empty (an RNR NAK and a timed retry). */
  if (tc->repost)
    repost(tc);
  if (!tc->chain)
    return;
  /* The last of a batch is signaled: nothing waits on a later post. */
  vb_slot_t *last = rmx_container_of(tc->chain_last, vb_slot_t, wr);
  if (!last->signaled) {
    last->wr.send_flags |= IBV_SEND_SIGNALED;
    last->signaled = 1;
    tc->posted_unsig = 0;
  }
  struct ibv_send_wr *first = tc->chain;
  tc->chain = tc->chain_last = NULL;
  int rc = ibv_post_send(tc->qp, first, &bad);
  if (rc) {
    RMX_TP_LOG(tc->tp->env, ERROR, "rdma: ibv_post_send on QP 0x%x failed: %s", tc->qp->qp_num,
            strerror(rc));
    /* Inside a core call: report from the loop. What was not posted is
     * failed with the rest of the ring when the drain finishes. */
    tc->fail_status = vb_err_from_errno(rc);
    vb_kick(tc->tp);
  }
}

/* ---- completions ---- */

static void slot_fire(struct rmx_tp_conn *tc, vb_slot_t *s, int status)
{
  uint8_t kind = s->kind;
  void *op = s->op;
  s->kind = SLOT_FREE;
  if (!tc->owner)
    return;
  if (kind == SLOT_SEND)
    vb_raise(tc, RMX_TP_EV_SEND, status, op, NULL, 0);
  else if (kind == SLOT_READ)
    vb_raise(tc, RMX_TP_EV_READ, status, op, NULL, 0);
  else if (kind == SLOT_WRITE)
    vb_raise(tc, RMX_TP_EV_WRITE, status, op, NULL, 0);
  else if (kind == SLOT_ATOMIC) {
    if (status == 0)
      memcpy(s->old, s->bounce, 8);
    vb_raise(tc, RMX_TP_EV_ATOMIC, status, op, NULL, 0);
  }
}

/* Completions come in order on an RC QP: a completion for slot s also
 * completes every unsignaled slot before it. */
static void complete_upto(struct rmx_tp_conn *tc, vb_slot_t *upto, int status)
{
  while (tc->tail != tc->head) {
    vb_slot_t *s = &tc->slots[tc->tail++ % tc->sq_depth];
    if (s == upto) {
      slot_fire(tc, s, status);
      return;
    }
    /* before a failure we cannot tell delivered from flushed */
    slot_fire(tc, s, status ? RMX_ECANCELED : 0);
  }
}

void vb_fail_slots(struct rmx_tp_conn *tc)
{
  while (tc->tail != tc->head)
    slot_fire(tc, &tc->slots[tc->tail++ % tc->sq_depth], RMX_ECANCELED);
}

static void check_drained(struct rmx_tp_conn *tc)
{
  if (tc->drain_send_seen && tc->rx_posted == 0 && tc->state == VC_DRAINING) {
    vb_fail_slots(tc);
    tc->state = VC_DONE;
    vb_kick(tc->tp);
  }
}

static void qp_error(struct rmx_tp_conn *tc, const struct ibv_wc *wc)
{
  if (tc->dead || tc->closing)
    return;
  RMX_TP_LOG(tc->tp->env, ERROR, "rdma: QP 0x%x: %s (vendor error 0x%x)", wc->qp_num,
          ibv_wc_status_str(wc->status), wc->vendor_err);
  vb_fail(tc, wc_status(wc->status));
}

static void on_recv(struct rmx_tp_conn *tc, vb_rx_t *rx, const struct ibv_wc *wc)
{
  if (wc->status != IBV_WC_SUCCESS) {
    if (wc->status != IBV_WC_WR_FLUSH_ERR)
      qp_error(tc, wc);
    return; /* flushed buffers are not given back */
  }
  if (tc->dead || tc->closing || !tc->owner)
    return;
  if (!tc->established) { /* the peer's first message beat the CM event */
    tc->established = 1;
    tc->state = VC_UP;
    vb_raise(tc, RMX_TP_EV_ESTABLISHED, 0, NULL, NULL, 0);
    if (tc->dead || tc->closing)
      return;
  }
  if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) { /* the data is already in place */
    rmx_tp_ev_t ev = {.type = RMX_TP_EV_IMM, .imm = ntohl(wc->imm_data), .len = wc->byte_len};
    tc->tp->env->event(tc->owner, &ev);
  } else {
    vb_raise(tc, RMX_TP_EV_RECV, 0, NULL, (const void *)(uintptr_t)rx->sge.addr, wc->byte_len);
  }
  if (tc->dead || tc->closing)
    return;
  /* Given back in one list per connection at the end of the batch. */
  rx->wr.next = NULL;
  if (tc->repost_last)
    tc->repost_last->next = &rx->wr;
  else {
    tc->repost = &rx->wr;
    rmx_list_push(&tc->tp->repost, &tc->repost_link);
  }
  tc->repost_last = &rx->wr;
}

static void on_wc(const struct ibv_wc *wc)
{
  if (wc->wr_id & RX_TAG) {
    vb_rx_t *rx = (vb_rx_t *)(uintptr_t)(wc->wr_id & ~(uint64_t)RX_TAG);
    struct rmx_tp_conn *tc = rx->tc;
    tc->rx_posted--;
    if (tc->state == VC_DRAINING)
      check_drained(tc);
    else
      on_recv(tc, rx, wc);
    return;
  }
  vb_slot_t *s = (vb_slot_t *)(uintptr_t)wc->wr_id;
  struct rmx_tp_conn *tc = s->tc;
  if (s == &tc->drain_slot) {
    tc->drain_send_seen = 1;
    check_drained(tc);
    return;
  }
  if (wc->status != IBV_WC_SUCCESS && wc->status != IBV_WC_WR_FLUSH_ERR)
    qp_error(tc, wc);
  complete_upto(tc, s, wc_status(wc->status));
}

/* Give a connection's receive buffers back, as one list. */
static void repost(struct rmx_tp_conn *tc)
{
  struct ibv_recv_wr *bad, *first = tc->repost;
  rmx_list_del(&tc->repost_link);
  tc->repost = tc->repost_last = NULL;
  if (!first || tc->dead || tc->closing)
    return;
  uint32_t count = 0;
  for (struct ibv_recv_wr *w = first; w; w = w->next)
    count++;
  int rc = ibv_post_recv(tc->qp, first, &bad);
  if (rc) {
    for (struct ibv_recv_wr *w = bad; w; w = w->next)
      count--; /* these never reached the QP */
    RMX_TP_LOG(tc->tp->env, ERROR, "rdma: ibv_post_recv on QP 0x%x failed: %s", tc->qp->qp_num,
            strerror(rc));
    vb_fail(tc, vb_err_from_errno(rc));
  }
  tc->rx_posted += count;
}

void vb_repost_all(struct rmx_tp *tp)
{
  rmx_list_t *n;
  while ((n = tp->repost.next) != &tp->repost)
    repost(rmx_container_of(n, struct rmx_tp_conn, repost_link));
}

void vb_cq_drain(vb_dev_t *dev)
{
  struct ibv_wc wc[VB_POLL_BATCH];
  int n;
  while ((n = ibv_poll_cq(dev->cq, VB_POLL_BATCH, wc)) > 0)
    for (int i = 0; i < n; i++)
      on_wc(&wc[i]);
  if (n == 0)
    dev->cq_empty_gen++; /* what was queued before this poll is all seen */
  if (n < 0)
    RMX_TP_LOG(dev->tp->env, ERROR, "rdma: polling the completion queue of %s failed", dev->name);
  vb_repost_all(dev->tp);
}

/* Move the QP to the error state: every posted request completes, flushed.
 * A marker on the send queue completes after all earlier sends; receives
 * are counted down to zero. */
int vb_drain_start(struct rmx_tp_conn *tc)
{
  struct ibv_qp_attr attr = {.qp_state = IBV_QPS_ERR};
  struct ibv_send_wr *bad;

  tc->chain = tc->chain_last = NULL; /* never posted: failed with the ring */
  if (ibv_modify_qp(tc->qp, &attr, IBV_QP_STATE) != 0)
    return RMX_EIO;
  tc->drain_slot.wr = (struct ibv_send_wr){.wr_id = (uintptr_t)&tc->drain_slot,
                                           .opcode = IBV_WR_SEND,
                                           .send_flags = IBV_SEND_SIGNALED};
  if (ibv_post_send(tc->qp, &tc->drain_slot.wr, &bad) != 0)
    return RMX_EIO;
  tc->state = VC_DRAINING;
  return 0;
}
