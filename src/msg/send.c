/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Sending messages: eager (one DATA frame, copied or the user's buffer) or
 * rendezvous (an RTS naming registered memory the peer reads, released at
 * its FIN). Messages wait in the send queue for credits (src/msg/sched.c).
 */
#include <stdlib.h>
#include <string.h>

#include "rmx_int.h"

/*
 * Register a rendezvous source for op: for this operation and this
 * connection alone, released when the operation ends; never cached, so it
 * is not left reachable afterwards (docs/security.md). (Destinations are
 * pool buffers: src/msg/recv.c.)
 */
int rmx__op_reg(rmx_conn_t *c, rmx__op_t *op, const void *addr, size_t len, unsigned access)
{
  return c->ops->mem_reg(c->ctx->tp[c->tpi], (void *)(uintptr_t)addr, len, access, c->tc,
                         &op->mem);
}

void rmx__op_unreg(rmx_conn_t *c, rmx__op_t *op)
{
  if (op->mem)
    c->ops->mem_dereg(op->mem);
  op->mem = NULL;
}

/* Flag an encoded DATA frame: an RPC extension written at ext, or a
 * notification (which has none). */
static void frame_flag(uint8_t *hdr, uint8_t flag, uint8_t *ext, const rmx_wire_rpc_t *rpc)
{
  if (flag == RMX_FF_NOTIFY)
    rmx__wire_notify_mark(hdr);
  else if (flag)
    rmx__wire_rpc_add(hdr, flag, ext, rpc);
}

/* Complete a user send exactly once and release what it held. */
static void user_done(rmx__op_t *op, int status)
{
  rmx_conn_t *c = op->conn;
  rmx__op_unreg(c, op);
  if (op->buf)
    rmx__buf_free(c->ctx, op->buf);
  if (status == 0) {
    c->st.msgs_sent++;
    c->st.bytes_sent += op->len;
  } else {
    c->st.errors++;
  }
  rmx_send_cb cb = op->cb;
  void *arg = op->arg;
  rmx__op_put(op);
  if (cb)
    cb(c, status, arg);
}

/* ---- sending ---- */

/*
 * The narrow path: a small message nobody waits on (no on_sent), on a
 * transport that copies small frames at the call (RMX_TP_F_SEND_COPY),
 * with credits to spare and nothing queued ahead. It goes as
 * rmx__msg_submit would post it, header and payload gathered straight
 * into the transport's copy, with no op. 0 when it went; else the general
 * path takes the message (and the transport's refusal, which it retries
 * or reports).
 */
static int send_narrow(rmx_conn_t *c, const void *data, size_t len, uint8_t rpc_flag,
                       const rmx_wire_rpc_t *rpc)
{
  uint8_t hdr[RMX_WIRE_HDR_LEN + RMX_WIRE_RPC_LEN];
  size_t hlen = RMX_WIRE_HDR_LEN + (rpc_flag & RMX_FF_RPC ? RMX_WIRE_RPC_LEN : 0);
  rmx__wire_hdr_encode(hdr, RMX_FR_DATA, 0, (uint32_t)len);
  frame_flag(hdr, rpc_flag, hdr + RMX_WIRE_HDR_LEN, rpc);
  uint16_t returned = rmx__credit_take(&c->cr);
  rmx__wire_set_credits(hdr, returned);
  rmx_tp_sge_t sge[2] = {{hdr, hlen, NULL}, {data, len, NULL}};
  if (c->ops->send(c->tc, sge, len ? 2 : 1, NULL) != 0) {
    rmx__credit_untake(&c->cr, returned);
    return -1;
  }
  RMX_LOG(c->ctx, TRACE, "%s peer %s: frame of %zu bytes posted (%u credits returned, %u left)",
          c->ops->name, c->peer, hlen + len, returned, c->cr.credits - 1);
  c->cr.credits--;
  rmx__alive_msg(c, c->ka.last_tx = uv_now(c->ctx->loop));
  c->ka.due = 0;
  c->stalled = 0;
  c->st.eager_sent++;
  c->st.msgs_sent++;
  c->st.bytes_sent += len;
  rmx__conn_flush_later(c);
  return 0;
}

static int narrow_ok(const rmx_conn_t *c, size_t frame_len)
{
  return (c->ops->flags & RMX_TP_F_SEND_COPY) && frame_len <= RMX_TP_SMALL_FRAME &&
         c->tp_state == RMX_TPS_OPEN && c->cr.credits >= rmx__credit_need(RMX_FR_DATA) &&
         rmx_list_empty(&c->sendq) && rmx_list_empty(&c->ctrlq) && rmx_list_empty(&c->rmaq);
}

/* Send a message, an RPC request/reply (rpc_flag, rpc), or a notification
 * (rpc_flag RMX_FF_NOTIFY: the caller keeps it within the eager size). *rndv
 * (may be NULL) tells whether it went by rendezvous. */
int rmx__msg_send(rmx_conn_t *c, const void *data, size_t len, rmx_buf_t *ubuf, uint8_t rpc_flag,
                  const rmx_wire_rpc_t *rpc, rmx_send_cb cb, void *arg, int *rndv)
{
  rmx__op_t *op;
  size_t ext = rpc_flag & RMX_FF_RPC ? RMX_WIRE_RPC_LEN : 0;
  int rc;

  if (!c || (!data && len))
    return RMX_EINVAL;
  if (c->state != RMX_CS_ESTABLISHED)
    return RMX_ENOTCONN;
  if (len > c->max_msg)
    return RMX_EMSGSIZE;

  if (rndv)
    *rndv = 0;
  if (len + ext <= c->eager_max) {
    if (!cb && !ubuf && narrow_ok(c, RMX_WIRE_HDR_LEN + ext + len) &&
        send_narrow(c, data, len, rpc_flag, rpc) == 0)
      return 0;
    op = rmx__op_get(c->ctx, c, RMX_OP_EAGER);
    if (!op)
      return RMX_ENOMEM;
    uint8_t *hdr; /* the frame: header, RPC extension, payload */
    if (ubuf) {
      op->buf = ubuf;
      op->user_buf = 1;
      hdr = RMX_BUF_FRAME(op->buf, ext);
    } else if (RMX_WIRE_HDR_LEN + ext + len <= RMX_OP_FRAME_MAX) {
      hdr = op->frame; /* small: built in the op itself, no pool buffer */
      op->frame_len = (uint32_t)(RMX_WIRE_HDR_LEN + ext + len);
    } else {
      if ((rc = rmx__buf_alloc(c->ctx, len, &op->buf)) != 0) {
        rmx__op_put(op);
        return rc;
      }
      hdr = RMX_BUF_FRAME(op->buf, ext);
    }
    if (!ubuf && len)
      memcpy(hdr + RMX_WIRE_HDR_LEN + ext, data, len);
    rmx__wire_hdr_encode(hdr, RMX_FR_DATA, 0, (uint32_t)len);
    frame_flag(hdr, rpc_flag, hdr + RMX_WIRE_HDR_LEN, rpc);
    c->st.eager_sent++;
  } else {
    op = rmx__op_get(c->ctx, c, RMX_OP_RNDV);
    if (!op)
      return RMX_ENOMEM;
    if ((rc = rmx__op_reg(c, op, data, len, RMX_TP_ACC_REMOTE_READ)) != 0) {
      rmx__op_put(op);
      return rc;
    }
    op->buf = ubuf;
    op->user_buf = ubuf != NULL;
    op->data = data;
    op->id = ++c->next_id;
    rmx_wire_rts_t rts = {.id = op->id, .addr = (uintptr_t)data, .size = len,
                          .rkey = c->ops->mem_rkey(op->mem)};
    op->frame_len = (uint32_t)rmx__wire_rts_encode(op->frame, 0, &rts);
    if (rpc_flag) {
      rmx__wire_rpc_add(op->frame, rpc_flag, op->frame + op->frame_len, rpc);
      op->frame_len += RMX_WIRE_RPC_LEN;
    }
    c->st.rndv_sent++;
  }
  if (rndv)
    *rndv = op->kind == RMX_OP_RNDV;
  op->rpc_flag = rpc_flag;
  op->len = len;
  op->cb = cb;
  op->arg = arg;
  rmx__msg_submit(c, op);
  return 0;
}

int rmx_send(rmx_conn_t *c, const void *data, size_t len, rmx_send_cb on_sent, void *arg)
{
  return rmx__msg_send(c, data, len, NULL, 0, NULL, on_sent, arg, NULL);
}

int rmx_send_buf(rmx_conn_t *c, rmx_buf_t *b, size_t len, rmx_send_cb on_sent, void *arg)
{
  if (!b || len > b->cap)
    return RMX_EINVAL;
  return rmx__msg_send(c, rmx_buf_data(b), len, b, 0, NULL, on_sent, arg, NULL);
}

static void rndv_done(rmx__op_t *op)
{
  user_done(op, rmx__op_status(op->conn, op->status));
}

/* The transport reported a message's frame (DATA, or RTS) sent. */
static void send_done(rmx_conn_t *c, rmx__op_t *op, int status)
{
  if (op->kind == RMX_OP_EAGER) {
    user_done(op, rmx__op_status(c, status));
  } else {
    op->sent = 1;
    if (status) {
      rmx_list_del(&op->link);
      op->status = status;
      rndv_done(op);
    } else if (op->ready) { /* FIN came first */
      rndv_done(op);
    }
  }
  rmx__msg_sent(c, status);
}

int rmx__msg_fin(rmx_conn_t *c, const rmx_wire_fin_t *fin)
{
  rmx_list_t *n;
  rmx_list_foreach(n, &c->rndv_wait) {
    rmx__op_t *op = rmx_container_of(n, rmx__op_t, link);
    if (op->id != fin->id)
      continue;
    rmx_list_del(n);
    op->status = rmx__wire_status(fin->status);
    op->ready = 1;
    if (op->sent)
      rndv_done(op);
    return 0;
  }
  return RMX_EPROTO;
}

const rmx__op_class_t rmx__send_class = {.done = send_done, .fail = user_done};
