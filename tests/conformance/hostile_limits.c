/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Hostile peers and the listener's limits: a flood of silent sockets
 * against the handshake limit, and the connection limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "hostile.h"

#ifndef HOSTILE_OLD_PROTOCOL

/* ------------------------------------------------------------------ */
/* 7. Handshake flood, connection limit                                 */
/* ------------------------------------------------------------------ */

#define C7_HS 8
#define C7_TIMEOUT 400

/*
 * A flood of silent sockets, three times the handshake limit: the
 * listener holds RMX_MAX_HANDSHAKES of them, leaves the rest in the
 * kernel's backlog (neither taken nor dropped), drops each silent one
 * RMX_HANDSHAKE_TIMEOUT_MS after it took it, and a legitimate client that
 * came behind the flood gets in once its turn comes: delayed, never
 * refused.
 */
void handshake_flood_is_bounded(void **state)
{
  srvcfg_t o = {.max_handshakes = C7_HS, .handshake_timeout_ms = C7_TIMEOUT};
  srv_start(&o);
  int fds[3 * C7_HS];
  /* warm-up: one silent socket timed out, one client in and out */
  fds[0] = raw_connect();
  PUMP_UNTIL(hung_up(fds[0]));
  close(fds[0]);
  static cli_t warm;
  cli_start(&warm);
  PUMP_UNTIL(warm.connected);
  assert_int_equal(warm.status, 0);
  c_close(&warm);
  PUMP_UNTIL(warm.closed && S.nsc == 1 && S.sc[0].closed);
  pump_for(20);
  size_t base = heap_used();

  uint64_t t0 = now_ms();
  for (int i = 0; i < 3 * C7_HS; i++)
    fds[i] = raw_connect();
  static cli_t late, after;
  cli_start(&late); /* behind the whole flood in the backlog */
  pump_for(C7_TIMEOUT / 2);
  for (int i = 0; i < 3 * C7_HS; i++)
    if (hung_up(fds[i]))
      fail_msg("silent socket %d was dropped before its handshake limit", i);
  assert_int_equal(late.connected, 0);
  /* Each silent socket is dropped by its own deadline, in turns of
   * C7_HS; the client comes after them and gets in. */
  for (int i = 0; i < 3 * C7_HS; i++)
    PUMP_UNTIL(hung_up(fds[i]));
  PUMP_UNTIL(late.connected);
  assert_int_equal(late.status, 0);
  fprintf(stderr, "# the client behind %d silent sockets connected after %llu ms\n", 3 * C7_HS,
          (unsigned long long)(now_ms() - t0));
  /* two more silent ones take two slots: a client still gets in at once */
  int s1 = raw_connect(), s2 = raw_connect();
  cli_start(&after);
  PUMP_UNTIL(after.connected);
  assert_int_equal(after.status, 0);
  close(s1);
  close(s2);
  for (int i = 0; i < 3 * C7_HS; i++)
    close(fds[i]);
  c_close(&late);
  c_close(&after);
  PUMP_UNTIL(late.closed && after.closed);
  for (int i = 0; i < S.nsc; i++)
    PUMP_UNTIL(S.sc[i].closed);
  pump_for(50);
  size_t after_heap = heap_used();
  fprintf(stderr, "# heap: %zu before the flood, %zu after\n", base, after_heap);
  assert_true(after_heap <= base + MEM_SLACK);
  assert_int_equal(late.disconnects, 0);
  assert_int_equal(after.disconnects, 0);
  (void)state;
}

void connection_limit_refuses_the_next(void **state)
{
  srvcfg_t o = {.max_conns = 4};
  srv_start(&o);
  static cli_t k[6];
  for (int i = 0; i < 4; i++) {
    cli_start(&k[i]);
    PUMP_UNTIL(k[i].connected && S.nsc == i + 1);
    assert_int_equal(k[i].status, 0);
  }
  cli_start(&k[4]);
  PUMP_UNTIL(k[4].connected);
  assert_int_equal(k[4].status, RMX_ECONNREFUSED);
  /* a raw peer is told the same in a REJECT */
  int fd = raw_connect();
  uint8_t h[8 + HELLO_LEN], r[12];
  hello_t hh = hello_default();
  hello_frame(h, &hh, 0, 0);
  assert_int_equal(write(fd, h, sizeof(h)), (ssize_t)sizeof(h));
  size_t got = 0;
  uint64_t t0 = now_ms();
  while (got < sizeof(r) && now_ms() - t0 < 5000) {
    pump_for(1);
    ssize_t n = recv(fd, r + got, sizeof(r) - got, MSG_DONTWAIT);
    if (n == 0)
      break;
    if (n > 0)
      got += (size_t)n;
  }
  close(fd);
  assert_int_equal(got, 12);
  assert_int_equal(r[4], K_REJECT);
  assert_int_equal((int32_t)g32(r + 8), RMX_ECONNREFUSED);
  assert_int_equal(S.nsc, 4);
  /* one leaves: the next gets in */
  c_close(&k[0]);
  PUMP_UNTIL(k[0].closed && S.sc[0].closed);
  cli_start(&k[5]);
  PUMP_UNTIL(k[5].connected);
  assert_int_equal(k[5].status, 0);
  for (int i = 1; i < 4; i++)
    assert_int_equal(k[i].disconnects, 0);
}

#endif /* !HOSTILE_OLD_PROTOCOL */
