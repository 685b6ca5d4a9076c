/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The send scheduler: the connection's queues (control frames, one-sided
 * operations, messages), posting what credits allow, control frames, and
 * credit returns. The credit rules themselves are src/msg/credit.h.
 */
#include <string.h>

#include "rmx_int.h"

#define EXT_LEN(op) ((op)->rpc_flag & RMX_FF_RPC ? RMX_WIRE_RPC_LEN : 0)

void rmx__msg_init(rmx_conn_t *c, const rmx_wire_hello_t *peer)
{
  const rmx_config_t *cfg = &c->ctx->cfg;
  uint32_t frame = peer->eager_size < cfg->eager_size ? peer->eager_size : cfg->eager_size;
  c->cr.peer_depth = peer->rx_depth;
  c->cr.credits = peer->rx_depth;
  c->eager_max = frame - RMX_WIRE_HDR_LEN;
  c->max_msg = peer->max_msg < cfg->max_msg_size ? peer->max_msg : cfg->max_msg_size;
  c->rma_window = peer->rma_window;
  c->ka.peer_limit = peer->silence_ms;
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
  /* A write refused because the connection was already gone (shm's pipe
   * once its channel has ended, a notification after the loss): the loss
   * is the cause, as a socket's EPIPE reads as RMX_ECONNRESET over TCP. */
  if (status == RMX_ENOTCONN && c->err)
    return c->err;
  return status;
}

/* ---- posting ---- */

static int post(rmx_conn_t *c, rmx__op_t *op)
{
  rmx_tp_sge_t sge;
  uint16_t returned = 0;
  int rc;

  if (op->kind == RMX_OP_RMA_IMM) {
    /* Parts may go before the send queue fills; the last carries the
     * immediate and spends the credit. */
    if ((rc = c->ctx->opc[op->kind]->post(c, op)) != 0)
      return rc;
    c->cr.credits--;
    rmx__alive_msg(c, c->ka.last_tx = uv_now(c->ctx->loop));
    c->ka.due = 0;
    return 0;
  }
  if (op->kind == RMX_OP_EAGER && op->buf) {
    uint8_t *hdr = RMX_BUF_FRAME(op->buf, EXT_LEN(op));
    sge.mem = NULL;
    if ((c->ops->flags & RMX_TP_F_LOCAL_REG) &&
        (rc = rmx__buf_mem(c->ctx, op->buf, c->tpi, &sge.mem)) != 0)
      return rc;
    returned = rmx__credit_take(&c->cr);
    rmx__wire_set_credits(hdr, returned);
    sge.addr = hdr;
    sge.len = RMX_WIRE_HDR_LEN + EXT_LEN(op) + op->len;
  } else {
    if (op->ctrl != RMX_FR_BYE) {
      returned = rmx__credit_take(&c->cr);
      rmx__wire_set_credits(op->frame, returned);
    }
    sge.addr = op->frame;
    sge.len = op->frame_len;
    sge.mem = NULL;
  }
  if (op->kind == RMX_OP_CTRL && op->ctrl == RMX_FR_CREDIT)
    c->credit_queued = 0;
  /* A small message built in its op, where the transport copies it at the
   * call: done once posted, with no completion to wait for (rt.c). */
  void *tp_op = op->kind == RMX_OP_EAGER && !op->buf && (c->ops->flags & RMX_TP_F_SEND_COPY)
                    ? NULL : op;
  rc = c->ops->send(c->tc, &sge, 1, tp_op);
  if (rc) {
    rmx__credit_untake(&c->cr, returned); /* not sent: still owed */
    if (op->kind == RMX_OP_CTRL && op->ctrl == RMX_FR_CREDIT)
      c->credit_queued = 1;
    return rc;
  }
  RMX_LOG(c->ctx, TRACE, "%s peer %s: frame of %zu bytes posted (%u credits returned, %u left)",
          c->ops->name, c->peer, sge.len, returned, c->cr.credits);
  if (!(op->kind == RMX_OP_CTRL && op->ctrl == RMX_FR_BYE))
    c->cr.credits--;
  c->ka.last_tx = uv_now(c->ctx->loop); /* any frame tells the peer we are here */
  if (op->kind != RMX_OP_CTRL)
    rmx__alive_msg(c, c->ka.last_tx); /* RMX_IDLE_TIMEOUT_MS: a message went */
  c->ka.due = 0;
  if (op->kind == RMX_OP_RNDV)
    rmx_list_push(&c->rndv_wait, &op->link);
  else if (!tp_op)
    rmx__early_push(c->ctx, op);
  return 0;
}

/* Post a message (or write-with-immediate) taken from the front of the
 * send queue, or one that found it empty. One not posted goes (back) to
 * its front; an error other than a full send queue (RMX_EAGAIN: retried
 * after a completion) takes the connection down, and the op fails with
 * the rest in conn_finish. */
