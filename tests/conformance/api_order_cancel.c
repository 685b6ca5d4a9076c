/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * API order: cancel in the same turn as the call, many at once, twice,
 * after the reply and inside on_reply; and deadlines racing replies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "api_order.h"

/* ---- cancel ---- */

/* The call limit shows the connection's count of calls is exact. */
static void limit_is_exact(trk_t *t, int max)
{
  for (int i = 0; i < max; i++) {
    op_t *op = do_call(t, H_HOLD, SMALL, 0);
    if (!op->issued)
      fail_msg("call %d of %d refused after a cancel: the call count is off", i + 1, max);
  }
  assert_int_equal(do_call(t, H_HOLD, SMALL, 0)->rc, RMX_EAGAIN);
}

static void cancel_same_turn(uint32_t h, size_t len)
{
  world_up(4, 1);
  op_t *op = do_call(CLT, h, len, 0);
  assert_true(op->issued);
  assert_int_equal(do_cancel(CLT, op), 0);
  assert_int_equal(op->fired, 0); /* never from inside the call */
  wait_fired(op, 5000);
  assert_int_equal(op->status, RMX_ECANCELED);
  run_ms(100); /* a second callback would come now */
  assert_int_equal(op->fired, 1);
  assert_int_equal(violations, 0);
  limit_is_exact(CLT, 4);
  world_down();
}

void cancel_same_turn_held_small(void **state) { cancel_same_turn(H_HOLD, SMALL); }
void cancel_same_turn_echo_small(void **state) { cancel_same_turn(H_ECHO, SMALL); }
void cancel_same_turn_held_large(void **state) { cancel_same_turn(H_HOLD, LARGE); }
void cancel_same_turn_echo_large(void **state) { cancel_same_turn(H_ECHO, LARGE); }

/* Many at once, every other one canceled at once, the rest later. */
void cancel_many_orders(void **state)
{
  world_up(64, 1);
  op_t *k[64];
  for (int i = 0; i < 64; i++) {
    k[i] = do_call(CLT, i % 3 ? H_ECHO : H_HOLD, i % 4 ? SMALL : LARGE, 0);
    assert_true(k[i]->issued);
    if (i % 2)
      assert_int_equal(do_cancel(CLT, k[i]), 0);
  }
  turn();
  for (int i = 0; i < 64; i += 2)
    do_cancel(CLT, k[i]); /* 0 or ENOENT, as do_cancel checks */
  for (int i = 0; i < 64; i++)
    wait_fired(k[i], 5000);
  run_ms(100);
  for (int i = 0; i < 64; i++)
    assert_int_equal(k[i]->fired, 1);
  limit_is_exact(CLT, 64);
  world_down();
}

void cancel_twice(void **state)
{
  world_up(0, 1);
  op_t *a = do_call(CLT, H_HOLD, SMALL, 0), *b = do_call(CLT, H_HOLD, LARGE, 0);
  assert_int_equal(do_cancel(CLT, a), 0);
  assert_int_equal(do_cancel(CLT, a), RMX_ENOENT);
  run_ms(50);
  assert_int_equal(b->fired, 0);
  assert_int_equal(do_cancel(CLT, b), 0);
  assert_int_equal(do_cancel(CLT, b), RMX_ENOENT);
  wait_fired(a, 5000);
  wait_fired(b, 5000);
  assert_int_equal(do_cancel(CLT, a), RMX_ENOENT);
  assert_int_equal(a->status, RMX_ECANCELED);
  assert_int_equal(b->status, RMX_ECANCELED);
  world_down();
}

void cancel_after_reply(void **state)
{
  world_up(0, 1);
  op_t *a = do_call(CLT, H_ECHO, SMALL, 0);
  wait_fired(a, 5000);
  assert_int_equal(a->status, 0);
  assert_int_equal(do_cancel(CLT, a), RMX_ENOENT);
  run_ms(50);
  assert_int_equal(a->fired, 1);
  world_down();
}

/* Inside on_reply of one call: cancel it (ended) and another (live). */
void cancel_inside_on_reply(void **state)
{
  world_up(0, 1);
  op_t *b = do_call(CLT, H_HOLD, SMALL, 0);
  op_t *a = do_call(CLT, H_ECHO, SMALL, 0);
  P[0] = (plan_t){.ev = EV_REPLY, .side = CL, .act = {A_CANCEL, A_CANCEL}};
  plan_on = 1;
  /* the first A_CANCEL takes b (the last live call), the second finds none */
  wait_fired(a, 5000);
  assert_int_equal(acts_run, 1);
  assert_int_equal(b->canceled, 1);
  wait_fired(b, 5000);
  assert_int_equal(b->status, RMX_ECANCELED);
  world_down();
}

/* The reply and the deadline in the same turn, both orders; and a large
 * request's timeout waits until the peer has read it. */
void timeout_racing_reply(void **state)
{
  world_up(0, 1);
  /* the deadline passes with the reply already in the socket: the timer
   * runs first in the turn; the reply that follows is dropped */
  for (int i = 0; i < 10; i++) {
    op_t *k = do_call(CLT, H_HOLD, SMALL, 5);
    while (nheld == 0 && !k->fired)
      turn();
    answer_held(NULL);
    usleep(20000);
    wait_fired(k, 5000);
    assert_int_equal(k->status, RMX_ETIMEDOUT);
  }
  /* the reply first, the deadline right after */
  for (int i = 0; i < 10; i++) {
    op_t *k = do_call(CLT, H_HOLD, SMALL, 30);
    while (nheld == 0)
      turn();
    answer_held(NULL);
    wait_fired(k, 5000);
  }
  /* a spread of deadlines around the round trip */
  op_t *k[200];
  for (int i = 0; i < 200; i++)
    k[i] = do_call(CLT, H_ECHO, i % 10 ? SMALL : LARGE, 1 + (uint32_t)i % 4);
  for (int i = 0; i < 200; i++) {
    wait_fired(k[i], 5000);
    if (k[i]->status != 0 && k[i]->status != RMX_ETIMEDOUT)
      fail_msg("call %d ended with %s", i, rmx_err_name(k[i]->status));
  }
  run_ms(100);
  /* large request, tiny deadline: on_reply frees it; the peer must be done */
  for (int i = 0; i < 5; i++) {
    op_t *l = do_call(CLT, H_HOLD, 4u << 20, 1);
    wait_fired(l, 10000);
    assert_int_equal(l->status, RMX_ETIMEDOUT);
  }
  run_ms(100);
  assert_int_equal(bad_requests, 0);
  world_down();
}
