/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Conformance, messages: connect, accept and close (and both ends'
 * addresses); every size byte for byte, from the user's buffers and the
 * pool's; 10,000 in order; many connections; the largest message and one
 * over it.
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
#include <cmocka.h>

#include "conformance.h"

/* The port of an IPv4 or IPv6 address, in host order (0: neither). */
static int sa_port(const struct sockaddr_storage *ss)
{
  if (ss->ss_family == AF_INET)
    return ntohs(((const struct sockaddr_in *)(const void *)ss)->sin_port);
  if (ss->ss_family == AF_INET6)
    return ntohs(((const struct sockaddr_in6 *)(const void *)ss)->sin6_port);
  return 0;
}

void connect_accept_close(void **state)
{
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  client_t cl;
  server_start(ctx, &s, 0);
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  assert_int_equal(cl.connect_status, 0);
  server_until(ctx, &s, &s.accepted, 1);
  assert_string_equal(rmx_conn_transport(cl.c), scheme);
  /* Both ends' addresses, as each transport sees them: the client's peer is
   * the listener's port, and its own port is what the server sees. */
  struct sockaddr_storage cp, cl_local, sp, sl;
  assert_int_equal(rmx_conn_peer_addr(cl.c, &cp), 0);
  assert_int_equal(rmx_conn_local_addr(cl.c, &cl_local), 0);
  assert_int_equal(sa_port(&cp), atoi(strrchr(s.uri, ':') + 1));
  if (!s.remote) {
    assert_int_equal(rmx_conn_peer_addr(s.conns[0], &sp), 0);
    assert_int_equal(rmx_conn_local_addr(s.conns[0], &sl), 0);
    assert_int_equal(sa_port(&sl), sa_port(&cp));
    assert_int_equal(sa_port(&sp), sa_port(&cl_local));
    assert_int_equal(sp.ss_family, cl_local.ss_family);
  }
  assert_int_equal(rmx_ctx_destroy(ctx), RMX_EBUSY); /* objects still open */
  client_close(ctx, &cl);
  /* the peer sees an orderly close, once */
  server_until(ctx, &s, &s.disconnects, 1);
  assert_int_equal(s.last_disconnect, 0);
  assert_int_equal(cl.disconnects, 0);
  server_stop(ctx, &s);
  assert_int_equal(s.disconnects, 1);
  ctx_done(ctx);
}

void message_sizes(void **state)
{
  /* 120 is the largest sent from the op itself (no pool buffer), 121 the
   * smallest sent from a pool buffer */
  static const size_t sizes[] = {0, 1, 2, 56, 57, 63, 64, 120, 121, 128,
                                 4095, 8183, 8184, 8185, 8192, 65536,
                                 (1u << 20) + 3, 16u << 20, 64u << 20};
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  client_t cl;
  uint8_t *msg = malloc(64u << 20);
  server_start(ctx, &s, 1);
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  assert_int_equal(cl.connect_status, 0);
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    cl.expect_len = sizes[i];
    cl.expect_seed = (uint32_t)i;
    pattern(msg, sizes[i], (uint32_t)i);
    assert_int_equal(rmx_send(cl.c, msg, sizes[i], cl_sent, &cl), 0);
    run_until(ctx, &cl.recvs, (int)i + 1);
    run_until(ctx, &cl.sent_ok, (int)i + 1); /* msg may be reused only now */
    if (cl.bad)
      fail_msg("the echo of %zu bytes differs", sizes[i]);
  }
  rmx_conn_stats_t st;
  rmx_conn_stats(cl.c, &st);
  assert_true(st.msgs_sent == sizeof(sizes) / sizeof(sizes[0]));
  assert_true(st.rndv_sent > 0 && st.eager_sent > 0);
  client_close(ctx, &cl);
  server_stop(ctx, &s);
  free(msg);
  ctx_done(ctx);
}

void send_from_pool_buffers(void **state)
{
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  client_t cl;
  static const size_t sizes[] = {100, 8184, 300000};
  server_start(ctx, &s, 1);
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  for (int i = 0; i < 3; i++) {
    rmx_buf_t *b;
    assert_int_equal(rmx_buf_get(ctx, sizes[i], &b), 0);
    assert_true(rmx_buf_size(b) >= sizes[i]);
    pattern(rmx_buf_data(b), sizes[i], 100 + i);
    cl.expect_len = sizes[i];
    cl.expect_seed = 100 + i;
    assert_int_equal(rmx_send_buf(cl.c, b, rmx_buf_size(b) + 1, cl_sent, &cl), RMX_EINVAL);
    assert_int_equal(rmx_send_buf(cl.c, b, sizes[i], cl_sent, &cl), 0);
    run_until(ctx, &cl.recvs, i + 1);
    run_until(ctx, &cl.sent_ok, i + 1);
    assert_int_equal(cl.bad, 0);
  }
  client_close(ctx, &cl);
  server_stop(ctx, &s);
  ctx_done(ctx);
}

/* ---- order ---- */

