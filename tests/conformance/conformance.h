/* SPDX-License-Identifier: BSD-3-Clause */
/* The conformance suite's cases (conformance_*.c), and the roles this
 * program plays again in a child process. */
#ifndef RMX_TEST_CONFORMANCE_H
#define RMX_TEST_CONFORMANCE_H

#include "harness.h"

/* Roles, run as "rmx-conformance SCHEME --dying-server" or
 * "--dying-client URI" (conformance_failures.c). */
int role_dying_server(void);
int role_dying_client(const char *uri);

void connect_accept_close(void **state); /* conformance_messages.c */
void message_sizes(void **state);
void send_from_pool_buffers(void **state);
void ten_thousand_in_order(void **state);
void sends_from_callbacks_keep_order(void **state);
void many_connections(void **state);
void over_maximum_is_refused(void **state);
void connect_to_closed_port_fails(void **state); /* conformance_failures.c */
void bad_uris_are_refused(void **state);
void unresolvable_host_fails(void **state);
void close_while_connecting(void **state);
void close_with_pending_sends(void **state);
void close_with_pending_large_sends(void **state);
void peer_killed_fails_outstanding(void **state);
void server_survives_killed_client(void **state);
void held_loop_keeps_a_talking_peer(void **state);
void post_from_other_threads(void **state); /* conformance_context.c */
void post_runs_at_next_progress(void **state);
void lives_in_callers_loop(void **state);
void names_and_ipv6(void **state);
void device_choice(void **state);
void listen_on_taken_port_fails(void **state); /* conformance_listen.c */
void listen_taken_ipv6_and_name(void **state);
void listen_auto_taken_port_fails(void **state);
void listen_group_taken_port_fails(void **state);
void listen_port_zero_dual_stack_reuse(void **state);

#endif