static int post_msg(rmx_conn_t *c, rmx__op_t *op)
{
  int rc = post(c, op);
  if (rc) {
    rmx_list_push_front(&c->sendq, &op->link);
    if (rc != RMX_EAGAIN)
      rmx__conn_down(c, rc);
    return rc;
  }
  c->stalled = 0;
  return 0;
}

static int queue_ctrl(rmx_conn_t *c, uint8_t type, const rmx_wire_fin_t *fin, const void *body,
                      size_t len);

/* Closing: keep the FINs the credits cover, drop the other control frames
 * (CREDIT frames, FINs past the credits): BYE must not wait behind them,
 * since no credit returns after the close. The credits left. */
static uint32_t ctrl_trim(rmx_conn_t *c)
{
  rmx_list_t *n, *next;
  uint32_t credits = c->cr.credits;
  for (n = c->ctrlq.next; n != &c->ctrlq; n = next) {
    next = n->next;
    rmx__op_t *op = rmx_container_of(n, rmx__op_t, link);
    if (op->ctrl == RMX_FR_FIN && credits >= rmx__credit_need(RMX_FR_FIN)) {
      credits--;
      continue;
    }
    rmx_list_del(n);
    rmx__op_put(op);
  }
  c->credit_queued = 0;
  return credits;
}

/* Closing: the messages the credits covered at the close, which the send
 * queue had not taken, go before BYE; then BYE. A frame queued since (a
 * FIN for a read that finished) may have taken a credit they counted on:
 * the rest are then cancelled. 1 if something was posted. */
static int close_drain(rmx_conn_t *c)
{
  rmx_list_t *n;
  int posted = 0;
  if (!c->bye_wait)
    return 0;
  while (c->close_sends && (n = c->sendq.next) != &c->sendq &&
         c->cr.credits >= rmx__credit_need(RMX_FR_DATA)) {
    rmx_list_del(n);
    if (post_msg(c, rmx_container_of(n, rmx__op_t, link)) != 0)
      return posted; /* no room: the completion that frees some comes back here */
    c->close_sends--;
    posted = 1;
  }
  c->bye_wait = 0;
  c->close_sends = 0;
  ctrl_trim(c);
  if (queue_ctrl(c, RMX_FR_BYE, NULL, NULL, 0) != 0)
    rmx__conn_tp_close(c); /* as a close that could not queue it */
  else
    rmx__msg_progress(c);
  return posted;
}

/* Send what credits allow: control frames first, then user messages. The
 * connection is queued for a flush only when something was posted. */
void rmx__msg_progress_queued(rmx_conn_t *c)
{
  rmx_list_t *n;
  int rc, posted = 0;

  if (c->tp_state != RMX_TPS_OPEN || c->state == RMX_CS_CONNECTING ||
      c->state == RMX_CS_RESOLVING)
    return;
  while ((n = c->ctrlq.next) != &c->ctrlq) {
    rmx__op_t *op = rmx_container_of(n, rmx__op_t, link);
    if (op->ctrl == RMX_FR_CREDIT && c->cr.owed == 0 && !c->ka.due) {
      /* A frame that went out since returned them already (and served as
       * the keepalive, if this was one). */
      rmx_list_del(n);
      c->credit_queued = 0;
      rmx__op_put(op);
      continue;
    }
    if (op->ctrl == RMX_FR_CREDIT ? !rmx__credit_frame_ok(&c->cr)
                                  : c->cr.credits < rmx__credit_need(op->ctrl)) {
      /* A CREDIT frame further back may still go with the last credit: a
       * FIN waiting for two must not hold back the credit return (or the
       * keepalive) both sides may be waiting for. */
      rmx__op_t *cr = NULL;
      rmx_list_t *k;
      rmx_list_foreach(k, &c->ctrlq) {
        rmx__op_t *o = rmx_container_of(k, rmx__op_t, link);
        if (o->ctrl == RMX_FR_CREDIT) {
          cr = o;
          break;
        }
      }
      if (!cr || cr == op || !rmx__credit_frame_ok(&c->cr))
        break;
      op = cr;
      n = &cr->link;
    }
    rmx_list_del(n);
    if ((rc = post(c, op)) != 0) {
      rmx_list_push_front(&c->ctrlq, &op->link);
      if (rc != RMX_EAGAIN) /* EAGAIN: the send queue is full, retry later */
        rmx__conn_down(c, rc);
      goto out;
    }
    posted = 1;
  }
  if (c->state != RMX_CS_ESTABLISHED) {
    posted |= close_drain(c);
    goto out;
  }
  if (!rmx_list_empty(&c->rmaq)) {
    posted = 1;
    c->ctx->up.rma_progress(c);
    if (c->state != RMX_CS_ESTABLISHED)
      goto out;
  }
  while ((n = c->sendq.next) != &c->sendq && c->cr.credits >= rmx__credit_need(RMX_FR_DATA)) {
    rmx__op_t *op = rmx_container_of(n, rmx__op_t, link);
    rmx_list_del(n);
    if (post_msg(c, op) != 0)
      goto out;
    posted = 1;
  }
  if (!rmx_list_empty(&c->sendq) && !c->stalled) {
    c->stalled = 1;
    c->st.credit_stalls++;
  }
  if (c->reads_blocked) { /* a message's next part, or the next message */
    c->reads_blocked = 0;
    c->ctx->up.reads_resume(c); /* flushes what it posts */
  }
out:
  if (posted)
    rmx__conn_flush_later(c);
}

