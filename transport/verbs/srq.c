/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A device's shared receive queue (RMX_SRQ): srq_depth buffers in one
 * registered region, posted once, each given back after its message was
 * delivered (in one list per CQ drain) and counted again; the limit event
 * rings when fewer than a quarter are posted. Also the map from QP number
 * to connection, which a shared buffer's completion is found by (a
 * buffer names no connection) and which the async events use.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

/* ---- QP number to connection: open addressing, linear probing ---- */

static uint32_t qpn_hash(uint32_t qpn, uint32_t mask) { return (qpn * 2654435761u) & mask; }

static int qpn_grow(vb_dev_t *dev)
{
  uint32_t cap = dev->qpn_cap ? dev->qpn_cap * 2 : 64;
  struct rmx_tp_conn **t = calloc(cap, sizeof(*t));
  if (!t)
    return RMX_ENOMEM;
  for (uint32_t i = 0; i < dev->qpn_cap; i++) {
    struct rmx_tp_conn *tc = dev->qpn_map[i];
    if (!tc)
      continue;
    uint32_t j = qpn_hash(tc->qpn, cap - 1);
    while (t[j])
      j = (j + 1) & (cap - 1);
    t[j] = tc;
  }
  free(dev->qpn_map);
  dev->qpn_map = t;
  dev->qpn_cap = cap;
  return 0;
}

int rmx__vb_qpn_add(vb_dev_t *dev, struct rmx_tp_conn *tc)
{
  if ((dev->nqp + 1) * 2 > dev->qpn_cap && qpn_grow(dev) != 0)
    return RMX_ENOMEM;
  uint32_t mask = dev->qpn_cap - 1, i = qpn_hash(tc->qpn, mask);
  while (dev->qpn_map[i])
    i = (i + 1) & mask;
  dev->qpn_map[i] = tc;
  dev->nqp++;
  tc->in_map = 1;
  return 0;
}

struct rmx_tp_conn *rmx__vb_qpn_find(const vb_dev_t *dev, uint32_t qpn)
{
  if (!dev->qpn_cap)
    return NULL;
  uint32_t mask = dev->qpn_cap - 1;
  for (uint32_t i = qpn_hash(qpn, mask); dev->qpn_map[i]; i = (i + 1) & mask)
    if (dev->qpn_map[i]->qpn == qpn)
      return dev->qpn_map[i];
  return NULL;
}

/* Remove, shifting back the entries after it that probed past its slot. */
void rmx__vb_qpn_del(vb_dev_t *dev, struct rmx_tp_conn *tc)
{
  if (!tc->in_map)
    return;
  tc->in_map = 0;
  uint32_t mask = dev->qpn_cap - 1, i = qpn_hash(tc->qpn, mask);
  while (dev->qpn_map[i] != tc)
    i = (i + 1) & mask;
  dev->qpn_map[i] = NULL;
  dev->nqp--;
  for (uint32_t j = (i + 1) & mask; dev->qpn_map[j]; j = (j + 1) & mask) {
    uint32_t home = qpn_hash(dev->qpn_map[j]->qpn, mask);
    /* j's entry may move to the hole at i when its home is not in (i, j] */
    if (((j - home) & mask) >= ((j - i) & mask)) {
      dev->qpn_map[i] = dev->qpn_map[j];
      dev->qpn_map[j] = NULL;
      i = j;
    }
  }
}

/* ---- the shared receive queue ---- */

static void srq_arm(vb_dev_t *dev)
{
  struct ibv_srq_attr a = {.srq_limit = dev->srq_depth / 4};
  if (ibv_modify_srq(dev->srq, &a, IBV_SRQ_LIMIT))
    RMX_TP_LOG(dev->tp->env, DEBUG, "rdma: %s: the shared receive queue's limit cannot be "
               "armed; it is refilled at every completion batch all the same", dev->name);
}

