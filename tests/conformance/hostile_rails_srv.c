/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rails against hostile peers, part 2: a rail's key used on its connection
 * and on another one (a raw client), and raw servers against an rmx client:
 * a server hello with RAIL, UP for rails never asked for or twice, OFFER
 * answers that are malformed or refusals (hostile_rails.c has the rest).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "hostile_rails.h"

/* ------------------------------------------------------------------ */
/* A rail's key works on that rail alone                                */
/* ------------------------------------------------------------------ */

#define KLEN 4096
static struct {
  uint64_t addr, k0, k1;
} RK;

/* A read of the region with key: its final status, the bytes checked. */
static int rd_key(peer_t *p, uint64_t id, uint64_t key, int32_t *end)
{
  static _Thread_local uint8_t buf[KLEN];
  uint8_t out[40];
  uint64_t got;
  ev_t *e = malloc(sizeof(*e));
  int rc = wr_full(p, out, rd_req_enc(out, id, RK.addr, KLEN, key)) ||
           rd_collect(p, id, buf, KLEN, &got, end, e) ? -1 : 0;
  free(e);
  if (rc == 0 && *end == 0)
    PCHECK(p, mismatches(buf, KLEN, TAG_A, 0) == 0, "a read brought the wrong bytes");
  return rc;
}

static int s_keys(peer_t *p)
{
  peer_t r, d;
  unsigned l;
  uint64_t t;
  int32_t end;
  if (handshake(p) || offer(p, NULL, 0, &l, &t) || rail_dial(p, &r, 2, t, 40) ||
      wait_up(p, l))
    return -1;
  pmark(p, 1);
  if (pwait(p, 1))
    return -1;
  /* the connection: its own key, not the rail's */
  if (rd_key(p, 1, RK.k1, &end))
    return -1;
  PCHECK(p, end == RMX_EACCES, "the rail's key on its connection: %d", end);
  if (rd_key(p, 2, RK.k0, &end))
    return -1;
  PCHECK(p, end == 0, "the connection's key: %d", end);
  /* the rail: its own key, not the connection's */
  if (rd_key(&r, 1, RK.k0, &end))
    return -1;
  PCHECK(p, end == RMX_EACCES, "the connection's key on its rail: %d", end);
  if (rd_key(&r, 2, RK.k1, &end))
    return -1;
  PCHECK(p, end == 0, "the rail's key on the rail: %d", end);
  /* another connection: neither */
  memset(&d, 0, sizeof(d));
  d.fd = raw_dial(S.port);
  PCHECK(p, d.fd >= 0, "no third socket");
  if (handshake(&d) || rd_key(&d, 1, RK.k1, &end))
    return -1;
  PCHECK(p, end == RMX_EACCES, "the rail's key on another connection: %d", end);
  if (rd_key(&d, 2, RK.k0, &end))
    return -1;
  PCHECK(p, end == RMX_EACCES, "the connection's key on another connection: %d", end);
  int rc = goodbye(&d) || goodbye(p);
  close(d.fd);
  PCHECK(p, drain_eof(r.fd, 5000) == 1, "the rail outlived its connection");
  close(r.fd);
  return rc;
}

void rail_keys_stay_on_their_connection(void **state)
{
  static uint8_t mem[KLEN];
  uint8_t blob[RMX_RKEY_MAX];
  size_t bl = sizeof(blob);
  rmx_mem_t *m;
  srv_start(NULL);
  fill(mem, sizeof(mem), TAG_A, 0);
  assert_int_equal(rmx_mem_reg(S.ctx, mem, sizeof(mem), RMX_MEM_REMOTE_READ, &m), 0);
  reg_track(m);
  peer_t *p = peer_start(s_keys, NULL, 0);
  wait_step(p, 1);
  if (atomic_load(&p->done))
    peer_join(p); /* it stopped early: fail with its complaint */
  assert_int_equal(rmx_conn_rails(S.sc[0].c), 1);
  assert_int_equal(rmx_mem_pack_for(m, S.sc[0].c, blob, &bl), 0);
  /* decoded as docs/protocol.md "Remote keys" says: TCP entries by lane */
  unsigned seen = 0;
  assert_int_equal(bl, 24 + 16 * (size_t)blob[1]);
  for (unsigned i = 0; i < blob[1]; i++) {
    const uint8_t *e = blob + 24 + 16 * i;
    assert_int_equal(e[0], 1);
    assert_in_range(e[1], 0, 1);
    seen |= 1u << e[1];
    *(e[1] ? &RK.k1 : &RK.k0) = g64(e + 8);
  }
  assert_int_equal(seen, 3);
  assert_int_not_equal(RK.k0, RK.k1);
  RK.addr = g64(blob + 8);
  atomic_store(&main_step, 1);
  peer_join(p);
  PUMP_UNTIL(S.nsc == 2 && S.sc[0].closed && S.sc[1].closed);
}

