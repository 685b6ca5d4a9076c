/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The orderly close over TCP against a raw server (rawpeer.c, written from
 * docs/protocol.md): every send the client saw complete reaches the peer,
 * then BYE, then the end of the stream; never a reset that drops them.
 *
 *   rmx-orderly-close [tcp]
 *
 * The case that broke: the client's last frames sat in its socket, unsent
 * (the peer reads slowly), when rmx closed the socket; a frame the peer
 * sent after that (a credit return, a keepalive) made the client's kernel
 * answer with a reset and drop them, BYE included. Seen across two hosts
 * as a peer told RMX_ECONNRESET instead of an orderly close.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include <rmx/rmx.h>

#include "rawpeer.h"

enum { NMSG = 62, MSG_LEN = 4000 }; /* 62: under the depth of 64, less the last credit */

/* ---- the raw server: one connection, read slowly, then answer ---- */

typedef struct raw {
  pthread_t th;
  int lfd, fd;
  atomic_int client_closed; /* set by the main thread at on_closed */
  uint8_t *got;             /* every byte the client sent after its hello */
  size_t ngot;
  int end;                  /* 1: end of stream; -1: reset or error */
  char why[128];            /* what went wrong before that */
} raw_t;

static void *raw_main(void *arg)
{
  raw_t *r = arg;
  uint8_t kind, body[64], f[64];
  uint32_t blen;
  size_t cap = 1u << 20;
  hello_t h = hello_default();
  r->got = malloc(cap);
  r->fd = accept(r->lfd, NULL, NULL);
  if (r->fd < 0 || rd_tframe(r->fd, &kind, body, &blen, sizeof(body)) || kind != K_HELLO) {
    snprintf(r->why, sizeof(r->why), "no HELLO from the client");
    return NULL;
  }
  uint8_t hb[HELLO_LEN];
  hello_enc(hb, &h);
  size_t n = tframe(f, K_HELLO_ACK, hb, HELLO_LEN);
  if (wr_all(r->fd, f, n)) {
    snprintf(r->why, sizeof(r->why), "writing HELLO_ACK failed");
    return NULL;
  }
  /* Slowly, so that the client's last frames wait in its socket when it
   * closes; until the client says it closed, or the stream ends. */
  set_rcvtimeo(r->fd, 10000);
  int closed_seen = 0;
  for (;;) {
    closed_seen = atomic_load(&r->client_closed);
    if (closed_seen)
      break;
    ssize_t k = recv(r->fd, r->got + r->ngot, 2048 < cap - r->ngot ? 2048 : cap - r->ngot, 0);
    if (k <= 0) {
      r->end = k == 0 ? 1 : -1;
      break;
    }
    r->ngot += (size_t)k;
    usleep(2000);
  }
  /* A frame of ours, as a peer returning credits would send: it must not
   * cost the client what it still had to deliver. (After the end of the
   * stream the client may be gone already: the write's result is moot.) */
  n = msg_frame(f, F_CREDIT, 0, NMSG, NULL, 0);
  (void)!send(r->fd, f, n, MSG_NOSIGNAL);
  while (!r->end) {
    ssize_t k = recv(r->fd, r->got + r->ngot, cap - r->ngot, 0);
    if (k <= 0)
      r->end = k == 0 ? 1 : -1;
    else
      r->ngot += (size_t)k;
  }
  close(r->fd);
  if (!closed_seen && r->end < 0)
    snprintf(r->why, sizeof(r->why), "the stream broke before the client's close completed");
  return NULL;
}

/* Frames in what the client sent: DATA messages (checked whole), BYE,
 * anything else. */
static void count_frames(const raw_t *r, int *data, int *bad, int *bye, int *after_bye)
{
  size_t p = 0;
  *data = *bad = *bye = *after_bye = 0;
  while (r->ngot - p >= 8) {
    uint32_t blen = g32(r->got + p);
    uint8_t kind = r->got[p + 4];
    if (r->ngot - p - 8 < blen)
      break;
    const uint8_t *b = r->got + p + 8;
    p += 8 + blen;
    if (*bye)
      (*after_bye)++;
    if (kind < K_FRAME) /* an rmx frame is kind K_FRAME + its type */
      continue;
    if (kind == K_FRAME + F_DATA) {
      (*data)++;
      int ok = blen == MSG_LEN;
      for (uint32_t i = 0; ok && i < MSG_LEN; i++)
        ok = b[i] == (uint8_t)(i * 7 + 1);
      *bad += !ok;
    } else if (kind == K_FRAME + F_BYE) {
      (*bye)++;
    }
  }
}

