/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A protection domain per connection (RMX_KEY_SCOPE=pd, or auto on a device
 * without type-2 memory windows). A QP reaches only MRs of its own PD, so
 * what is exposed to one peer is registered in that peer's connection's
 * PD (mem.c) and no other connection can name it, key guessed or not.
 *
 * The price is on local memory: a registration made without a connection
 * (pool slabs, cache entries, the caller's) has no MR of its own; it gets
 * one in each connection's PD the first time it is used there as a local
 * buffer (rmx__vb_pd_lkey: the last one found, then the list). Each such MR
 * is on two lists, the connection's and the registration's, and goes with
 * whichever ends first: the connection's QP (rmx__vb_pd_conn_release, from
 * rmx__vb_qp_destroy) or the registration (rmx__vb_pd_mem_release). The PD
 * is counted: its connection holds it until the QP is gone, and every MR in
 * it until deregistered, so it is deallocated after the last.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

int rmx__vb_pd_conn_open(struct rmx_tp_conn *tc)
{
  vb_pd_t *p = calloc(1, sizeof(*p));
  if (!p)
    return RMX_ENOMEM;
  p->pd = ibv_alloc_pd(tc->dev->verbs);
  if (!p->pd) {
    int rc = rmx__vb_err_from_errno(errno);
    RMX_TP_LOG(tc->tp->env, ERROR, "rdma: cannot allocate a protection domain on %s for a "
               "connection (RMX_KEY_SCOPE=pd): %s", tc->dev->name, strerror(errno));
    free(p);
    return rc;
  }
  p->refs = 1;
  p->tp = tc->tp;
  tc->own_pd = p;
  tc->pd = p->pd;
  return 0;
}

void rmx__vb_pd_unref(vb_pd_t *p)
{
  if (--p->refs)
    return;
  if (ibv_dealloc_pd(p->pd))
    RMX_TP_LOG(p->tp->env, WARN, "rdma: deallocating a connection's protection domain failed: %s",
                   strerror(errno));
  free(p);
}

static void pdmr_free(vb_pdmr_t *e)
{
  rmx_list_del(&e->conn_link);
  rmx_list_del(&e->mem_link);
  if (e->m->hit == e)
    e->m->hit = NULL;
  if (ibv_dereg_mr(e->mr))
    RMX_TP_LOG(e->tc->tp->env, WARN, "rdma: ibv_dereg_mr failed: %s", strerror(errno));
  rmx__vb_pd_unref(e->tc->own_pd);
  free(e);
}

void rmx__vb_pd_conn_release(struct rmx_tp_conn *tc)
{
  rmx_list_t *n;
  if (!tc->own_pd)
    return;
  while ((n = tc->pdmrs.next) != &tc->pdmrs)
    pdmr_free(rmx_container_of(n, vb_pdmr_t, conn_link));
  vb_pd_t *p = tc->own_pd;
  rmx__vb_pd_unref(p);
  tc->own_pd = NULL;
  tc->pd = NULL;
}

void rmx__vb_pd_mem_release(rmx_tp_mem_t *m)
{
  rmx_list_t *n;
  while ((n = m->pdmrs.next) != &m->pdmrs)
    pdmr_free(rmx_container_of(n, vb_pdmr_t, mem_link));
}

int rmx__vb_pd_lkey(struct rmx_tp_conn *tc, rmx_tp_mem_t *m, uint32_t *lkey)
{
  if (m->in_pd == tc->own_pd) { /* made for this connection */
    *lkey = m->mr->lkey;
    return 0;
  }
  vb_pdmr_t *e = m->hit;
  if (!e || e->tc != tc) {
    rmx_list_t *n;
    e = NULL;
    rmx_list_foreach(n, &m->pdmrs) {
      vb_pdmr_t *x = rmx_container_of(n, vb_pdmr_t, mem_link);
      if (x->tc == tc) {
        e = x;
        break;
      }
    }
  }
  if (!e) {
    e = calloc(1, sizeof(*e));
    if (!e)
      return RMX_ENOMEM;
    e->mr = ibv_reg_mr(tc->pd, m->addr, m->len, (int)m->local);
    if (!e->mr) {
      int rc = rmx__vb_reg_err(tc->tp, m->len, errno);
      free(e);
      return rc;
    }
    e->tc = tc;
    e->m = m;
    tc->own_pd->refs++;
    rmx_list_push(&tc->pdmrs, &e->conn_link);
    rmx_list_push(&m->pdmrs, &e->mem_link);
  }
  m->hit = e;
  *lkey = e->mr->lkey;
  return 0;
}
