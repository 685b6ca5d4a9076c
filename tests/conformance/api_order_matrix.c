/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * API order, the matrices: every action from inside every callback of both
 * sides, every action inside callbacks that report an error, and every
 * ordered pair of actions in one turn.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api_order.h"

/* ---- the matrices ---- */

static const act_t matrix_acts[] = {
  A_CLOSE, A_CLOSE_PEER, A_SEND_SMALL, A_SEND_LARGE, A_CALL_ECHO, A_CALL_HOLD, A_CALL_LARGE,
  A_CANCEL, A_CANCEL_TWICE, A_WRITE, A_READ, A_WRITE_IMM, A_REPLY_HELD, A_CLOSE_LISTENER,
};
#define NACTS (sizeof(matrix_acts) / sizeof(matrix_acts[0]))

static const char *side_name(int side) { return side == CL ? "client" : "server"; }

/* Every action, then a close, from inside every callback of both sides, at
 * the first and the second such callback. */
void every_action_in_every_callback(void **state)
{
  for (int nth = 1; nth <= 2; nth++)
    for (int ev = 0; ev < EV_N; ev++)
      for (int side = CL; side <= SV; side++) {
        if ((ev == EV_CONNECTED && side == SV) || (ev == EV_ACCEPT && side == CL) ||
            (ev == EV_HANDLER && side == CL) || (ev == EV_REPLY && side == SV))
          continue; /* no such event there in this workload */
        if (ev == EV_XFER || ev == EV_NOTIFY)
          continue; /* every_xfer_action_in_every_callback (api_order_xfer.c) */
        if (nth == 2 && (ev == EV_CONNECTED || ev == EV_ACCEPT || ev == EV_DISCONNECT ||
                         ev == EV_CLOSED || ev == EV_IMM || (ev == EV_RECV && side == CL) ||
                         (ev == EV_OP && side == SV)))
          continue; /* once only */
        for (size_t a = 0; a < NACTS; a++) {
          plan_t p = {.ev = (ev_t)ev, .side = side, .nth = nth, .act = {matrix_acts[a], A_CLOSE}};
          fprintf(stderr, "[ %s #%d / %s: %s, close ]\n", ev_names[ev], nth, side_name(side),
                  act_names[matrix_acts[a]]);
          scenario(&p);
        }
      }
}

/* Every action inside callbacks that report an error, so from inside the
 * connection's end: the peer closes (in each of its callbacks), or the
 * connection itself is closed, and then each failing callback acts. */
void every_action_in_failing_callbacks(void **state)
{
  static const plan_t causes[] = {
    {.ev = EV_RECV, .side = SV, .act = {A_CLOSE}},
    {.ev = EV_HANDLER, .side = SV, .act = {A_CLOSE}},
    {.ev = EV_ACCEPT, .side = SV, .act = {A_CLOSE}},
    {.ev = EV_OP, .side = CL, .act = {A_CLOSE_PEER}},
    {.ev = EV_SENT, .side = CL, .act = {A_CLOSE}},
    {.ev = EV_REPLY, .side = CL, .act = {A_CLOSE}},
  };
  static const ev_t failing[] = {EV_SENT, EV_REPLY, EV_OP};
  int ran = 0, n = 0;
  for (size_t c = 0; c < sizeof(causes) / sizeof(causes[0]); c++)
    for (size_t e = 0; e < sizeof(failing) / sizeof(failing[0]); e++)
      for (size_t a = 0; a < NACTS; a++) {
        plan_t q = {.ev = failing[e], .side = CL, .err = 1, .act = {matrix_acts[a], A_CLOSE}};
        fprintf(stderr, "[ %s / %s: %s; failing %s: %s, close ]\n", ev_names[causes[c].ev],
                side_name(causes[c].side), act_names[causes[c].act[0]], ev_names[failing[e]],
                act_names[matrix_acts[a]]);
        scenario2(&causes[c], &q);
        ran += P[1].ran;
        n++;
      }
  fprintf(stderr, "[ %d of %d failing callbacks acted ]\n", ran, n);
  assert_true(ran >= n / 2); /* the causes do make callbacks fail */
}

/* Every ordered pair of actions in one turn, then everything settles. */
void every_pair_in_one_turn(void **state)
{
  for (size_t a = 0; a < NACTS; a++)
    for (size_t b = 0; b < NACTS; b++) {
      fprintf(stderr, "[ %s; %s ]\n", act_names[matrix_acts[a]], act_names[matrix_acts[b]]);
      world_up(0, 1);
      run_for(sv_known, 2000);
      do_call(CLT, H_HOLD, SMALL, 0); /* something to cancel and answer */
      do_call(CLT, H_ECHO, LARGE, 0);
      while (nheld == 0 && CLT->live)
        turn();
      run_act(matrix_acts[a], CLT, NULL);
      run_act(matrix_acts[b], CLT, NULL);
      run_for(quiet, 3000);
      world_down();
    }
}
