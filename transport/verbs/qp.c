/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Queue pairs: creation (receive buffers posted as one list, or the SRQ),
 * the ring of send slots with selective signaling, posting sends, RDMA
 * reads, writes and atomics, and flush, which gives receive buffers back
 * and rings the doorbell. What the CM gives a QP is qpattr.c's, what
 * completes is cq.c's, what ends a QP is ep.c's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

/* ---- creation ---- */

static void rx_init(struct rmx_tp_conn *tc, uint32_t i)
{
  vb_rx_t *rx = &tc->rx[i];
  rx->tc = tc;
  rx->sge.addr = (uintptr_t)(tc->rx_mem + (size_t)i * tc->rx_size);
  rx->sge.length = (uint32_t)tc->rx_size;
  rx->sge.lkey = tc->rx_mr->lkey;
  rx->wr.wr_id = (uintptr_t)rx | VB_RX_TAG;
  rx->wr.sg_list = &rx->sge;
  rx->wr.num_sge = 1;
  rx->wr.next = i + 1 < tc->rx_count ? &tc->rx[i + 1].wr : NULL;
}

/* The largest message a port of dev sends, asked of the device once: no
 * device query per connection. */
static uint64_t port_max_msg(vb_dev_t *dev, uint8_t port)
{
  struct ibv_port_attr pa;
  uint64_t *known = port >= 1 && port <= 4 ? &dev->port_max_msg[port - 1] : NULL;
  if (known && *known)
    return *known;
  uint64_t max = 1u << 30;
  if (ibv_query_port(dev->verbs, port, &pa) == 0 && pa.max_msg_sz)
    max = pa.max_msg_sz;
  if (known)
    *known = max;
  return max;
}

/* Register tc's region (or the part of it that needs a key). */
static int region_reg(struct rmx_tp_conn *tc, void *addr, size_t len)
{
  if (!(tc->rx_mr = ibv_reg_mr(tc->pd, addr, len, IBV_ACCESS_LOCAL_WRITE)))
    return rmx__vb_reg_err(tc->tp, len, errno);
  tc->tp->reg_bytes += len;
  return 0;
}

/* Whether tc's QP takes its receives from the device's SRQ: 0 or 1, or an
 * error when RMX_SRQ=1 cannot be had. */
static int srq_wanted(struct rmx_tp_conn *tc)
{
  const rmx_config_t *cfg = tc->tp->env->cfg;
  vb_dev_t *dev = tc->dev;
  if (cfg->srq == RMX_SRQ_OFF || (cfg->srq == RMX_SRQ_AUTO && dev->nqp < RMX_SRQ_AUTO_OWN))
    return 0;
  int rc = rmx__vb_srq_get(dev);
  if (rc == 0)
    return 1;
  if (cfg->srq == RMX_SRQ_AUTO)
    return 0; /* its own receive queue, as before the threshold */
  if (rc == RMX_ENOTSUP)
    RMX_TP_LOG_LIMITED(tc->tp->env, &tc->tp->rl_refused, uv_now(tc->tp->loop), ERROR,
                       "rdma: RMX_SRQ=1, but %s %s: connection refused (RMX_SRQ=auto uses a "
                       "receive queue per connection there)", dev->name,
                       dev->pd_per_conn ? "has a protection domain per connection "
                                          "(RMX_KEY_SCOPE=pd, or not the context's first "
                                          "device), which a shared queue cannot serve"
                                        : "has no shared receive queues");
  return rc;
}

