/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * API order: close from inside every callback on top of a workload that
 * runs them all, and close in the same turn as a connect, a large send, RPC
 * calls and sends waiting for credits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api_order.h"

/* ---- close from inside every callback ---- */

/* The standard traffic: every callback of both sides runs at least once. */
static void workload(void)
{
  if (!CLT || !CLT->live || CLT->connect_status)
    return;
  do_send(CLT, SMALL);
  do_send(CLT, LARGE);
  for (int i = 0; i < BURST; i++) /* beyond the credits: some wait in the queue */
    do_send(CLT, 1 + (size_t)i % 64);
  do_call(CLT, H_ECHO, SMALL, 0);
  do_call(CLT, H_ECHO, LARGE, 0);
  do_call(CLT, H_HOLD, SMALL, 0);
  do_rma(CLT, A_WRITE);
  do_rma(CLT, A_READ);
  do_rma(CLT, A_WRITE_IMM);
  do_xfer(CLT, 1); /* its notification: the server's on_notify */
  if (SVT && SVT->live) {
    do_xfer(SVT, 1); /* the client keeps it */
    do_send(SVT, SMALL);
    do_send(SVT, LARGE);
    do_rma(SVT, A_WRITE_IMM);
  }
}

int sv_known(void) { return SVT != NULL || !CLT->live || CLT->close_called; }

static int acted(void) { return acts_run > 0; }

/* One case: the plans act in their events, on top of the workload. The
 * first plan's event must come; the second's (one that reports an error,
 * say) may not. */
void scenario2(const plan_t *p, const plan_t *q)
{
  memset(P, 0, sizeof(P));
  P[0] = *p;
  if (q)
    P[1] = *q;
  plan_on = 1;
  world_up(0, 1);
  phase = "scenario";
  run_for(sv_known, 2000); /* the server's end, unless the client closed first */
  workload();
  run_for(quiet, 3000);
  if (P[0].ev == EV_DISCONNECT && !P[0].ran) {
    /* a disconnect needs a cause: the other side closes */
    close_conn(P[0].side == CL ? SVT : CLT);
    answer_held(NULL);
    run_for(acted, 3000);
    run_for(quiet, 3000);
  }
  world_down();
  if (!P[0].ran)
    fail_msg("%s on the %s side never ran", ev_names[P[0].ev],
             P[0].side == CL ? "client" : "server");
}

void scenario(const plan_t *p) { scenario2(p, NULL); }

#define CLOSE_IN(name, e, s, ...)                                        \
  void name(void **state)                                                \
  {                                                                      \
    scenario(&(plan_t){.ev = (e), .side = (s), .act = {__VA_ARGS__}}); \
  }

CLOSE_IN(close_in_on_connected, EV_CONNECTED, CL, A_CLOSE)
CLOSE_IN(close_in_on_accept, EV_ACCEPT, SV, A_CLOSE)
CLOSE_IN(close_in_on_recv_server, EV_RECV, SV, A_CLOSE)
CLOSE_IN(close_in_on_recv_client, EV_RECV, CL, A_CLOSE)
CLOSE_IN(close_in_on_sent, EV_SENT, CL, A_CLOSE)
CLOSE_IN(close_in_on_reply, EV_REPLY, CL, A_CLOSE)
CLOSE_IN(close_in_handler_before_reply, EV_HANDLER, SV, A_CLOSE, A_REPLY)
CLOSE_IN(close_in_handler_after_reply, EV_HANDLER, SV, A_REPLY, A_CLOSE)
CLOSE_IN(close_in_on_disconnect, EV_DISCONNECT, CL, A_CLOSE, A_SEND_SMALL, A_CALL_ECHO)
CLOSE_IN(close_in_op_callback, EV_OP, CL, A_CLOSE)
CLOSE_IN(close_in_op_callback_server, EV_OP, SV, A_CLOSE)
CLOSE_IN(close_in_on_imm, EV_IMM, SV, A_CLOSE)
CLOSE_IN(close_peer_in_on_imm, EV_IMM, CL, A_CLOSE_PEER)

/* Each one-sided kind alone, closed in its own callback. */
void close_in_write_and_read_callbacks(void **state)
{
  for (act_t a = A_WRITE; a <= A_WRITE_IMM; a++) {
    P[0] = (plan_t){.ev = EV_OP, .side = CL, .act = {A_CLOSE}};
    plan_on = 1;
    world_up(0, 1);
    op_t *k[8];
    for (int i = 0; i < 8; i++)
      k[i] = do_rma(CLT, a);
    for (int i = 0; i < 8; i++) {
      assert_true(k[i]->issued);
      wait_fired(k[i], 5000);
    }
    assert_int_equal(acts_run, 1);
    assert_int_equal(k[0]->status, 0);
    for (int i = 1; i < 8; i++)
      if (k[i]->status != 0 && k[i]->status != RMX_ECANCELED)
        fail_msg("%s %d after the close: %s", act_names[a], i, rmx_err_name(k[i]->status));
    world_down();
  }
}

