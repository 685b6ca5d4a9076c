/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Receiving messages. Inbound messages are delivered in the order they were
 * sent. An eager message that finds nothing ahead of it is delivered
 * straight from the receive buffer; one that arrives behind a rendezvous
 * still being read is copied and held. Its credit is returned only on
 * delivery, so a peer can never make us hold more than rx_depth messages.
 * Rendezvous messages are read into a buffer of their own, as many at once
 * as RMX_RNDV_DEPTH and the peer's remote window allow.
 */
#include <stdlib.h>
#include <string.h>

#include "rmx_int.h"

static void protocol_error(rmx_conn_t *c, const char *why)
{
  /* A peer can make these at will, one per connection it opens. */
  RMX_LOG_LIMITED(c->ctx, &c->ctx->rl_proto, ERROR,
                  "closing the connection to %s peer %s: its protocol error: %s", c->ops->name,
                  c->peer, why);
  rmx__conn_down(c, RMX_EPROTO);
}

static void deliver(rmx_conn_t *c, const void *data, size_t len)
{
  c->st.msgs_recv++;
  c->st.bytes_recv += len;
  if (c->cbs.on_recv) {
    c->cbs.on_recv(c, data, len, c->cbs_arg);
#if RMX_SCRIBBLE
    /* Valid only during the callback (the receive buffer, a pool buffer or
     * a copy, all rmx's): a late reader now reads 0xdb. */
    memset((void *)(uintptr_t)data, 0xdb, len);
#endif
  } else
    RMX_LOG(c->ctx, DEBUG, "%s peer %s: %zu-byte message dropped: no on_recv", c->ops->name,
            c->peer, len);
}

static void deliver_imm(rmx_conn_t *c, uint32_t imm, size_t len)
{
  if (c->cbs.on_imm)
    c->cbs.on_imm(c, imm, len, c->cbs_arg);
  else
    RMX_LOG(c->ctx, DEBUG, "%s peer %s: immediate %u dropped: no on_imm", c->ops->name,
            c->peer, imm);
}

/* Hand one inbound item to its consumer. Its receive credit goes back now,
 * except for an RPC request that must wait for a handler slot (the RPC
 * layer returns it then). */