/*
 * A new message or write-with-immediate (both spend a credit and keep one
 * order): posted at once when nothing waits ahead of it and the credits
 * allow, which is the common case; else queued behind what waits. Either
 * way it goes exactly as rmx__msg_progress would send it.
 */
void rmx__msg_submit(rmx_conn_t *c, rmx__op_t *op)
{
  if (!rmx_list_empty(&c->sendq) || !rmx_list_empty(&c->ctrlq) || !rmx_list_empty(&c->rmaq) ||
      c->tp_state != RMX_TPS_OPEN || c->cr.credits < rmx__credit_need(RMX_FR_DATA)) {
    rmx_list_push(&c->sendq, &op->link);
    rmx__msg_progress(c);
    return;
  }
  if (post_msg(c, op) == 0)
    rmx__conn_flush_later(c);
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
    op->frame_len = (uint32_t)rmx__wire_fin_encode(op->frame, 0, fin);
  } else {
    op->frame_len = (uint32_t)(rmx__wire_hdr_encode(op->frame, type, 0, (uint32_t)len) + len);
    if (len)
      memcpy(op->frame + RMX_WIRE_HDR_LEN, body, len);
  }
  rmx_list_push(&c->ctrlq, &op->link);
  return 0;
}

int rmx__msg_queue_fin(rmx_conn_t *c, uint64_t id, int32_t status)
{
  rmx_wire_fin_t fin = {.id = id, .status = status};
  return queue_ctrl(c, RMX_FR_FIN, &fin, NULL, 0);
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

/*
 * BYE goes after what the credits at the close cover: the FINs waiting
 * (the peer's sends complete) and the messages handed over before the
 * close, though the send queue may not have taken them yet (it is short on
 * the SRQ). What the credits do not cover is dropped (frames) or cancelled
 * when the connection finishes (messages): no credit returns after the
 * close that BYE could wait for. The close deadline bounds it all.
 */
int rmx__msg_queue_bye(rmx_conn_t *c)
{
  rmx_list_t *n;
  rmx__msg_progress(c);
  uint32_t credits = ctrl_trim(c);
  c->close_sends = 0;
  rmx_list_foreach(n, &c->sendq) {
    if (credits < rmx__credit_need(RMX_FR_DATA))
      break;
    credits--;
    c->close_sends++;
  }
  if (c->close_sends || !rmx_list_empty(&c->ctrlq)) {
    c->bye_wait = 1; /* close_drain queues it */
    rmx__msg_progress(c);
    return 0;
  }
  int rc = queue_ctrl(c, RMX_FR_BYE, NULL, NULL, 0);
  if (rc == 0)
    rmx__msg_progress(c);
  return rc;
}

void rmx__msg_maybe_return_credits(rmx_conn_t *c)
{
  if (rmx__credit_want_frame(&c->cr, c->ctx->cfg.rx_depth) && !c->credit_queued &&
      c->state == RMX_CS_ESTABLISHED) {
    if (queue_ctrl(c, RMX_FR_CREDIT, NULL, NULL, 0) == 0) {
      c->credit_queued = 1;
      c->st.credit_frames++;
    }
  }
}

int rmx__msg_queue_keepalive(rmx_conn_t *c)
{
  c->ka.due = 1;
  if (c->credit_queued)
    return 0; /* a CREDIT frame already waits: it serves */
  int rc = queue_ctrl(c, RMX_FR_CREDIT, NULL, NULL, 0);
  if (rc == 0)
    c->credit_queued = 1;
  return rc;
}

void rmx__msg_credit_back(rmx_conn_t *c) { rmx__credit_freed(&c->cr, 0); }

/* After a send completed (any kind): fail on error, let held work go. */
void rmx__msg_sent(rmx_conn_t *c, int status)
{
  if (status && c->state != RMX_CS_DOWN) {
    rmx__conn_down(c, status);
    return;
  }
  rmx__msg_progress(c); /* and a read refused for a full send queue (reads_blocked) */
}

/* ---- control frames: CREDIT, FIN, BYE, AUTH ---- */

static void ctrl_done(rmx_conn_t *c, rmx__op_t *op, int status)
{
  int bye = op->ctrl == RMX_FR_BYE;
  rmx__op_put(op);
  if (bye)
    rmx__conn_tp_finish(c); /* BYE is out: the transport may end */
  rmx__msg_sent(c, status);
}

static void ctrl_fail(rmx__op_t *op, int status) { rmx__op_put(op); }

const rmx__op_class_t rmx__ctrl_class = {.done = ctrl_done, .fail = ctrl_fail};
