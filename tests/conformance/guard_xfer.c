/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The guard against transfer requests (TCP, where the target sees each
 * refused key; part of rmx-guard-test, guard.c): what is no guess costs no
 * strike, and a guess costs one however many entries carry it.
 */
#include <rmx/rmx.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <uv.h>

#include "guard.h"

#define ENTRIES 16

typedef struct xres {
  int done, status;
  size_t failed;
} xres_t;

static void xfer_done(rmx_xfer_t *x, int status, size_t failed, void *arg)
{
  xres_t *r = arg;
  (void)x;
  r->done++;
  r->status = status;
  r->failed = failed;
}

/* One read request of ENTRIES entries with rk on c, each 64 bytes of 128
 * of its own at the peer (none merged: ENTRIES parts): its status, and in
 * *failed the entry its callback named. */
static int read_request(rmx_conn_t *c, rmx_rkey_t *rk, size_t *failed)
{
  static uint8_t local[ENTRIES * 64];
  rmx_xfer_entry_t e[ENTRIES];
  rmx_xfer_t *x;
  xres_t r = {0};
  for (int i = 0; i < ENTRIES; i++)
    e[i] = (rmx_xfer_entry_t){.addr = local + i * 64, .len = 64, .rkey = rk, .offset = i * 128u};
  assert_int_equal(rmx_xfer_prep(c, RMX_XFER_READ, e, ENTRIES, &x), 0);
  assert_int_equal(rmx_xfer_post(x, NULL, 0, xfer_done, &r), 0);
  run_until(W.ctx, &r.done, 1);
  assert_int_equal(rmx_xfer_release(x), 0);
  *failed = r.failed;
  return r.status;
}

/* m's key for the server's connection sc, unpacked on the client's cc. */
static rmx_rkey_t *pack_for(rmx_mem_t *m, rmx_conn_t *sc, rmx_conn_t *cc)
{
  uint8_t blob[RMX_RKEY_MAX];
  size_t len = sizeof(blob);
  rmx_rkey_t *rk;
  assert_int_equal(rmx_mem_pack_for(m, sc, blob, &len), 0);
  assert_int_equal(rmx_rkey_unpack(cc, blob, len, &rk), 0);
  return rk;
}

static struct {
  int done, status;
  rmx_rkey_t *rk;
} found;

static void looked_up(rmx_conn_t *c, int status, rmx_rkey_t *rk, void *arg)
{
  (void)c;
  (void)arg;
  found.done++;
  found.status = status;
  found.rk = rk;
}

static rmx_mem_t *reg(void)
{
  rmx_mem_t *m;
  assert_int_equal(rmx_mem_reg(W.ctx, W.region, sizeof(W.region), RMX_MEM_REMOTE_READ, &m), 0);
  return m;
}

/* Keys the client held and saw withdrawn (revoked, deregistered, its name
 * withdrawn with its memory, a capability deregistered): a request of
 * ENTRIES entries with each fails at its first entry with RMX_EACCES, and
 * strikes nobody: ENTRIES refusals each, STRIKES keys, and the address is
 * still welcome. */
void stale_keys_strike_nobody(void **state)
{
  (void)state;
  start(STRIKES);
  rmx_conn_t *sc = W.s.conns[0], *cc = W.cl.c;
  rmx_rkey_t *rk[STRIKES];
  rmx_mem_t *m = reg();
  rk[0] = pack_for(m, sc, cc);
  assert_int_equal(rmx_mem_revoke(m, sc), 0);
  rmx_mem_dereg(m);
  m = reg();
  rk[1] = pack_for(m, sc, cc);
  rmx_mem_dereg(m);
  m = reg();
  assert_int_equal(rmx_mem_publish(m, "block-7"), 0);
  assert_int_equal(rmx_mem_lookup(cc, "block-7", 0, looked_up, NULL), 0);
  run_until(W.ctx, &found.done, 1);
  assert_int_equal(found.status, 0);
  rk[2] = found.rk;
  assert_int_equal(rmx_mem_unpublish(m), 0); /* the block is evicted */
  rmx_mem_dereg(m);
  m = reg();
  rk[3] = share(m, cc);
  rmx_mem_dereg(m);
  for (int i = 0; i < STRIKES; i++) {
    size_t failed = 0;
    int st = read_request(cc, rk[i], &failed);
    if (st != RMX_EACCES || failed != 0)
      fail_msg("stale key %d: %s at entry %zu, not RMX_EACCES at entry 0", i, rmx_err_name(st),
               failed);
    rmx_rkey_release(rk[i]);
  }
  if (L.bans != 0)
    fail_msg("stale keys banned the address: %s", L.last);
  assert_int_equal(try_connect(), 0);
  assert_int_equal(read_with(W.good_rk), 0);
  stop();
}