void ten_thousand_in_order(void **state)
{
  enum { N = 10000, BIG = 100000 };
  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.sq_depth = 4 * cfg.rx_depth; /* credits hold the sends back, not the send queue */
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), 0);
  server_t s;
  client_t cl;
  server_start(ctx, &s, SRV_SEQ);
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  uint8_t *big = malloc((size_t)(N / 1000) * BIG);
  /* All queued at once: credits, not the test, pace them. */
  for (uint32_t i = 0; i < N; i++) {
    if (i % 1000 == 999) {
      uint8_t *b = big + (i / 1000) * BIG;
      memcpy(b, &i, 4);
      memset(b + 4, (uint8_t)i, BIG - 4);
      assert_int_equal(rmx_send(cl.c, b, BIG, cl_sent, &cl), 0);
    } else {
      assert_int_equal(rmx_send(cl.c, &i, 4, cl_sent, &cl), 0);
    }
  }
  run_until(ctx, &cl.sent_ok, N);
  server_until(ctx, &s, &s.recvs, N);
  assert_int_equal(s.bad, 0);
  assert_int_equal(cl.sent_err, 0);
  rmx_conn_stats_t st;
  rmx_conn_stats(cl.c, &st);
  assert_true(st.credit_stalls > 0); /* 10,000 queued > 64 credits */
  client_close(ctx, &cl);
  server_stop(ctx, &s);
  free(big);
  ctx_done(ctx);
}

/* Each echo sends the next number from inside on_recv while messages sent
 * earlier still wait for credits: the echo's header has just returned
 * some, and the new message must still go after those that wait. */
typedef struct chase {
  client_t cl;
  uint32_t next, n;
} chase_t;

static void chase_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  chase_t *ch = arg;
  ch->cl.recvs++;
  if (ch->next < ch->n) {
    uint32_t v = ch->next++;
    assert_int_equal(rmx_send(c, &v, sizeof(v), cl_sent, &ch->cl), 0);
  }
}

void sends_from_callbacks_keep_order(void **state)
{
  enum { FIRST = 300, N = 3000 };
  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.sq_depth = 4 * cfg.rx_depth; /* credits hold the sends back, not the send queue */
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), 0);
  server_t s;
  chase_t ch = {.n = N};
  server_start(ctx, &s, SRV_SEQ_ECHO);
  client_connect(ctx, &ch.cl, s.uri);
  static const rmx_conn_cbs_t cbs = {.on_recv = chase_recv, .on_disconnect = cl_disconnect};
  rmx_conn_set_cbs(ch.cl.c, &cbs, &ch);
  run_until(ctx, &ch.cl.connected, 1);
  for (; ch.next < FIRST; ch.next++) /* more than the credits: most wait */
    assert_int_equal(rmx_send(ch.cl.c, &ch.next, sizeof(ch.next), cl_sent, &ch.cl), 0);
  run_until(ctx, &ch.cl.recvs, N);
  server_until(ctx, &s, &s.recvs, N);
  assert_int_equal(s.bad, 0);
  assert_int_equal(ch.cl.sent_ok, N);
  assert_int_equal(ch.cl.sent_err, 0);
  rmx_conn_stats_t st;
  rmx_conn_stats(ch.cl.c, &st);
  assert_true(st.credit_stalls > 0);
  client_close(ctx, &ch.cl);
  server_stop(ctx, &s);
  ctx_done(ctx);
}

void many_connections(void **state)
{
  enum { NC = 32, MSGS = 50 };
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  static client_t cl[NC];
  uint8_t msg[3000];
  server_start(ctx, &s, 1);
  for (int i = 0; i < NC; i++)
    client_connect(ctx, &cl[i], s.uri);
  for (int i = 0; i < NC; i++) {
    run_until(ctx, &cl[i].connected, 1);
    assert_int_equal(cl[i].connect_status, 0);
    cl[i].expect_len = sizeof(msg);
    cl[i].expect_seed = 7;
  }
  pattern(msg, sizeof(msg), 7);
  for (int m = 0; m < MSGS; m++)
    for (int i = 0; i < NC; i++)
      assert_int_equal(rmx_send(cl[i].c, msg, sizeof(msg), cl_sent, &cl[i]), 0);
  for (int i = 0; i < NC; i++) {
    run_until(ctx, &cl[i].recvs, MSGS);
    run_until(ctx, &cl[i].sent_ok, MSGS);
    assert_int_equal(cl[i].bad, 0);
  }
  server_until(ctx, &s, &s.accepted, NC);
  assert_int_equal(s.accepted, NC);
  for (int i = 0; i < NC; i++)
    client_close(ctx, &cl[i]);
  server_until(ctx, &s, &s.disconnects, NC);
  server_stop(ctx, &s);
  ctx_done(ctx);
}

void over_maximum_is_refused(void **state)
{
  rmx_ctx_t *ctx = ctx_new(1u << 20);
  server_t s;
  client_t cl;
  static uint8_t msg[(1u << 20) + 1];
  server_start(ctx, &s, 0);
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  assert_int_equal(rmx_send(cl.c, msg, sizeof(msg), cl_sent, &cl), RMX_EMSGSIZE);
  rmx_buf_t *b;
  assert_int_equal(rmx_buf_get(ctx, sizeof(msg), &b), RMX_EMSGSIZE);
  assert_int_equal(rmx_send(cl.c, msg, sizeof(msg) - 1, cl_sent, &cl), 0); /* the maximum goes */
  run_until(ctx, &cl.sent_ok, 1);
  server_until(ctx, &s, &s.recvs, 1);
  assert_int_equal(cl.sent_err, 0);
  client_close(ctx, &cl);
  server_stop(ctx, &s);
  ctx_done(ctx);
}
