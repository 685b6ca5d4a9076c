/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The guard: guessing costs the guesser (public API only).
 *   rmx-guard-test tcp|rdma
 * Both ends live in one context whose guard is small (4 strikes in 10 s,
 * a ban of 500 ms). The client reads with a forged key, one the server
 * never gave out (a registration of a second context's): each read is
 * refused, a strike against the client's address (tcp: 127.0.0.1,
 * RMX_TEST_ADDR=::1 for IPv6; rdma: RMX_TEST_ADDR, else RXE_VM_ADDR, else
 * 192.0.2.1). On TCP the read fails with RMX_EACCES
 * and the connection stays, so every bad read goes over the standing
 * connection. Over rdma the target's device refuses the read and puts its
 * QP into the error state, which ends the connection (the strike comes
 * from transport/verbs: cq.c's flush or async.c's QP event): each bad read
 * goes over a fresh connection, and the standing one is never used for
 * one. At the 4th strike, new connections from that address are refused
 * (RMX_ECONNREFUSED) while the standing one still serves a good read;
 * after the ban they are accepted again. RMX_GUARD_STRIKES=0: no ban at
 * all. The guard's log lines go out at most once a second, with a count.
 * TCP also checks what is no guess: stale keys (revoked, deregistered,
 * withdrawn by name, in transfer requests of 16 entries) strike nobody; a
 * request's forged key strikes once; a key revoked from another connection
 * still strikes. And a transfer entry refused at rmx_xfer_prep is logged
 * at WARN, one line a second at most (guard_xfer.c).
 */
#include <rmx/rmx.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include "guard.h"

world_t W;
guard_log_t L;
static int rdma; /* the scheme is rdma: a refused read ends its connection */

static void on_log(rmx_log_level_t level, const char *line, void *arg)
{
  (void)arg;
  if (getenv("RMX_TEST_GUARD_VERBOSE"))
    fprintf(stderr, "log: %s\n", line);
  if (strncmp(line, "transfer request on ", 20) == 0) {
    L.xfer_lines++;
    L.xfer_warn += level == RMX_LOG_WARN;
    snprintf(L.xfer_last, sizeof(L.xfer_last), "%s", line);
  }
  if (strncmp(line, "guard: ", 7) != 0)
    return;
  L.lines++;
  L.bans += strstr(line, "its new connections are refused") != NULL;
  L.refusals += strstr(line, "guard: refusing") != NULL;
  /* the harness's address: 127.0.0.1 or RMX_TEST_ADDR; over shm every
   * peer comes through the listener's socket name, which the line names */
  L.named += strstr(line, strcmp(scheme, "shm") == 0 ? "@rmx-test-" : addr) != NULL;
  const char *more = strstr(line, " (and ");
  unsigned n;
  if (more && sscanf(more, " (and %u more like it", &n) == 1)
    L.held += n;
  snprintf(L.last, sizeof(L.last), "%s", line);
}

static void op_done(rmx_conn_t *c, int status, void *arg)
{
  world_t *w = arg;
  (void)c;
  w->done++;
  w->status = status;
}

rmx_rkey_t *share(rmx_mem_t *m, rmx_conn_t *c)
{
  uint8_t blob[RMX_RKEY_MAX];
  size_t len = sizeof(blob);
  rmx_rkey_t *rk;
  assert_int_equal(rmx_mem_pack(m, blob, &len), 0);
  assert_int_equal(rmx_rkey_unpack(c, blob, len, &rk), 0);
  return rk;
}

rmx_rkey_t *forged(rmx_conn_t *c)
{
  rmx_mem_t *m;
  assert_true(W.nforged < FORGED_MAX);
  assert_int_equal(rmx_mem_reg(W.ctx2, W.region, sizeof(W.region), RMX_MEM_REMOTE_READ, &m), 0);
  W.forged_mem[W.nforged] = m;
  return W.forged_rk[W.nforged++] = share(m, c);
}