static void deliver_item(rmx_conn_t *c, int is_imm, uint32_t imm, uint8_t rpc_flag,
                         const rmx_wire_rpc_t *rpcx, const void *data, size_t len)
{
  if (c->lane) { /* a rail carries one-sided parts alone (src/rails.c) */
    protocol_error(c, "a message on a rail");
    return;
  }
  if (rpc_flag == RMX_FF_NOTIFY) {
    if (!c->ctx->up.notify_deliver(c, data, len))
      rmx__msg_credit_back(c);
    return;
  }
  if (rpc_flag) {
    if (!c->ctx->up.rpc_deliver(c, rpc_flag, rpcx, data, len))
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
  if (op->buf)
    op->mem = NULL; /* the pool buffer's own registration, not the op's */
  rmx__op_unreg(c, op);
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

/* ---- rendezvous reads ---- */

/*
 * Where a rendezvous read lands: a pool buffer (its slab is registered once
 * and reused) up to the pool's largest, else heap memory registered for
 * this read alone. Never the registration cache: rmx frees this memory
 * itself, and a cache keyed by address would hand the next allocation at
 * the same address a stale registration whenever the allocator unmaps
 * behind the cache's hooks (AddressSanitizer's does: reads then landed in
 * pages the application no longer saw).
 */
static int rx_dest(rmx_conn_t *c, rmx__op_t *op)
{
  int local_reg = (c->ops->flags & RMX_TP_F_LOCAL_REG) != 0;
  if (op->len <= UINT32_MAX) {
    int rc = rmx__buf_alloc(c->ctx, op->len, &op->buf);
    if (rc)
      return rc;
    op->data = rmx_buf_data(op->buf);
    return local_reg ? rmx__buf_mem(c->ctx, op->buf, c->tpi, &op->mem) : 0;
  }
  if (!(op->heap = malloc(op->len)))
    return RMX_ENOMEM;
  op->data = op->heap;
  return local_reg ? c->ops->mem_reg(c->ctx->tp[c->tpi], op->heap, op->len, RMX_TP_ACC_LOCAL,
                                     c->tc, &op->mem)
                   : 0;
}

/*
 * Read what the peer offered, message by message in order, at most
 * rndv_depth messages at once, each in parts of at most the connection's
 * io_max (so no read needs more of the send ring than half of it: a ring
 * need not be deep enough for the largest message whole). A part refused
 * for want of room or of the peer's window is asked for again after a
 * completion (reads_blocked).
 */
static void start_reads(rmx_conn_t *c)
{
  rmx_list_t *n;
  int rc;
  if (c->tp_state != RMX_TPS_OPEN)
    return; /* closed under us (a refused post in read_done's progress): nothing more goes */
  size_t most = c->ops->io_max ? c->ops->io_max(c->tc) : SIZE_MAX;
  rmx_list_foreach(n, &c->rxq) {
    rmx__op_t *op = rmx_container_of(n, rmx__op_t, link);
    if (op->ready || (op->reading && op->read_off >= op->len))
      continue; /* whole, or every part asked for */
    if (!op->reading && op->read_off == 0) { /* a message not started */
      if (c->rndv_reads >= c->ctx->cfg.rndv_depth)
        break;
      if (c->rpc_held_bytes >= c->ctx->cfg.max_msg_size) {
        /* RPC requests wait for handlers with a message's worth copied:
         * read no more large ones until some are served (bounds what a
         * peer can make us hold). */
        c->reads_blocked = 1;
        break;
      }
      if (!op->data && (rc = rx_dest(c, op)) != 0) {
        RMX_LOG(c->ctx, ERROR, "cannot take %zu bytes for a message from %s peer %s: %s",
                op->len, c->ops->name, c->peer, rmx_strerror(rc));
        rmx__conn_down(c, rc);
        return;
      }
    }
    do {
      size_t off = op->read_off, part = op->len - off < most ? op->len - off : most;
      rc = c->rma_out < c->rma_window
               ? c->ops->read(c->tc, (uint8_t *)(uintptr_t)op->data + off, part, op->mem,
                              op->rts.addr + off, op->rts.rkey, op)
               : RMX_EAGAIN;
      if (rc == RMX_EAGAIN) {
        c->reads_blocked = 1; /* the buffer stays; retried after a completion */
        goto out;
      }
      if (rc) {
        rmx__conn_down(c, rc);
        return;
      }
      if (op->reading++ == 0 && off == 0)
        c->rndv_reads++;
      op->read_off = off + part;
      c->rma_out++;
    } while (op->read_off < op->len);
  }
out:
  rmx__conn_flush_later(c);
}

void rmx__msg_reads_resume(rmx_conn_t *c) { start_reads(c); }

static void read_done(rmx_conn_t *c, rmx__op_t *op, int status)
{
  if (--op->reading == 0 && (status || op->read_off >= op->len))
    c->rndv_reads--; /* the message's last part in flight */
  if (!status && (op->reading || op->read_off < op->len)) {
    if (c->reads_blocked) { /* a part waits for the room this one left */
      c->reads_blocked = 0;
      start_reads(c);
    }
    return;
  }
  if (status) {
    if (c->state != RMX_CS_DOWN) {
      RMX_LOG(c->ctx, ERROR, "%s peer %s: reading a %zu-byte message failed: %s",
              c->ops->name, c->peer, op->len, rmx_strerror(status));
      rmx__conn_down(c, status);
    }
    return; /* the entry stays in rxq and is freed with the connection */
  }
  op->ready = 1;
  if (rmx__msg_queue_fin(c, op->rts.id, 0) != 0) {
    rmx__conn_down(c, RMX_ENOMEM);
    return;
  }
  /* FIN before delivery: the sender's buffer is free sooner, and a receiver
   * that closes from on_recv does not strand the sender's callback. */
  rmx__msg_progress(c);
  deliver_ready(c);
  start_reads(c);
  rmx__msg_maybe_return_credits(c);
  rmx__msg_progress(c);
}

/* ---- frames ---- */

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
  int why = rmx__credit_rx(&c->cr, c->ctx->cfg.rx_depth, credit_frame);
  if (why == 0)
    return 1;
  protocol_error(c, why == RMX__CREDIT_OVER
                        ? "peer sent more frames than its credits allow"
                        : "peer spent its last credit on something other than a CREDIT frame");
  return 0;
}

/* What every frame's header does: the credits it returns, the peer heard
 * from, the receive buffer it used (all but BYE). 1 when the connection
 * goes on. */
static int rx_header(rmx_conn_t *c, uint16_t credits, uint8_t type)
{
  if (rmx__credit_returned(&c->cr, credits) != 0) {
    protocol_error(c, "peer returned more credits than it was owed");
    return 0;
  }
  c->ka.last_rx = uv_now(c->ctx->loop);
  if (type != RMX_FR_CREDIT && type != RMX_FR_BYE)
    rmx__alive_msg(c, c->ka.last_rx); /* RMX_IDLE_TIMEOUT_MS: keepalives do not count */
  if (credits && c->cr.credits >= rmx__credit_need(RMX_FR_DATA))
    c->ka.credit_at = c->ka.last_rx; /* messages may move again */
  return type == RMX_FR_BYE || rx_credit_spent(c, type == RMX_FR_CREDIT);
}

void rmx__msg_recv(rmx_conn_t *c, const void *buf, size_t len)
{
  const uint8_t *p = buf;
  rmx_frame_t f;
  const char *why;

  if (c->state != RMX_CS_ESTABLISHED)
    return; /* closing: nothing more is delivered */
  /* The narrow path: a plain message (type DATA, no flags, its length
   * field true) with nothing held ahead of it, delivered from the receive
   * buffer as the general path below would deliver it. */
  if (len >= RMX_WIRE_HDR_LEN && p[0] == RMX_FR_DATA && p[1] == 0 &&
      rmx_get32(p + 4) == len - RMX_WIRE_HDR_LEN && len <= c->ctx->cfg.eager_size &&
      rmx_list_empty(&c->rxq)) {
    if (!rx_header(c, rmx_get16(p + 2), RMX_FR_DATA))
      return;
    deliver_item(c, 0, 0, 0, NULL, p + RMX_WIRE_HDR_LEN, len - RMX_WIRE_HDR_LEN);
    rmx__msg_maybe_return_credits(c);
    rmx__msg_progress(c);
    return;
  }
  if (rmx__wire_decode(buf, len, &f, &why) != 0) {
    protocol_error(c, why);
    return;
  }
  if (len > c->ctx->cfg.eager_size) {
    protocol_error(c, "frame larger than the receive buffers");
    return;
  }
  if (!rx_header(c, f.credits, f.type))
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
    if (c->lane) { /* before its read: a rail pulls no message from the peer */
      protocol_error(c, "a message on a rail");
      return;
    }
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
    if (rmx__msg_fin(c, &f.u.fin) != 0) {
      protocol_error(c, "FIN for a message that is not waiting for one");
      return;
    }
    break;
  case RMX_FR_CREDIT:
    rmx__credit_freed(&c->cr, 1); /* never a reason to send a CREDIT frame back */
    break;
  case RMX_FR_BYE:
    rmx__conn_down(c, 0);
    return;
  case RMX_FR_AUTH:
  case RMX_FR_AUTH_OK:
    protocol_error(c, "authentication frame after the handshake");
    return;
  }
  if (!rmx_list_empty(&c->rxq))
    deliver_ready(c);
  rmx__msg_maybe_return_credits(c);
  rmx__msg_progress(c);
}