/* ---- the client ---- */

typedef struct cl {
  rmx_conn_t *c;
  int connected, status, sent_ok, sent_err, closed, after_closed, disconnects;
} cl_t;

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  cl_t *k = arg;
  k->connected++;
  k->status = status;
}

static void on_sent(rmx_conn_t *c, int status, void *arg)
{
  cl_t *k = arg;
  k->after_closed += k->closed;
  if (status == 0)
    k->sent_ok++;
  else
    k->sent_err++;
}

static void on_disc(rmx_conn_t *c, int status, void *arg)
{
  cl_t *k = arg;
  k->after_closed += k->closed;
  k->disconnects++;
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  cl_t *k = arg;
  k->after_closed += k->closed;
  k->closed++;
}

static void run_until(uv_loop_t *loop, const int *counter, int want)
{
  while (*counter < want)
    uv_run(loop, UV_RUN_ONCE);
}

static void sends_reach_a_slow_peer_that_answers(void **state)
{
  raw_t r = {0};
  struct sockaddr_in sa = {.sin_family = AF_INET};
  socklen_t sl = sizeof(sa);
  int small = 4096;
  char uri[64];
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  r.lfd = tcp_socket();
  /* A small receive buffer (inherited by the accepted socket): the peer's
   * window stays small, and the client's socket holds what it wrote. */
  setsockopt(r.lfd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  assert_int_equal(bind(r.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(r.lfd, 1), 0);
  assert_int_equal(getsockname(r.lfd, (struct sockaddr *)&sa, &sl), 0);
  snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", ntohs(sa.sin_port));
  assert_int_equal(pthread_create(&r.th, NULL, raw_main, &r), 0);

  uv_loop_t loop;
  rmx_ctx_t *ctx;
  rmx_config_t cfg;
  cl_t k = {0};
  static uint8_t msg[MSG_LEN];
  for (int i = 0; i < MSG_LEN; i++)
    msg[i] = (uint8_t)(i * 7 + 1);
  assert_int_equal(uv_loop_init(&loop), 0);
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.close_timeout_ms = 60000; /* the peer's pace decides, not the deadline */
  cfg.keepalive_ms = 0;
  assert_int_equal(rmx_ctx_create(&ctx, &loop, &cfg), 0);
  assert_int_equal(rmx_connect(ctx, uri, on_connected, &k, &k.c), 0);
  run_until(&loop, &k.connected, 1);
  assert_int_equal(k.status, 0);
  rmx_conn_cbs_t cbs = {.on_disconnect = on_disc};
  rmx_conn_set_cbs(k.c, &cbs, &k);
  for (int i = 0; i < NMSG; i++)
    assert_int_equal(rmx_send(k.c, msg, MSG_LEN, on_sent, &k), 0);
  assert_int_equal(rmx_conn_close(k.c, on_closed, &k), 0);
  run_until(&loop, &k.closed, 1);
  atomic_store(&r.client_closed, 1);
  assert_int_equal(pthread_join(r.th, NULL), 0);

  int data, bad, bye, after_bye;
  count_frames(&r, &data, &bad, &bye, &after_bye);
  printf("# the peer got %zu bytes: %d messages (%d damaged), BYE %d, then %s\n", r.ngot, data,
         bad, bye, r.end > 0 ? "the end of the stream" : "a reset");
  assert_string_equal(r.why, "");
  assert_int_equal(k.sent_ok + k.sent_err, NMSG);
  assert_int_equal(data, k.sent_ok); /* every send reported done arrived */
  assert_int_equal(bad, 0);
  assert_int_equal(bye, 1);
  assert_int_equal(after_bye, 0);
  assert_int_equal(r.end, 1);
  assert_int_equal(k.closed, 1);
  assert_int_equal(k.after_closed, 0);
  assert_int_equal(k.disconnects, 0); /* our own close: no on_disconnect */
  free(r.got);
  close(r.lfd);
  assert_int_equal(rmx_ctx_destroy(ctx), 0);
  uv_run(&loop, UV_RUN_DEFAULT); /* the context's handles close on our loop */
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "tcp") != 0) {
    fprintf(stderr, "usage: rmx-orderly-close [tcp]\n");
    return 2;
  }
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(sends_reach_a_slow_peer_that_answers),
  };
  return cmocka_run_group_tests_name("orderly-close/tcp", tests, NULL, NULL);
}