/* ------------------------------------------------------------------ */
/* Raw servers against an rmx client                                    */
/* ------------------------------------------------------------------ */

static struct rsrv {
  peer_t p; /* the connection; p.srv holds the client's hello */
  int lfd, port, mode;
  pthread_t th;
  atomic_int done;
} R;

enum { RS_RAIL_FLAG, RS_OFFERS, RS_NO_UP, RS_SILENT };

/* Accept one and read its HELLO into h (its length in *len). */
static int rs_accept(peer_t *p, int *fd, uint8_t *h, uint32_t *len)
{
  uint8_t kind;
  *fd = accept(R.lfd, NULL, NULL);
  PCHECK(p, *fd >= 0, "accept");
  set_rcvtimeo(*fd, 10000);
  PCHECK(p, rd_tframe(*fd, &kind, h, len, 256) == 0 && kind == K_HELLO && *len >= HELLO_LEN,
         "no HELLO");
  return 0;
}

static int rs_ack(peer_t *p, int fd, uint16_t flags)
{
  uint8_t b[8 + HELLO_LEN], hb[HELLO_LEN];
  hello_t h = hello_default();
  h.flags = flags;
  hello_enc(hb, &h);
  return wr_all(fd, b, tframe(b, K_HELLO_ACK, hb, HELLO_LEN)) == 0 ? 0 : -1;
}

/* An OFFER's answer, as variant v of the hostile ones (the last is right). */
static const struct {
  int32_t st;
  uint8_t len, lane, pad;
  uint64_t token;
} ANS[] = {
  {0, 16, 0, 0, 1}, {0, 16, 8, 0, 1}, {0, 16, 1, 0, 0}, {0, 16, 1, 1, 1}, {0, 15, 1, 0, 1},
  {0, 17, 1, 0, 1}, {RMX_ENOMEM, 0, 0, 0, 0}, {RMX_ENOHANDLER, 0, 0, 0, 0},
  {0, 16, 1, 0, 0x7a11},
};
#define NANS (sizeof(ANS) / sizeof(ANS[0]))

