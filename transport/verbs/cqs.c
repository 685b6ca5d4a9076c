/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The device's CQs: each QP reserves room in one for every completion it
 * can raise; where none has room the newest grows, or another is added,
 * up to the device's limits. What completes is cq.c's.
 */
#include "verbs.h"

int rmx__vb_cq_open(vb_dev_t *dev, int size)
{
  vb_cq_t *c = &dev->cqs[dev->ncq];
  if (!(c->cq = ibv_create_cq(dev->verbs, size, dev, dev->chan, 0)))
    return -1;
  if (ibv_req_notify_cq(c->cq, 0)) {
    ibv_destroy_cq(c->cq);
    c->cq = NULL;
    return -1;
  }
  c->size = c->cq->cqe;
  c->used = 0;
  c->unacked = 0;
  dev->ncq++;
  return 0;
}

vb_cq_t *rmx__vb_cq_take(vb_dev_t *dev, int need, int srq)
{
  int max = dev->attr.max_cqe, shared = (int)dev->srq_depth;
#define ROOM(c) (need + (srq && !(c)->srq_room ? shared : 0))
  vb_cq_t *c = NULL;
  for (int i = 0; i < dev->ncq && !c; i++)
    if (dev->cqs[i].used + ROOM(&dev->cqs[i]) <= dev->cqs[i].size)
      c = &dev->cqs[i];
  /* None has room: grow the newest towards the device's limit, or add one. */
  if (!c && dev->ncq > 0) {
    vb_cq_t *n = &dev->cqs[dev->ncq - 1];
    int want = n->size * 2 > max ? max : n->size * 2;
    if (n->used + ROOM(n) <= want && ibv_resize_cq(n->cq, want) == 0) {
      n->size = n->cq->cqe;
      c = n;
    }
  }
  int first = need + (srq ? shared : 0);
  int size = first > VB_CQ_FIRST ? first : VB_CQ_FIRST < max ? VB_CQ_FIRST : max;
  if (!c && dev->ncq < VB_CQ_MAX && dev->ncq < dev->attr.max_cq &&
      rmx__vb_cq_open(dev, size) == 0 && dev->cqs[dev->ncq - 1].size >= first) {
    c = &dev->cqs[dev->ncq - 1];
    RMX_TP_LOG(dev->tp->env, DEBUG, "rdma: %s: completion queue %d added (%d entries)", dev->name,
               dev->ncq, c->size);
  }
#undef ROOM
  if (!c) {
    dev->tp->refused++; /* rmx_ctx_stats_t tp_refused */
    RMX_TP_LOG_LIMITED(dev->tp->env, &dev->tp->rl_refused, uv_now(dev->tp->loop), ERROR,
                       "rdma: the completion queues of %s are full (%d of at most %d, %d entries "
                       "each at most): too many connections on one device", dev->name, dev->ncq,
                       dev->attr.max_cq < VB_CQ_MAX ? dev->attr.max_cq : VB_CQ_MAX, max);
    return NULL;
  }
  if (srq && !c->srq_room) { /* held for the CQ's life */
    c->srq_room = 1;
    c->used += shared;
  }
  return c;
}

void rmx__vb_cq_give(struct rmx_tp_conn *tc, int keep)
{
  if (tc->cq && keep < tc->cq_resv) {
    tc->cq->used -= tc->cq_resv - keep;
    tc->cq_resv = keep;
  }
}

