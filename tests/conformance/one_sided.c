/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One-sided operations, written once, run per transport:
 *   rmx-one-sided SCHEME [filter]
 * Both ends live in one context: the "target" side registers memory, packs
 * its key, and the initiator unpacks it on its own connection. The world is
 * one_sided.h's; keys packed for one connection are one_sided_scope.c's.
 */
#include <rmx/rmx.h>
#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include "harness.h"
#include "one_sided.h"

world_t W;

static void op_done(rmx_conn_t *c, int status, void *arg)
{
  world_t *w = arg;
  w->done++;
  if (status) {
    w->errors++;
    w->status = status;
  }
}

static void on_imm(rmx_conn_t *c, uint32_t imm, size_t len, void *arg)
{
  world_t *w = arg;
  uint8_t want[64];
  if (w->imms < 256)
    w->imm_seen[w->imms] = imm;
  w->imms++;
  if (w->norder < 512)
    w->order[w->norder] = imm;
  w->norder++;
  /* the data of that write is already in place */
  pattern(want, sizeof(want), 1000 + imm);
  if (len != 64 || memcmp(w->region + (size_t)imm * 64, want, 64) != 0)
    w->imm_bad++;
}

static void target_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  world_t *w = arg;
  uint32_t v = UINT32_MAX;
  if (len == sizeof(v))
    memcpy(&v, data, sizeof(v));
  if (w->norder < 512)
    w->order[w->norder] = v;
  w->norder++;
}

static void target_disconnect(rmx_conn_t *c, int status, void *arg) { srv_disconnect(c, status, &W.s); }

static void accept_target(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  rmx_conn_cbs_t cbs = {.on_recv = target_recv, .on_imm = on_imm,
                        .on_disconnect = target_disconnect};
  W.s.conns[W.s.nconns++] = c;
  W.s.accepted++;
  W.target = c;
  rmx_conn_set_cbs(c, &cbs, &W);
}

/* m's key for t's peer, the initiator c. */
static rmx_rkey_t *share(rmx_mem_t *m, rmx_conn_t *t, rmx_conn_t *c)
{
  uint8_t blob[RMX_RKEY_MAX];
  size_t len = sizeof(blob);
  rmx_rkey_t *rk;
  assert_int_equal(key_pack(m, t, blob, &len), 0);
  assert_true(len <= RMX_RKEY_MAX);
  assert_int_equal(rmx_rkey_unpack(c, blob, len, &rk), 0);
  return rk;
}

int world_setup(void **state)
{
  char uri[128];
  memset(&W, 0, sizeof(W));
  W.ctx = ctx_new(0);
  W.s.echo = 0;
  uri_for(uri, sizeof(uri), 0);
  assert_int_equal(rmx_listen(W.ctx, uri, accept_target, NULL, &W.s.l), 0);
  assert_int_equal(rmx_listener_uri(W.s.l, W.s.uri, sizeof(W.s.uri)), 0);
  client_connect(W.ctx, &W.cl, W.s.uri);
  run_until(W.ctx, &W.cl.connected, 1);
  assert_int_equal(W.cl.connect_status, 0);
  run_until(W.ctx, &W.s.accepted, 1);
  W.region = calloc(1, REGION + GUARD);
  assert_non_null(W.region);
  memset(W.region + REGION, 0x5a, GUARD);
  assert_int_equal(rmx_mem_reg(W.ctx, W.region, REGION,
                               RMX_MEM_LOCAL | RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE |
                                   RMX_MEM_REMOTE_ATOMIC, &W.mem), 0);
  W.rk = share(W.mem, W.target, W.cl.c);
  assert_true(rmx_rkey_size(W.rk) == REGION);
  alarm(300);
  return 0;
}

int world_teardown(void **state)
{
  rmx_rkey_release(W.rk);
  if (!W.cl.disconnects)
    client_close(W.ctx, &W.cl);
  else
    assert_int_equal(rmx_conn_close(W.cl.c, cl_closed, &W.cl), 0), run_until(W.ctx, &W.cl.closed, 1);
  server_stop(W.ctx, &W.s);
  rmx_mem_dereg(W.mem);
  for (int i = 0; i < GUARD; i++) /* nothing ever landed outside the region */
    if (W.region[REGION + i] != 0x5a)
      fail_msg("byte %d after the region changed", i);
  free(W.region);
  ctx_done(W.ctx);
  return 0;
}

static void wait_ops(int n) { run_until(W.ctx, &W.done, n); }

