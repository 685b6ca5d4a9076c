/*
 * Messages: eager frames, credit flow control, rendezvous, in-order delivery.
 *
 * Credits: a credit is one free receive buffer at the peer. Every frame but
 * BYE spends one. User messages and FINs leave the last credit alone; only a
 * CREDIT frame may spend it, so two peers that each owe the other credits can
 * always get one frame through and neither waits forever. Credits come back
 * in the header of every frame, or in a CREDIT frame once half of the
 * receive window is owed.
 *
 * Inbound messages are delivered in the order they were sent. An eager
 * message that finds nothing ahead of it is delivered straight from the
 * receive buffer; one that arrives behind a rendezvous still being read is
 * copied and held. Its credit is returned only on delivery, so a peer can
 * never make us hold more than rx_depth messages.
 */
#include <stdlib.h>
#include <string.h>

#include "rmx_int.h"

/* Where an eager frame starts in its buffer: header, then the RPC extension
 * if any, then the payload at rmx_buf_data(). */
#define EXT_LEN(op) ((op)->rpc_flag ? RMX_WIRE_RPC_LEN : 0)
#define FRAME_HDR(b, ext) ((b)->base + RMX_BUF_HEADROOM - RMX_WIRE_HDR_LEN - (ext))

static void protocol_error(rmx_conn_t *c, const char *why)
{
  RMX_LOG(c->ctx, ERROR, "closing connection %p (%s): protocol error: %s", (void *)c,
          c->ops->name, why);
  rmx__conn_down(c, RMX_EPROTO);
}

void rmx__msg_init(rmx_conn_t *c, const rmx_wire_hello_t *peer)
{
  const rmx_config_t *cfg = &c->ctx->cfg;
  uint32_t frame = peer->eager_size < cfg->eager_size ? peer->eager_size : cfg->eager_size;
  c->peer_depth = peer->rx_depth;
  c->credits = peer->rx_depth;
  c->eager_max = frame - RMX_WIRE_HDR_LEN;
  c->max_msg = peer->max_msg < cfg->max_msg_size ? peer->max_msg : cfg->max_msg_size;
  c->rma_window = peer->rma_window;
}

/* The status a user's operation reports for what the transport said. */
int rmx__op_status(rmx_conn_t *c, int status)
{
  if (status == 0)
    return 0;
  if (c->user_closed)
    return RMX_ECANCELED;
  /* The transport cancels what it still holds when we close it because the
   * peer went away: report the peer's loss, not a cancel nobody asked for. */
  if (status == RMX_ECANCELED)
    return c->err ? c->err : RMX_ECONNRESET;
  return status;
}

/*
 * Register a rendezvous source or destination for op. Memory a peer may
 * reach (a source it reads) is registered for this operation and this
 * connection alone, and released when the operation ends: never cached,
 * so it is not left reachable afterwards (docs/security.md). Local-only
 * destinations go through the cache where registration is costly (verbs).
 */
static int op_reg(rmx_conn_t *c, rmx__op_t *op, const void *addr, size_t len, unsigned access)
{
  int rc = 0;
  if (access & ~RMX_TP_ACC_LOCAL) {
    rc = c->ops->mem_reg(c->ctx->tp[c->tpi], (void *)(uintptr_t)addr, len, access, c->tc,
                         &op->mem);
  } else if (c->ops->flags & RMX_TP_F_LOCAL_REG) {
    if ((rc = rmx__regcache_get(c->ctx, c->tpi, addr, len, access, &op->cached)) == 0)
      op->mem = op->cached->mem;
  }
  return rc;
}

static void op_unreg(rmx_conn_t *c, rmx__op_t *op)
{
  if (op->cached)
    rmx__regcache_put(c->ctx, op->cached);
  else if (op->mem)
    c->ops->mem_dereg(op->mem);
}

