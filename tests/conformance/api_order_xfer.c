/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * API order, transfer requests: posting a prepared request (new, or one
 * that ended posted again), with or without a notification, releasing one,
 * and taking a kept notification, as actions from inside every callback and
 * in the same turn as every other action; the transfer callback and
 * on_notify as callbacks the actions run from. The tracking layer checks
 * them as every other callback: exactly once per post that returned 0,
 * never after on_closed; rmx_xfer_status agrees with the callback; each
 * notification arrives once, at the peer of the side that posted it, with
 * the bytes of its request in place.
 *
 * Requests write into the top half of the peer's region (rmx_write and
 * friends use the bottom half): four entries, the first two contiguous on
 * both sides (merged), one empty, one after a gap.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api_order.h"

#define XREQ_MAX 1024
#define XSLOT 4096 /* each request's place in the peer's region */
#define NOTE_MAGIC 0x6e6f7465u

typedef struct xreq {
  rmx_xfer_t *x;
  trk_t *t;
  uint8_t *src; /* XSLOT bytes */
  uint64_t off; /* in the peer's region */
  op_t *last;   /* its latest post */
  int released;
} xreq_t;

static const struct { size_t at, len; } ENT[4] = {
  {0, 1000}, {1000, 1048}, {2048, 0}, {2096, 2000},
};

static xreq_t xreqs[XREQ_MAX];
static int nxreqs;
static uint32_t next_slot, next_seed = 1;
static int seen_ok, seen_err, seen_cb_notes, seen_taken; /* what the cases made happen */

static void on_xfer(rmx_xfer_t *x, int status, size_t failed, void *arg);

/* A new request of t's, prepared. NULL where prep refused (checked). */
static xreq_t *xreq_new(trk_t *t)
{
  if (!regions_ready || nxreqs == XREQ_MAX)
    return NULL;
  if (!t->rk)
    t->rk = unpack_for(t);
  xreq_t *r = &xreqs[nxreqs];
  memset(r, 0, sizeof(*r));
  r->t = t;
  r->src = malloc(XSLOT);
  assert_non_null(r->src);
  r->off = REGION / 2 + (next_slot++ % (REGION / 2 / XSLOT)) * XSLOT;
  rmx_xfer_entry_t e[4];
  for (int i = 0; i < 4; i++)
    e[i] = (rmx_xfer_entry_t){.addr = r->src + ENT[i].at, .len = ENT[i].len, .rkey = t->rk,
                              .offset = r->off + ENT[i].at};
  in_api++;
  int rc = rmx_xfer_prep(t->c, RMX_XFER_WRITE, e, 4, &r->x);
  in_api--;
  check_rc(t, "rmx_xfer_prep", rc, 0);
  if (rc) {
    free(r->src);
    return NULL;
  }
  if (rmx_xfer_conn(r->x) != t->c)
    violation("rmx_xfer_conn does not name the connection the request was prepared on");
  nxreqs++;
  return r;
}

/* The latest request of t's that is not posted now, or a new one. */
static xreq_t *xreq_idle(trk_t *t)
{
  for (int i = nxreqs - 1; i >= 0; i--) {
    xreq_t *r = &xreqs[i];
    if (r->t == t && !r->released && (!r->last || r->last->fired || !r->last->issued))
      return r;
  }
  return xreq_new(t);
}

op_t *do_xfer(trk_t *t, int notify)
{
  op_t *op = op_new(t, OP_XFER);
  xreq_t *r = xreq_idle(t);
  if (!r)
    return op;
  uint8_t note[8];
  uint32_t idx = (uint32_t)(op - ops), magic = NOTE_MAGIC;
  memcpy(note, &idx, 4);
  memcpy(note + 4, &magic, 4);
  op->xr = r;
  op->notify = notify;
  op->seed = next_seed++;
  pattern(r->src, XSLOT, op->seed); /* not posted: the source is ours */
  in_api++;
  op->rc = rmx_xfer_post(r->x, notify ? note : NULL, notify ? sizeof(note) : 0, on_xfer, op);
  in_api--;
  check_rc(t, "rmx_xfer_post", op->rc, 0);
  if (op->rc == 0) {
    op->issued = 1;
    t->issued++;
    r->last = op;
    size_t failed = 0;
    if (rmx_xfer_status(r->x, &failed) != RMX_EINPROGRESS || failed != RMX_XFER_NO_ENTRY)
      violation("rmx_xfer_status of a posted request: not RMX_EINPROGRESS");
    in_api++;
    int rc = rmx_xfer_post(r->x, NULL, 0, on_xfer, op);
    in_api--;
    if (rc != RMX_EBUSY)
      violation("posting a posted request returned %s, not RMX_EBUSY", rmx_err_name(rc));
  }
  return op;
}