static void write_then_read_back(void **state)
{
  static const struct { size_t len, off; } cases[] = {
    {1, 0}, {1, REGION - 1}, {7, 3}, {4096, 4093}, {65537, 100000}, {(1u << 20) + 13, 1},
    {16u << 20, 12345}, {256u << 20, 4093},
  };
  size_t max = 256u << 20;
  uint8_t *src = malloc(max), *dst = malloc(max);
  int ops = 0;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    size_t len = cases[i].len, off = cases[i].off;
    pattern(src, len, (uint32_t)i + 1);
    memset(dst, 0, len);
    rmx_iov_t s = {src, len, NULL}, d = {dst, len, NULL};
    assert_int_equal(rmx_write(W.cl.c, &s, 1, W.rk, off, op_done, &W), 0);
    wait_ops(++ops);
    assert_int_equal(W.errors, 0);
    if (memcmp(W.region + off, src, len) != 0)
      fail_msg("write of %zu at %zu did not land intact", len, off);
    assert_int_equal(rmx_read(W.cl.c, &d, 1, W.rk, off, op_done, &W), 0);
    wait_ops(++ops);
    assert_int_equal(W.errors, 0);
    if (memcmp(dst, src, len) != 0)
      fail_msg("read of %zu at %zu differs", len, off);
  }
  /* gather and scatter: three local pieces, one remote range */
  pattern(src, 3000, 77);
  rmx_iov_t g[3] = {{src, 1000, NULL}, {src + 1000, 1, NULL}, {src + 1001, 1999, NULL}};
  assert_int_equal(rmx_write(W.cl.c, g, 3, W.rk, 555, op_done, &W), 0);
  wait_ops(++ops);
  assert_memory_equal(W.region + 555, src, 3000);
  memset(dst, 0, 3000);
  rmx_iov_t sc[2] = {{dst + 2000, 1000, NULL}, {dst, 2000, NULL}};
  assert_int_equal(rmx_read(W.cl.c, sc, 2, W.rk, 555, op_done, &W), 0);
  wait_ops(++ops);
  assert_memory_equal(dst + 2000, src, 1000);
  assert_memory_equal(dst, src + 1000, 2000);
  assert_int_equal(W.errors, 0);
  free(src);
  free(dst);
}

static void registered_local_buffers(void **state)
{
  uint8_t *src = malloc(1 << 20);
  rmx_mem_t *lm;
  pattern(src, 1 << 20, 9);
  assert_int_equal(rmx_mem_reg(W.ctx, src, 1 << 20, RMX_MEM_LOCAL, &lm), 0);
  rmx_iov_t s = {src + 10, (1 << 20) - 10, lm};
  assert_int_equal(rmx_write(W.cl.c, &s, 1, W.rk, 0, op_done, &W), 0);
  wait_ops(1);
  assert_int_equal(W.errors, 0);
  assert_memory_equal(W.region, src + 10, (1 << 20) - 10);
  rmx_iov_t outside = {src, 100, lm};
  outside.addr = W.region; /* not inside lm */
  assert_int_equal(rmx_write(W.cl.c, &outside, 1, W.rk, 0, op_done, &W), RMX_EINVAL);
  rmx_mem_dereg(lm);
  free(src);
}

static void write_imm_once_each_in_order(void **state)
{
  enum { N = 200 };
  uint8_t *src = malloc(N * 64);
  for (uint32_t i = 0; i < N; i++) {
    pattern(src + i * 64, 64, 1000 + i);
    rmx_iov_t s = {src + i * 64, 64, NULL};
    assert_int_equal(rmx_write_imm(W.cl.c, &s, 1, W.rk, (uint64_t)i * 64, i, op_done, &W), 0);
  }
  wait_ops(N);
  run_until(W.ctx, &W.imms, N);
  assert_int_equal(W.errors, 0);
  assert_int_equal(W.imm_bad, 0);
  for (uint32_t i = 0; i < N && i < 256; i++)
    assert_int_equal(W.imm_seen[i], i);
  /* and nothing more arrives */
  uv_run(rmx_ctx_loop(W.ctx), UV_RUN_NOWAIT);
  assert_int_equal(W.imms, N);
  free(src);
}

/* Messages and writes with immediate made in one loop turn, mixed: the
 * target sees them in the order they were made (they leave together, and
 * a write must not pass a message posted before it). */
