/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The credit rules (src/msg/credit.h) as pure functions, against
 * docs/protocol.md's flow-control section: what each frame needs, the last
 * credit kept for CREDIT frames, returns bounded by what was given, and
 * when a CREDIT frame is due.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "rmx_int.h"

static void frames_need_what_the_protocol_says(void **state)
{
  assert_int_equal(rmx__credit_need(RMX_FR_BYE), 0);
  assert_int_equal(rmx__credit_need(RMX_FR_CREDIT), 1);
  assert_int_equal(rmx__credit_need(RMX_FR_DATA), 2);
  assert_int_equal(rmx__credit_need(RMX_FR_FIN), 2);
  assert_int_equal(rmx__credit_need(RMX_FR_AUTH), 2);
}

static void the_last_credit_is_for_credit_frames(void **state)
{
  rmx__credit_t k = {0};
  const uint32_t depth = 4;
  /* depth - 1 frames of any kind, then only a CREDIT frame */
  for (uint32_t i = 0; i < depth - 1; i++)
    assert_int_equal(rmx__credit_rx(&k, depth, 0), 0);
  rmx__credit_t spare = k;
  assert_int_equal(rmx__credit_rx(&k, depth, 0), RMX__CREDIT_LAST);
  assert_int_equal(rmx__credit_rx(&spare, depth, 1), 0);
  assert_int_equal(rmx__credit_rx(&spare, depth, 1), RMX__CREDIT_OVER);
}

/* Crossing keepalives: both sides at their last credit, nothing owed. If
 * both spent it, neither could ever send again. */
static void the_last_credit_returns_something(void **state)
{
  rmx__credit_t a = {.credits = 1, .peer_depth = 4}, b = a;
  assert_false(rmx__credit_frame_ok(&a)); /* it would return nothing */
  rmx__credit_freed(&a, 1);               /* a keepalive of b's was consumed */
  assert_true(rmx__credit_frame_ok(&a));  /* now it returns one */
  b.credits = 2;
  assert_true(rmx__credit_frame_ok(&b));  /* not the last */
  /* Both at the last credit, each owing one: both send, each frame brings
   * the other a credit back, and neither is stuck. */
  rmx__credit_freed(&b, 1);
  b.credits = 1;
  uint16_t from_a = rmx__credit_take(&a), from_b = rmx__credit_take(&b);
  a.credits--, b.credits--;
  assert_int_equal(rmx__credit_returned(&a, from_b), 0);
  assert_int_equal(rmx__credit_returned(&b, from_a), 0);
  assert_int_equal(a.credits, 1);
  assert_int_equal(b.credits, 1);
}

static void returned_credits_free_receive_slots(void **state)
{
  rmx__credit_t k = {0};
  const uint32_t depth = 4;
  for (uint32_t i = 0; i < depth - 1; i++)
    assert_int_equal(rmx__credit_rx(&k, depth, 0), 0);
  rmx__credit_freed(&k, 0);
  rmx__credit_freed(&k, 0);
  assert_int_equal(rmx__credit_take(&k), 2); /* into the next header */
  assert_int_equal(k.owed, 0);
  assert_int_equal(k.rx_unreturned, 1);
  assert_int_equal(rmx__credit_rx(&k, depth, 0), 0); /* room again */
  assert_int_equal(rmx__credit_rx(&k, depth, 0), 0);
  assert_int_equal(rmx__credit_rx(&k, depth, 0), RMX__CREDIT_LAST);
}

static void a_frame_not_sent_still_owes(void **state)
{
  rmx__credit_t k = {.owed = 3, .owed_data = 3, .rx_unreturned = 3};
  uint16_t n = rmx__credit_take(&k);
  assert_int_equal(n, 3);
  rmx__credit_untake(&k, n);
  assert_int_equal(k.owed, 3);
  assert_int_equal(k.rx_unreturned, 3);
}

static void take_caps_at_the_header_field(void **state)
{
  rmx__credit_t k = {.owed = 70000, .owed_data = 70000, .rx_unreturned = 70000};
  assert_int_equal(rmx__credit_take(&k), UINT16_MAX);
  assert_int_equal(k.owed, 70000 - UINT16_MAX);
  assert_true(k.owed_data <= k.owed);
}

static void returns_beyond_what_was_given_are_refused(void **state)
{
  rmx__credit_t k = {.credits = 2, .peer_depth = 4};
  assert_int_equal(rmx__credit_returned(&k, 2), 0);
  assert_int_equal(k.credits, 4);
  assert_int_equal(rmx__credit_returned(&k, 1), -1);
  assert_int_equal(k.credits, 4); /* unchanged */
  assert_int_equal(rmx__credit_returned(&k, UINT16_MAX), -1);
}

static void credit_frames_come_at_half_the_window_of_data(void **state)
{
  rmx__credit_t k = {0};
  const uint32_t depth = 8;
  for (int i = 0; i < 10; i++)
    rmx__credit_freed(&k, 1); /* CREDIT frames never call for one */
  assert_false(rmx__credit_want_frame(&k, depth));
  for (int i = 0; i < 3; i++)
    rmx__credit_freed(&k, 0);
  assert_false(rmx__credit_want_frame(&k, depth));
  rmx__credit_freed(&k, 0);
  assert_true(rmx__credit_want_frame(&k, depth));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(frames_need_what_the_protocol_says),
    cmocka_unit_test(the_last_credit_is_for_credit_frames),
    cmocka_unit_test(the_last_credit_returns_something),
    cmocka_unit_test(returned_credits_free_receive_slots),
    cmocka_unit_test(a_frame_not_sent_still_owes),
    cmocka_unit_test(take_caps_at_the_header_field),
    cmocka_unit_test(returns_beyond_what_was_given_are_refused),
    cmocka_unit_test(credit_frames_come_at_half_the_window_of_data),
  };
  return cmocka_run_group_tests_name("credit rules", tests, NULL, NULL);
}
