/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The conformance suite: written once against the public API, run against
 * every transport.
 *
 *   rmx-conformance SCHEME [cmocka filter]
 *
 * SCHEME is tcp or rdma; the address is $RMX_TEST_ADDR, else $RXE_VM_ADDR
 * (inside the SoftRoCE VM), else 127.0.0.1.
 *
 * Across two hosts: `rmx-conformance SCHEME --serve [READY_FILE]` on one
 * prints (and writes) a control URI; `RMX_TEST_PEER=URI rmx-conformance
 * SCHEME` on the other runs the cases with their servers over there
 * (peer.c). Cases about this host alone (names, devices) are skipped then.
 *
 * The cases: messages in conformance_messages.c, failures and killed peers
 * in conformance_failures.c, the context in conformance_context.c, taken
 * addresses and other listening cases in conformance_listen.c.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "conformance.h"

static int arm_alarm(void **state)
{
  alarm(300); /* a hang kills the run instead of stalling CI */
  return 0;
}

int main(int argc, char **argv)
{
  if (harness_args(argc, argv) != 0)
    return 2;
  if (argc > 2 && strcmp(argv[2], "--dying-server") == 0)
    return role_dying_server();
  if (argc > 3 && strcmp(argv[2], "--dying-client") == 0)
    return role_dying_client(argv[3]);
  signal(SIGPIPE, SIG_IGN);
  if (argc > 2 && strcmp(argv[2], "--serve") == 0)
    return serve_main(argc > 3 ? argv[3] : NULL);
  peer_ctl = getenv("RMX_TEST_PEER");
  if (argc > 2)
    cmocka_set_test_filter(argv[2]);
#define T(f) cmocka_unit_test_setup(f, arm_alarm)
  const struct CMUnitTest tests[] = {
    T(connect_accept_close), T(message_sizes), T(send_from_pool_buffers),
    T(ten_thousand_in_order), T(sends_from_callbacks_keep_order), T(many_connections), T(over_maximum_is_refused),
    T(connect_to_closed_port_fails), T(bad_uris_are_refused), T(unresolvable_host_fails),
    T(close_while_connecting), T(close_with_pending_sends), T(close_with_pending_large_sends),
    T(peer_killed_fails_outstanding),
    T(server_survives_killed_client), T(held_loop_keeps_a_talking_peer),
    T(post_from_other_threads), T(post_runs_at_next_progress), T(lives_in_callers_loop),
    T(names_and_ipv6), T(device_choice),
    T(listen_on_taken_port_fails), T(listen_taken_ipv6_and_name), T(listen_auto_taken_port_fails),
    T(listen_group_taken_port_fails), T(listen_port_zero_dual_stack_reuse),
  };
  char name[64];
  snprintf(name, sizeof(name), peer_ctl ? "conformance/%s (servers on the peer host)" : "conformance/%s", scheme);
  return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