static void messages_and_imms_keep_one_order(void **state)
{
  enum { N = 300 };
  uint8_t *src = malloc(N * 64);
  for (uint32_t i = 0; i < N; i++) {
    if (i % 3 == 0) {
      pattern(src + i * 64, 64, 1000 + i);
      rmx_iov_t s = {src + i * 64, 64, NULL};
      assert_int_equal(rmx_write_imm(W.cl.c, &s, 1, W.rk, (uint64_t)i * 64, i, op_done, &W), 0);
    } else {
      assert_int_equal(rmx_send(W.cl.c, &i, sizeof(i), op_done, &W), 0);
    }
  }
  wait_ops(N);
  run_until(W.ctx, &W.norder, N);
  assert_int_equal(W.errors, 0);
  assert_int_equal(W.imm_bad, 0);
  for (uint32_t i = 0; i < N; i++)
    if (W.order[i] != i)
      fail_msg("the target's %uth arrival is %u", i, W.order[i]);
  free(src);
}

static void atomics_from_several_connections(void **state)
{
  enum { NC = 4, PER = 250 };
  static client_t cls[NC];
  static rmx_rkey_t *rks[NC];
  static uint64_t olds[NC * PER];
  static uint8_t seen[NC * PER];
  uint64_t *word = (uint64_t *)(W.region + 4096);
  *word = 0;
  for (int i = 0; i < NC; i++) {
    client_connect(W.ctx, &cls[i], W.s.uri);
    run_until(W.ctx, &cls[i].connected, 1);
    assert_int_equal(cls[i].connect_status, 0);
    run_until(W.ctx, &W.s.accepted, i + 2); /* W.target: its end */
    rks[i] = share(W.mem, W.target, cls[i].c);
  }
  /* all in flight at once, interleaved across the connections */
  for (int k = 0; k < PER; k++)
    for (int i = 0; i < NC; i++)
      assert_int_equal(rmx_atomic_fadd(cls[i].c, rks[i], 4096, 1, &olds[i * PER + k], op_done, &W),
                       0);
  wait_ops(NC * PER);
  assert_int_equal(W.errors, 0);
  assert_true(*word == NC * PER);
  memset(seen, 0, sizeof(seen));
  for (int i = 0; i < NC * PER; i++) { /* every old value exactly once */
    assert_true(olds[i] < NC * PER);
    assert_int_equal(seen[olds[i]]++, 0);
  }
  uint64_t old = 0;
  assert_int_equal(rmx_atomic_cswap(W.cl.c, W.rk, 4096, 5, 99, &old, op_done, &W), 0);
  wait_ops(NC * PER + 1);
  assert_true(old == NC * PER && *word == NC * PER); /* no match: unchanged */
  assert_int_equal(rmx_atomic_cswap(W.cl.c, W.rk, 4096, NC * PER, 99, &old, op_done, &W), 0);
  wait_ops(NC * PER + 2);
  assert_true(old == NC * PER && *word == 99);
  assert_int_equal(rmx_atomic_fadd(W.cl.c, W.rk, 4097, 1, &old, op_done, &W), RMX_EINVAL);
  assert_int_equal(rmx_atomic_fadd(W.cl.c, W.rk, REGION, 1, &old, op_done, &W), RMX_EACCES);
  for (int i = 0; i < NC; i++) {
    rmx_rkey_release(rks[i]);
    client_close(W.ctx, &cls[i]);
  }
}

/* A forger can recompute the packed key's checksum (it detects damage, not
 * forgery); CRC-32C as in docs/protocol.md. */
static void rekey_sum(uint8_t *blob, size_t len)
{
  uint32_t crc = 0xffffffffu;
  memset(blob + 4, 0, 4);
  for (size_t i = 0; i < len; i++) {
    crc ^= blob[i];
    for (int k = 0; k < 8; k++)
      crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
  }
  crc = ~crc;
  for (int i = 0; i < 4; i++)
    blob[4 + i] = (uint8_t)(crc >> (8 * i));
}