/* A request whose ENTRIES entries carry one forged key is one strike: the
 * address is banned at the (STRIKES - 1)th forged read after it, no sooner. */
void a_request_of_forged_entries_strikes_once(void **state)
{
  (void)state;
  start(STRIKES);
  size_t failed = 0;
  assert_int_equal(read_request(W.cl.c, forged(W.cl.c), &failed), RMX_EACCES);
  assert_int_equal(failed, 0);
  for (int i = 0; i < STRIKES - 2; i++)
    bad_read();
  if (L.bans != 0)
    fail_msg("banned before %d strikes: %s", STRIKES, L.last);
  assert_int_equal(try_connect(), 0);
  bad_read();
  assert_int_equal(L.bans, 1);
  assert_int_equal(try_connect(), RMX_ECONNREFUSED);
  stop();
}

/* A key withdrawn from another connection is no stale key on this one (a
 * replay of a victim's key after its revocation): each strikes. */
void a_key_revoked_from_another_connection_still_strikes(void **state)
{
  (void)state;
  start(STRIKES);
  client_t c2;
  client_connect(W.ctx, &c2, W.s.uri);
  run_until(W.ctx, &c2.connected, 1);
  assert_int_equal(c2.connect_status, 0);
  run_until(W.ctx, &W.s.accepted, 2);
  rmx_conn_t *sc2 = W.s.conns[W.s.nconns - 1];
  for (int i = 0; i < STRIKES; i++) {
    rmx_mem_t *m = reg();
    rmx_rkey_t *rk = pack_for(m, sc2, W.cl.c);
    assert_int_equal(rmx_mem_revoke(m, sc2), 0);
    assert_int_equal(read_with(rk), RMX_EACCES);
    rmx_rkey_release(rk);
    rmx_mem_dereg(m);
  }
  assert_int_equal(L.bans, 1);
  assert_int_equal(try_connect(), RMX_ECONNREFUSED);
  client_close(W.ctx, &c2);
  stop();
}

/* An entry rmx_xfer_prep refuses is named at WARN: past the region's end
 * (RMX_EACCES), a NULL address (RMX_EINVAL); a loop of bad requests logs
 * one line a second at most. */
void refused_entries_are_logged_once_a_second(void **state)
{
  (void)state;
  start(STRIKES);
  static uint8_t local[4 * 64];
  rmx_xfer_entry_t e[4];
  rmx_xfer_t *x = NULL;
  for (int i = 0; i < 4; i++)
    e[i] = (rmx_xfer_entry_t){.addr = local + i * 64, .len = 64, .rkey = W.good_rk,
                              .offset = i * 64u};
  e[3].offset = sizeof(W.region) - 32;
  assert_int_equal(rmx_xfer_prep(W.cl.c, RMX_XFER_READ, e, 4, &x), RMX_EACCES);
  if (L.xfer_warn != 1 || !strstr(L.xfer_last, "entry 3") ||
      !strstr(L.xfer_last, "leaves the region"))
    fail_msg("%d warnings for an entry past the region's end (last: %s)", L.xfer_warn,
             L.xfer_last);
  run_for_ms(W.ctx, 1100); /* the limiter lets the next line out */
  e[3] = (rmx_xfer_entry_t){.addr = NULL, .len = 64, .rkey = W.good_rk, .offset = 0};
  assert_int_equal(rmx_xfer_prep(W.cl.c, RMX_XFER_READ, e, 4, &x), RMX_EINVAL);
  if (L.xfer_warn != 2 || !strstr(L.xfer_last, "entry 3") || !strstr(L.xfer_last, "NULL"))
    fail_msg("%d warnings after a NULL address (last: %s)", L.xfer_warn, L.xfer_last);
  uint64_t t0 = uv_hrtime();
  for (int i = 0; i < 300; i++)
    assert_int_equal(rmx_xfer_prep(W.cl.c, RMX_XFER_READ, e, 4, &x), RMX_EINVAL);
  uint64_t secs = (uv_hrtime() - t0) / 1000000000u;
  if ((uint64_t)L.xfer_lines > 2 + 1 + secs)
    fail_msg("%d lines for 302 refused requests in %llu s", L.xfer_lines, (unsigned long long)secs);
  assert_null(x);
  stop();
}