void start(uint32_t strikes)
{
  rmx_config_t cfg;
  char uri[128];
  memset(&W, 0, sizeof(W));
  memset(&L, 0, sizeof(L));
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.guard_strikes = strikes;
  cfg.guard_window_ms = 10000;
  cfg.guard_ban_ms = BAN_MS;
  assert_int_equal(rmx_ctx_create(&W.ctx, NULL, &cfg), 0);
  assert_int_equal(rmx_ctx_create(&W.ctx2, NULL, NULL), 0); /* its keys: forgeries here */
  uri_for(uri, sizeof(uri), 0);
  assert_int_equal(rmx_listen(W.ctx2, uri, srv_accept, &W.s2, &W.s2.l), 0); /* its transport */
  uri_for(uri, sizeof(uri), 0);
  assert_int_equal(rmx_listen(W.ctx, uri, srv_accept, &W.s, &W.s.l), 0);
  assert_int_equal(rmx_listener_uri(W.s.l, W.s.uri, sizeof(W.s.uri)), 0);
  client_connect(W.ctx, &W.cl, W.s.uri);
  run_until(W.ctx, &W.cl.connected, 1);
  assert_int_equal(W.cl.connect_status, 0);
  run_until(W.ctx, &W.s.accepted, 1);
  assert_int_equal(rmx_mem_reg(W.ctx, W.region, sizeof(W.region), RMX_MEM_REMOTE_READ, &W.good), 0);
  W.good_rk = share(W.good, W.cl.c);
}

void stop(void)
{
  rmx_rkey_release(W.good_rk);
  for (int i = 0; i < W.nforged; i++) {
    rmx_rkey_release(W.forged_rk[i]);
    rmx_mem_dereg(W.forged_mem[i]);
  }
  server_stop(W.ctx2, &W.s2);
  ctx_done(W.ctx2);
  rmx_mem_dereg(W.good);
  client_close(W.ctx, &W.cl);
  server_stop(W.ctx, &W.s);
  ctx_done(W.ctx);
}

/* One read on connection c; its status. */
static int read_on(rmx_conn_t *c, rmx_rkey_t *rk)
{
  rmx_iov_t v = {W.buf, sizeof(W.buf), NULL};
  int want = W.done + 1;
  assert_int_equal(rmx_read(c, &v, 1, rk, 0, op_done, &W), 0);
  run_until(W.ctx, &W.done, want);
  return W.status;
}

/* One read on the standing connection; its status. */
int read_with(rmx_rkey_t *rk) { return read_on(W.cl.c, rk); }

/* A new connection from the same address: what on_connected said. */
int try_connect(void)
{
  client_t c2;
  int accepted = W.s.accepted;
  client_connect(W.ctx, &c2, W.s.uri);
  run_until(W.ctx, &c2.connected, 1);
  int st = c2.connect_status;
  if (st == 0)
    run_until(W.ctx, &W.s.accepted, accepted + 1);
  client_close(W.ctx, &c2);
  return st;
}

/* One read with a new forged key, which the server refuses: one strike. On
 * TCP over the standing connection, refused with RMX_EACCES. Over rdma the
 * refusal ends the connection at both ends, so it goes over a connection
 * of its own; the strike is counted by the time the server's end has
 * reported its disconnect. */
void bad_read(void)
{
  if (!rdma) {
    assert_int_equal(read_with(forged(W.cl.c)), RMX_EACCES);
    return;
  }
  client_t c2;
  int accepted = W.s.accepted, down = W.s.disconnects;
  client_connect(W.ctx, &c2, W.s.uri);
  run_until(W.ctx, &c2.connected, 1);
  if (c2.connect_status != 0)
    fail_msg("the connection for a bad read: %s", rmx_err_name(c2.connect_status));
  run_until(W.ctx, &W.s.accepted, accepted + 1);
  int st = read_on(c2.c, forged(c2.c));
  if (st == 0)
    fail_msg("a read with a forged key succeeded");
  run_until(W.ctx, &c2.disconnects, 1);
  run_until(W.ctx, &W.s.disconnects, down + 1);
  client_close(W.ctx, &c2);
}