static int rs_offers(peer_t *p)
{
  ev_t *e = malloc(sizeof(*e));
  uint8_t h[256], up[2] = {1, 1}, body[64];
  uint32_t len;
  int rail = -1, rc = -1;
  /* UP for rails never asked for: 1, 0, 9, and one of 2 bytes */
  if (R.mode == RS_OFFERS &&
      (rpc_req(p, 0, UP_ID, 1, up, 1) || rpc_req(p, 0, UP_ID, 1, "\0", 1) ||
       rpc_req(p, 0, UP_ID, 1, "\x09", 1) || rpc_req(p, 0, UP_ID, 1, up, 2)))
    goto out;
  for (size_t v = R.mode != RS_OFFERS ? NANS - 1 : 0; v < NANS; v++) {
    do {
      if (next_ev(p, e))
        goto out;
    } while (!(e->kind == K_FRAME && e->ftype == F_DATA && e->fflags == 1));
    if (e->flen != 16 || g32(e->fbody + 8) != OFFER_ID) {
      pfail(p, "a request of %u bytes to handler %x", e->flen, g32(e->fbody + 8));
      goto out;
    }
    memset(body, 0, sizeof(body));
    memcpy(body, e->fbody, 8);
    p32(body + 12, (uint32_t)ANS[v].st);
    body[16] = ANS[v].lane;
    body[17] = ANS[v].pad;
    p64(body + 24, ANS[v].token);
    if (send_rmx(p, F_DATA, 2, body, 16u + ANS[v].len))
      goto out;
  }
  /* the rail, with the token of the last answer */
  if (rs_accept(p, &rail, h, &len))
    goto out;
  if (len != HELLO_LEN + 8 || g16(h + 6) != 2 || g64(h + HELLO_LEN) != 0x7a11) {
    pfail(p, "a rail's HELLO of %u bytes, flags %x, token %llx", len, g16(h + 6),
          (unsigned long long)g64(h + HELLO_LEN));
    goto out;
  }
  if (R.mode == RS_NO_UP || R.mode == RS_SILENT) { /* the rail goes before its UP */
    if (rs_ack(p, rail, 0))
      goto out;
    if (R.mode == RS_SILENT && drain_eof(rail, 10000) != 1) { /* the client closes it */
      pfail(p, "the client kept a rail the server never said UP for");
      goto out;
    }
    close(rail);
    rail = -1;
  }
  /* UP once, then twice more (the second and third ignored) */
  else if (rs_ack(p, rail, 0) || rpc_req(p, 0, UP_ID, 1, up, 1) || rpc_req(p, 0, UP_ID, 1, up, 1) ||
      rpc_req(p, 0, UP_ID, 1, up, 1))
    goto out;
  /* the connection still carries messages, then goes with its rail */
  do {
    if (next_ev(p, e))
      goto out;
  } while (!(e->kind == K_FRAME && e->ftype == F_DATA));
  if (e->fflags != 0 || e->flen != 5 || memcmp(e->fbody, "still", 5)) {
    pfail(p, "a message of %u bytes, flags %u", e->flen, e->fflags);
    goto out;
  }
  do {
    if (next_ev(p, e))
      goto out;
  } while (!(e->kind == K_FRAME && e->ftype == F_BYE));
  PCHECK(p, rail < 0 || drain_eof(rail, 5000) == 1, "the client kept its rail");
  rc = 0;
out:
  if (rail >= 0)
    close(rail);
  free(e);
  return rc;
}

static void wake(void *a) { (void)a; }

static void *rs_main(void *arg)
{
  peer_t *p = &R.p;
  uint8_t h[256];
  uint32_t len;
  (void)arg;
  if (rs_accept(p, &p->fd, h, &len) == 0) {
    hello_dec(h, &p->srv); /* the client's: its eager size bounds what it sends */
    p->credits = (int32_t)p->srv.depth;
    if (R.mode == RS_RAIL_FLAG) {
      if (rs_ack(p, p->fd, 2) == 0 && wait_eof(p->fd, 5000) != 1)
        pfail(p, "the client took a server hello with RAIL");
    } else if (rs_ack(p, p->fd, 0) == 0) {
      if (rs_offers(p) && !p->failed)
        pfail(p, "the raw server stopped: %s", p->saw_eof ? "the client hung up" : "I/O");
    }
  }
  if (p->fd >= 0)
    shutdown(p->fd, SHUT_RDWR); /* the client's close ends here, not at its timeout */
  atomic_store(&R.done, 1);
  rmx_ctx_post(S.ctx, wake, NULL);
  return NULL;
}

