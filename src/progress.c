/*
 * The progress engine's core side: every transport completion enters here
 * and becomes a state change or a user callback. The transports own the
 * waiting (libuv readiness for TCP, completion channels for verbs).
 */
#include "rmx_int.h"

void rmx__tp_event(void *owner, const rmx_tp_ev_t *ev)
{
  rmx_conn_t *c = owner;
  rmx_ctx_t *ctx = c->ctx; /* c may be gone after dispatch; ctx is not */
  ctx->in_cb++;
  switch (ev->type) {
  case RMX_TP_EV_RECV:
    rmx__msg_recv(c, ev->data, ev->len);
    break;
  case RMX_TP_EV_SEND:
    rmx__msg_send_done(c, ev->op, ev->status);
    break;
  case RMX_TP_EV_READ:
    c->rma_out--;
    if (((rmx__op_t *)ev->op)->kind == RMX_OP_RX)
      rmx__msg_read_done(c, ev->op, ev->status); /* a rendezvous */
    else
      rmx__rma_event(c, ev->op, ev->status);
    break;
  case RMX_TP_EV_WRITE:
  case RMX_TP_EV_ATOMIC:
    c->rma_out--;
    rmx__rma_event(c, ev->op, ev->status);
    break;
  case RMX_TP_EV_IMM:
    rmx__msg_imm(c, ev->imm, ev->len, ev->status != 0);
    break;
  case RMX_TP_EV_ESTABLISHED:
  case RMX_TP_EV_DISCONNECTED:
  case RMX_TP_EV_CLOSED:
    rmx__conn_on_event(c, ev);
    break;
  }
  ctx->in_cb--;
}