static void refused_reads_ban_new_connections_for_a_while(void **state)
{
  (void)state;
  start(STRIKES);
  uint64_t t0 = uv_hrtime();
  for (int i = 0; i < STRIKES - 1; i++)
    bad_read();
  /* one strike short of the ban: a new connection is still welcome */
  assert_int_equal(try_connect(), 0);
  assert_int_equal(L.bans, 0);
  bad_read();
  assert_int_equal(L.bans, 1);
  assert_int_equal(L.named, 1);
  /* banned: new connections are refused, the standing one still works */
  for (int i = 0; i < 8; i++) {
    int st = try_connect();
    if (st != RMX_ECONNREFUSED)
      fail_msg("connection %d during the ban: %s, not RMX_ECONNREFUSED", i, rmx_err_name(st));
  }
  assert_int_equal(read_with(W.good_rk), 0);
  assert_int_equal(W.cl.disconnects, 0);
  /* every guard line counts: at most one a second since the first */
  uint64_t secs = (uv_hrtime() - t0) / 1000000000u;
  if ((uint64_t)L.lines > 1 + secs)
    fail_msg("%d guard lines in %llu s (last: %s)", L.lines, (unsigned long long)secs, L.last);
  /* after the ban, welcome again */
  run_for_ms(W.ctx, BAN_MS + 100);
  assert_int_equal(try_connect(), 0);
  /* a second ban: 2 bans and 9 refusals in all, each a line of its own
   * or counted in the next line that went out; the last may still be held */
  run_for_ms(W.ctx, 1100);
  for (int i = 0; i < STRIKES; i++)
    bad_read();
  assert_int_equal(L.bans, 2);
  assert_int_equal(try_connect(), RMX_ECONNREFUSED);
  unsigned seen = (unsigned)L.lines + L.held;
  if (seen != 10 && seen != 11)
    fail_msg("the guard's lines account for %u of 11 events (last: %s)", seen, L.last);
  secs = (uv_hrtime() - t0) / 1000000000u;
  if ((uint64_t)L.lines > 1 + secs)
    fail_msg("%d guard lines in %llu s (last: %s)", L.lines, (unsigned long long)secs, L.last);
  stop();
}

static void strikes_zero_turns_the_guard_off(void **state)
{
  (void)state;
  start(0);
  for (int i = 0; i < 3 * STRIKES; i++)
    bad_read();
  assert_int_equal(try_connect(), 0);
  assert_int_equal(read_with(W.good_rk), 0);
  assert_int_equal(L.lines, 0);
  stop();
}

int main(int argc, char **argv)
{
  if (harness_args(argc, argv) != 0)
    return 2;
  rdma = strcmp(scheme, "rdma") == 0;
  if (rdma && !getenv("RMX_TEST_ADDR") && !getenv("RXE_VM_ADDR"))
    addr = "192.0.2.1"; /* the SoftRoCE VM's (tests/vm/rxe-vm) */
  unsetenv("RMX_LOG");
  rmx_log_set_handler(on_log, NULL);
  alarm(120);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(refused_reads_ban_new_connections_for_a_while),
    cmocka_unit_test(strikes_zero_turns_the_guard_off),
  };
  const struct CMUnitTest tcp_tests[] = {
    cmocka_unit_test(refused_reads_ban_new_connections_for_a_while),
    cmocka_unit_test(strikes_zero_turns_the_guard_off),
    cmocka_unit_test(stale_keys_strike_nobody),
    cmocka_unit_test(a_request_of_forged_entries_strikes_once),
    cmocka_unit_test(a_key_revoked_from_another_connection_still_strikes),
    cmocka_unit_test(refused_entries_are_logged_once_a_second),
  };
  if (!rdma)
    return cmocka_run_group_tests_name("guard/tcp", tcp_tests, NULL, NULL);
  return cmocka_run_group_tests_name("guard/rdma", tests, NULL, NULL);
}