static void rs_start(int mode)
{
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof(a);
  memset(&R, 0, sizeof(R));
  R.mode = mode;
  R.lfd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(R.lfd >= 0);
  assert_int_equal(bind(R.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
  assert_int_equal(listen(R.lfd, 4), 0);
  assert_int_equal(getsockname(R.lfd, (struct sockaddr *)&a, &al), 0);
  R.port = ntohs(a.sin_port);
  R.p.fd = -1;
  assert_int_equal(pthread_create(&R.th, NULL, rs_main, NULL), 0);
}

static void rs_join(void)
{
  PUMP_UNTIL(atomic_load(&R.done));
  pthread_join(R.th, NULL);
  close(R.lfd);
  if (R.p.fd >= 0)
    close(R.p.fd);
  if (R.p.failed)
    fail_msg("raw server: %s", R.p.why);
}

static struct {
  int connected, status, closed, rails, rail_st[16];
  unsigned rail_no[16];
} C;

static void k_connected(rmx_conn_t *c, int st, void *a) { C.connected++, C.status = st; }
static void k_closed(rmx_conn_t *c, void *a) { C.closed++; }
static void k_rail(rmx_conn_t *c, int st, unsigned rail, void *a)
{
  C.rail_no[C.rails] = rail;
  C.rail_st[C.rails++] = st;
}

static rmx_conn_t *k_connect(char *uri, size_t n)
{
  rmx_conn_t *c;
  memset(&C, 0, sizeof(C));
  snprintf(uri, n, "tcp://127.0.0.1:%d", R.port);
  assert_int_equal(rmx_connect(S.ctx, uri, k_connected, NULL, &c), 0);
  PUMP_UNTIL(C.connected);
  return c;
}

void server_hello_with_rail_is_refused(void **state)
{
  char uri[64];
  srv_start(NULL);
  rs_start(RS_RAIL_FLAG);
  rmx_conn_t *c = k_connect(uri, sizeof(uri));
  assert_int_equal(C.status, RMX_EPROTO);
  assert_int_equal(rmx_conn_close(c, k_closed, NULL), 0);
  PUMP_UNTIL(C.closed);
  rs_join();
  pump_for(20);
  assert_int_equal(C.connected, 1);
  assert_int_equal(C.closed, 1);
}

void hostile_offers_and_ups(void **state)
{
  char uri[64];
  srv_start(NULL);
  rs_start(RS_OFFERS);
  rmx_conn_t *c = k_connect(uri, sizeof(uri));
  assert_int_equal(C.status, 0);
  for (int v = 0; v < (int)NANS; v++) {
    assert_int_equal(rmx_rail_add(c, uri, k_rail, NULL), 0);
    PUMP_UNTIL(C.rails == v + 1);
    int want = v < 6 ? RMX_EPROTO : v == 6 ? RMX_ENOMEM : v == 7 ? RMX_ENOTSUP : 0;
    assert_int_equal(C.rail_st[v], want);
    assert_int_equal(C.rail_no[v], want ? 0 : 1);
    assert_int_equal(rmx_conn_rails(c), want ? 0 : 1);
  }
  assert_int_equal(rmx_send(c, "still", 5, NULL, NULL), 0);
  pump_for(20);
  assert_int_equal(C.rails, (int)NANS);
  assert_int_equal(rmx_conn_rails(c), 1);
  assert_int_equal(rmx_conn_close(c, k_closed, NULL), 0);
  PUMP_UNTIL(C.closed);
  rs_join();
  pump_for(20);
  assert_int_equal(C.closed, 1);
  assert_int_equal(C.rails, (int)NANS);
}

/* The rail established, then lost before the peer said UP (mode
 * RS_NO_UP), or never told UP (RS_SILENT: RMX_ETIMEDOUT after the
 * handshake's time): the add ends with an error, once, and the connection
 * carries on. */
static void no_up(int mode)
{
  char uri[64];
  srvcfg_t o = {.handshake_timeout_ms = 50};
  srv_start(mode == RS_SILENT ? &o : NULL);
  rs_start(mode);
  rmx_conn_t *c = k_connect(uri, sizeof(uri));
  assert_int_equal(C.status, 0);
  assert_int_equal(rmx_rail_add(c, uri, k_rail, NULL), 0);
  PUMP_UNTIL(C.rails == 1);
  if (mode == RS_SILENT)
    assert_int_equal(C.rail_st[0], RMX_ETIMEDOUT);
  assert_int_not_equal(C.rail_st[0], 0);
  assert_int_equal(C.rail_no[0], 0);
  assert_int_equal(rmx_conn_rails(c), 0);
  assert_int_equal(rmx_send(c, "still", 5, NULL, NULL), 0);
  assert_int_equal(rmx_conn_close(c, k_closed, NULL), 0);
  PUMP_UNTIL(C.closed);
  rs_join();
  pump_for(20);
  assert_int_equal(C.closed, 1);
  assert_int_equal(C.rails, 1);
}

void rail_lost_before_up(void **state) { no_up(RS_NO_UP); }
void rail_never_told_up(void **state) { no_up(RS_SILENT); }