static void on_xfer(rmx_xfer_t *x, int status, size_t failed, void *arg)
{
  op_t *op = arg;
  size_t f = 0;
  int st = rmx_xfer_status(x, &f);
  if (!op->xr || op->xr->x != x)
    violation("a transfer callback for a request it was not posted for");
  if (st != status || f != failed)
    violation("rmx_xfer_status says %s at entry %zu, the callback %s at %zu", rmx_err_name(st),
              f, rmx_err_name(status), failed);
  if (failed != RMX_XFER_NO_ENTRY) /* every entry is valid: only the connection fails */
    violation("a transfer failed (%s) naming entry %zu", rmx_err_name(status), failed);
  if (!op_fire(op, rmx_xfer_conn(x), status, "transfer callback"))
    return;
  *(status ? &seen_err : &seen_ok) += 1;
  hook(EV_XFER, op->t, NULL, status);
}

void do_xfer_release(trk_t *t)
{
  for (int i = nxreqs - 1; i >= 0; i--) {
    xreq_t *r = &xreqs[i];
    if (r->t != t || r->released)
      continue;
    int busy = r->last && r->last->issued && !r->last->fired;
    in_api++;
    int rc = rmx_xfer_release(r->x);
    in_api--;
    if (rc != (busy ? RMX_EBUSY : 0))
      violation("rmx_xfer_release of a%s request returned %s", busy ? " posted" : "n idle",
                rmx_err_name(rc));
    if (rc == 0) {
      r->released = 1;
      free(r->src);
      r->src = NULL;
    }
    return;
  }
}

/* A notification arrived at t: whose, once, and are its bytes in place? */
static void notified(trk_t *t, const void *data, size_t len, const char *how)
{
  uint32_t idx, magic;
  if (len != 8)
    goto bad;
  memcpy(&idx, data, 4);
  memcpy(&magic, (const uint8_t *)data + 4, 4);
  if (magic != NOTE_MAGIC || idx >= (uint32_t)nops)
    goto bad;
  op_t *op = &ops[idx];
  if (op->kind != OP_XFER || !op->notify || !op->issued || op->t->side == t->side)
    goto bad;
  if (op->notified++)
    violation("%s: a notification arrived %d times", how, op->notified);
  t->notifies++;
  if (op->xr->last == op && op->xr->t->live) { /* its bytes, unless posted again since */
    uint8_t *want = malloc(XSLOT);
    pattern(want, XSLOT, op->seed);
    for (int i = 0; i < 4; i++)
      if (memcmp(regions[t->side] + op->xr->off + ENT[i].at, want + ENT[i].at, ENT[i].len))
        violation("%s: a notification before its entry %d was in place", how, i);
    free(want);
  }
  return;
bad:
  violation("%s: %zu bytes that no request sent as a notification", how, len);
}

void on_notify(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  trk_t *t = arg;
  if (!cb_enter(t, c, "on_notify"))
    return;
  if (t->close_called)
    violation("on_notify after a local close");
  notified(t, data, len, "on_notify");
  seen_cb_notes++;
  hook(EV_NOTIFY, t, NULL, 0);
}

void do_notify_take(trk_t *t)
{
  uint8_t buf[64];
  size_t len = 0;
  in_api++;
  int rc = rmx_notify_take(t->c, buf, 4, &len); /* too short: nothing is taken */
  in_api--;
  if (rc == RMX_EAGAIN)
    return;
  if (rc != RMX_EMSGSIZE || len != 8)
    violation("rmx_notify_take with 4 bytes of room returned %s, length %zu", rmx_err_name(rc),
              len);
  in_api++;
  rc = rmx_notify_take(t->c, buf, sizeof(buf), &len);
  in_api--;
  if (rc != 0)
    violation("rmx_notify_take after RMX_EMSGSIZE returned %s", rmx_err_name(rc));
  else
    notified(t, buf, len, "rmx_notify_take"), seen_taken++;
}

void xfer_world_down(void)
{
  for (int i = 0; i < nxreqs; i++) {
    xreq_t *r = &xreqs[i];
    if (r->released)
      continue;
    if (rmx_xfer_conn(r->x) != NULL)
      violation("a request names its connection after on_closed");
    int rc = rmx_xfer_post(r->x, NULL, 0, on_xfer, NULL);
    if (rc != RMX_ENOTCONN)
      violation("posting a request after on_closed returned %s", rmx_err_name(rc));
    rc = rmx_xfer_release(r->x);
    if (rc)
      violation("releasing a request after on_closed returned %s", rmx_err_name(rc));
    free(r->src);
  }
  nxreqs = 0;
}

/* ---- the cases ---- */

static const act_t xfer_acts[] = {A_XFER, A_XFER_NOTIFY, A_XFER_RELEASE, A_NOTIFY_TAKE};
#define NX (sizeof(xfer_acts) / sizeof(xfer_acts[0]))
static const act_t other_acts[] = {
  A_CLOSE, A_CLOSE_PEER, A_SEND_SMALL, A_SEND_LARGE, A_CALL_ECHO, A_CANCEL, A_WRITE, A_READ,
  A_WRITE_IMM, A_REPLY_HELD, A_CLOSE_LISTENER, A_XFER, A_XFER_NOTIFY, A_XFER_RELEASE,
  A_NOTIFY_TAKE,
};
#define NO (sizeof(other_acts) / sizeof(other_acts[0]))

