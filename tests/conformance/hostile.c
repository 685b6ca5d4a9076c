/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A hostile rmx peer against a real rmx server in this process.
 *
 * The peer is written from docs/protocol.md alone (the hello, the frames,
 * credits, remote keys, the TCP stream framing): its encoders are
 * rawpeer.c's and its reader hostile_peer.c's, not src/wire.c. Each peer is
 * a raw TCP socket driven by a script in a helper thread; the rmx context's
 * loop runs on the main thread. cmocka's asserts run on the main thread
 * only: a script records what it saw (pfail) and the test checks it after
 * joining.
 *
 * The cases, numbered as in their sections: 1 and 8 (and destroying with a
 * registration left) in hostile_memory.c, 2 and 5 in hostile_credits.c, 3
 * and 4 in hostile_keys.c, 6 in hostile_frames.c, 7 in hostile_limits.c.
 *
 * Every case checks what users rely on: the server process lives on, the
 * hostile connection is closed (or its request refused) with the documented
 * error, other connections keep working with their data intact, every
 * server-side callback fires exactly once, and no byte the peer was not
 * given reaches it. Memory is checked with ASan (RMX_SANITIZE=ON) and, for
 * the floods, by the heap in use before and after.
 *
 * Built with -DHOSTILE_OLD_PROTOCOL it speaks the protocol of commit
 * 3149805 (no remote window in the hello, one RD_RESP frame per read) and
 * keeps only the cases that apply there (1, 3, 5, 8), to show they fail
 * against that code.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <cmocka.h>

#include "hostile.h"

#ifdef __SANITIZE_ADDRESS__
/* libasan's own (GCC ships no allocator_interface.h) */
void __sanitizer_set_report_fd(void *fd);
#endif

int main(int argc, char **argv)
{
  /* SIGPIPE is left at its default on purpose: a peer must never be able
   * to kill the process through it (rmx_ctx_create sees to that). */
  if (argc > 1) /* one test, or a pattern: rmx-hostile 'read_*' */
    cmocka_set_test_filter(argv[1]);
#ifdef __SANITIZE_ADDRESS__
  /* sanitizer reports go to the real stderr even while a test captures it */
  static int report_fd;
  report_fd = dup(2);
  __sanitizer_set_report_fd((void *)(intptr_t)report_fd);
#endif
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
    T(read_request_then_fin),
#ifndef HOSTILE_OLD_PROTOCOL
    T(flood_past_the_window_is_cut_off),
    T(window_kept_exactly_is_not_cut_off),
    T(server_keeps_the_peers_window),
#endif
    T(guessed_and_foreign_keys_are_refused),
#ifndef HOSTILE_OLD_PROTOCOL
    T(flipped_packed_keys_are_refused),
#endif
    T(data_into_last_credit_is_cut_off),
    T(rts_into_last_credit_is_cut_off),
    T(credit_frame_may_use_last_credit),
#ifndef HOSTILE_OLD_PROTOCOL
    T(write_imm_into_last_credit_is_cut_off),
    T(bad_frames_close_only_that_connection),
    T(fin_with_reserved_bits_is_refused),
    T(atomic_with_pad_is_refused),
    T(oversized_read_chunk_is_refused),
    T(handshake_flood_is_bounded),
    T(connection_limit_refuses_the_next),
    T(destroy_with_a_registration_left),
#endif
    T(write_into_deregistered_memory),
    T(read_of_deregistered_memory),
  };
  return cmocka_run_group_tests_name("hostile-tcp", tests, NULL, NULL);
}
