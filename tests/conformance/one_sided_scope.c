/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Keys packed for one connection (rmx_mem_pack_for, rmx_mem_revoke), in
 * the one-sided suite's world (one_sided.h), on either transport. The
 * target end packs a key for its connection and sends it there, as the API
 * asks (on RDMA the window's bind goes ahead of that message); the client
 * at the other end uses it. The same bytes used anywhere else, or after
 * the key is withdrawn, are refused: over TCP by the target (RMX_EACCES,
 * the connection stays), over RDMA by the device (the operation fails and
 * the connection ends).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <uv.h>

#include "one_sided.h"

#define AREA 4096   /* bytes each case registers, inside the world's region */
#define KEY_AT 32   /* the transport key in a one-entry blob (docs/protocol.md) */

/* One operation at a time: completions counted, the last one's status. */
static struct {
  int posted, done, status;
} O;

/* The key as the client received it. */
static struct {
  uint8_t blob[RMX_RKEY_MAX];
  size_t len;
  int got, sent, send_err;
} G;

static int down_seen;

static void one_done(rmx_conn_t *c, int status, void *arg)
{
  O.done++;
  O.status = status;
}

static void got_key(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  G.len = len <= sizeof(G.blob) ? len : 0;
  memcpy(G.blob, data, G.len);
  G.got++;
}

static void key_sent(rmx_conn_t *c, int status, void *arg)
{
  G.sent++;
  G.send_err += status != 0;
}

static void down_only(rmx_conn_t *c, int status, void *arg) { down_seen++; }

/* A read or write of len bytes at the key's offset 0, waited for: its
 * status, or the call's own code when it was refused before starting. */
static int xfer(int write, rmx_conn_t *c, rmx_rkey_t *rk, void *buf, size_t len)
{
  rmx_iov_t v = {buf, len, NULL};
  int rc = write ? rmx_write(c, &v, 1, rk, 0, one_done, NULL)
                 : rmx_read(c, &v, 1, rk, 0, one_done, NULL);
  if (rc)
    return rc; /* no callback owed */
  O.posted++;
  run_until(W.ctx, &O.done, O.posted);
  assert_int_equal(O.done, O.posted);
  return O.status;
}

/* Every operation called back exactly once, and nothing more arrives. */
static void calls_once(void)
{
  uv_run(rmx_ctx_loop(W.ctx), UV_RUN_NOWAIT);
  assert_int_equal(O.done, O.posted);
}

/* AREA bytes of the region, filled with a pattern, registered with remote
 * read and write rights (no key packed yet). */
static rmx_mem_t *area_reg(uint8_t **area, uint32_t seed)
{
  rmx_mem_t *m;
  memset(&O, 0, sizeof(O));
  memset(&G, 0, sizeof(G));
  down_seen = 0;
  *area = W.region + (1u << 20);
  pattern(*area, AREA, seed);
  assert_int_equal(rmx_mem_reg(W.ctx, *area, AREA, RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE, &m),
                   0);
  return m;
}

/* Another client connection to the world's server: its accepted end. */
static rmx_conn_t *another(client_t *cl)
{
  int accepted = W.s.accepted;
  client_connect(W.ctx, cl, W.s.uri);
  run_until(W.ctx, &cl->connected, 1);
  assert_int_equal(cl->connect_status, 0);
  run_until(W.ctx, &W.s.accepted, accepted + 1);
  return W.target;
}

int pd_keys(void)
{
  static int known = -1;
  rmx_config_t cfg;
  if (known >= 0)
    return known;
  known = 0;
  if (strcmp(scheme, "rdma") != 0 || rmx_config_init(&cfg) != 0)
    return known;
  if (cfg.key_scope == RMX_KEY_SCOPE_PD) {
    known = 1;
    printf("keys: a protection domain per connection (RMX_KEY_SCOPE=pd)\n");
  } else if (cfg.key_scope == RMX_KEY_SCOPE_AUTO) {
    rmx_device_info_t *d;
    int n;
    if (rmx_device_list(&d, &n) == 0) {
      for (int i = 0; i < n; i++)
        known |= d[i].max_mr_size && !d[i].key_scope; /* one device in the VM */
      rmx_device_list_free(d);
    }
  }
  return known;
}

int key_pack(rmx_mem_t *m, rmx_conn_t *t, void *blob, size_t *len)
{
  if (!pd_keys())
    return rmx_mem_pack(m, blob, len);
  uint8_t scratch[RMX_RKEY_MAX];
  size_t l = sizeof(scratch);
  int cap = rmx_mem_pack(m, scratch, &l);
  int rc = rmx_mem_pack_for(m, t, blob, len);
  /* refused, unless the registration has nothing to share at all */
  if (cap != RMX_ENOTSUP)
    assert_true(cap == RMX_EINVAL && rc == RMX_EINVAL);
  return rc;
}

/* m's capability key, unpacked on c; NULL where there are none (a PD per
 * connection: pd_keys), as rmx_mem_pack says with RMX_ENOTSUP. */
static rmx_rkey_t *cap_key(rmx_mem_t *m, rmx_conn_t *c, uint8_t *blob, size_t *len)
{
  rmx_rkey_t *rk = NULL;
  if (pd_keys()) {
    assert_int_equal(rmx_mem_pack(m, blob, len), RMX_ENOTSUP);
    return NULL;
  }
  assert_int_equal(rmx_mem_pack(m, blob, len), 0);
  assert_int_equal(rmx_rkey_unpack(c, blob, *len, &rk), 0);
  return rk;
}

/* Pack m's key for the target end t, send it on t, and unpack what t's
 * peer, the client cl, received. blob and *len: the packed key. */
static rmx_rkey_t *grant(rmx_mem_t *m, rmx_conn_t *t, client_t *cl, uint8_t *blob, size_t *len)
{
  static const rmx_conn_cbs_t cbs = {.on_recv = got_key, .on_disconnect = cl_disconnect};
  rmx_rkey_t *rk;
  int got = G.got, sent = G.sent;
  *len = RMX_RKEY_MAX;
  assert_int_equal(rmx_mem_pack_for(m, t, blob, len), 0);
  rmx_conn_set_cbs(cl->c, &cbs, cl);
  assert_int_equal(rmx_send(t, blob, *len, key_sent, NULL), 0);
  run_until(W.ctx, &G.got, got + 1);
  run_until(W.ctx, &G.sent, sent + 1);
  assert_int_equal(G.send_err, 0);
  assert_int_equal(G.len, *len);
  assert_memory_equal(G.blob, blob, *len);
  assert_int_equal(rmx_rkey_unpack(cl->c, G.blob, G.len, &rk), 0);
  return rk;
}

/* The key reads the area's current bytes on connection c. */
static void read_ok(rmx_conn_t *c, rmx_rkey_t *rk, const uint8_t *area)
{
  static uint8_t buf[AREA];
  memset(buf, 0, AREA);
  assert_int_equal(xfer(0, c, rk, buf, AREA), 0);
  assert_memory_equal(buf, area, AREA);
}

/* The key, used on cl's connection, is refused and moves no byte either
 * way. TCP: RMX_EACCES for a read and a write (first_write picks which
 * comes first), the connection stays. RDMA: the device refuses the first
 * one, which fails (its exact status is the device's), and the connection
 * ends. */
static void refused(client_t *cl, rmx_rkey_t *rk, const uint8_t *area, int first_write)
{
  static uint8_t before[AREA], buf[AREA];
  int tcp = strcmp(rmx_conn_transport(cl->c), "rdma") != 0; /* tcp, shm: the target checks */
  memcpy(before, area, AREA);
  for (int i = 0; i < (tcp ? 2 : 1); i++) {
    int write = i == 0 ? first_write : !first_write;
    memset(buf, 0xe7, AREA);
    int rc = xfer(write, cl->c, rk, buf, AREA);
    if (tcp)
      assert_int_equal(rc, RMX_EACCES);
    else
      assert_int_not_equal(rc, 0);
    if (memcmp(area, before, AREA) != 0)
      fail_msg("a refused %s changed the target's memory", write ? "write" : "read");
    for (size_t k = 0; k < AREA; k++)
      if (buf[k] != 0xe7)
        fail_msg("a refused %s changed the local buffer at %zu", write ? "write" : "read", k);
  }
  if (!tcp)
    run_until(W.ctx, &cl->disconnects, 1);
}

/* A key packed for connection A works on A, both ways; the same bytes
 * unpacked on another connection B to the same server are refused. */
void scoped_key_works_only_on_its_connection(void **state)
{
  static uint8_t want[AREA], buf[AREA];
  uint8_t *area, blob[RMX_RKEY_MAX];
  size_t len;
  client_t b;
  rmx_rkey_t *rka, *rkb;
  rmx_mem_t *m = area_reg(&area, 1);
  rka = grant(m, W.target, &W.cl, blob, &len);
  read_ok(W.cl.c, rka, area);
  pattern(want, AREA, 2);
  memcpy(buf, want, AREA);
  assert_int_equal(xfer(1, W.cl.c, rka, buf, AREA), 0);
  assert_memory_equal(area, want, AREA);
  read_ok(W.cl.c, rka, area);

  another(&b); /* a replay of the same bytes from another connection */
  assert_int_equal(rmx_rkey_unpack(b.c, blob, len, &rkb), 0);
  refused(&b, rkb, area, 0);
  assert_memory_equal(area, want, AREA);
  read_ok(W.cl.c, rka, area); /* and A's key still works */
  rmx_rkey_release(rkb);
  rmx_rkey_release(rka);
  client_close(W.ctx, &b);
  rmx_mem_dereg(m);
  calls_once();
}

/* Packing again for the same connection gives the same bytes (one key,
 * revoked by one rmx_mem_revoke); for another connection, another key. */
void scoped_key_is_stable_per_connection(void **state)
{
  uint8_t *area, a1[RMX_RKEY_MAX], a2[RMX_RKEY_MAX], bb[RMX_RKEY_MAX];
  size_t l1 = sizeof(a1), l2, lb;
  client_t b;
  rmx_mem_t *m = area_reg(&area, 3);
  rmx_conn_t *ta = W.target, *tb;
  assert_int_equal(rmx_mem_pack_for(m, ta, a1, &l1), 0);
  rmx_rkey_release(grant(m, ta, &W.cl, a2, &l2)); /* the key reaches A */
  assert_int_equal(l2, l1);
  assert_memory_equal(a2, a1, l1);
  tb = another(&b);
  rmx_rkey_release(grant(m, tb, &b, bb, &lb));
  assert_int_equal(lb, l1);
  assert_int_equal(bb[1], 1); /* one entry: the connection's transport */
  if (memcmp(bb + KEY_AT, a1 + KEY_AT, 8) == 0)
    fail_msg("two connections were given the same key");
  assert_int_equal(rmx_mem_revoke(m, ta), 0);
  assert_int_equal(rmx_mem_revoke(m, ta), RMX_ENOENT);
  client_close(W.ctx, &b);
  rmx_mem_dereg(m);
  calls_once();
}

/* rmx_mem_revoke withdraws one connection's key: that key is refused from
 * then on, also after a new one is packed for the same connection, while
 * the other connection's key and the capability key keep working. */
void revoke_withdraws_that_key_alone(void **state)
{
  uint8_t *area, ga[RMX_RKEY_MAX], ga2[RMX_RKEY_MAX], gb[RMX_RKEY_MAX], cap[RMX_RKEY_MAX];
  size_t la, la2, lb, lc = sizeof(cap);
  client_t b;
  rmx_rkey_t *rka, *rka2, *rkb, *rkc;
  rmx_mem_t *m = area_reg(&area, 4);
  rmx_conn_t *ta = W.target, *tb = another(&b);
  rka = grant(m, ta, &W.cl, ga, &la);
  rkb = grant(m, tb, &b, gb, &lb);
  rkc = cap_key(m, b.c, cap, &lc);
  read_ok(W.cl.c, rka, area);

  assert_int_equal(rmx_mem_revoke(m, ta), 0);
  assert_int_equal(rmx_mem_revoke(m, ta), RMX_ENOENT);
  rka2 = grant(m, ta, &W.cl, ga2, &la2); /* a new key for A works */
  read_ok(W.cl.c, rka2, area);
  refused(&W.cl, rka, area, 0); /* the withdrawn one does not */
  read_ok(b.c, rkb, area);
  if (rkc)
    read_ok(b.c, rkc, area);
  assert_int_equal(rmx_mem_revoke(m, tb), 0);
  rmx_rkey_release(rka);
  rmx_rkey_release(rka2);
  rmx_rkey_release(rkb);
  rmx_rkey_release(rkc);
  client_close(W.ctx, &b);
  rmx_mem_dereg(m);
  calls_once();
}

/* rmx_mem_dereg with keys given to two connections and a capability key
 * out: every one of them is refused afterwards, and writes with them leave
 * the memory as it was (ASan: the grants go with the registration). */
void dereg_ends_every_key(void **state)
{
  uint8_t *area, ga[RMX_RKEY_MAX], gb[RMX_RKEY_MAX], cap[RMX_RKEY_MAX];
  size_t la, lb, lc = sizeof(cap);
  client_t b, c;
  rmx_rkey_t *rka, *rkb, *rkc;
  rmx_mem_t *m = area_reg(&area, 5);
  rmx_conn_t *ta = W.target, *tb = another(&b);
  another(&c);
  rka = grant(m, ta, &W.cl, ga, &la);
  rkb = grant(m, tb, &b, gb, &lb);
  rkc = cap_key(m, c.c, cap, &lc);
  read_ok(W.cl.c, rka, area);
  read_ok(b.c, rkb, area);
  if (rkc)
    read_ok(c.c, rkc, area);

  rmx_mem_dereg(m);
  refused(&W.cl, rka, area, 1);
  refused(&b, rkb, area, 1);
  if (rkc)
    refused(&c, rkc, area, 1);
  rmx_rkey_release(rka);
  rmx_rkey_release(rkb);
  rmx_rkey_release(rkc);
  client_close(W.ctx, &b);
  client_close(W.ctx, &c);
  calls_once();
}

/* The end of a connection revokes the keys packed for it: while its handle
 * is still ours (down, not yet closed), there is no key left to revoke and
 * none can be packed; the registration outlives the freed connection. */
void connection_end_revokes_its_keys(void **state)
{
  uint8_t *area, blob[RMX_RKEY_MAX];
  size_t len;
  client_t b;
  rmx_rkey_t *rkb;
  rmx_mem_t *m = area_reg(&area, 6);
  rmx_conn_t *tb = another(&b);
  rkb = grant(m, tb, &b, blob, &len);
  read_ok(b.c, rkb, area);
  rmx_rkey_release(rkb);
  rmx_conn_cbs_t cbs = {.on_disconnect = down_only};
  rmx_conn_set_cbs(tb, &cbs, NULL); /* down, and left for this case to close */
  client_close(W.ctx, &b);          /* the peer leaves */
  run_until(W.ctx, &down_seen, 1);
  assert_int_equal(rmx_mem_revoke(m, tb), RMX_ENOENT);
  len = sizeof(blob);
  assert_int_equal(rmx_mem_pack_for(m, tb, blob, &len), RMX_ENOTCONN);

  int found = 0, closed = W.s.closed;
  for (int i = 0; i < W.s.nconns; i++)
    if (W.s.conns[i] == tb) {
      W.s.conns[i] = W.s.conns[--W.s.nconns];
      found = 1;
      break;
    }
  assert_true(found);
  assert_int_equal(rmx_conn_close(tb, srv_conn_closed, &W.s), 0);
  run_until(W.ctx, &W.s.closed, closed + 1);
  rmx_mem_dereg(m); /* nothing of the freed connection is left in it */
  calls_once();
}

/* What rmx_mem_pack_for and rmx_mem_revoke refuse, and with which code. */
void scoped_key_argument_errors(void **state)
{
  uint8_t *area, blob[RMX_RKEY_MAX];
  size_t len = sizeof(blob), need;
  client_t c, o;
  rmx_mem_t *m = area_reg(&area, 7), *local;
  rmx_conn_t *ta = W.target;
  assert_int_equal(rmx_mem_pack_for(NULL, ta, blob, &len), RMX_EINVAL);
  assert_int_equal(rmx_mem_pack_for(m, NULL, blob, &len), RMX_EINVAL);
  assert_int_equal(rmx_mem_pack_for(m, ta, NULL, &len), RMX_EINVAL);
  assert_int_equal(rmx_mem_pack_for(m, ta, blob, NULL), RMX_EINVAL);
  assert_int_equal(rmx_mem_revoke(NULL, ta), RMX_EINVAL);
  assert_int_equal(rmx_mem_revoke(m, NULL), RMX_EINVAL);
  len = 8;
  assert_int_equal(rmx_mem_pack_for(m, ta, blob, &len), RMX_EINVAL);
  assert_int_equal(rmx_mem_revoke(m, ta), RMX_ENOENT); /* a refused call granted nothing */
  assert_int_equal(rmx_mem_reg(W.ctx, area, AREA, RMX_MEM_LOCAL, &local), 0);
  len = sizeof(blob);
  assert_int_equal(rmx_mem_pack_for(local, ta, blob, &len), RMX_EINVAL); /* no remote right */
  rmx_mem_dereg(local);

  len = sizeof(blob);
  assert_int_equal(rmx_mem_pack_for(m, ta, blob, &len), 0);
  need = len--;
  assert_int_equal(rmx_mem_pack_for(m, ta, blob, &len), RMX_EINVAL); /* one byte short */
  len = need;
  assert_int_equal(rmx_mem_pack_for(m, ta, blob, &len), 0);

  client_connect(W.ctx, &c, W.s.uri); /* not established yet */
  len = sizeof(blob);
  assert_int_equal(rmx_mem_pack_for(m, c.c, blob, &len), RMX_ENOTCONN);
  run_until(W.ctx, &c.connected, 1);
  assert_int_equal(c.connect_status, 0);
  len = sizeof(blob);
  assert_int_equal(rmx_mem_pack_for(m, c.c, blob, &len), 0);
  assert_int_equal(rmx_conn_close(c.c, cl_closed, &c), 0); /* closing: no new key */
  assert_int_equal(rmx_mem_revoke(m, c.c), 0); /* the key lasts until BYE is out; revoke ends it */
  assert_int_equal(rmx_mem_revoke(m, c.c), RMX_ENOENT);
  len = sizeof(blob);
  assert_int_equal(rmx_mem_pack_for(m, c.c, blob, &len), RMX_ENOTCONN);
  run_until(W.ctx, &c.closed, 1);

  rmx_ctx_t *other = ctx_new(0); /* a connection of another context */
  client_connect(other, &o, W.s.uri);
  len = sizeof(blob);
  assert_int_equal(rmx_mem_pack_for(m, o.c, blob, &len), RMX_EINVAL);
  assert_int_equal(rmx_conn_close(o.c, cl_closed, &o), 0);
  ctx_done(other);
  assert_int_equal(o.closed, 1);
  rmx_mem_dereg(m);
  calls_once();
}
