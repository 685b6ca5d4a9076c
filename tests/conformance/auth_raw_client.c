/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Raw clients, written from docs/protocol.md, against an rmx server with a
 * secret (TCP only): the whole exchange by the page alone; AUTH skipped for
 * DATA, RTS, CREDIT or a remote read; proofs under another key, short,
 * long, flagged, twice or replayed; AUTH_OK from a client; hellos without
 * the nonce or the flag; silence until the deadline; destroy in the middle.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <sodium.h>

#include "auth.h"

/* ---- raw clients against an rmx server with SECRET_A ---- */

enum {
  RC_GOOD,         /* the whole exchange, recorded, then a DATA frame */
  RC_REPLAY,       /* r->rec again on a new connection, then DATA */
  RC_DATA_FIRST,   /* DATA instead of AUTH */
  RC_RTS_FIRST,    /* RTS instead of AUTH */
  RC_CREDIT_FIRST, /* CREDIT instead of AUTH */
  RC_WRONG_KEY,    /* AUTH computed with SECRET_B */
  RC_SHORT_AUTH,   /* 31-byte AUTH body */
  RC_LONG_AUTH,    /* the right proof and one byte more */
  RC_FLAGGED_AUTH, /* the right proof, header flags 1 */
  RC_AUTH_OK,      /* AUTH_OK instead of AUTH */
  RC_TWO_AUTH,     /* the right AUTH twice */
  RC_SILENT,       /* nothing after the server's hello */
  RC_NO_NONCE,     /* AUTH flag in a 32-byte hello */
  RC_NO_FLAG,      /* a plain hello */
  RC_HELLO_ONLY,   /* a right 48-byte hello; a REJECT expected */
  RC_READ_FIRST,   /* a remote read (TCP RD_REQ) of a real registration instead of AUTH */
};

static const char *const rc_name[] = {"good", "replay", "DATA first", "RTS first",
                                      "CREDIT first", "wrong key", "short AUTH", "long AUTH",
                                      "flagged AUTH", "AUTH_OK", "two AUTH", "silent",
                                      "no nonce", "no flag", "hello only", "read first"};

