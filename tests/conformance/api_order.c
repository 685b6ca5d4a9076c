/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The API against an adversary, run per transport:  rmx-api-order SCHEME [filter]
 *
 * Every call from inside every callback, and in the same loop turn as every
 * other call. A tracking layer checks the callback contract on every
 * connection, whatever the case does: each callback of a call that returned
 * 0 runs exactly once, never from inside a call, and none of a call that
 * failed; on_disconnect at most once and never after a local close;
 * on_closed exactly once, after everything else, and nothing after it.
 * After each case every connection is closed, the context is destroyed, and
 * destroy must return promptly.
 *
 * The tracking layer is api_order_track.c, the calls and the world
 * api_order_world.c; the cases: cancel in api_order_cancel.c, close in
 * api_order_close.c, the matrices in api_order_matrix.c.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>
#include <cmocka.h>

#include "api_order.h"

/* A hang inside an rmx call (rmx_ctx_destroy spinning) cannot fail a test
 * from the outside: say where, and exit. */
static void on_alarm(int sig)
{
  char msg[160];
  int n = snprintf(msg, sizeof(msg), "api-order: hung in %s\n", phase);
  (void)!write(STDERR_FILENO, msg, (size_t)n);
  _exit(1);
}

int main(int argc, char **argv)
{
  if (harness_args(argc, argv) != 0)
    return 2;
  if (argc > 2)
    cmocka_set_test_filter(argv[2]);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGALRM, on_alarm);
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
    T(cancel_same_turn_held_small), T(cancel_same_turn_echo_small),
    T(cancel_same_turn_held_large), T(cancel_same_turn_echo_large),
    T(cancel_many_orders), T(cancel_twice), T(cancel_after_reply), T(cancel_inside_on_reply),
    T(timeout_racing_reply),
    T(close_in_on_connected), T(close_in_on_accept), T(close_in_on_recv_server),
    T(close_in_on_recv_client), T(close_in_on_sent), T(close_in_on_reply),
    T(close_in_handler_before_reply), T(close_in_handler_after_reply),
    T(close_in_on_disconnect), T(close_in_op_callback), T(close_in_op_callback_server),
    T(close_in_on_imm), T(close_peer_in_on_imm), T(close_in_write_and_read_callbacks),
    T(close_same_turn_as_connect), T(close_same_turn_as_large_send),
    T(close_same_turn_as_rpc_call), T(calls_after_close),
    T(sends_before_close_arrive), T(close_with_sends_waiting_for_credits),
    T(every_action_in_every_callback), T(every_action_in_failing_callbacks),
    T(every_pair_in_one_turn), T(every_xfer_action_in_every_callback),
    T(every_xfer_pair_in_one_turn), T(every_action_in_failing_xfer_callbacks),
  };
  char name[64];
  snprintf(name, sizeof(name), "api-order/%s", scheme);
  return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