/* Complete a user send exactly once and release what it held. */
static void user_done(rmx__op_t *op, int status)
{
  rmx_conn_t *c = op->conn;
  if (op->kind == RMX_OP_RMA_IMM || op->kind == RMX_OP_RMA) {
    rmx__rma_fail(op, status);
    return;
  }
  op_unreg(c, op);
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

/* ---- posting ---- */

static uint16_t take_owed(rmx_conn_t *c)
{
  uint32_t n = c->owed > UINT16_MAX ? UINT16_MAX : c->owed;
  c->owed -= n;
  c->owed_data = c->owed_data > c->owed ? c->owed : c->owed_data;
  c->rx_unreturned -= n;
  return (uint16_t)n;
}

static int post(rmx_conn_t *c, rmx__op_t *op)
{
  rmx_tp_sge_t sge;
  uint16_t returned = 0;
  int rc;

  if (op->kind == RMX_OP_RMA_IMM) {
    /* Parts may go before the send queue fills; the last carries the
     * immediate and spends the credit. */
    if ((rc = rmx__rma_post_imm(c, op)) != 0)
      return rc;
    c->credits--;
    return 0;
  }
  if (op->kind == RMX_OP_EAGER) {
    uint8_t *hdr = FRAME_HDR(op->buf, EXT_LEN(op));
    sge.mem = NULL;
    if ((c->ops->flags & RMX_TP_F_LOCAL_REG) &&
        (rc = rmx__buf_mem(c->ctx, op->buf, c->tpi, &sge.mem)) != 0)
      return rc;
    returned = take_owed(c);
    rmx_wire_set_credits(hdr, returned);
    sge.addr = hdr;
    sge.len = RMX_WIRE_HDR_LEN + EXT_LEN(op) + op->len;
  } else {
    if (op->ctrl != RMX_FR_BYE) {
      returned = take_owed(c);
      rmx_wire_set_credits(op->frame, returned);
    }
    sge.addr = op->frame;
    sge.len = op->frame_len;
    sge.mem = NULL;
  }
  if (op->kind == RMX_OP_CTRL && op->ctrl == RMX_FR_CREDIT)
    c->credit_queued = 0;
  rc = c->ops->send(c->tc, &sge, 1, op);
  if (rc) {
    c->owed += returned; /* not sent: still owed */
    c->rx_unreturned += returned;
    if (op->kind == RMX_OP_CTRL && op->ctrl == RMX_FR_CREDIT)
      c->credit_queued = 1;
    return rc;
  }
  if (!(op->kind == RMX_OP_CTRL && op->ctrl == RMX_FR_BYE))
    c->credits--;
  if (op->kind == RMX_OP_RNDV)
    rmx_list_push(&c->rndv_wait, &op->link);
  return 0;
}

static void start_reads(rmx_conn_t *c);

/* Send what credits allow: control frames first, then user messages. */
void rmx__msg_progress(rmx_conn_t *c)
{
  rmx_list_t *n;
  int rc;

  if (c->tp_state != RMX_TPS_OPEN || c->state == RMX_CS_CONNECTING ||
      c->state == RMX_CS_RESOLVING)
    return;
  while ((n = c->ctrlq.next) != &c->ctrlq) {
    rmx__op_t *op = rmx_container_of(n, rmx__op_t, link);
    if (op->ctrl == RMX_FR_CREDIT && c->owed == 0) {
      /* A frame that went out since returned them already. */
      rmx_list_del(n);
      c->credit_queued = 0;
      rmx__op_put(op);
      continue;
    }
    uint32_t need = op->ctrl == RMX_FR_BYE ? 0 : op->ctrl == RMX_FR_CREDIT ? 1 : 2;
    if (c->credits < need)
      break;
    rmx_list_del(n);
    if ((rc = post(c, op)) != 0) {
      rmx_list_push_front(&c->ctrlq, &op->link);
      if (rc != RMX_EAGAIN) /* EAGAIN: the send queue is full, retry later */
        rmx__conn_down(c, rc);
      goto out;
    }
  }
  if (c->state != RMX_CS_ESTABLISHED)
    goto out;
  rmx__rma_progress(c);
  if (c->state != RMX_CS_ESTABLISHED)
    goto out;
  while ((n = c->sendq.next) != &c->sendq && c->credits >= 2) {
    rmx__op_t *op = rmx_container_of(n, rmx__op_t, link);
    rmx_list_del(n);
    if ((rc = post(c, op)) != 0) {
      /* Back in its place; on failure it fails with the rest in conn_finish. */
      rmx_list_push_front(&c->sendq, &op->link);
      if (rc != RMX_EAGAIN)
        rmx__conn_down(c, rc);
      goto out;
    }
    c->stalled = 0;
  }
  if (!rmx_list_empty(&c->sendq) && !c->stalled) {
    c->stalled = 1;
    c->st.credit_stalls++;
  }
  if (c->reads_blocked && c->rndv_reads < c->ctx->cfg.rndv_depth) {
    c->reads_blocked = 0;
    start_reads(c);
  }
out:
  if (c->tp_state == RMX_TPS_OPEN)
    c->ops->flush(c->tc);
}

/* Queue a control frame: FIN (fin), or a header with body[0..len). */
static int queue_ctrl(rmx_conn_t *c, uint8_t type, const rmx_wire_fin_t *fin, const void *body,
                      size_t len)
{
  rmx__op_t *op = rmx__op_get(c->ctx, c, RMX_OP_CTRL);
  if (!op)
    return RMX_ENOMEM;
  op->ctrl = type;
  if (type == RMX_FR_FIN) {
    op->frame_len = (uint32_t)rmx_wire_fin_encode(op->frame, 0, fin);
  } else {
    op->frame_len = (uint32_t)(rmx_wire_hdr_encode(op->frame, type, 0, (uint32_t)len) + len);
    if (len)
      memcpy(op->frame + RMX_WIRE_HDR_LEN, body, len);
  }
  rmx_list_push(&c->ctrlq, &op->link);
  return 0;
}

/* AUTH or AUTH_OK (src/auth.c): the first frame each way. It spends a
 * credit like any frame; the peer returns it in a later header. */
int rmx__msg_queue_auth(rmx_conn_t *c, uint8_t type, const uint8_t *body, size_t len)
{
  int rc = queue_ctrl(c, type, NULL, body, len);
  if (rc == 0)
    rmx__msg_progress(c);
  return rc;
}

int rmx__msg_queue_bye(rmx_conn_t *c)
{
  rmx_list_t *n;
  /* FINs the credits allow still go (the peer's sends complete); what is
   * left could hold BYE back forever, since no credit returns after close. */
  rmx__msg_progress(c);
  while ((n = rmx_list_pop(&c->ctrlq)) != NULL)
    rmx__op_put(rmx_container_of(n, rmx__op_t, link));
  c->credit_queued = 0;
  int rc = queue_ctrl(c, RMX_FR_BYE, NULL, NULL, 0);
  if (rc == 0)
    rmx__msg_progress(c);
  return rc;
}

static void maybe_return_credits(rmx_conn_t *c)
{
  uint32_t half = c->ctx->cfg.rx_depth / 2;
  if (c->owed_data >= half && !c->credit_queued && c->state == RMX_CS_ESTABLISHED) {
    if (queue_ctrl(c, RMX_FR_CREDIT, NULL, NULL, 0) == 0) {
      c->credit_queued = 1;
      c->st.credit_frames++;
    }
  }
}

/* ---- sending ---- */

/* Send a message, or an RPC request/reply (rpc_flag, rpc). *rndv (may be
 * NULL) tells whether it went by rendezvous. */
int rmx__msg_send(rmx_conn_t *c, const void *data, size_t len, rmx_buf_t *ubuf, uint8_t rpc_flag,
                  const rmx_wire_rpc_t *rpc, rmx_send_cb cb, void *arg, int *rndv)
{
  rmx__op_t *op;
  size_t ext = rpc_flag ? RMX_WIRE_RPC_LEN : 0;
  int rc;

  if (!c || (!data && len))
    return RMX_EINVAL;
  if (c->state != RMX_CS_ESTABLISHED)
    return RMX_ENOTCONN;
  if (len > c->max_msg)
    return RMX_EMSGSIZE;

  if (len + ext <= c->eager_max) {
    op = rmx__op_get(c->ctx, c, RMX_OP_EAGER);
    if (!op)
      return RMX_ENOMEM;
    if (ubuf) {
      op->buf = ubuf;
      op->user_buf = 1;
    } else {
      if ((rc = rmx__buf_alloc(c->ctx, len, &op->buf)) != 0) {
        rmx__op_put(op);
        return rc;
      }
      if (len)
        memcpy(rmx_buf_data(op->buf), data, len);
    }
    uint8_t *hdr = FRAME_HDR(op->buf, ext);
    rmx_wire_hdr_encode(hdr, RMX_FR_DATA, 0, (uint32_t)len);
    if (rpc_flag)
      rmx_wire_rpc_add(hdr, rpc_flag, hdr + RMX_WIRE_HDR_LEN, rpc);
    c->st.eager_sent++;
  } else {
    op = rmx__op_get(c->ctx, c, RMX_OP_RNDV);
    if (!op)
      return RMX_ENOMEM;
    if ((rc = op_reg(c, op, data, len, RMX_TP_ACC_REMOTE_READ)) != 0) {
      rmx__op_put(op);
      return rc;
    }
    op->buf = ubuf;
    op->user_buf = ubuf != NULL;
    op->data = data;
    op->id = ++c->next_id;
    rmx_wire_rts_t rts = {.id = op->id, .addr = (uintptr_t)data, .size = len,
                          .rkey = c->ops->mem_rkey(op->mem)};
    op->frame_len = (uint32_t)rmx_wire_rts_encode(op->frame, 0, &rts);
    if (rpc_flag) {
      rmx_wire_rpc_add(op->frame, rpc_flag, op->frame + op->frame_len, rpc);
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
  rmx_list_push(&c->sendq, &op->link);
  rmx__msg_progress(c);
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

void rmx__msg_send_done(rmx_conn_t *c, rmx__op_t *op, int status)
{
  switch (op->kind) {
  case RMX_OP_EAGER:
    user_done(op, rmx__op_status(c, status));
    break;
  case RMX_OP_RNDV:
    op->sent = 1;
    if (status) {
      rmx_list_del(&op->link);
      op->status = status;
      rndv_done(op);
    } else if (op->ready) { /* FIN came first */
      rndv_done(op);
    }
    break;
  case RMX_OP_CTRL: {
    int bye = op->ctrl == RMX_FR_BYE;
    rmx__op_put(op);
    if (bye)
      rmx__conn_bye_sent(c);
    break;
  }
  default:
    break;
  }
  if (status && c->state != RMX_CS_DOWN) {
    rmx__conn_down(c, status);
    return;
  }
  if (c->state == RMX_CS_ESTABLISHED && c->rndv_reads < c->ctx->cfg.rndv_depth)
    start_reads(c); /* a read refused for a full send queue may go now */
  rmx__msg_progress(c);
}

/* ---- receiving ---- */

void rmx__msg_credit_back(rmx_conn_t *c)
{
  c->owed++;
  c->owed_data++;
}

static void deliver(rmx_conn_t *c, const void *data, size_t len)
{
  c->st.msgs_recv++;
  c->st.bytes_recv += len;
  if (c->cbs.on_recv)
    c->cbs.on_recv(c, data, len, c->cbs_arg);
  else
    RMX_LOG(c->ctx, DEBUG, "connection %p: %zu-byte message dropped: no on_recv", (void *)c, len);
}

static void deliver_imm(rmx_conn_t *c, uint32_t imm, size_t len)
{
  if (c->cbs.on_imm)
    c->cbs.on_imm(c, imm, len, c->cbs_arg);
  else
    RMX_LOG(c->ctx, DEBUG, "connection %p: immediate %u dropped: no on_imm", (void *)c, imm);
}

/* Hand one inbound item to its consumer. Its receive credit goes back now,
 * except for an RPC request that must wait for a handler slot (the RPC
 * layer returns it then). */
static void deliver_item(rmx_conn_t *c, int is_imm, uint32_t imm, uint8_t rpc_flag,
                         const rmx_wire_rpc_t *rpcx, const void *data, size_t len)
{
  if (rpc_flag) {
    if (!rmx__rpc_deliver(c, rpc_flag, rpcx, data, len))
      rmx__msg_credit_back(c);
    return;
  }
  rmx__msg_credit_back(c);
  if (is_imm)
    deliver_imm(c, imm, len);
  else
    deliver(c, data, len);
}

static void rx_free(rmx__op_t *op)
{
  rmx_conn_t *c = op->conn;
  op_unreg(c, op);
  if (op->buf)
    rmx__buf_free(c->ctx, op->buf);
  free(op->heap);
  rmx__op_put(op);
}


static void deliver_ready(rmx_conn_t *c)
{
  rmx_list_t *n;
  while (c->state == RMX_CS_ESTABLISHED && (n = c->rxq.next) != &c->rxq) {
    rmx__op_t *op = rmx_container_of(n, rmx__op_t, link);
    if (!op->ready)
      break;
    rmx_list_del(n);
    deliver_item(c, op->is_imm, op->imm, op->rpc_flag, &op->rpcx, op->data, op->len);
    rx_free(op);
  }
}

static void start_reads(rmx_conn_t *c)
{
  rmx_list_t *n;
  int rc;
  rmx_list_foreach(n, &c->rxq) {
    if (c->rndv_reads >= c->ctx->cfg.rndv_depth)
      return;
    if (c->rpc_held_bytes >= c->ctx->cfg.max_msg_size) {
      /* RPC requests wait for handlers with a message's worth copied: read
       * no more large ones until some are served (bounds what a peer can
       * make us hold). */
      c->reads_blocked = 1;
      return;
    }
    rmx__op_t *op = rmx_container_of(n, rmx__op_t, link);
    if (op->ready || op->reading)
      continue;
    if (!op->heap && !(op->heap = malloc(op->len ? op->len : 1))) {
      RMX_LOG(c->ctx, ERROR, "cannot allocate %zu bytes for an incoming message", op->len);
      rmx__conn_down(c, RMX_ENOMEM);
      return;
    }
    op->data = op->heap;
    if (!op->mem && (rc = op_reg(c, op, op->heap, op->len, RMX_TP_ACC_LOCAL)) != 0) {
      rmx__conn_down(c, rc);
      return;
    }
    rc = c->rma_out < c->rma_window
             ? c->ops->read(c->tc, op->heap, op->len, op->mem, op->rts.addr, op->rts.rkey, op)
             : RMX_EAGAIN;
    if (rc == RMX_EAGAIN) {
      c->reads_blocked = 1; /* the buffer stays; retried after a completion */
      break;
    }
    if (rc) {
      rmx__conn_down(c, rc);
      return;
    }
    op->reading = 1;
    c->rndv_reads++;
    c->rma_out++;
  }
  c->ops->flush(c->tc);
}

void rmx__msg_read_done(rmx_conn_t *c, rmx__op_t *op, int status)
{
  op->reading = 0;
  c->rndv_reads--;
  if (status) {
    if (c->state != RMX_CS_DOWN) {
      RMX_LOG(c->ctx, ERROR, "connection %p: reading a %zu-byte message failed: %s", (void *)c,
              op->len, rmx_strerror(status));
      rmx__conn_down(c, status);
    }
    return; /* the entry stays in rxq and is freed with the connection */
  }
  op->ready = 1;
  rmx_wire_fin_t fin = {.id = op->rts.id, .status = 0};
  if (queue_ctrl(c, RMX_FR_FIN, &fin, NULL, 0) != 0) {
    rmx__conn_down(c, RMX_ENOMEM);
    return;
  }
  /* FIN before delivery: the sender's buffer is free sooner, and a receiver
   * that closes from on_recv does not strand the sender's callback. */
  rmx__msg_progress(c);
  deliver_ready(c);
  start_reads(c);
  maybe_return_credits(c);
  rmx__msg_progress(c);
}

static int on_fin(rmx_conn_t *c, const rmx_wire_fin_t *fin)
{
  rmx_list_t *n;
  rmx_list_foreach(n, &c->rndv_wait) {
    rmx__op_t *op = rmx_container_of(n, rmx__op_t, link);
    if (op->id != fin->id)
      continue;
    rmx_list_del(n);
    op->status = rmx_wire_status(fin->status);
    op->ready = 1;
    if (op->sent)
      rndv_done(op);
    return 0;
  }
  return RMX_EPROTO;
}

static int hold(rmx_conn_t *c, const rmx_frame_t *f)
{
  rmx__op_t *op = rmx__op_get(c->ctx, c, RMX_OP_RX);
  if (!op)
    return RMX_ENOMEM;
  op->len = f->type == RMX_FR_DATA ? f->payload_len : f->u.rts.size;
  op->rpc_flag = f->flags;
  op->rpcx = f->rpc;
  if (f->type == RMX_FR_DATA) {
    if (rmx__buf_alloc(c->ctx, op->len, &op->buf) != 0) {
      rmx__op_put(op);
      return RMX_ENOMEM;
    }
    op->data = rmx_buf_data(op->buf);
    memcpy(rmx_buf_data(op->buf), f->payload, op->len);
    op->ready = 1;
  } else {
    op->rts = f->u.rts;
  }
  rmx_list_push(&c->rxq, &op->link);
  return 0;
}

/*
 * The peer used one of our receive buffers. Only a CREDIT frame may use
 * its last credit (protocol.md, flow control); anything else there, or
 * anything beyond, closes the connection. 0 when it did.
 */
static int rx_credit_spent(rmx_conn_t *c, int credit_frame)
{
  uint32_t depth = c->ctx->cfg.rx_depth;
  if (++c->rx_unreturned <= depth - (credit_frame ? 0 : 1))
    return 1;
  protocol_error(c, c->rx_unreturned > depth
                        ? "peer sent more frames than its credits allow"
                        : "peer spent its last credit on something other than a CREDIT frame");
  return 0;
}

void rmx__msg_recv(rmx_conn_t *c, const void *buf, size_t len)
{
  rmx_frame_t f;
  const char *why;

  if (c->state == RMX_CS_AUTH) {
    rmx__auth_recv(c, buf, len); /* AUTH or AUTH_OK, or the connection is refused */
    return;
  }
  if (c->state != RMX_CS_ESTABLISHED)
    return; /* closing: nothing more is delivered */
  if (rmx_wire_decode(buf, len, &f, &why) != 0) {
    protocol_error(c, why);
    return;
  }
  if (len > c->ctx->cfg.eager_size) {
    protocol_error(c, "frame larger than the receive buffers");
    return;
  }
  if ((uint64_t)c->credits + f.credits > c->peer_depth) {
    protocol_error(c, "peer returned more credits than it was owed");
    return;
  }
  c->credits += f.credits;
  if (f.type != RMX_FR_BYE && !rx_credit_spent(c, f.type == RMX_FR_CREDIT))
    return;
  if (f.flags == RMX_FF_RPC_REP && f.rpc.status > 0)
    f.rpc.status = RMX_EIO; /* replies carry 0 or a negative status */

  switch (f.type) {
  case RMX_FR_DATA:
    if (rmx_list_empty(&c->rxq)) {
      deliver_item(c, 0, 0, f.flags, &f.rpc, f.payload, f.payload_len);
    } else if (hold(c, &f) != 0) {
      rmx__conn_down(c, RMX_ENOMEM);
      return;
    }
    break;
  case RMX_FR_RTS:
    if (f.u.rts.size > c->ctx->cfg.max_msg_size) {
      RMX_LOG(c->ctx, ERROR, "peer announced a %llu-byte message; the maximum is %llu",
              (unsigned long long)f.u.rts.size, (unsigned long long)c->ctx->cfg.max_msg_size);
      protocol_error(c, "message larger than the configured maximum");
      return;
    }
    if (hold(c, &f) != 0) {
      rmx__conn_down(c, RMX_ENOMEM);
      return;
    }
    start_reads(c);
    break;
  case RMX_FR_FIN:
    rmx__msg_credit_back(c);
    if (on_fin(c, &f.u.fin) != 0) {
      protocol_error(c, "FIN for a message that is not waiting for one");
      return;
    }
    break;
  case RMX_FR_CREDIT:
    c->owed++; /* returned, but never a reason to send a CREDIT frame back */
    break;
  case RMX_FR_BYE:
    rmx__conn_down(c, 0);
    return;
  case RMX_FR_AUTH:
  case RMX_FR_AUTH_OK:
    protocol_error(c, "authentication frame after the handshake");
    return;
  }
  deliver_ready(c);
  maybe_return_credits(c);
  rmx__msg_progress(c);
}

/* A peer's write-with-immediate: it used a receive buffer, like a message,
 * and is delivered in order with messages. */
void rmx__msg_imm(rmx_conn_t *c, uint32_t imm, size_t len, int refused)
{
  if (c->state == RMX_CS_AUTH) {
    rmx__auth_refuse(c, "write with immediate before authenticating");
    return;
  }
  if (c->state != RMX_CS_ESTABLISHED)
    return;
  if (!rx_credit_spent(c, 0))
    return;
  if (refused) { /* the target refused the write: nothing to deliver, but the
                    peer spent a credit on it, which goes back */
    rmx__msg_credit_back(c);
    maybe_return_credits(c);
    rmx__msg_progress(c);
    return;
  }
  if (rmx_list_empty(&c->rxq)) {
    deliver_item(c, 1, imm, 0, NULL, NULL, len);
  } else {
    rmx__op_t *op = rmx__op_get(c->ctx, c, RMX_OP_RX);
    if (!op) {
      rmx__conn_down(c, RMX_ENOMEM);
      return;
    }
    op->is_imm = 1;
    op->imm = imm;
    op->len = len;
    op->ready = 1;
    rmx_list_push(&c->rxq, &op->link);
  }
  deliver_ready(c);
  maybe_return_credits(c);
  rmx__msg_progress(c);
}

/* The connection is down and the transport closed: every op left fails. */
void rmx__msg_fail_all(rmx_conn_t *c, int status)
{
  rmx_list_t *n;
  while ((n = rmx_list_pop(&c->ctrlq)) != NULL)
    rmx__op_put(rmx_container_of(n, rmx__op_t, link));
  while ((n = rmx_list_pop(&c->rxq)) != NULL)
    rx_free(rmx_container_of(n, rmx__op_t, link));
  /* User callbacks last: they may call back into rmx. */
  while ((n = rmx_list_pop(&c->rndv_wait)) != NULL)
    user_done(rmx_container_of(n, rmx__op_t, link), status);
  while ((n = rmx_list_pop(&c->rmaq)) != NULL)
    user_done(rmx_container_of(n, rmx__op_t, link), status);
  while ((n = rmx_list_pop(&c->sendq)) != NULL)
    user_done(rmx_container_of(n, rmx__op_t, link), status);
}