static int s_client(raw_t *r)
{
  uint8_t buf[512], c[C_HELLO_LEN], body[256], kind, k[32], pr[PROOF_LEN + 1];
  uint32_t blen;
  size_t n;
  int fd = r->fd = raw_dial(r->port);
  uint64_t t0;

  RCHECK(r, fd >= 0, "cannot connect: %s", strerror(errno));
  if (r->mode == RC_REPLAY) {
    /* The recorded HELLO + AUTH, then a message. */
    RCHECK(r, wr_all(fd, r->rec, r->reclen) == 0, "write");
    n = msg_frame(buf, F_DATA, 0, 0, "replayed", 8);
    wr_all(fd, buf, n); /* may fail: the server may have hung up already */
    RCHECK(r, rd_tframe(fd, &kind, body, &blen, sizeof(body)) == 0 && kind == K_HELLO_ACK &&
                  blen >= S_HELLO_LEN, "no HELLO_ACK for the replayed hello");
    RCHECK(r, memcmp(body + HELLO_LEN, r->srv_nonce, NONCE_LEN) != 0, "the same server nonce");
    RCHECK(r, wait_eof(fd, 5000) == 1, "the server took a replayed AUTH");
    return 0;
  }
  auth_hello(c, r->mode == RC_NO_FLAG ? 0 : 1);
  randombytes_buf(c + HELLO_LEN, NONCE_LEN);
  size_t clen = r->mode == RC_NO_NONCE || r->mode == RC_NO_FLAG ? HELLO_LEN : C_HELLO_LEN;
  n = tframe(buf, K_HELLO, c, (uint32_t)clen);
  RCHECK(r, wr_all(fd, buf, n) == 0, "write HELLO");
  memcpy(r->rec, buf, n);
  r->reclen = n;
  RCHECK(r, rd_tframe(fd, &kind, body, &blen, sizeof(body)) == 0, "no answer to HELLO");
  if (r->mode == RC_NO_NONCE || r->mode == RC_NO_FLAG || r->mode == RC_HELLO_ONLY) {
    RCHECK(r, kind == K_REJECT && blen == 4, "kind %u instead of REJECT", kind);
    r->reject = (int32_t)g32(body);
    return 0;
  }
  RCHECK(r, kind == K_HELLO_ACK && blen >= S_HELLO_LEN, "HELLO_ACK kind %u, %u bytes", kind,
         blen);
  RCHECK(r, g32(body) == 0x31584d52u && (g16(body + 6) & 1), "server hello without AUTH");
  memcpy(r->srv_nonce, body + HELLO_LEN, NONCE_LEN);
  if (r->secret)
    derive_bytes(r->secret, r->secret_len, k);
  else
    derive(r->mode == RC_WRONG_KEY ? SECRET_B : SECRET_A, k);
  proof(k, "server", c, body, pr);
  if (r->mode != RC_WRONG_KEY)
    RCHECK(r, crypto_verify_32(pr, body + C_HELLO_LEN) == 0, "server proof does not verify");
  proof(k, "client", c, body, pr);
  pr[PROOF_LEN] = 0xee;
  t0 = now_ms();
  switch (r->mode) {
  case RC_GOOD:
  case RC_WRONG_KEY:
  case RC_TWO_AUTH:
    n = msg_frame(buf, F_AUTH, 0, 0, pr, PROOF_LEN);
    break;
  case RC_DATA_FIRST:
    n = msg_frame(buf, F_DATA, 0, 0, "unauthenticated", 15);
    break;
  case RC_RTS_FIRST: {
    uint8_t rts[32];
    p64(rts, 1), p64(rts + 8, 4096), p64(rts + 16, 64), p64(rts + 24, 1);
    n = msg_frame(buf, F_RTS, 0, 0, rts, 32);
    break;
  }
  case RC_CREDIT_FIRST:
    n = msg_frame(buf, F_CREDIT, 0, 0, NULL, 0);
    break;
  case RC_READ_FIRST:
    n = rd_req_enc(buf, 1, r->rd_addr, 64, r->rd_key);
    break;
  case RC_SHORT_AUTH:
    n = msg_frame(buf, F_AUTH, 0, 0, pr, PROOF_LEN - 1);
    break;
  case RC_LONG_AUTH:
    n = msg_frame(buf, F_AUTH, 0, 0, pr, PROOF_LEN + 1);
    break;
  case RC_FLAGGED_AUTH:
    n = msg_frame(buf, F_AUTH, 1, 0, pr, PROOF_LEN);
    break;
  case RC_AUTH_OK:
    n = msg_frame(buf, F_AUTH_OK, 0, 0, NULL, 0);
    break;
  case RC_SILENT:
    atomic_store(&r->step, 1);
    RCHECK(r, wait_eof(fd, 8000) == 1, "the server kept a silent peer");
    r->ms = now_ms() - t0;
    return 0;
  default:
    RCHECK(r, 0, "mode %d", r->mode);
  }
  RCHECK(r, wr_all(fd, buf, n) == 0, "write the first frame");
  memcpy(r->rec + r->reclen, buf, n);
  r->reclen += n;
  if (r->mode == RC_TWO_AUTH)
    wr_all(fd, buf, n);
  if (r->mode != RC_GOOD && r->mode != RC_TWO_AUTH) {
    RCHECK(r, wait_eof(fd, 5000) == 1, "%s: the server did not hang up, or answered",
           rc_name[r->mode]);
    return 0;
  }
  RCHECK(r, rd_tframe(fd, &kind, body, &blen, sizeof(body)) == 0, "no AUTH_OK");
  RCHECK(r, kind == K_FRAME && blen == 8 && body[0] == F_AUTH_OK && body[1] == 0 &&
                g32(body + 4) == 0 && g16(body + 2) <= 1,
         "AUTH_OK: kind %u, %u bytes, type %u", kind, blen, body[0]);
  if (r->mode == RC_TWO_AUTH) {
    RCHECK(r, wait_eof(fd, 5000) == 1, "a second AUTH was taken");
    return 0;
  }
  /* Return AUTH_OK's credit with a message; the server echoes it. */
  n = msg_frame(buf, F_DATA, 0, 1, "authenticated", 13);
  RCHECK(r, wr_all(fd, buf, n) == 0, "write DATA");
  RCHECK(r, rd_tframe(fd, &kind, body, &blen, sizeof(body)) == 0 && kind == K_FRAME &&
                body[0] == F_DATA && blen == 8 + 13 && memcmp(body + 8, "authenticated", 13) == 0,
         "no echo");
  return 0;
}

