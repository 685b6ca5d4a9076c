/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Hostile peers and rails (docs/protocol.md "Rails (hello flag RAIL)"), over
 * raw TCP sockets written from the page: a raw client against an rmx server
 * (rail hellos with tokens never given, token 0, no token, AUTH without a
 * secret, a token replayed or lapsed; OFFER with a payload and past 7; every
 * kind of message on a rail; a rail's key used elsewhere), and raw servers
 * against an rmx client (hostile_rails_srv.c). Each case checks the
 * documented refusal, that the connection the rail serves and the server's
 * other connections keep working, and each callback once (srv_stop); the
 * sanitizer build checks the memory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "hostile_rails.h"

/* ---- the raw client's side of rails ---- */

int rpc_req(peer_t *p, uint64_t id, uint32_t handler, uint8_t flags, const void *pl, uint32_t n)
{
  uint8_t b[16 + 64];
  p64(b, id);
  p32(b + 8, flags == 4 ? 0 : handler);
  p32(b + 12, 0);
  if (n)
    memcpy(b + 16, pl, n);
  if (flags == 4) /* a notification has no extension */
    return send_rmx(p, F_DATA, 4, pl, n);
  return send_rmx(p, F_DATA, flags, b, 16 + n);
}

/* Frames until the reply to call id; UP requests met on the way are noted
 * in p->u[6] (a bit per rail number), and counted in p->u[5]. */
int rpc_wait(peer_t *p, uint64_t id, int32_t *st, uint8_t *out, uint32_t *n)
{
  ev_t *e = malloc(sizeof(*e));
  int rc = -1;
  while (next_ev(p, e) == 0) {
    if (e->kind != K_FRAME || e->ftype != F_DATA)
      continue;
    if (e->fflags == 1 && e->flen >= 16 && g32(e->fbody + 8) == UP_ID) {
      PCHECK(p, e->flen == 17 && g64(e->fbody) == 0, "UP of %u bytes, call id %llu", e->flen,
             (unsigned long long)g64(e->fbody));
      p->u[6] |= 1ull << e->fbody[16];
      p->u[5]++;
      if (!id) {
        rc = 0;
        break;
      }
      continue;
    }
    if (e->fflags == 2 && e->flen >= 16 && g64(e->fbody) == id) {
      *st = (int32_t)g32(e->fbody + 12);
      *n = e->flen - 16;
      memcpy(out, e->fbody + 16, *n < 64 ? *n : 64);
      rc = 0;
      break;
    }
  }
  free(e);
  return rc;
}

int offer(peer_t *p, const void *pl, uint32_t n, unsigned *lane, uint64_t *token)
{
  int32_t st = 0;
  uint8_t out[64];
  uint32_t len = 0;
  uint64_t id = ++p->next_id;
  if (rpc_req(p, id, OFFER_ID, 1, pl, n) || rpc_wait(p, id, &st, out, &len))
    return -1;
  if (st) {
    PCHECK(p, len == 0, "a refused OFFER (%d) carries %u bytes", st, len);
    return st;
  }
  PCHECK(p, len == 16, "an OFFER's answer of %u bytes", len);
  for (int i = 1; i < 8; i++)
    PCHECK(p, out[i] == 0, "an OFFER's answer with pad byte %d set", i);
  *lane = out[0];
  *token = g64(out + 8);
  PCHECK(p, *lane >= 1 && *lane <= 7 && *token, "an OFFER of rail %u, token %llx", *lane,
         (unsigned long long)*token);
  return 0;
}

int wait_up(peer_t *p, unsigned lane)
{
  while (!(p->u[6] >> lane & 1))
    if (rpc_wait(p, 0, NULL, NULL, NULL))
      return -1;
  return 0;
}

int rail_dial(peer_t *p, peer_t *r, uint16_t flags, uint64_t token, size_t len)
{
  uint8_t b[8 + 64] = {0}, kind, body[256];
  uint32_t blen;
  hello_t h = hello_default();
  h.flags = flags;
  hello_enc(b + 8, &h);
  size_t at = 8 + (flags & 1 ? C_HELLO_LEN : HELLO_LEN);
  if (flags & 1)
    memset(b + 8 + HELLO_LEN, 0x3c, NONCE_LEN);
  p64(b + at, token);
  tf(b, K_HELLO, (uint32_t)len);
  memset(r, 0, sizeof(*r));
  r->fd = raw_dial(S.port);
  PCHECK(p, r->fd >= 0, "no socket for a rail");
  PCHECK(p, wr_all(r->fd, b, 8 + len) == 0, "a rail's HELLO not sent");
  PCHECK(p, rd_tframe(r->fd, &kind, body, &blen, sizeof(body)) == 0, "no answer to a rail");
  if (kind == K_REJECT) {
    PCHECK(p, blen == 4, "REJECT of %u bytes", blen);
    PCHECK(p, wait_eof(r->fd, 5000) == 1, "the server kept a refused rail open");
    close(r->fd);
    r->fd = -1;
    return (int32_t)g32(body);
  }
  PCHECK(p, kind == K_HELLO_ACK && blen >= HELLO_LEN, "a rail answered by kind %u", kind);
  hello_dec(body, &r->srv);
  PCHECK(p, r->srv.flags == 0, "the server's hello has flags %x", r->srv.flags);
  r->credits = (int32_t)r->srv.depth;
  return 0;
}

/* ------------------------------------------------------------------ */
/* Rail hellos the server refuses, and the one it takes                  */
/* ------------------------------------------------------------------ */

static int s_hellos(peer_t *p)
{
  peer_t r;
  unsigned l;
  uint64_t t;
  int rc;
  /* before any offer: a token never given, and 0 */
  PCHECK(p, (rc = rail_dial(p, &r, 2, 0x5eed5eed5eed5eedull, 40)) == RMX_EACCES,
         "a token never given: %d", rc);
  PCHECK(p, (rc = rail_dial(p, &r, 2, 0, 40)) == RMX_EACCES, "token 0: %d", rc);
  if (handshake(p) || offer(p, NULL, 0, &l, &t))
    return -1;
  PCHECK(p, l == 1, "the first rail is number %u", l);
  /* the token offered, but the hello too short to hold it */
  PCHECK(p, (rc = rail_dial(p, &r, 2, t, 32)) == RMX_EPROTO, "no token: %d", rc);
  PCHECK(p, (rc = rail_dial(p, &r, 2, t, 39)) == RMX_EPROTO, "7 bytes of token: %d", rc);
  PCHECK(p, (rc = rail_dial(p, &r, 3, t, 48)) == RMX_EPROTO, "AUTH, no token: %d", rc);
  /* AUTH with the right token, on a server without a secret */
  PCHECK(p, (rc = rail_dial(p, &r, 3, t, 56)) == RMX_EACCES, "AUTH without a secret: %d", rc);
  /* the same token and a neighbour of it */
  PCHECK(p, (rc = rail_dial(p, &r, 2, t ^ 1, 40)) == RMX_EACCES, "token ^ 1: %d", rc);
  PCHECK(p, (rc = rail_dial(p, &r, 2, t, 40)) == 0, "the token offered: %d", rc);
  if (wait_up(p, 1))
    return -1;
  peer_t r2;
  PCHECK(p, (rc = rail_dial(p, &r2, 2, t, 40)) == RMX_EACCES, "the token again: %d", rc);
  pmark(p, 1);
  if (pwait(p, 1))
    return -1;
  /* the connection works: a message, then goodbye; its rail goes with it */
  PCHECK(p, send_rmx(p, F_DATA, 0, "after", 5) == 0, "DATA not sent");
  if (goodbye(p))
    return -1;
  PCHECK(p, drain_eof(r.fd, 5000) == 1, "the rail outlived its connection");
  close(r.fd);
  PCHECK(p, p->u[5] == 1, "%llu UP requests for one rail", (unsigned long long)p->u[5]);
  return 0;
}

static void rail_hellos_are_checked(void **state)
{
  srv_start(NULL);
  static cli_t k;
  cli_start(&k);
  PUMP_UNTIL(k.connected);
  assert_int_equal(k.status, 0);
  peer_t *p = peer_start(s_hellos, NULL, 0);
  wait_step(p, 1);
  if (atomic_load(&p->done))
    peer_join(p); /* it stopped early: fail with its complaint */
  /* the rail did not reach on_accept; it counts as rail 1 of the raw client */
  assert_int_equal(S.nsc, 2); /* the in-process client and the raw one */
  rmx_conn_t *c = S.sc[1].c;
  rmx_rail_info_t ri;
  assert_int_equal(rmx_rail_info(c, 1, &ri), 0);
  assert_int_equal(ri.up, 1);
  assert_int_equal(rmx_rail_info(c, 2, &ri), RMX_ENOENT);
  /* the other connection is untouched */
  static uint8_t msg[100];
  fill(msg, sizeof(msg), TAG_B, 0);
  assert_int_equal(rmx_send(k.c, msg, sizeof(msg), NULL, NULL), 0);
  PUMP_UNTIL(S.sc[0].recvs == 1);
  assert_int_equal(mismatches(S.sc[0].msgs[0], 100, TAG_B, 0), 0);
  atomic_store(&main_step, 1);
  peer_join(p);
  PUMP_UNTIL(S.sc[1].closed);
  assert_int_equal(S.sc[1].recvs, 1);
  assert_int_equal(S.sc[1].disc_status, 0);
  assert_int_equal(S.nsc, 2);
}

/* ------------------------------------------------------------------ */
/* OFFER: a payload, and past 7 rails; lapsed offers                    */
/* ------------------------------------------------------------------ */

static int s_offers(peer_t *p)
{
  unsigned l;
  uint64_t t, seen[8] = {0};
  int rc;
  if (handshake(p))
    return -1;
  PCHECK(p, (rc = offer(p, "x", 1, &l, &t)) == RMX_EINVAL, "OFFER with a payload: %d", rc);
  for (unsigned i = 1; i <= 7; i++) {
    PCHECK(p, (rc = offer(p, NULL, 0, &l, &t)) == 0, "OFFER %u: %d", i, rc);
    PCHECK(p, l == i, "OFFER %u gave rail %u", i, l);
    for (unsigned j = 1; j < i; j++)
      PCHECK(p, seen[j] != t, "OFFER %u repeats rail %u's token", i, j);
    seen[i] = t;
  }
  for (int i = 0; i < 3; i++)
    PCHECK(p, (rc = offer(p, NULL, 0, &l, &t)) == RMX_ENOMEM, "OFFER past 7: %d", rc);
  /* the last one still opens its rail, and the connection carries on */
  peer_t r;
  PCHECK(p, (rc = rail_dial(p, &r, 2, seen[7], 40)) == 0, "rail 7: %d", rc);
  if (wait_up(p, 7))
    return -1;
  /* UP towards the accepting side, which asks for none: ignored */
  PCHECK(p, rpc_req(p, 0, UP_ID, 1, "\x07", 1) == 0, "UP not sent");
  PCHECK(p, send_rmx(p, F_DATA, 0, "after", 5) == 0, "DATA not sent");
  if (goodbye(p))
    return -1;
  PCHECK(p, drain_eof(r.fd, 5000) == 1, "the rail outlived its connection");
  close(r.fd);
  return 0;
}

/* Two rails present one token at once: one is attached, the other refused
 * (REJECT, or closed after its HELLO_ACK where both passed the first
 * check); one UP. */
static int s_twice(peer_t *p)
{
  unsigned l;
  uint64_t t;
  uint8_t b[8 + 40] = {0}, kind, body[256];
  uint32_t blen;
  int fd[2], up = 0, refused = 0;
  hello_t h = hello_default();
  h.flags = 2;
  if (handshake(p) || offer(p, NULL, 0, &l, &t))
    return -1;
  tf(b, K_HELLO, 40);
  hello_enc(b + 8, &h);
  p64(b + 8 + HELLO_LEN, t);
  for (int i = 0; i < 2; i++) {
    fd[i] = raw_dial(S.port);
    PCHECK(p, fd[i] >= 0 && wr_all(fd[i], b, sizeof(b)) == 0, "rail %d not sent", i);
  }
  for (int i = 0; i < 2; i++) {
    PCHECK(p, rd_tframe(fd[i], &kind, body, &blen, sizeof(body)) == 0, "no answer to %d", i);
    if (kind == K_REJECT) {
      PCHECK(p, blen == 4 && (int32_t)g32(body) == RMX_EACCES, "refused with %d",
             (int32_t)g32(body));
      refused++;
    } else {
      PCHECK(p, kind == K_HELLO_ACK, "answered by kind %u", kind);
      /* a read with a key of nothing: a rail up answers it; the one
       * refused said BYE first (or hung up) */
      uint8_t rq[40];
      PCHECK(p, wr_all(fd[i], rq, rd_req_enc(rq, 9, 4096, 8, 0x1234)) == 0 ||
                    hung_up(fd[i]), "RD_REQ not sent");
      int r = rd_tframe(fd[i], &kind, body, &blen, sizeof(body));
      if (r != 0 || (kind == K_FRAME && body[0] == F_BYE)) {
        refused++;
      } else {
        PCHECK(p, kind == K_RD_RESP && (int32_t)g32(body + 8) == RMX_EACCES,
               "a read with no key answered by kind %u", kind);
        up++;
      }
    }
  }
  PCHECK(p, up == 1 && refused == 1, "%d rails up, %d refused", up, refused);
  if (wait_up(p, l))
    return -1;
  PCHECK(p, send_rmx(p, F_DATA, 0, "after", 5) == 0, "DATA not sent");
  int rc = goodbye(p);
  for (int i = 0; i < 2; i++)
    close(fd[i]);
  PCHECK(p, p->u[5] == 1, "%llu UP requests", (unsigned long long)p->u[5]);
  return rc;
}

static void a_token_presented_twice_at_once(void **state)
{
  srv_start(NULL);
  peer_t *p = peer_start(s_twice, NULL, 0);
  peer_join(p);
  PUMP_UNTIL(S.nsc == 1 && S.sc[0].closed);
  assert_int_equal(S.sc[0].recvs, 1);
}

static void offers_are_bounded(void **state)
{
  srv_start(NULL);
  peer_t *p = peer_start(s_offers, NULL, 0);
  peer_join(p);
  PUMP_UNTIL(S.nsc == 1 && S.sc[0].closed);
  assert_int_equal(S.sc[0].recvs, 1);
  assert_int_equal(S.sc[0].disc_status, 0);
}

static int s_lapsed(peer_t *p)
{
  unsigned l;
  uint64_t t;
  int rc;
  peer_t r;
  if (handshake(p) || offer(p, NULL, 0, &l, &t))
    return -1;
  usleep(300 * 1000); /* the offer lasts 20 + 20 ms on this server */
  PCHECK(p, (rc = rail_dial(p, &r, 2, t, 40)) == RMX_EACCES, "a lapsed offer: %d", rc);
  /* a fresh one, used at once, still works */
  if (offer(p, NULL, 0, &l, &t))
    return -1;
  PCHECK(p, l == 2, "the second offer is rail %u", l);
  pmark(p, 1);
  return pwait(p, 1) || goodbye(p);
}

static void lapsed_offers_are_refused(void **state)
{
  srvcfg_t o = {.connect_timeout_ms = 20, .handshake_timeout_ms = 20};
  srv_start(&o);
  peer_t *p = peer_start(s_lapsed, NULL, 0);
  wait_step(p, 1);
  assert_int_equal(S.nsc, 1);
  rmx_rail_info_t ri;
  assert_int_equal(rmx_rail_info(S.sc[0].c, 1, &ri), 0);
  assert_int_equal(ri.up, 0);
  assert_int_equal(rmx_conn_rails(S.sc[0].c), 0);
  atomic_store(&main_step, 1);
  peer_join(p);
  PUMP_UNTIL(S.sc[0].closed);
}

/* ------------------------------------------------------------------ */
/* Messages on a rail close the rail; its connection stays               */
/* ------------------------------------------------------------------ */

enum { M_DATA, M_RPC, M_NOTIFY, M_IMM, M_RTS, M_KINDS };

static int s_messages(peer_t *p)
{
  static const char *const what[] = {"DATA", "an RPC request", "a notification",
                                     "a write with immediate", "an RTS"};
  unsigned l;
  uint64_t t;
  int rc;
  if (handshake(p))
    return -1;
  for (int m = 0; m < M_KINDS; m++) {
    peer_t r;
    uint8_t b[128], body[32];
    size_t n = 0;
    if (offer(p, NULL, 0, &l, &t))
      return -1;
    PCHECK(p, (rc = rail_dial(p, &r, 2, t, 40)) == 0, "rail %u: %d", l, rc);
    if (wait_up(p, l))
      return -1;
    switch (m) {
    case M_DATA:
      n = msg_frame(b, F_DATA, 0, 0, "on a rail", 9);
      break;
    case M_RPC: /* OFFER, which the connection would serve */
      p64(body, 1), p32(body + 8, OFFER_ID), p32(body + 12, 0);
      n = msg_frame(b, F_DATA, 1, 0, body, 16);
      break;
    case M_NOTIFY:
      n = msg_frame(b, F_DATA, 4, 0, "done", 4);
      break;
    case M_IMM: /* a key any connection may use: the write itself is allowed */
      n = tf(b, K_WR_REQ, 40 + 8);
      p64(b + 8, 1), p64(b + 16, K8.addr), p64(b + 24, 8), p64(b + 32, K8.key);
      p32(b + 40, 1), p32(b + 44, 77);
      memset(b + 48, TAG_A, 8);
      n = 56;
      break;
    case M_RTS:
      p64(body, 1), p64(body + 8, K8.addr), p64(body + 16, 8), p64(body + 24, K8.key);
      n = msg_frame(b, F_RTS, 0, 0, body, 32);
      break;
    }
    PCHECK(p, wr_all(r.fd, b, n) == 0, "%s not sent on the rail", what[m]);
    PCHECK(p, drain_eof(r.fd, 5000) == 1, "the server kept a rail after %s", what[m]);
    close(r.fd);
    /* the connection carries on */
    PCHECK(p, send_rmx(p, F_DATA, 0, "after", 5) == 0, "DATA not sent");
  }
  pmark(p, 1);
  return pwait(p, 1) || goodbye(p);
}

static void messages_on_a_rail_close_it(void **state)
{
  static uint8_t mem[64];
  srv_start(NULL);
  reg_and_publish(mem, sizeof(mem), RMX_MEM_REMOTE_WRITE | RMX_MEM_REMOTE_READ);
  size_t before = heap_used();
  peer_t *p = peer_start(s_messages, NULL, 0);
  wait_step(p, 1);
  assert_int_equal(S.nsc, 1);
  PUMP_UNTIL(S.sc[0].recvs == M_KINDS);
  for (int i = 0; i < M_KINDS; i++)
    assert_memory_equal(S.sc[0].msgs[i], "after", 5);
  assert_int_equal(S.sc[0].disconnects, 0);
  assert_int_equal(rmx_conn_rails(S.sc[0].c), 0);
  atomic_store(&main_step, 1);
  peer_join(p);
  PUMP_UNTIL(S.sc[0].closed);
  assert_int_equal(S.sc[0].disc_status, 0);
  pump_for(10);
  /* five rails and their connection gone: the heap is back (freelists aside) */
  size_t after = heap_used();
  if (after > before + MEM_SLACK)
    fail_msg("the heap grew by %zu bytes", after - before);
}

int main(int argc, char **argv)
{
  if (argc > 1)
    cmocka_set_test_filter(argv[1]);
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
    T(rail_hellos_are_checked),
    T(offers_are_bounded),
    T(a_token_presented_twice_at_once),
    T(lapsed_offers_are_refused),
    T(messages_on_a_rail_close_it),
    T(rail_keys_stay_on_their_connection),
    T(server_hello_with_rail_is_refused),
    T(hostile_offers_and_ups),
    T(rail_lost_before_up),
    T(rail_never_told_up),
  };
  return cmocka_run_group_tests_name("hostile-rails", tests, NULL, NULL);
}
