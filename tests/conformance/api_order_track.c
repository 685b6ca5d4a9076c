/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The API-order suite's tracking layer (api_order.h): every callback checks
 * that it may run at all, counts what it promised against what ran, and
 * offers the case its turn; the RPC handlers echo or hold their requests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "api_order.h"

const char *volatile phase = "setup";

/* ---- the tracking layer ---- */

rmx_ctx_t *ctx;
rmx_listener_t *lst;
char lst_uri[128];
trk_t trks[MAX_TRK];
int ntrk;
trk_t *CLT, *SVT;
op_t ops[MAX_OPS];
int nops;
held_t held[MAX_HELD];
int nheld;
int violations, in_api;
void violation(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "api-order: violation: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  violations++;
}

trk_t *trk_new(rmx_conn_t *c, int side)
{
  assert_true(ntrk < MAX_TRK);
  trk_t *t = &trks[ntrk++];
  memset(t, 0, sizeof(*t));
  t->c = c;
  t->side = side;
  t->live = 1;
  return t;
}

/* The live record of a connection, keyed by its handle. */
static trk_t *trk_find(rmx_conn_t *c)
{
  for (int i = ntrk - 1; i >= 0; i--)
    if (trks[i].live && trks[i].c == c)
      return &trks[i];
  return NULL;
}

/* Every callback starts here: is it allowed to run at all? */
int cb_enter(trk_t *t, rmx_conn_t *c, const char *what)
{
  if (in_api)
    violation("%s ran from inside an API call", what);
  if (!t) {
    violation("%s for connection %p that the test does not know", what, (void *)c);
    return 0;
  }
  if (t->c != c)
    violation("%s: handle %p, the record says %p", what, (void *)c, (void *)t->c);
  if (!t->live) {
    violation("%s after on_closed (connection %p)", what, (void *)c);
    return 0;
  }
  return 1;
}

op_t *op_new(trk_t *t, op_kind_t kind)
{
  assert_true(nops < MAX_OPS);
  op_t *op = &ops[nops++];
  memset(op, 0, sizeof(*op));
  op->t = t;
  op->kind = kind;
  return op;
}

/* A send, op or reply callback: exactly once per call that returned 0. */
int op_fire(op_t *op, rmx_conn_t *c, int status, const char *what)
{
  if (!cb_enter(op->t, c, what))
    return 0;
  if (!op->issued)
    violation("%s of a call that returned an error", what);
  if (op->fired)
    violation("%s ran %d times (status %s now, %s first)", what, op->fired + 1,
              rmx_err_name(status), rmx_err_name(op->status));
  if (op->canceled && status != RMX_ECANCELED)
    violation("%s of a canceled call: %s, not RMX_ECANCELED", what, rmx_err_name(status));
  if (op->fired++ == 0)
    op->status = status;
  op->t->fired++;
  return op->fired == 1;
}

/* ---- what a case does, and where ---- */

const char *const ev_names[EV_N] = {"on_connected", "on_accept", "on_recv", "on_sent",
                                    "on_reply", "handler", "on_disconnect", "op callback",
                                    "on_imm", "on_closed", "transfer callback", "on_notify"};
const char *const act_names[A_N] = {
  "nothing", "close", "close the peer", "send small", "send large", "call echo",
  "call held", "call large", "cancel", "cancel twice", "write", "read", "write_imm",
  "reply", "reply held", "close the listener", "transfer", "transfer with a notification",
  "release a transfer", "take a notification"};

plan_t P[2];
int plan_on;
const void *req_data;
size_t req_len;
int ev_count[EV_N][2];
int acts_run;

/* Where every callback offers the case its turn. *req: a handler's request,
 * set to NULL once an action answered it. */
void hook(ev_t ev, trk_t *t, rmx_rpc_req_t **req, int status)
{
  ev_count[ev][t->side]++;
  for (int k = 0; plan_on && k < 2; k++) {
    plan_t *p = &P[k];
    if (p->ran || p->act[0] == A_NONE || p->ev != ev || p->side != t->side ||
        (p->err && !status) || ++p->seen != (p->nth ? p->nth : 1))
      continue;
    p->ran = 1;
    acts_run++;
    for (int i = 0; i < 4 && p->act[i] != A_NONE; i++)
      run_act(p->act[i], t, req);
  }
}

/* ---- callbacks ---- */

static void on_closed(rmx_conn_t *c, void *arg);

void close_conn(trk_t *t)
{
  if (!t || !t->live)
    return;
  in_api++;
  int rc = rmx_conn_close(t->c, on_closed, t);
  in_api--;
  if (t->close_called && rc != RMX_EALREADY)
    violation("a second close returned %s, not RMX_EALREADY", rmx_err_name(rc));
  if (!t->close_called && rc != 0)
    violation("close returned %s", rmx_err_name(rc));
  t->close_called = 1;
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  trk_t *t = arg;
  if (!cb_enter(t, c, "on_closed"))
    return;
  if (!t->close_called)
    violation("on_closed without a close");
  if (t->issued != t->fired)
    violation("on_closed with %d of %d callbacks still to run", t->issued - t->fired, t->issued);
  if (t->held)
    violation("on_closed with %d requests unanswered", t->held);
  if (t->side == CL && t->connected != 1)
    violation("on_closed after %d on_connected", t->connected);
  int issued = t->issued;
  hook(EV_CLOSED, t, NULL, 0); /* the handle is still valid here */
  if (t->issued != issued)
    violation("a call from inside on_closed returned 0");
  t->closed++;
  t->live = 0;
}