/* The cases must make each kind of outcome happen, or they test nothing
 * (a take, in the callbacks, only where a notification came in time). */
static void seen(const char *what, int takes)
{
  fprintf(stderr, "[ %s: %d transfers ended, %d failed; %d notifications in on_notify, "
          "%d taken ]\n", what, seen_ok, seen_err, seen_cb_notes, seen_taken);
  assert_true(seen_ok > 0 && seen_err > 0 && seen_cb_notes > 0 && (!takes || seen_taken > 0));
  seen_ok = seen_err = seen_cb_notes = seen_taken = 0;
}

/* Each transfer action, then a close, from inside every callback of both
 * sides (the first of each); every action from inside the transfer
 * callback and on_notify. */
void every_xfer_action_in_every_callback(void **state)
{
  for (int ev = 0; ev < EV_N; ev++)
    for (int side = CL; side <= SV; side++) {
      if ((ev == EV_CONNECTED && side == SV) || (ev == EV_ACCEPT && side == CL) ||
          (ev == EV_HANDLER && side == CL) || (ev == EV_REPLY && side == SV) ||
          (ev == EV_NOTIFY && side == CL))
        continue; /* no such event there in this workload */
      int mine = ev == EV_XFER || ev == EV_NOTIFY;
      for (size_t a = 0; a < (mine ? NO : NX); a++) {
        act_t act = mine ? other_acts[a] : xfer_acts[a];
        plan_t p = {.ev = (ev_t)ev, .side = side, .act = {act, A_XFER_NOTIFY, A_CLOSE}};
        fprintf(stderr, "[ %s / %s: %s, transfer, close ]\n", ev_names[ev],
                side == CL ? "client" : "server", act_names[act]);
        scenario(&p);
      }
    }
  seen("every transfer action in every callback", 0);
}

/* Every action inside transfer callbacks that report an error: the peer
 * closes, or the connection is closed, in one of the callbacks. */
void every_action_in_failing_xfer_callbacks(void **state)
{
  static const plan_t causes[] = {
    {.ev = EV_RECV, .side = SV, .act = {A_CLOSE}},
    {.ev = EV_NOTIFY, .side = SV, .act = {A_CLOSE}},
    {.ev = EV_ACCEPT, .side = SV, .act = {A_CLOSE}},
    {.ev = EV_XFER, .side = CL, .act = {A_XFER_NOTIFY, A_CLOSE_PEER}},
    {.ev = EV_SENT, .side = CL, .act = {A_XFER, A_CLOSE}},
  };
  int ran = 0, n = 0;
  for (size_t c = 0; c < sizeof(causes) / sizeof(causes[0]); c++)
    for (size_t a = 0; a < NO; a++) {
      plan_t q = {.ev = EV_XFER, .side = CL, .err = 1, .act = {other_acts[a], A_CLOSE}};
      fprintf(stderr, "[ %s / %s: %s; failing transfer callback: %s, close ]\n",
              ev_names[causes[c].ev], causes[c].side == CL ? "client" : "server",
              act_names[causes[c].act[0]], act_names[other_acts[a]]);
      scenario2(&causes[c], &q);
      ran += P[1].ran;
      n++;
    }
  fprintf(stderr, "[ %d of %d failing transfer callbacks acted ]\n", ran, n);
  assert_true(ran >= n / 2);
}

/* Each transfer action and every action in one turn, both orders. */
void every_xfer_pair_in_one_turn(void **state)
{
  for (size_t a = 0; a < NX; a++)
    for (size_t b = 0; b < NO; b++)
      for (int order = 0; order < 2; order++) {
        act_t first = order ? other_acts[b] : xfer_acts[a];
        act_t second = order ? xfer_acts[a] : other_acts[b];
        if (order && other_acts[b] == xfer_acts[a])
          continue;
        fprintf(stderr, "[ %s; %s ]\n", act_names[first], act_names[second]);
        world_up(0, 1);
        run_for(sv_known, 2000);
        do_call(CLT, H_HOLD, SMALL, 0);
        if (SVT && SVT->live)
          do_xfer(SVT, 1); /* a notification for the client to keep */
        do_xfer(CLT, 1);
        while (nheld == 0 && CLT->live)
          turn();
        run_for(quiet, 2000); /* the transfers ended */
        /* The server's request ends once its notification is handed to its
         * transport; over RDMA the client may not have it yet. A call
         * answered after it comes after it: then the client keeps it. */
        if (CLT->live)
          do_call(CLT, H_ECHO, SMALL, 0);
        run_for(quiet, 2000);
        run_act(first, CLT, NULL);
        run_act(second, CLT, NULL);
        run_for(quiet, 3000);
        world_down();
      }
  seen("every transfer action and every action in one turn", 1);
}
