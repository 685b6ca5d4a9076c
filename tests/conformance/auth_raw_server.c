/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Raw servers, written from docs/protocol.md, against an rmx client with a
 * secret (TCP only): DATA before AUTH_OK, a hello with the flag and a nonce
 * but no proof, and a server hello replayed from an earlier connection.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>
#include <sodium.h>

#include "auth.h"

/* ---- raw servers against an rmx client with SECRET_A ---- */

enum {
  RS_DATA_FIRST, /* a right hello and proof, then DATA instead of AUTH_OK */
  RS_NO_PROOF,   /* the AUTH flag, a nonce, no proof */
  RS_REPLAY,     /* two connections: the second gets the first's hello */
};

/* Accept one, read its HELLO, answer with our hello + nonce + proof. */
static int srv_handshake(raw_t *r, uint8_t *s, uint8_t *c, uint8_t *ack, size_t *acklen)
{
  uint8_t kind, body[256], k[32];
  uint32_t blen;
  r->fd = accept(r->lfd, NULL, NULL);
  RCHECK(r, r->fd >= 0, "accept");
  set_rcvtimeo(r->fd, 10000);
  RCHECK(r, rd_tframe(r->fd, &kind, body, &blen, sizeof(body)) == 0 && kind == K_HELLO &&
                blen >= C_HELLO_LEN && (g16(body + 6) & 1), "client HELLO: kind %u, %u bytes",
         kind, blen);
  memcpy(c, body, C_HELLO_LEN);
  auth_hello(s, 1);
  randombytes_buf(s + HELLO_LEN, NONCE_LEN);
  derive(SECRET_A, k);
  proof(k, "server", c, s, s + C_HELLO_LEN);
  *acklen = tframe(ack, K_HELLO_ACK, s, S_HELLO_LEN);
  return 0;
}

static int s_server(raw_t *r)
{
  uint8_t s[S_HELLO_LEN], c[C_HELLO_LEN], ack[128], buf[128], kind, body[256], k[32], pr[32];
  uint32_t blen;
  size_t acklen, n;
  if (srv_handshake(r, s, c, ack, &acklen) != 0)
    return -1;
  if (r->mode == RS_NO_PROOF) {
    n = tframe(buf, K_HELLO_ACK, s, C_HELLO_LEN);
    RCHECK(r, wr_all(r->fd, buf, n) == 0, "write");
    RCHECK(r, wait_eof(r->fd, 5000) == 1, "the client took a hello without a proof");
    return 0;
  }
  RCHECK(r, wr_all(r->fd, ack, acklen) == 0, "write HELLO_ACK");
  /* The client's AUTH, checked as the page says. */
  RCHECK(r, rd_tframe(r->fd, &kind, body, &blen, sizeof(body)) == 0 && kind == K_FRAME &&
                blen == 8 + PROOF_LEN && body[0] == F_AUTH && g16(body + 2) == 0,
         "client AUTH: kind %u, %u bytes, type %u", kind, blen, body[0]);
  derive(SECRET_A, k);
  proof(k, "client", c, s, pr);
  RCHECK(r, crypto_verify_32(pr, body + 8) == 0, "the client's proof does not verify");
  if (r->mode == RS_DATA_FIRST) {
    n = msg_frame(buf, F_DATA, 0, 0, "before AUTH_OK", 14);
    RCHECK(r, wr_all(r->fd, buf, n) == 0, "write");
    RCHECK(r, wait_eof(r->fd, 5000) == 1, "the client took DATA before AUTH_OK");
    return 0;
  }
  /* RS_REPLAY: finish this one, then replay its hello to the next. */
  n = msg_frame(buf, F_AUTH_OK, 0, 1, NULL, 0);
  RCHECK(r, wr_all(r->fd, buf, n) == 0, "write AUTH_OK");
  atomic_store(&r->step, 1);
  RCHECK(r, drain_eof(r->fd, 10000) == 1, "the first client did not close"); /* BYE, then EOF */
  close(r->fd);
  uint8_t s2[S_HELLO_LEN], ack2[128];
  if (srv_handshake(r, s2, c, ack2, &acklen) != 0)
    return -1;
  RCHECK(r, wr_all(r->fd, ack, acklen) == 0, "write the old HELLO_ACK");
  RCHECK(r, wait_eof(r->fd, 5000) == 1, "the client took a replayed server hello");
  return 0;
}

static void raw_server_open(raw_t *r, char *uri, size_t len)
{
  struct sockaddr_in sa = {.sin_family = AF_INET};
  socklen_t sl = sizeof(sa);
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  r->lfd = tcp_socket();
  assert_int_equal(bind(r->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(r->lfd, 4), 0);
  assert_int_equal(getsockname(r->lfd, (struct sockaddr *)&sa, &sl), 0);
  snprintf(uri, len, "tcp://127.0.0.1:%u", ntohs(sa.sin_port));
}

static void raw_server_case(int mode)
{
  raw_t r = {0};
  char uri[64];
  cl_t k;
  raw_server_open(&r, uri, sizeof(uri));
  raw_start(&r, s_server, mode);
  if (mode == RS_REPLAY) {
    cl_connect(&k, SECRET_A, uri);
    assert_int_equal(k.status, 0);
    cl_close(&k);
  }
  cl_connect(&k, SECRET_A, uri);
  assert_int_equal(k.status, RMX_EACCES);
  cl_close(&k);
  raw_join(&r);
  assert_int_equal(k.recvs, 0);
  close(r.fd);
  close(r.lfd);
}

void data_before_auth_ok_is_refused(void **state) { raw_server_case(RS_DATA_FIRST); }
void server_hello_without_proof_is_refused(void **state) { raw_server_case(RS_NO_PROOF); }
void replayed_server_hello_is_refused(void **state) { raw_server_case(RS_REPLAY); }
