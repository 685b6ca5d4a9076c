/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The progress engine's core side: every transport event enters here and
 * goes to the layer that owns it. The transports own the waiting (libuv
 * readiness for TCP, completion channels for verbs); completions of ops go
 * to the op's class (src/rt/rt.c), so this file knows no op's insides.
 */
#include "rmx_int.h"

static const char *const ev_name[] = {"ESTABLISHED", "DISCONNECTED", "CLOSED",
                                      "SEND",        "RECV",         "READ",
                                      "WRITE",       "ATOMIC",       "IMM"};
_Static_assert(sizeof(ev_name) / sizeof(ev_name[0]) == RMX_TP_EV_IMM + 1, "a name per event");

/* A frame received: the messages' path, and the handshake's while the
 * peer authenticates. */
void rmx__tp_recv(void *owner, const void *data, size_t len)
{
  rmx_conn_t *c = owner;
  rmx_ctx_t *ctx = c->ctx;
  RMX_LOG(ctx, TRACE, "%s peer %s: RECV, status 0, %zu bytes", c->ops->name, c->peer, len);
  rmx__cb_enter(ctx);
  rmx__conn_spin(c);
  if (c->state != RMX_CS_AUTH)
    rmx__msg_recv(c, data, len);
  else if (rmx__auth_recv(c, data, len)) /* AUTH or AUTH_OK, or refused */
    rmx__conn_ready(c);
  ctx->in_cb--;
}

void rmx__tp_event(void *owner, const rmx_tp_ev_t *ev)
{
  rmx_conn_t *c = owner;
  rmx_ctx_t *ctx = c->ctx; /* c may be gone after dispatch; ctx is not */
  if (ev->type == RMX_TP_EV_RECV) {
    rmx__tp_recv(owner, ev->data, ev->len);
    return;
  }
  /* RMX_LOG=trace: every completion and frame; one comparison when off. */
  RMX_LOG(ctx, TRACE, "%s peer %s: %s, status %d, %zu bytes", c->ops->name, c->peer,
          ev_name[ev->type], ev->status, ev->len);
  rmx__cb_enter(ctx);
  rmx__conn_spin(c);
  switch (ev->type) {
  case RMX_TP_EV_RECV: /* above */
    break;
  case RMX_TP_EV_IMM:
    if (c->state == RMX_CS_AUTH)
      rmx__auth_refuse(c, "write with immediate before authenticating");
    else
      rmx__msg_imm(c, ev->imm, ev->len, ev->status != 0);
    break;
  case RMX_TP_EV_READ:
  case RMX_TP_EV_WRITE:
  case RMX_TP_EV_ATOMIC:
    c->rma_out--; /* a place in the peer's remote window is free */
    if (ev->status == 0)
      rmx__alive_msg(c, c->ka.last_rx = uv_now(ctx->loop)); /* the peer answered: it is there */
    /* fall through */
  case RMX_TP_EV_SEND:
    if (ev->op)
      rmx__op_done(c, ev->op, ev->status);
    else /* copied sends retired: the send queue has room (or the status) */
      rmx__msg_sent(c, ev->status);
    break;
  case RMX_TP_EV_ESTABLISHED:
    rmx__conn_established(c, ev);
    break;
  case RMX_TP_EV_DISCONNECTED:
    rmx__conn_down(c, ev->status ? ev->status : RMX_ECONNRESET);
    break;
  case RMX_TP_EV_CLOSED: /* from a close callback: no flush follows */
    rmx__conn_closed(c);
    rmx__flush_kick(ctx);
    break;
  }
  ctx->in_cb--;
}