int rmx__vb_qp_create(struct rmx_tp_conn *tc)
{
  struct rmx_tp *tp = tc->tp;
  vb_dev_t *dev = tc->dev;
  const rmx_config_t *cfg = tp->env->cfg;
  struct ibv_recv_wr *bad;
  int rc;

  int srq = srq_wanted(tc);
  if (srq < 0)
    return srq;
  tc->srq = (uint8_t)srq;
  /* Deep enough for a window of messages each way and the rendezvous
   * reads; on the shared queue, small: connections there are many, and
   * what the ring cannot take waits in the core, which hears when there
   * is room (want_room). The core asks for no read or write longer than
   * io_max (half the ring's worth of the port's largest message), so
   * three entries are enough for anything. */
  tc->max_msg = port_max_msg(dev, tc->id->port_num);
  uint32_t sq = cfg->sq_depth ? cfg->sq_depth
                : srq         ? VB_SRQ_SQ
                              : 2 * cfg->rx_depth + 2 * cfg->rndv_depth + 8;
  if (sq < VB_SQ_MIN)
    sq = VB_SQ_MIN;
  uint32_t rq = srq ? 0 : cfg->rx_depth + 2; /* + BYE and one of slack */
  if (sq + 1 > (uint32_t)dev->attr.max_qp_wr)
    sq = (uint32_t)dev->attr.max_qp_wr - 1;
  int need = (int)(sq + rq + 2);
  if (!(tc->cq = rmx__vb_cq_take(dev, need, srq)))
    return RMX_ENOMEM;
  tc->sq_depth = sq;
  tc->sig_every = sq / 2 < VB_SIG_EVERY ? sq / 2 : VB_SIG_EVERY;
  tc->rx_count = rq;
  tc->rx_size = cfg->eager_size;
  /* One region: the receive buffers (none on the SRQ), each slot's bounce
   * area, each slot's 8 bytes for an atomic's result. Pages where it holds
   * receive buffers; on the SRQ, under a kilobyte from the heap (pinning
   * the pages it is on, which are resident anyway), not a page of its own. */
  size_t rx_bytes = (size_t)rq * tc->rx_size, bounce_bytes = (size_t)sq * VB_BOUNCE;
  size_t align = rq ? 4096 : 64;
  size_t bytes = (rx_bytes + bounce_bytes + (size_t)sq * 8 + align - 1) & ~(align - 1);
  tc->rx_mem = aligned_alloc(align, bytes);
  tc->slots = calloc(sq, sizeof(*tc->slots));
  tc->rx = rq ? calloc(rq, sizeof(*tc->rx)) : NULL;
  if (!tc->rx_mem || !tc->slots || (rq && !tc->rx)) {
    rc = RMX_ENOMEM;
    goto err;
  }
  tc->bounce = tc->rx_mem + rx_bytes;
  tc->atomics = tc->bounce + bounce_bytes;
  tc->pd = dev->pd;
  if (dev->pd_per_conn && (rc = rmx__vb_pd_conn_open(tc)) != 0)
    goto err;
  /* With receive buffers, registered now: they are posted as soon as the
   * QP is made. On the SRQ, once the QP tells how much it inlines. */
  if (!srq && (rc = region_reg(tc, tc->rx_mem, bytes)) != 0)
    goto err;
  for (uint32_t i = 0; i < sq; i++)
    tc->slots[i].tc = tc;

  struct ibv_qp_init_attr qa = {
    .qp_context = tc, .send_cq = tc->cq->cq, .recv_cq = tc->cq->cq, .qp_type = IBV_QPT_RC,
    .srq = srq ? dev->srq : NULL,
    .cap = {.max_send_wr = sq + 1, .max_recv_wr = srq ? 0 : rq + 1,
            .max_send_sge = RMX_TP_MAX_SGE, .max_recv_sge = srq ? 0 : 1,
            .max_inline_data = VB_INLINE_WANT},
  };
  /* Devices differ in how much they inline; ask for less until one fits. */
  static const uint32_t inl_own[] = VB_INLINE_TRY, inl_srq[] = VB_INLINE_TRY_SRQ;
  const uint32_t *inl = srq ? inl_srq : inl_own;
  for (size_t i = 0; i < sizeof(inl_own) / sizeof(inl_own[0]); i++) {
    qa.cap.max_inline_data = inl[i];
    if ((rc = rdma_create_qp(tc->id, tc->pd, &qa)) == 0)
      break;
  }
  if (rc) {
    rc = rmx__vb_err_from_errno(errno);
    if (rc == RMX_ENOMEM)
      tp->refused++; /* the device's queue pairs (rmx_ctx_stats_t tp_refused) */
    /* rdma_cm refuses a QP for a request its peer has already given up
     * on, which a peer can repeat at will: a line it cannot flood. */
    if (tc->passive && rc == RMX_EINVAL)
      RMX_TP_LOG_LIMITED(tp->env, &tp->rl_refused, uv_now(tp->loop), WARN,
                         "rdma: no queue pair for the request of %s (%s): it may have given "
                         "up on it", tc->peer, rmx_strerror(rc));
    else
      RMX_TP_LOG(tp->env, ERROR, "rdma: cannot create a queue pair on %s: %s", dev->name,
                 rmx_strerror(rc));
    goto err;
  }
  tc->qp = tc->id->qp;
  tc->qpn = tc->qp->qp_num;
  tc->cq->used += need;
  tc->cq_resv = need;
  if ((rc = rmx__vb_qpn_add(dev, tc)) != 0)
    goto err;
  tc->max_inline = qa.cap.max_inline_data;
  /* Every copied send inlines from its bounce area where the QP inlines a
   * whole one: then only the atomics' results need a key. */
  if (srq && (rc = tc->max_inline >= VB_BOUNCE
                       ? region_reg(tc, tc->atomics, (size_t)sq * 8)
                       : region_reg(tc, tc->rx_mem, bytes)) != 0)
    goto err;

  for (uint32_t i = 0; i < rq; i++)
    rx_init(tc, i);
  if (rq && (rc = ibv_post_recv(tc->qp, &tc->rx[0].wr, &bad)) != 0) {
    rc = rmx__vb_err_from_errno(rc);
    goto err;
  }
  tc->rx_posted = rq;
  tc->drain_slot.tc = tc;
  tc->drain_slot.kind = SLOT_DRAIN;
  return 0;

err:
  rmx__vb_qp_destroy(tc);
  return rc;
}