/* ---- close in the same turn as another call ---- */

/* Close after 0, 1, 2, ... turns of a connect: every state it passes. */
void close_same_turn_as_connect(void **state)
{
  world_up(0, 0);
  for (int turns = 0; turns < 40; turns++) {
    trk_t *t = connect_tracked();
    for (int i = 0; i < turns; i++)
      turn();
    close_conn(t);
    if (turns == 0) {
      run_for(all_closed, 5000);
      assert_int_equal(t->connected, 1);
      assert_int_equal(t->connect_status, RMX_ECANCELED);
    }
  }
  world_down();
}

void close_same_turn_as_large_send(void **state)
{
  world_up(0, 1);
  op_t *k[4];
  for (int i = 0; i < 4; i++)
    k[i] = do_send(CLT, i % 2 ? LARGE : 4u << 20);
  close_conn(CLT);
  op_t *after = do_send(CLT, LARGE);
  assert_int_equal(after->issued, 0);
  for (int i = 0; i < 4; i++)
    wait_fired(k[i], 5000);
  world_down();
}

void close_same_turn_as_rpc_call(void **state)
{
  world_up(0, 1);
  op_t *k[4] = {do_call(CLT, H_ECHO, SMALL, 0), do_call(CLT, H_HOLD, SMALL, 0),
                do_call(CLT, H_ECHO, LARGE, 0), do_call(CLT, H_HOLD, LARGE, 100)};
  close_conn(CLT);
  for (int i = 0; i < 4; i++) {
    assert_true(k[i]->issued);
    wait_fired(k[i], 5000);
    assert_int_equal(k[i]->status, RMX_ECANCELED);
  }
  world_down();
}

/* After close: every call fails and calls nothing; a late answer only
 * releases the request. */
void calls_after_close(void **state)
{
  world_up(0, 1);
  op_t *k = do_call(CLT, H_HOLD, SMALL, 0);
  while (nheld == 0)
    turn();
  close_conn(SVT);
  close_conn(CLT);
  assert_false(do_send(CLT, SMALL)->issued);
  assert_false(do_send(CLT, LARGE)->issued);
  assert_false(do_call(CLT, H_ECHO, SMALL, 0)->issued);
  assert_false(do_rma(CLT, A_WRITE)->issued);
  assert_false(do_rma(CLT, A_READ)->issued);
  assert_false(do_rma(CLT, A_WRITE_IMM)->issued);
  assert_false(do_send(SVT, SMALL)->issued);
  answer_held(NULL); /* ENOTCONN, released: the server's end can close */
  wait_fired(k, 5000);
  assert_int_equal(k->status, RMX_ECANCELED);
  world_down();
}

/* Sends waiting for credits when the close comes: each ends once. */
void close_with_sends_waiting_for_credits(void **state)
{
  world_up(0, 1);
  run_for(sv_known, 2000);
  op_t *k[3 * BURST];
  for (int i = 0; i < 3 * BURST; i++)
    k[i] = do_send(CLT, i % 50 ? SMALL : LARGE);
  close_conn(CLT);
  for (int i = 0; i < 3 * BURST; i++) {
    assert_true(k[i]->issued);
    wait_fired(k[i], 5000);
    if (k[i]->status != 0 && k[i]->status != RMX_ECANCELED)
      fail_msg("send %d ended with %s", i, rmx_err_name(k[i]->status));
  }
  assert_int_not_equal(k[3 * BURST - 1]->status, 0); /* it had no credit */
  world_down();
}

/* Sends handed over before a close arrive before the peer sees it. */
void sends_before_close_arrive(void **state)
{
  world_up(0, 1);
  run_for(sv_known, 2000);
  assert_non_null(SVT);
  op_t *k[10];
  for (int i = 0; i < 10; i++)
    k[i] = do_send(CLT, SMALL);
  close_conn(CLT);
  for (int i = 0; i < 10; i++)
    wait_fired(k[i], 5000);
  while (!SVT->disconnects && SVT->live)
    turn(); /* bounded by the alarm */
  assert_int_equal(SVT->recvs, 10);
  assert_int_equal(SVT->disconnect_status, 0);
  world_down();
}
