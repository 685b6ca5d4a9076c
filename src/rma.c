/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One-sided operations: read, write, write-with-immediate, atomics.
 *
 * Each user operation becomes one transport operation per local buffer and
 * per max_io bytes (or the connection's io_max); it completes when the
 * last of them has, with the first error any of them saw. Operations wait in the connection's rmaq while the
 * send queue is full. A write-with-immediate uses one of the peer's receive
 * buffers, so it waits for credits in the sendq like a message, which also
 * keeps its place in the message order. Transfer requests (src/xfer/) wait
 * in the same rmaq, posting through their own class.
 */
#include <stdlib.h>
#include <string.h>

#include "rmx_int.h"

static rmx__rma_t *rma_get(rmx_ctx_t *ctx)
{
  rmx_list_t *n = rmx_list_pop(&ctx->free_rma);
  rmx__rma_t *r = n ? rmx_container_of(n, rmx__rma_t, link) : malloc(sizeof(*r));
  if (r)
    memset(r, 0, sizeof(*r));
  return r;
}

static void rma_release(rmx_conn_t *c, rmx__op_t *op)
{
  rmx__rma_t *r = op->rma;
  for (int i = 0; i < r->iovcnt; i++)
    if (r->cached[i])
      rmx__regcache_put(c->ctx, r->cached[i]);
  rmx_list_push(&c->ctx->free_rma, &r->link);
  op->rma = NULL;
}

static void rma_complete(rmx__op_t *op, int status)
{
  rmx_conn_t *c = op->conn;
  rmx_op_cb cb = (rmx_op_cb)op->cb;
  void *arg = op->arg;
  rma_release(c, op);
  if (status)
    c->st.errors++;
  rmx__op_put(op);
  if (cb)
    cb(c, status, arg);
}

/* Post what fits of op; 0 when all of it is posted. */
static int rma_post(rmx_conn_t *c, rmx__op_t *op)
{
  rmx__rma_t *r = op->rma;
  int rc;
  if (c->rma_out >= c->rma_window)
    return RMX_EAGAIN; /* the peer's window is full: after a completion */
  if (r->kind == RMX_TP_EV_ATOMIC) {
    rc = c->ops->atomic(c->tc, r->akind, r->raddr, r->rkey, r->cmp_add, r->swap, r->old, op);
    if (rc)
      return rc;
    r->posted++;
    c->rma_out++;
    r->all_posted = 1;
    return 0;
  }
  while (r->next_iov < r->iovcnt) {
    if (c->rma_out >= c->rma_window)
      return RMX_EAGAIN;
    rmx_iov_t *v = &r->iov[r->next_iov];
    uint64_t rpos = 0;
    for (int i = 0; i < r->next_iov; i++)
      rpos += r->iov[i].len;
    size_t left = v->len - r->next_off;
    size_t most = rmx__io_most(c);
    size_t chunk = left < most ? left : most;
    int last = r->next_iov == r->iovcnt - 1 && chunk == left;
    uint8_t *local = (uint8_t *)v->addr + r->next_off;
    uint64_t raddr = r->raddr + rpos + r->next_off;
    if (r->kind == RMX_TP_EV_READ)
      rc = c->ops->read(c->tc, local, chunk, r->lmem[r->next_iov], raddr, r->rkey, op);
    else
      rc = c->ops->write(c->tc, local, chunk, r->lmem[r->next_iov], raddr, r->rkey,
                         op->kind == RMX_OP_RMA_IMM && last ? &r->imm : NULL, op);
    if (rc)
      return rc;
    r->posted++;
    c->rma_out++;
    r->next_off += chunk;
    if (r->next_off == v->len) {
      r->next_iov++;
      r->next_off = 0;
    }
  }
  r->all_posted = 1;
  return 0;
}

void rmx__rma_progress(rmx_conn_t *c)
{
  rmx_list_t *n;
  while ((n = c->rmaq.next) != &c->rmaq) {
    rmx__op_t *op = rmx_container_of(n, rmx__op_t, link);
    int rc = c->ctx->opc[op->kind]->post(c, op); /* rma_post, or a transfer request's */
    if (rc == RMX_EAGAIN)
      return;
    if (rc) { /* stays queued; fails with the connection */
      rmx__conn_down(c, rc);
      return;
    }
    rmx_list_del(n);
  }
}

/* The transport reported one part. */
static void rma_event(rmx_conn_t *c, rmx__op_t *op, int status)
{
  rmx__rma_t *r = op->rma;
  r->done++;
  if (status && !op->status)
    op->status = status;
  if (r->all_posted && r->done == r->posted)
    rma_complete(op, rmx__op_status(c, op->status));
  /* A slot freed: what waited for send-queue room may go now, also a
   * write with immediate that a close still sends before BYE. */
  if (c->state == RMX_CS_ESTABLISHED || c->bye_wait)
    rmx__msg_progress(c);
}

/* The connection is gone and the transport has reported every posted part. */
static void rma_fail(rmx__op_t *op, int status)
{
  rma_complete(op, rmx__op_status(op->conn, op->status ? op->status : status));
}

/* Reads, writes, atomics, and writes with immediate (posted from the send
 * queue, where they wait for a credit). */
const rmx__op_class_t rmx__rma_class = {.done = rma_event, .fail = rma_fail, .post = rma_post};

/* ---- the calls ---- */

static int check_range(rmx_conn_t *c, const rmx_rkey_t *rk, uint64_t offset, uint64_t len,
                       unsigned need)
{
  if (!c || !rk)
    return RMX_EINVAL;
  if (c->state != RMX_CS_ESTABLISHED)
    return RMX_ENOTCONN;
  if (rk->tpi != c->tpi)
    return RMX_EINVAL;
  if (!(rk->access & need) || offset > rk->len || len > rk->len - offset)
    return RMX_EACCES; /* the peer would refuse it: nothing is sent */
  return 0;
}

/* An op with its one-sided state, aimed at raddr. */
static rmx__op_t *rma_op(rmx_conn_t *c, rmx__op_kind_t opkind, rmx_tp_ev_type_t kind,
                         uint64_t raddr, uint64_t rkey)
{
  rmx__op_t *op = rmx__op_get(c->ctx, c, opkind);
  rmx__rma_t *r = op ? rma_get(c->ctx) : NULL;
  if (!r) {
    if (op)
      rmx__op_put(op);
    return NULL;
  }
  op->rma = r;
  r->kind = (uint8_t)kind;
  r->raddr = raddr;
  r->rkey = rkey;
  return op;
}

static int rma_start(rmx_conn_t *c, rmx_tp_ev_type_t kind, const rmx_iov_t *iov, int n,
                     rmx_rkey_t *rk, uint64_t offset, const uint32_t *imm, rmx_op_cb cb,
                     void *arg)
{
  uint64_t total = 0;
  int rc;
  if (!iov || n < 1 || n > RMX_RMA_MAX_IOV)
    return RMX_EINVAL;
  for (int i = 0; i < n; i++) {
    if (!iov[i].addr && iov[i].len)
      return RMX_EINVAL;
    total += iov[i].len;
  }
  if ((rc = check_range(c, rk, offset, total,
                        kind == RMX_TP_EV_READ ? RMX_MEM_REMOTE_READ : RMX_MEM_REMOTE_WRITE)))
    return rc;
  rmx__op_t *op = rma_op(c, imm ? RMX_OP_RMA_IMM : RMX_OP_RMA, kind, rk->base + offset, rk->key);
  if (!op)
    return RMX_ENOMEM;
  rmx__rma_t *r = op->rma;
  memcpy(r->iov, iov, sizeof(*iov) * (size_t)n);
  unsigned acc = kind == RMX_TP_EV_READ ? RMX_TP_ACC_LOCAL : 0;
  for (int i = 0; i < n; i++) {
    rc = rmx__mem_local(c, iov[i].addr, iov[i].len, acc, iov[i].mem, &r->lmem[i], &r->cached[i]);
    if (rc) {
      r->iovcnt = i;
      rma_release(c, op);
      rmx__op_put(op);
      return rc;
    }
  }
  r->iovcnt = n;
  op->cb = (rmx_send_cb)cb;
  op->arg = arg;
  op->len = total;
  if (imm) {
    r->imm = *imm;
    rmx__msg_submit(c, op);
  } else {
    rmx_list_push(&c->rmaq, &op->link);
    rmx__msg_progress(c);
  }
  return 0;
}

int rmx_write(rmx_conn_t *c, const rmx_iov_t *iov, int iovcnt, rmx_rkey_t *rk, uint64_t offset,
              rmx_op_cb cb, void *arg)
{
  return rma_start(c, RMX_TP_EV_WRITE, iov, iovcnt, rk, offset, NULL, cb, arg);
}

int rmx_read(rmx_conn_t *c, const rmx_iov_t *iov, int iovcnt, rmx_rkey_t *rk, uint64_t offset,
             rmx_op_cb cb, void *arg)
{
  return rma_start(c, RMX_TP_EV_READ, iov, iovcnt, rk, offset, NULL, cb, arg);
}

int rmx_write_imm(rmx_conn_t *c, const rmx_iov_t *iov, int iovcnt, rmx_rkey_t *rk,
                  uint64_t offset, uint32_t imm, rmx_op_cb cb, void *arg)
{
  return rma_start(c, RMX_TP_EV_WRITE, iov, iovcnt, rk, offset, &imm, cb, arg);
}

static int atomic_start(rmx_conn_t *c, rmx_rkey_t *rk, uint64_t offset, rmx_tp_atomic_t kind,
                        uint64_t cmp_add, uint64_t swap, uint64_t *old, rmx_op_cb cb, void *arg)
{
  int rc;
  if (!old)
    return RMX_EINVAL;
  if ((rc = check_range(c, rk, offset, 8, RMX_MEM_REMOTE_ATOMIC)))
    return rc;
  if ((rk->base + offset) % 8)
    return RMX_EINVAL;
  if (!(c->ops->caps(c->tc) & RMX_TP_CAP_ATOMIC))
    return RMX_ENOTSUP;
  rmx__op_t *op = rma_op(c, RMX_OP_RMA, RMX_TP_EV_ATOMIC, rk->base + offset, rk->key);
  if (!op)
    return RMX_ENOMEM;
  rmx__rma_t *r = op->rma;
  r->akind = kind;
  r->cmp_add = cmp_add;
  r->swap = swap;
  r->old = old;
  op->cb = (rmx_send_cb)cb;
  op->arg = arg;
  rmx_list_push(&c->rmaq, &op->link);
  rmx__msg_progress(c);
  return 0;
}

int rmx_atomic_fadd(rmx_conn_t *c, rmx_rkey_t *rk, uint64_t offset, uint64_t add, uint64_t *old,
                    rmx_op_cb cb, void *arg)
{
  return atomic_start(c, rk, offset, RMX_TP_FADD, add, 0, old, cb, arg);
}

int rmx_atomic_cswap(rmx_conn_t *c, rmx_rkey_t *rk, uint64_t offset, uint64_t compare,
                     uint64_t swap, uint64_t *old, rmx_op_cb cb, void *arg)
{
  return atomic_start(c, rk, offset, RMX_TP_CSWAP, compare, swap, old, cb, arg);
}