/* ---- receive buffers ---- */

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
    /* Possibly inside a core call (flush): report from the loop, as a
     * failed post_send is. */
    tc->fail_status = rmx__vb_err_from_errno(rc);
    vb_kick(tc->tp);
  }
  tc->rx_posted += count;
}

void rmx__vb_repost_all(struct rmx_tp *tp)
{
  rmx_list_t *n;
  while ((n = tp->repost.next) != &tp->repost)
    repost(rmx_container_of(n, struct rmx_tp_conn, repost_link));
}

/* ---- posting ---- */

static vb_slot_t *slot_take(struct rmx_tp_conn *tc, slot_kind_t kind, void *op)
{
  vb_slot_t *s = &tc->slots[tc->head++ % tc->sq_depth];
  s->kind = (uint8_t)kind;
  s->op = op;
  s->signaled = 0;
  if (kind == SLOT_SEND) { /* a send reads only these: no 128-byte clear per message */
    s->wr.next = NULL;
    s->wr.send_flags = 0;
    s->wr.imm_data = 0;
  } else {
    memset(&s->wr, 0, sizeof(s->wr));
  }
  s->wr.wr_id = (uintptr_t)s;
  s->wr.sg_list = s->sge;
  return s;
}

/* A post refused for want of room: the completion that frees some tells
 * the owner (complete_upto), whichever slot it was for. */
static int ring_full(struct rmx_tp_conn *tc)
{
  tc->want_room = 1;
  return RMX_EAGAIN;
}

/* Chain a built request; every VB_SIG_EVERY-th is signaled so the ring
 * cannot fill with requests nobody will hear about. */
static void chain(struct rmx_tp_conn *tc, vb_slot_t *s, int must_signal)
{
  if (must_signal || ++tc->posted_unsig >= tc->sig_every) {
    s->wr.send_flags |= IBV_SEND_SIGNALED;
    s->signaled = 1;
    tc->posted_unsig = 0;
    tc->unsig_ops = 0;
  } else if (s->op) {
    tc->unsig_ops = 1; /* someone waits for it: the batch's last is signaled */
  }
  if (tc->chain_last) {
    tc->chain_last->next = &s->wr;
  } else {
    tc->chain = &s->wr;
    rmx_list_push(&tc->tp->unflushed, &tc->flush_link);
  }
  tc->chain_last = &s->wr;
}

/* A send gathered now into the registered bounce area of the slot it
 * takes, inlined from there when it fits: a copied send (op NULL,
 * RMX_TP_F_SEND_COPY: nothing of the caller's is read later), or a frame
 * without a key too long to inline. */
static int send_copy(struct rmx_tp_conn *tc, const rmx_tp_sge_t *sge, int n, void *op)
{
  uint8_t *b = tc->bounce + (size_t)(tc->head % tc->sq_depth) * VB_BOUNCE;
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    if (sge[i].len > VB_BOUNCE - total)
      return RMX_EINVAL; /* unregistered memory is only for small frames */
    memcpy(b + total, sge[i].addr, sge[i].len);
    total += sge[i].len;
  }
  if (total > tc->rx_size)
    return RMX_EMSGSIZE;
  vb_slot_t *s = slot_take(tc, SLOT_SEND, op);
  s->wr.opcode = IBV_WR_SEND;
  s->wr.send_flags = total <= tc->max_inline ? IBV_SEND_INLINE : 0;
  s->sge[0] = (struct ibv_sge){.addr = (uintptr_t)b, .length = (uint32_t)total,
                               .lkey = tc->rx_mr->lkey};
  s->wr.num_sge = 1;
  chain(tc, s, 0);
  return 0;
}