static void on_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  trk_t *t = arg;
  if (!cb_enter(t, c, "on_recv"))
    return;
  if (t->close_called)
    violation("on_recv after a local close");
  uint8_t *want = malloc(len ? len : 1);
  pattern(want, len, (uint32_t)len);
  if (memcmp(want, data, len) != 0)
    violation("on_recv: %zu bytes that were not sent", len);
  free(want);
  t->recvs++;
  hook(EV_RECV, t, NULL, 0);
}

static void on_disconnect(rmx_conn_t *c, int status, void *arg)
{
  trk_t *t = arg;
  if (!cb_enter(t, c, "on_disconnect"))
    return;
  if (t->disconnects++)
    violation("on_disconnect ran %d times", t->disconnects);
  if (t->close_called)
    violation("on_disconnect after a local close");
  if (t->issued != t->fired)
    violation("on_disconnect with %d operations still outstanding", t->issued - t->fired);
  t->disconnect_status = status;
  hook(EV_DISCONNECT, t, NULL, status);
  if (t->live && !t->close_called)
    close_conn(t); /* what every application does */
}

static void on_imm(rmx_conn_t *c, uint32_t imm, size_t len, void *arg)
{
  trk_t *t = arg;
  if (!cb_enter(t, c, "on_imm"))
    return;
  if (t->close_called)
    violation("on_imm after a local close");
  t->imms++;
  hook(EV_IMM, t, NULL, 0);
}

const rmx_conn_cbs_t tracked_cbs = {.on_recv = on_recv, .on_disconnect = on_disconnect,
                                   .on_imm = on_imm};
/* The server takes notifications in on_notify; the client keeps them for
 * rmx_notify_take (api_order_xfer.c). */
static const rmx_conn_cbs_t tracked_sv_cbs = {.on_recv = on_recv, .on_disconnect = on_disconnect,
                                              .on_imm = on_imm, .on_notify = on_notify};

void on_connected(rmx_conn_t *c, int status, void *arg)
{
  trk_t *t = arg;
  if (!cb_enter(t, c, "on_connected"))
    return;
  if (t->connected++)
    violation("on_connected ran %d times", t->connected);
  t->connect_status = status;
  if (t->close_called && status != RMX_ECANCELED)
    violation("on_connected after a close: %s, not RMX_ECANCELED", rmx_err_name(status));
  if (status == 0)
    hook(EV_CONNECTED, t, NULL, status);
}

void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  if (in_api)
    violation("on_accept ran from inside an API call");
  if (trk_find(c))
    violation("on_accept for a connection already known");
  trk_t *t = trk_new(c, SV);
  SVT = t;
  rmx_conn_set_cbs(c, &tracked_sv_cbs, t);
  hook(EV_ACCEPT, t, NULL, 0);
}

void on_sent(rmx_conn_t *c, int status, void *arg)
{
  op_t *op = arg;
  if (!op_fire(op, c, status, "on_sent"))
    return;
  free(op->buf); /* the source may go now: a late read of it is ASan's to see */
  op->buf = NULL;
  hook(EV_SENT, op->t, NULL, status);
}

void on_reply(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  op_t *op = arg;
  if (!op_fire(op, c, status, "on_reply"))
    return;
  if (status == 0 && op->check && (len != op->len || memcmp(data, op->buf, len) != 0))
    violation("on_reply: %zu bytes that are not the echo of %zu", len, op->len);
  free(op->buf); /* the request may go now, even a large one */
  op->buf = NULL;
  hook(EV_REPLY, op->t, NULL, status);
}

void on_op(rmx_conn_t *c, int status, void *arg)
{
  op_t *op = arg;
  if (!op_fire(op, c, status, "op callback"))
    return;
  free(op->buf);
  op->buf = NULL;
  hook(EV_OP, op->t, NULL, status);
}

/* ---- handlers ---- */

int bad_requests;

static trk_t *req_trk(rmx_rpc_req_t *req, const void *data, size_t len)
{
  rmx_conn_t *c = rmx_rpc_req_conn(req);
  trk_t *t = trk_find(c);
  cb_enter(t, c, "handler");
  uint8_t *want = malloc(len ? len : 1);
  pattern(want, len, (uint32_t)len);
  if (memcmp(want, data, len) != 0)
    bad_requests++, violation("handler: a %zu-byte request that was not sent", len);
  free(want);
  return t;
}

static int reply_rc_ok(trk_t *t, int rc)
{
  if (rc == 0)
    return t && !t->close_called;
  return rc == RMX_ENOTCONN;
}

void answer(trk_t *t, rmx_rpc_req_t *req, const void *data, size_t len)
{
  in_api++;
  int rc = rmx_rpc_reply(req, data, len);
  in_api--;
  if (!reply_rc_ok(t, rc))
    violation("rmx_rpc_reply returned %s%s", rmx_err_name(rc),
              t && t->close_called ? " after a local close" : "");
  if (t)
    t->held--;
}

/* A handler's start: the request is held until answered, and the case has
 * its turn (*req is NULL once it answered). NULL for an unknown connection. */
static trk_t *handler_turn(rmx_rpc_req_t **req, const void *data, size_t len)
{
  trk_t *t = req_trk(*req, data, len);
  if (!t)
    return NULL;
  t->held++;
  req_data = data;
  req_len = len;
  hook(EV_HANDLER, t, req, 0);
  return t;
}

void h_echo(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  trk_t *t = handler_turn(&req, data, len);
  if (t && req)
    answer(t, req, data, len);
}

void h_hold(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  trk_t *t = handler_turn(&req, data, len);
  if (t && req) {
    assert_true(nheld < MAX_HELD);
    held[nheld++] = (held_t){req, t};
  }
}

void answer_held(trk_t *only)
{
  int keep = 0;
  for (int i = 0; i < nheld; i++) {
    if (only && held[i].t != only) {
      held[keep++] = held[i];
      continue;
    }
    answer(held[i].t, held[i].req, "late", 4);
  }
  nheld = keep;
}
