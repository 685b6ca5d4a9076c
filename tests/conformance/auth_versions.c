/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Version ranges in the hello (docs/protocol.md, "Versions and features"),
 * through a relay between an rmx client and an rmx server (TCP only): each
 * side's hello carries its lowest version in the version field and its range
 * after what authentication appends; a relay that strips a range downgrades
 * a connection without a secret to version 4 (which still works: that is a
 * version-4 peer), and makes one with a secret fail, because the proofs
 * cover both ranges. A relay that strips both leaves two sides that each
 * look like a version-4 peer to the other, with a secret too: that is the
 * rule's limit, which the page states.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "auth.h"

#define RANGE_LEN 8
#define RANGE_TAG 0x6772 /* "rg" */
#define LOWEST 4         /* what the version field says */
#define HIGHEST 5

enum { STRIP_CLIENT = 1, STRIP_SERVER = 2 };

/* The range's offset in a hello of these flags, as the page places it. */
static size_t range_off(const uint8_t *hello, int server)
{
  if (!(g16(hello + 6) & 1))
    return HELLO_LEN;
  return server ? S_HELLO_LEN : C_HELLO_LEN;
}

/* A hello that says LOWEST in its version field and HIGHEST in its range. */
static int ranged(const uint8_t *b, uint32_t blen, int server)
{
  size_t at = range_off(b, server);
  return blen == at + RANGE_LEN && g16(b + 4) == LOWEST && g16(b + at) == RANGE_TAG &&
         g16(b + at + 2) == HIGHEST;
}

/* Copy bytes both ways until either side closes. */
static void splice_both(int a, int b)
{
  struct pollfd p[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
  uint8_t buf[16384];
  uint64_t t0 = now_ms();
  while (now_ms() - t0 < 20000) {
    if (poll(p, 2, 100) < 0)
      return;
    for (int i = 0; i < 2; i++) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      ssize_t n = read(p[i].fd, buf, sizeof(buf));
      if (n <= 0 || wr_all(p[!i].fd, buf, (size_t)n) != 0)
        return;
    }
  }
}

/* Carry one hello of this kind from one socket to the other: it must hold
 * a range 4 .. 5 (server: the accepting side's), which strip cuts off. */
static int pass_hello(raw_t *r, int from, int to, uint8_t want, int server, int strip)
{
  uint8_t kind, body[256], buf[300];
  uint32_t blen;
  RCHECK(r, rd_tframe(from, &kind, body, &blen, sizeof(body)) == 0 && kind == want,
         "%s hello: kind %u", server ? "server" : "client", kind);
  RCHECK(r, ranged(body, blen, server), "the %s's hello (%u bytes) carries no range 4 .. 5",
         server ? "server" : "client", blen);
  if (strip)
    blen = (uint32_t)range_off(body, server);
  RCHECK(r, wr_all(to, buf, tframe(buf, want, body, blen)) == 0, "write the hello");
  return 0;
}

/* r->port: the server's. r->mode: what to strip. */
static int relay(raw_t *r)
{
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)r->port)};
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  int cfd = accept(r->lfd, NULL, NULL), sfd = tcp_socket();
  RCHECK(r, cfd >= 0 && sfd >= 0, "accept");
  r->fd = cfd;
  RCHECK(r, connect(sfd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect to the server");
  set_rcvtimeo(cfd, 10000);
  set_rcvtimeo(sfd, 10000);
  int rc = pass_hello(r, cfd, sfd, K_HELLO, 0, r->mode & STRIP_CLIENT);
  if (!rc)
    rc = pass_hello(r, sfd, cfd, K_HELLO_ACK, 1, r->mode & STRIP_SERVER);
  if (!rc)
    splice_both(cfd, sfd);
  close(sfd);
  return rc;
}

static void relay_case(const char *secret, int mode, int want)
{
  srv_t s;
  raw_t r = {0};
  cl_t k;
  struct sockaddr_in sa = {.sin_family = AF_INET};
  socklen_t sl = sizeof(sa);
  char uri[64];
  srv_open(&s, secret, 0);
  r.port = s.port;
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  r.lfd = tcp_socket();
  assert_int_equal(bind(r.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(r.lfd, 4), 0);
  assert_int_equal(getsockname(r.lfd, (struct sockaddr *)&sa, &sl), 0);
  snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", ntohs(sa.sin_port));
  raw_start(&r, relay, mode);
  cl_connect(&k, secret, uri);
  assert_int_equal(k.status, want);
  if (!want) { /* a round trip through the relay at the version agreed */
    assert_int_equal(rmx_rpc_call(k.c, 42, "abc", 3, 10000, c_reply, &k, NULL), 0);
    PUMP_UNTIL(k.rpc_done);
    assert_int_equal(k.rpc_status, 0);
    assert_int_equal(k.rpc_len, 3);
    assert_memory_equal(k.rpc_reply, "cba", 3);
  }
  cl_close(&k);
  raw_join(&r);
  close(r.fd);
  close(r.lfd);
  srv_close(&s);
}

void ranges_pass_through_a_relay(void **state)
{
  relay_case(SECRET_A, 0, 0);
  relay_case(NULL, 0, 0);
}

void a_stripped_range_is_a_version_4_peer(void **state)
{
  relay_case(NULL, STRIP_CLIENT, 0);
  relay_case(NULL, STRIP_SERVER, 0);
  relay_case(NULL, STRIP_CLIENT | STRIP_SERVER, 0);
}

void a_stripped_range_fails_authentication(void **state)
{
  relay_case(SECRET_A, STRIP_CLIENT, RMX_EACCES);
  relay_case(SECRET_A, STRIP_SERVER, RMX_EACCES);
  relay_case(SECRET_A, STRIP_CLIENT | STRIP_SERVER, 0);
}