int rmx__vb_send(struct rmx_tp_conn *tc, const rmx_tp_sge_t *sge, int n, void *op)
{
  size_t total = 0;
  int need_lkey = 0;

  if (tc->dead || tc->closing || tc->state != VC_UP)
    return RMX_ENOTCONN;
  if (n < 1 || n > RMX_TP_MAX_SGE)
    return RMX_EINVAL;
  /* What is sent may carry a window's key: its bind goes first. */
  if (!rmx__vb_binds_chain(tc) || tc->head - tc->tail >= tc->sq_depth)
    return ring_full(tc);
  if (!op)
    return send_copy(tc, sge, n, NULL);
  uint32_t lkey[RMX_TP_MAX_SGE];
  for (int i = 0; i < n; i++) {
    total += sge[i].len;
    need_lkey |= sge[i].mem == NULL;
  }
  if (total > tc->rx_size)
    return RMX_EMSGSIZE;
  int inl = total <= tc->max_inline;
  if (need_lkey && !inl)
    return send_copy(tc, sge, n, op);
  if (!inl)
    for (int i = 0; i < n; i++) {
      int rc = vb_lkey(tc, sge[i].mem, &lkey[i]);
      if (rc)
        return rc;
    }
  vb_slot_t *s = slot_take(tc, SLOT_SEND, op);
  s->wr.opcode = IBV_WR_SEND;
  if (inl)
    s->wr.send_flags = IBV_SEND_INLINE;
  for (int i = 0; i < n; i++)
    s->sge[i] = (struct ibv_sge){.addr = (uintptr_t)sge[i].addr, .length = (uint32_t)sge[i].len,
                                 .lkey = inl ? 0 : lkey[i]};
  s->wr.num_sge = n;
  chain(tc, s, 0);
  return 0;
}

int rmx__vb_binds_chain(struct rmx_tp_conn *tc)
{
  rmx_list_t *n;
  while ((n = tc->bind_wait.next) != &tc->bind_wait) {
    if (tc->head - tc->tail >= tc->sq_depth)
      return ring_full(tc), 0;
    rmx_tp_mem_t *m = rmx_container_of(n, rmx_tp_mem_t, wait_link);
    rmx_list_del(n);
    m->waiting = 0;
    vb_slot_t *s = slot_take(tc, SLOT_INTERNAL, NULL);
    s->wr.opcode = IBV_WR_BIND_MW;
    s->wr.bind_mw.mw = m->mw;
    s->wr.bind_mw.rkey = m->rkey;
    s->wr.bind_mw.bind_info = (struct ibv_mw_bind_info){
      .mr = m->mr, .addr = (uintptr_t)m->addr, .length = m->len,
      .mw_access_flags = m->remote};
    s->wr.num_sge = 0;
    chain(tc, s, 0);
  }
  return 1;
}

/* The slot stays taken, unposted: the next signaled completion retires it
 * with the unsignaled ones before it, or the close does. */
void rmx__vb_bind_unchain(struct rmx_tp_conn *tc, struct ibv_mw *mw)
{
  struct ibv_send_wr *prev = NULL;
  for (struct ibv_send_wr *w = tc->chain; w; prev = w, w = w->next) {
    if (w->opcode != IBV_WR_BIND_MW || w->bind_mw.mw != mw)
      continue;
    if (prev)
      prev->next = w->next;
    else
      tc->chain = w->next;
    if (tc->chain_last == w)
      tc->chain_last = prev;
    if (!tc->chain)
      rmx_list_del(&tc->flush_link);
    w->next = NULL;
    return;
  }
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
    return ring_full(tc);
  uint32_t lkey = 0;
  if (mem) {
    int rc = vb_lkey(tc, mem, &lkey);
    if (rc)
      return rc;
  }
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
                                 .lkey = lkey};
    s->wr.num_sge = len ? 1 : 0;
    if (!mem && opc == IBV_WR_RDMA_WRITE)
      s->wr.send_flags = IBV_SEND_INLINE;
    chain(tc, s, last);
  }
  return 0;
}

int rmx__vb_read(struct rmx_tp_conn *tc, void *dst, size_t len, rmx_tp_mem_t *dst_mem,
                 uint64_t raddr, uint64_t rkey, void *op)
{
  return rdma_rw(tc, IBV_WR_RDMA_READ, SLOT_READ, dst, len, dst_mem, raddr, rkey, NULL, op);
}