/* A peer's write-with-immediate: it used a receive buffer, like a message,
 * and is delivered in order with messages. */
void rmx__msg_imm(rmx_conn_t *c, uint32_t imm, size_t len, int refused)
{
  if (c->state != RMX_CS_ESTABLISHED)
    return;
  rmx__alive_msg(c, c->ka.last_rx = uv_now(c->ctx->loop));
  if (!rx_credit_spent(c, 0))
    return;
  if (refused) { /* the target refused the write: nothing to deliver, but the
                    peer spent a credit on it, which goes back */
    rmx__msg_credit_back(c);
    rmx__msg_maybe_return_credits(c);
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
  rmx__msg_maybe_return_credits(c);
  rmx__msg_progress(c);
}

/* The connection is down and the transport closed: every op left fails. */
void rmx__msg_fail_all(rmx_conn_t *c, int status)
{
  rmx_list_t *n;
  rmx__early_conn(c); /* handed over already: done (0) before the rest fail */
  while ((n = rmx_list_pop(&c->ctrlq)) != NULL)
    rmx__op_put(rmx_container_of(n, rmx__op_t, link));
  while ((n = rmx_list_pop(&c->rxq)) != NULL)
    rx_free(rmx_container_of(n, rmx__op_t, link));
  /* User callbacks last: they may call back into rmx. */
  while ((n = rmx_list_pop(&c->rndv_wait)) != NULL)
    rmx__op_fail(rmx_container_of(n, rmx__op_t, link), status);
  while ((n = rmx_list_pop(&c->rmaq)) != NULL)
    rmx__op_fail(rmx_container_of(n, rmx__op_t, link), status);
  while ((n = rmx_list_pop(&c->sendq)) != NULL)
    rmx__op_fail(rmx_container_of(n, rmx__op_t, link), status);
}

static void rx_fail(rmx__op_t *op, int status) { rx_free(op); }

const rmx__op_class_t rmx__rx_class = {.done = read_done, .fail = rx_fail};