static void bad_keys_are_refused(void **state)
{
  uint8_t blob[RMX_RKEY_MAX];
  size_t len = sizeof(blob);
  rmx_rkey_t *rk = NULL;
  assert_int_equal(key_pack(W.mem, W.target, blob, &len), 0);
  for (size_t n = 0; n < len; n++) /* every truncation */
    assert_int_equal(rmx_rkey_unpack(W.cl.c, blob, n, &rk), RMX_EINVAL);
  uint8_t bad[RMX_RKEY_MAX];
  memcpy(bad, blob, len);
  bad[0] = 99; /* another version */
  assert_int_equal(rmx_rkey_unpack(W.cl.c, bad, len, &rk), RMX_EVERSION);
  for (size_t bit = 8; bit < len * 8; bit++) { /* every single bit flipped after the version */
    memcpy(bad, blob, len);
    bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    assert_int_equal(rmx_rkey_unpack(W.cl.c, bad, len, &rk), RMX_EINVAL);
  }
  memcpy(bad, blob, len);
  for (unsigned i = 0; i < bad[1]; i++)
    bad[24 + 16 * i] = 77; /* keys for a transport this connection is not */
  assert_int_equal(rmx_rkey_unpack(W.cl.c, bad, len, &rk), RMX_EINVAL);
  assert_null(rk);
  size_t small = 8;
  assert_int_equal(key_pack(W.mem, W.target, blob, &small), RMX_EINVAL);
  rmx_mem_t *local_only;
  assert_int_equal(rmx_mem_reg(W.ctx, blob, sizeof(blob), RMX_MEM_LOCAL, &local_only), 0);
  len = sizeof(blob);
  assert_int_equal(key_pack(local_only, W.target, bad, &len), RMX_EINVAL); /* nothing to share */
  rmx_mem_dereg(local_only);
}

static void out_of_bounds_and_rights_refused_locally(void **state)
{
  uint8_t buf[64] = {0};
  rmx_iov_t v = {buf, sizeof(buf), NULL};
  assert_int_equal(rmx_write(W.cl.c, &v, 1, W.rk, REGION - 63, op_done, &W), RMX_EACCES);
  assert_int_equal(rmx_read(W.cl.c, &v, 1, W.rk, REGION, op_done, &W), RMX_EACCES);
  assert_int_equal(rmx_read(W.cl.c, &v, 1, W.rk, UINT64_MAX - 10, op_done, &W), RMX_EACCES);
  /* a read-only region cannot be written */
  rmx_mem_t *ro;
  rmx_rkey_t *rrk;
  assert_int_equal(rmx_mem_reg(W.ctx, W.region, 4096, RMX_MEM_REMOTE_READ, &ro), 0);
  rrk = share(ro, W.target, W.cl.c);
  assert_int_equal(rmx_write(W.cl.c, &v, 1, rrk, 0, op_done, &W), RMX_EACCES);
  assert_int_equal(rmx_atomic_fadd(W.cl.c, rrk, 0, 1, (uint64_t *)buf, op_done, &W), RMX_EACCES);
  assert_int_equal(rmx_read(W.cl.c, &v, 1, rrk, 0, op_done, &W), 0);
  wait_ops(1);
  assert_int_equal(W.errors, 0);
  rmx_rkey_release(rrk);
  rmx_mem_dereg(ro);
  run_until(W.ctx, &W.done, 1);
  assert_int_equal(W.done, 1); /* refused calls never call back */
}

/*
 * A key that lies about its region (forged, or stale after the target
 * deregistered) gets past the initiator's check; the target must refuse.
 * TCP: the operation fails with RMX_EACCES and the connection stays.
 * RDMA: the NIC answers with a remote access error, which ends the RC
 * connection: the operation fails with RMX_EACCES and the connection goes
 * down (docs/one-sided.md).
 */
static void target_refuses_what_the_key_does_not_allow(void **state)
{
  rmx_mem_t *small;
  uint8_t blob[RMX_RKEY_MAX], buf[8192];
  size_t len = sizeof(blob);
  rmx_rkey_t *forged;
  assert_int_equal(rmx_mem_reg(W.ctx, W.region + REGION - 4096, 4096,
                               RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE, &small), 0);
  assert_int_equal(key_pack(small, W.target, blob, &len), 0);
  blob[16] = 0;
  blob[17] = 0x40; /* claim 16 KiB instead of 4, with a checksum to match */
  rekey_sum(blob, len);
  assert_int_equal(rmx_rkey_unpack(W.cl.c, blob, len, &forged), 0);
  memset(buf, 0xee, sizeof(buf));
  rmx_iov_t v = {buf, sizeof(buf), NULL};
  assert_int_equal(rmx_write(W.cl.c, &v, 1, forged, 0, op_done, &W), 0);
  wait_ops(1);
  assert_int_equal(W.status, RMX_EACCES);
  /* the region's last page and the guard after it are untouched */
  for (int i = 0; i < 4096; i++)
    assert_int_not_equal(W.region[REGION - 4096 + i], 0xee);
  if (strcmp(scheme, "rdma") != 0) { /* tcp, shm: the target checks, the connection stays */
    rmx_iov_t ok = {buf, 16, NULL};
    assert_int_equal(rmx_write(W.cl.c, &ok, 1, W.rk, 0, op_done, &W), 0);
    wait_ops(2);
    assert_int_equal(W.errors, 1); /* the connection still works */
  } else {
    run_until(W.ctx, &W.cl.disconnects, 1);
    assert_int_not_equal(W.cl.last_disconnect, 0);
  }
  rmx_rkey_release(forged);
  rmx_mem_dereg(small);
}