int rmx__vb_write(struct rmx_tp_conn *tc, const void *src, size_t len, rmx_tp_mem_t *src_mem,
                  uint64_t raddr, uint64_t rkey, const uint32_t *imm, void *op)
{
  return rdma_rw(tc, IBV_WR_RDMA_WRITE, SLOT_WRITE, (void *)(uintptr_t)src, len, src_mem, raddr,
                 rkey, imm, op);
}

/* Two operations of this size fit the send ring at once. */
size_t rmx__vb_io_max(struct rmx_tp_conn *tc)
{
  uint64_t n = tc->sq_depth / 2 ? tc->sq_depth / 2 : 1;
  return tc->max_msg > SIZE_MAX / n ? SIZE_MAX : (size_t)(n * tc->max_msg);
}

unsigned rmx__vb_caps(struct rmx_tp_conn *tc)
{
  return tc->dev && tc->dev->attr.atomic_cap != IBV_ATOMIC_NONE ? RMX_TP_CAP_ATOMIC : 0;
}

int rmx__vb_atomic(struct rmx_tp_conn *tc, rmx_tp_atomic_t kind, uint64_t raddr, uint64_t rkey,
                   uint64_t cmp_add, uint64_t swap, uint64_t *old, void *op)
{
  if (tc->dead || tc->closing || tc->state != VC_UP)
    return RMX_ENOTCONN;
  if (!(rmx__vb_caps(tc) & RMX_TP_CAP_ATOMIC))
    return RMX_ENOTSUP;
  if (rkey > UINT32_MAX)
    return RMX_EINVAL;
  if (tc->head - tc->tail >= tc->sq_depth)
    return ring_full(tc);
  uint32_t idx = tc->head % tc->sq_depth;
  vb_slot_t *s = slot_take(tc, SLOT_ATOMIC, op);
  s->old = old;
  s->bounce = tc->atomics + (size_t)idx * 8; /* registered, 8-aligned */
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

/*
 * What a batch of completions made the owner post is posted when the batch
 * has been dispatched (rmx__vb_cq_drain), not a loop phase later when the core
 * flushes: the reply to a message then leaves without waiting for the rest
 * of the loop's turn. It is still one doorbell per connection per batch.
 */
void rmx__vb_flush_all(struct rmx_tp *tp)
{
  rmx_list_t *n;
  while ((n = tp->unflushed.next) != &tp->unflushed)
    rmx__vb_flush(rmx_container_of(n, struct rmx_tp_conn, flush_link));
}

void rmx__vb_flush(struct rmx_tp_conn *tc)
{
  struct ibv_send_wr *bad;
  if (!tc->chain && !tc->repost && rmx_list_empty(&tc->bind_wait))
    return; /* posted already, at the end of the batch that built it */
  /* Credits reach the peer only in what we send: buffers whose credit may
   * be in this batch go back on the receive queue first, or the peer's next
   * send could find the queue empty (an RNR NAK and a timed retry). */
  if (tc->repost)
    repost(tc);
  if (!tc->dead && !tc->closing && tc->state == VC_UP)
    rmx__vb_binds_chain(tc); /* windows bind even with nothing to send */
  if (!tc->chain)
    return;
  /* The last of a batch is signaled when an op waits on it or on one
   * before it: nothing waits on a later post. Copied sends wait on
   * nothing; they are retired by the next signaled completion. */
  vb_slot_t *last = rmx_container_of(tc->chain_last, vb_slot_t, wr);
  if (!last->signaled && tc->unsig_ops) {
    last->wr.send_flags |= IBV_SEND_SIGNALED;
    last->signaled = 1;
    tc->posted_unsig = 0;
    tc->unsig_ops = 0;
  }
  struct ibv_send_wr *first = tc->chain;
  tc->chain = tc->chain_last = NULL;
  rmx_list_del(&tc->flush_link);
  rmx__vb_spin(tc->dev); /* adaptive: what this asks for may complete soon */
  int rc = ibv_post_send(tc->qp, first, &bad);
  if (rc) {
    RMX_TP_LOG(tc->tp->env, ERROR, "rdma: ibv_post_send on QP 0x%x failed: %s", tc->qp->qp_num,
            strerror(rc));
    /* Inside a core call: report from the loop. What was not posted is
     * failed with the rest of the ring when the drain finishes. */
    tc->fail_status = rmx__vb_err_from_errno(rc);
    vb_kick(tc->tp);
  }
}