int rmx__vb_srq_get(vb_dev_t *dev)
{
  const rmx_config_t *cfg = dev->tp->env->cfg;
  struct ibv_recv_wr *bad;
  if (dev->srq)
    return 0;
  if (dev->attr.max_srq <= 0 || dev->attr.max_srq_wr <= 1 || dev->pd_per_conn)
    return RMX_ENOTSUP;
  uint32_t depth = cfg->srq_depth;
  if (depth > (uint32_t)dev->attr.max_srq_wr - 1)
    depth = (uint32_t)dev->attr.max_srq_wr - 1;
  size_t bytes = ((size_t)depth * cfg->eager_size + 4095) & ~(size_t)4095;
  struct ibv_srq_init_attr ia = {.srq_context = dev, .attr = {.max_wr = depth, .max_sge = 1}};
  int rc = RMX_ENOMEM;
  if (!(dev->srq_mem = aligned_alloc(4096, bytes)) ||
      !(dev->srq_rx = calloc(depth, sizeof(*dev->srq_rx))))
    goto err;
  if (!(dev->srq_mr = ibv_reg_mr(dev->pd, dev->srq_mem, bytes, IBV_ACCESS_LOCAL_WRITE))) {
    rc = rmx__vb_reg_err(dev->tp, bytes, errno);
    goto err;
  }
  dev->tp->reg_bytes += bytes;
  if (!(dev->srq = ibv_create_srq(dev->pd, &ia))) {
    rc = rmx__vb_err_from_errno(errno);
    RMX_TP_LOG(dev->tp->env, ERROR, "rdma: cannot create a shared receive queue of %u on %s: %s",
               depth, dev->name, rmx_strerror(rc));
    goto err;
  }
  dev->srq_depth = depth;
  for (uint32_t i = 0; i < depth; i++) {
    vb_rx_t *rx = &dev->srq_rx[i];
    rx->dev = dev;
    rx->sge.addr = (uintptr_t)(dev->srq_mem + (size_t)i * cfg->eager_size);
    rx->sge.length = cfg->eager_size;
    rx->sge.lkey = dev->srq_mr->lkey;
    rx->wr.wr_id = (uintptr_t)rx | VB_RX_TAG;
    rx->wr.sg_list = &rx->sge;
    rx->wr.num_sge = 1;
    rx->wr.next = i + 1 < depth ? &dev->srq_rx[i + 1].wr : NULL;
  }
  if ((rc = ibv_post_srq_recv(dev->srq, &dev->srq_rx[0].wr, &bad)) != 0) {
    rc = rmx__vb_err_from_errno(rc);
    goto err;
  }
  srq_arm(dev);
  RMX_TP_LOG(dev->tp->env, INFO, "rdma: %s: shared receive queue of %u buffers (%zu KiB)",
             dev->name, depth, bytes >> 10);
  return 0;
err:
  rmx__vb_srq_free(dev);
  return rc;
}

void rmx__vb_srq_give(vb_dev_t *dev, vb_rx_t *rx)
{
  rx->wr.next = NULL;
  if (dev->srq_repost_last)
    dev->srq_repost_last->next = &rx->wr;
  else
    dev->srq_repost = &rx->wr;
  dev->srq_repost_last = &rx->wr;
}

void rmx__vb_srq_repost(vb_dev_t *dev)
{
  struct ibv_recv_wr *bad, *first = dev->srq_repost;
  dev->srq_repost = dev->srq_repost_last = NULL;
  if (!first || !dev->srq)
    return;
  int rc = ibv_post_srq_recv(dev->srq, first, &bad);
  if (rc) {
    /* Not expected (the queue holds every buffer): keep what did not go
     * for the next drain rather than lose the room. */
    RMX_TP_LOG(dev->tp->env, ERROR, "rdma: %s: ibv_post_srq_recv failed: %s", dev->name,
               strerror(rc));
    dev->srq_repost = bad;
    for (dev->srq_repost_last = bad; dev->srq_repost_last->next;)
      dev->srq_repost_last = dev->srq_repost_last->next;
  }
}

void rmx__vb_srq_limit(vb_dev_t *dev)
{
  if (!dev->srq)
    return;
  dev->srq_limits++;
  RMX_TP_LOG(dev->tp->env, DEBUG, "rdma: %s: shared receive queue below %u buffers (%llu times)",
             dev->name, dev->srq_depth / 4, (unsigned long long)dev->srq_limits);
  rmx__vb_srq_repost(dev);
  srq_arm(dev); /* the event is one-shot */
}

void rmx__vb_srq_free(vb_dev_t *dev)
{
  if (dev->srq && ibv_destroy_srq(dev->srq))
    RMX_TP_LOG(dev->tp->env, WARN, "rdma: destroying the shared receive queue of %s failed",
               dev->name);
  if (dev->srq_mr) {
    dev->tp->reg_bytes -= dev->srq_mr->length;
    if (ibv_dereg_mr(dev->srq_mr))
      RMX_TP_LOG(dev->tp->env, WARN, "rdma: deregistering the shared receive buffers failed");
  }
  free(dev->srq_mem);
  free(dev->srq_rx);
  dev->srq = NULL;
  dev->srq_mr = NULL;
  dev->srq_mem = NULL;
  dev->srq_rx = NULL;
}