static void stale_key_is_refused(void **state)
{
  rmx_mem_t *m;
  rmx_rkey_t *rk;
  uint8_t buf[128];
  assert_int_equal(rmx_mem_reg(W.ctx, W.region, 4096, RMX_MEM_REMOTE_READ, &m), 0);
  rk = share(m, W.target, W.cl.c);
  rmx_mem_dereg(m); /* the peer still holds the key */
  rmx_iov_t v = {buf, sizeof(buf), NULL};
  assert_int_equal(rmx_read(W.cl.c, &v, 1, rk, 0, op_done, &W), 0);
  wait_ops(1);
  assert_int_equal(W.status, RMX_EACCES);
  if (strcmp(scheme, "rdma") == 0)
    run_until(W.ctx, &W.cl.disconnects, 1);
  rmx_rkey_release(rk);
}

static void cl_sent_count(rmx_conn_t *c, int status, void *arg) { *(int *)arg += status == 0; }

/*
 * A write with immediate that the target refuses (TCP: the connection stays)
 * still used one of the target's receive buffers, so its credit must come
 * back: three times the receive depth of them, then a message still goes.
 * The target once returned no credit for a refused one; the initiator's
 * credits ran out and the connection wedged without an error.
 */
static void refused_write_imm_returns_its_credit(void **state)
{
  if (strcmp(scheme, "rdma") == 0)
    skip(); /* on RDMA a refused write ends the connection */
  rmx_mem_t *m;
  rmx_rkey_t *rk;
  uint8_t buf[8] = {0};
  int sent = 0;
  assert_int_equal(rmx_mem_reg(W.ctx, W.region, 4096, RMX_MEM_REMOTE_WRITE, &m), 0);
  rk = share(m, W.target, W.cl.c);
  rmx_mem_dereg(m); /* the key is stale: every write is refused */
  rmx_iov_t v = {buf, sizeof(buf), NULL};
  for (int i = 0; i < 3 * 64; i++) {
    assert_int_equal(rmx_write_imm(W.cl.c, &v, 1, rk, 0, (uint32_t)i, op_done, &W), 0);
    wait_ops(i + 1);
    assert_int_equal(W.status, RMX_EACCES);
  }
  assert_int_equal(W.errors, 3 * 64);
  assert_int_equal(rmx_send(W.cl.c, "still", 5, cl_sent_count, &sent), 0);
  run_until(W.ctx, &sent, 1);
  rmx_rkey_release(rk);
}

/* ---- the registration cache, through rendezvous sends ---- */

typedef struct sink {
  int n, bad;
  uint8_t expect;
} sink_t;
static sink_t S;

static void sink_recv(rmx_conn_t *c, const void *d, size_t len, void *arg)
{
  const uint8_t *p = d;
  S.n++;
  for (size_t i = 0; i < len; i++)
    if (p[i] != S.expect) {
      S.bad++;
      return;
    }
}

static void send_and_check(uint8_t *buf, size_t len, uint8_t fill)
{
  memset(buf, fill, len);
  S.expect = fill;
  int before = S.n, done = W.done;
  assert_int_equal(rmx_send(W.cl.c, buf, len, op_done, &W), 0);
  run_until(W.ctx, &S.n, before + 1);
  wait_ops(done + 1); /* the buffer is the sender's again */
  assert_int_equal(S.bad, 0);
}

/* A one-sided write from an unregistered buffer: its local registration
 * comes from the cache. The target region must then hold the new bytes. */
static void write_and_check(uint8_t *buf, size_t len, uint8_t fill)
{
  rmx_iov_t v = {buf, len, NULL};
  memset(buf, fill, len);
  int before = W.done;
  assert_int_equal(rmx_write(W.cl.c, &v, 1, W.rk, 0, op_done, &W), 0);
  wait_ops(before + 1);
  assert_int_equal(W.errors, 0);
  for (size_t i = 0; i < len; i += 4093)
    assert_int_equal(W.region[i], fill);
  assert_int_equal(W.region[len - 1], fill);
}