/* Run one raw client against s; returns after its thread ended. */
static void raw_client(srv_t *s, raw_t *r, int mode)
{
  r->port = s->port;
  raw_start(r, s_client, mode);
  raw_join(r);
  close(r->fd);
}

void authenticated_raw_client_is_served(void **state)
{
  srv_t s;
  raw_t r = {0};
  srv_open(&s, SECRET_A, 0);
  raw_client(&s, &r, RC_GOOD); /* the page alone is enough to get in */
  PUMP_UNTIL(s.accepted == 1 && s.recvs == 1);
  PUMP_UNTIL(s.disconnects == 1);
  srv_close(&s);
}

/* docs/protocol.md's example: a server whose secret file holds the two
 * bytes 0x00 0xff is keyed by S = "00ff", the file's lowercase hex; the
 * page's K for it is checked here, and a raw client keyed that way gets
 * in, while one that hashes the file's bytes themselves is refused. */
void raw_client_keyed_by_the_files_hex_is_served(void **state)
{
  static const uint8_t file[2] = {0x00, 0xff};
  static const uint8_t want[32] = {
    0x59, 0x50, 0x5a, 0x92, 0x7d, 0xf7, 0xc5, 0x37, 0x29, 0x68, 0xb8, 0xf4, 0xe7, 0xac, 0xb7, 0x9e,
    0x44, 0x8e, 0xea, 0xc8, 0xfa, 0x66, 0x97, 0x95, 0xdd, 0xd7, 0x0e, 0xe9, 0xf8, 0x53, 0xbe, 0x64};
  char path[] = "/tmp/rmx-auth-hex-XXXXXX";
  uint8_t k[32];
  srv_t s;
  rmx_ctx_t *ctx;
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, file, sizeof(file)), (ssize_t)sizeof(file));
  close(fd);
  setenv("RMX_AUTH_SECRET_FILE", path, 1);
  int rc = rmx_ctx_create(&ctx, LOOP, NULL);
  unlink(path);
  unsetenv("RMX_AUTH_SECRET_FILE");
  assert_int_equal(rc, 0);
  srv_open_ctx(&s, ctx);
  derive_bytes("00ff", 4, k);
  assert_memory_equal(k, want, sizeof(want));
  raw_t r = {.secret = "00ff", .secret_len = 4};
  raw_client(&s, &r, RC_GOOD);
  PUMP_UNTIL(s.accepted == 1 && s.recvs == 1);
  PUMP_UNTIL(s.disconnects == 1);
  raw_t raw = {.secret = file, .secret_len = sizeof(file)};
  raw_client(&s, &raw, RC_WRONG_KEY); /* the server hangs up */
  pump_for(50);
  assert_int_equal(s.accepted, 1);
  srv_close(&s);
}

/* A peer that fails: the server hangs up, on_accept never runs, nothing
 * reaches on_recv, and a right client still gets in afterwards. */
static void refused_raw(int mode)
{
  srv_t s;
  raw_t r = {0};
  srv_open(&s, SECRET_A, 0);
  raw_client(&s, &r, mode);
  pump_for(50);
  assert_int_equal(s.accepted, 0);
  assert_int_equal(s.recvs, 0);
  cl_t k;
  cl_connect(&k, SECRET_A, s.uri);
  assert_int_equal(k.status, 0);
  PUMP_UNTIL(s.accepted == 1);
  cl_close(&k);
  PUMP_UNTIL(s.disconnects == 1);
  srv_close(&s);
}

/* A peer that knows a user registration's key (it leaked, say) still
 * reads nothing before it has authenticated: no answer, only the hang-up. */
void read_before_auth_is_cut_off(void **state)
{
  srv_t s;
  raw_t r = {0};
  static uint8_t secret_page[4096];
  uint8_t blob[RMX_RKEY_MAX];
  size_t len = sizeof(blob);
  tkey_t tk;
  rmx_mem_t *m;
  srv_open(&s, SECRET_A, 0);
  memset(secret_page, 0x5a, sizeof(secret_page));
  assert_int_equal(rmx_mem_reg(s.ctx, secret_page, sizeof(secret_page), RMX_MEM_REMOTE_READ, &m),
                   0);
  assert_int_equal(rmx_mem_pack(m, blob, &len), 0);
  assert_int_equal(rkey_tcp(blob, len, &tk), 0); /* the TCP entry (docs/protocol.md) */
  r.rd_addr = tk.addr;
  r.rd_key = tk.key;
  raw_client(&s, &r, RC_READ_FIRST);
  pump_for(50);
  assert_int_equal(s.accepted, 0);
  rmx_mem_dereg(m);
  srv_close(&s);
}

