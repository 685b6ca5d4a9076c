/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Peer authentication with a shared secret (docs/protocol.md, "Peer
 * authentication").
 *
 * Over the public API, on either transport (argv[1] = tcp | rdma): the same
 * secret connects and carries messages (eager and rendezvous) and an RPC;
 * another secret, or a secret on one side only (both ways), is refused with
 * RMX_EACCES at the connecting side and nothing reaches the other.
 *
 * On TCP only, raw peers in a helper thread, written from docs/protocol.md
 * (their framing is rawpeer.c's, their proofs auth_common.c's, with
 * libsodium as the page says): a client keyed by the secret file's hex as
 * the page's example says, a client that skips AUTH and sends DATA or RTS first, one
 * that replays a recorded exchange (HELLO with its nonce + AUTH) on a new
 * connection, one holding another key, wrong-length and malformed AUTH,
 * AUTH_OK from a client, a hello with the flag and no nonce, a client that
 * never authenticates (deadline), destroy while a peer is in the middle;
 * and raw servers against an rmx client: DATA before AUTH_OK, a replayed
 * server hello, a hello without its proof. In every refusal the peer is cut
 * off and nothing it sent reaches on_recv or on_accept.
 *
 * Both contexts share one loop on the main thread; cmocka asserts run on
 * the main thread only (a raw peer records what went wrong in its why[]).
 *
 * The cases: over the API and the secret file in auth_api.c, raw clients in
 * auth_raw_client.c, raw servers in auth_raw_server.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sodium.h>

#include "auth.h"

int main(int argc, char **argv)
{
  if (harness_args(argc, argv) != 0)
    return 2;
  unsetenv("RMX_AUTH_SECRET_FILE");
  if (sodium_init() < 0)
    return 2;
  const struct CMUnitTest api[] = {
    cmocka_unit_test_setup_teardown(same_secret_connects_and_carries_messages_and_rpc, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(different_secrets_are_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(secret_on_server_only_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(secret_on_client_only_is_refused, setup, teardown),
  };
  const struct CMUnitTest tcp[] = {
    cmocka_unit_test_setup_teardown(secret_file_is_read_and_checked, setup, teardown),
    cmocka_unit_test_setup_teardown(authenticated_raw_client_is_served, setup, teardown),
    cmocka_unit_test_setup_teardown(raw_client_keyed_by_the_files_hex_is_served, setup, teardown),
    cmocka_unit_test_setup_teardown(data_before_auth_is_cut_off, setup, teardown),
    cmocka_unit_test_setup_teardown(read_before_auth_is_cut_off, setup, teardown),
    cmocka_unit_test_setup_teardown(rts_before_auth_is_cut_off, setup, teardown),
    cmocka_unit_test_setup_teardown(credit_before_auth_is_cut_off, setup, teardown),
    cmocka_unit_test_setup_teardown(auth_with_another_key_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(short_auth_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(long_auth_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(flagged_auth_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(auth_ok_from_a_client_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(second_auth_is_a_protocol_error, setup, teardown),
    cmocka_unit_test_setup_teardown(replayed_exchange_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(hello_without_nonce_or_flag_is_rejected, setup, teardown),
    cmocka_unit_test_setup_teardown(silent_peer_is_cut_at_the_deadline, setup, teardown),
    cmocka_unit_test_setup_teardown(destroy_while_a_peer_authenticates, setup, teardown),
    cmocka_unit_test_setup_teardown(data_before_auth_ok_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(server_hello_without_proof_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(replayed_server_hello_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(ranges_pass_through_a_relay, setup, teardown),
    cmocka_unit_test_setup_teardown(a_stripped_range_is_a_version_4_peer, setup, teardown),
    cmocka_unit_test_setup_teardown(a_stripped_range_fails_authentication, setup, teardown),
  };
  int rc = cmocka_run_group_tests_name(scheme, api, NULL, NULL);
  if (strcmp(scheme, "tcp") == 0)
    rc |= cmocka_run_group_tests_name("tcp raw peers", tcp, NULL, NULL);
  return rc;
}