/* What this program's relocation for munmap points at (not inlined: the
 * compiler takes the relocated address for a constant). */
__attribute__((noinline)) static void *munmap_here(void)
{
  int (*volatile f)(void *, size_t) = munmap;
  return (void *)f;
}

static void cache_reuses_and_follows_unmaps(void **state)
{
  enum { LEN = 1 << 20 };
  rmx_conn_cbs_t cbs = {.on_recv = sink_recv, .on_disconnect = target_disconnect};
  rmx_ctx_stats_t st0, st;
  memset(&S, 0, sizeof(S));
  rmx_conn_set_cbs(W.target, &cbs, &W);
  rmx_ctx_stats(W.ctx, &st0);

  /* The cache arms at the first registration it could keep, and never
   * caches memory malloc mapped before then (architecture.md, Memory):
   * one transfer first, so that this case holds when run on its own. */
  uint8_t *first = malloc(LEN);
  write_and_check(first, LEN, 0x11);
  free(first);
  rmx_ctx_stats(W.ctx, &st0);

#ifdef __SANITIZE_ADDRESS__
  /* AddressSanitizer's allocator reserved its regions before the cache
   * armed, so nothing its malloc returns is ever cached; a mapping made
   * since is. */
  uint8_t *buf = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(buf != MAP_FAILED);
#else
  uint8_t *buf = malloc(LEN);
#endif
  for (int i = 0; i < 10; i++)
    write_and_check(buf, LEN, (uint8_t)(i + 1));
  rmx_ctx_stats(W.ctx, &st);
  if (strcmp(scheme, "rdma") == 0) {
    /* The source buffer is registered once and reused nine times. */
    assert_true(st.reg_cache_hits - st0.reg_cache_hits >= 9);
    assert_true(st.reg_cache_misses - st0.reg_cache_misses <= 1);
  }
  /* free and allocate again: the same address, new contents */
#ifdef __SANITIZE_ADDRESS__
  munmap(buf, LEN);
#else
  free(buf);
#endif
  buf = malloc(LEN);
  write_and_check(buf, LEN, 0xc1);
  send_and_check(buf, LEN, 0xc2); /* and by rendezvous (never cached) */
  free(buf);

  /* unmap, map again at the same place: the old registration must go */
  uint8_t *m1 = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(m1 != MAP_FAILED);
  write_and_check(m1, LEN, 'A');
  rmx_ctx_stats(W.ctx, &st0);
  assert_int_equal(munmap(m1, LEN), 0);
  uint8_t *m2 = mmap(m1, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(m2 != MAP_FAILED);
  write_and_check(m2, LEN, 'B'); /* a stale registration would write 'A's */
  rmx_ctx_stats(W.ctx, &st);
  if (strcmp(scheme, "rdma") == 0)
    assert_true(st.reg_cache_evictions > st0.reg_cache_evictions);
  munmap(m2, LEN);
  assert_int_equal(W.errors, 0);
  /* munmap is hooked where a cache was used (RDMA), and only there: over
   * TCP, which registers nothing, this process runs untouched. */
  rmx_ctx_stats(W.ctx, &st);
  int hooked = munmap_here() != dlsym(RTLD_DEFAULT, "munmap");
  assert_int_equal(hooked, st.reg_cache_hits > 0);
  if (strcmp(scheme, "rdma") != 0)
    assert_false(hooked);
}

int main(int argc, char **argv)
{
  if (harness_args(argc, argv) != 0)
    return 2;
  if (argc > 2)
    cmocka_set_test_filter(argv[2]);
  signal(SIGPIPE, SIG_IGN);
#define T(f) cmocka_unit_test_setup_teardown(f, world_setup, world_teardown)
  const struct CMUnitTest tests[] = {
    T(write_then_read_back), T(registered_local_buffers), T(write_imm_once_each_in_order),
    T(messages_and_imms_keep_one_order), T(atomics_from_several_connections), T(bad_keys_are_refused),
    T(out_of_bounds_and_rights_refused_locally), T(target_refuses_what_the_key_does_not_allow),
    T(stale_key_is_refused), T(refused_write_imm_returns_its_credit),
    T(cache_reuses_and_follows_unmaps), ONE_SIDED_SCOPE_TESTS,
  };
  char name[64];
  snprintf(name, sizeof(name), "one-sided/%s", scheme);
  return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