void data_before_auth_is_cut_off(void **state) { refused_raw(RC_DATA_FIRST); }
void rts_before_auth_is_cut_off(void **state) { refused_raw(RC_RTS_FIRST); }
void credit_before_auth_is_cut_off(void **state) { refused_raw(RC_CREDIT_FIRST); }
void auth_with_another_key_is_refused(void **state) { refused_raw(RC_WRONG_KEY); }
void short_auth_is_refused(void **state) { refused_raw(RC_SHORT_AUTH); }
void long_auth_is_refused(void **state) { refused_raw(RC_LONG_AUTH); }
void flagged_auth_is_refused(void **state) { refused_raw(RC_FLAGGED_AUTH); }
void auth_ok_from_a_client_is_refused(void **state) { refused_raw(RC_AUTH_OK); }

void second_auth_is_a_protocol_error(void **state)
{
  srv_t s;
  raw_t r = {0};
  srv_open(&s, SECRET_A, 0);
  raw_client(&s, &r, RC_TWO_AUTH);
  PUMP_UNTIL(s.disconnects == 1); /* it was in (on_accept), then cut off */
  assert_int_equal(s.accepted, 1);
  assert_int_equal(s.recvs, 0);
  srv_close(&s);
}

void replayed_exchange_is_refused(void **state)
{
  srv_t s;
  raw_t r = {0};
  srv_open(&s, SECRET_A, 0);
  raw_client(&s, &r, RC_GOOD); /* records its HELLO and AUTH */
  PUMP_UNTIL(s.accepted == 1 && s.recvs == 1 && s.disconnects == 1);
  assert_true(r.reclen == 8 + C_HELLO_LEN + 8 + PROOF_LEN); /* HELLO, AUTH */
  raw_client(&s, &r, RC_REPLAY); /* the same bytes on a new connection */
  pump_for(50);
  assert_int_equal(s.accepted, 1);
  assert_int_equal(s.recvs, 1);
  srv_close(&s);
}

void hello_without_nonce_or_flag_is_rejected(void **state)
{
  srv_t s;
  raw_t r = {0};
  srv_open(&s, SECRET_A, 0);
  raw_client(&s, &r, RC_NO_NONCE);
  assert_int_equal(r.reject, RMX_EPROTO);
  raw_client(&s, &r, RC_NO_FLAG);
  assert_int_equal(r.reject, RMX_EACCES);
  assert_int_equal(s.accepted, 0);
  srv_close(&s);
  /* A server without a secret: a right authenticating hello is refused
   * with EACCES, the flag without its nonce is malformed (EPROTO). */
  srv_open(&s, NULL, 0);
  raw_client(&s, &r, RC_HELLO_ONLY);
  assert_int_equal(r.reject, RMX_EACCES);
  raw_client(&s, &r, RC_NO_NONCE);
  assert_int_equal(r.reject, RMX_EPROTO);
  assert_int_equal(s.accepted, 0);
  srv_close(&s);
}

void silent_peer_is_cut_at_the_deadline(void **state)
{
  srv_t s;
  raw_t r = {0};
  srv_open(&s, SECRET_A, 600);
  raw_client(&s, &r, RC_SILENT);
  assert_true(r.ms >= 400 && r.ms < 5000);
  assert_int_equal(s.accepted, 0);
  srv_close(&s);
}

void destroy_while_a_peer_authenticates(void **state)
{
  srv_t s;
  raw_t r = {0};
  srv_open(&s, SECRET_A, 0);
  r.port = s.port;
  raw_start(&r, s_client, RC_SILENT);
  PUMP_UNTIL(atomic_load(&r.step) == 1);
  pump_for(20); /* the server is in the AUTH wait */
  srv_close(&s);  /* ends it: the peer sees the close */
  raw_join(&r);
  close(r.fd);
  assert_true(r.ms < 5000);
}
