/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Hostile and foreign peers on the TCP transport, played by raw sockets in a
 * helper thread: garbage, another protocol version, frames claiming more
 * than the limits, silence. Each is refused with a logged error, the
 * process lives on, and the server keeps serving.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "rmx_int.h"

enum { TF_HELLO = 1, TF_HELLO_ACK, TF_REJECT, TF_FRAME = 16 /* + the rmx frame's type */ };

typedef struct world {
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  int port;
  int accepted, disconnects, last_disconnect, closed, thread_done;
  /* what the raw peer saw */
  int saw_eof;
  uint8_t reply[64];
  ssize_t reply_len;
  int (*script)(struct world *w, int fd);
} world_t;

static void on_closed(rmx_conn_t *c, void *arg) { ((world_t *)arg)->closed++; }

static void on_disc(rmx_conn_t *c, int status, void *arg)
{
  world_t *w = arg;
  w->disconnects++;
  w->last_disconnect = status;
  assert_int_equal(rmx_conn_close(c, on_closed, w), 0);
}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  world_t *w = arg;
  rmx_conn_cbs_t cbs = {.on_disconnect = on_disc};
  rmx_conn_set_cbs(c, &cbs, w);
  w->accepted++;
}

static void run_until(world_t *w, const int *counter, int want)
{
  while (*counter < want)
    uv_run(rmx_ctx_loop(w->ctx), UV_RUN_ONCE);
}

static void tf(int fd, uint8_t kind, const void *body, uint32_t blen)
{
  uint8_t h[8];
  rmx_put32(h, blen);
  h[4] = kind;
  h[5] = h[6] = h[7] = 0;
  assert_int_equal(write(fd, h, 8), 8);
  if (blen)
    assert_int_equal(write(fd, body, blen), (ssize_t)blen);
}

/* An rmx frame encoded by the core (n bytes, its 8-byte header first), its
 * header's fields moved into the stream header. */
static void rmx_frame(int fd, const uint8_t *f, size_t n)
{
  uint8_t h[8];
  rmx_put32(h, (uint32_t)(n - 8));
  h[4] = (uint8_t)(TF_FRAME + f[0]);
  h[5] = f[1];
  memcpy(h + 6, f + 2, 2);
  assert_int_equal(write(fd, h, 8), 8);
  if (n > 8)
    assert_int_equal(write(fd, f + 8, n - 8), (ssize_t)(n - 8));
}

static void hello(uint8_t out[RMX_WIRE_HELLO_LEN], uint16_t version)
{
  rmx_wire_hello_t h = {.magic = RMX_WIRE_MAGIC, .version = version, .eager_size = 8192,
                        .rx_depth = 64, .max_msg = 1 << 20, .rma_window = 64};
  rmx__wire_hello_encode(&h, out);
}

/* Read until the peer closes; keep the first bytes. */
static void drain(world_t *w, int fd)
{
  uint8_t buf[4096];
  ssize_t n;
  w->reply_len = 0;
  while ((n = read(fd, buf, sizeof(buf))) > 0) {
    size_t room = sizeof(w->reply) - (size_t)w->reply_len;
    memcpy(w->reply + w->reply_len, buf, (size_t)n < room ? (size_t)n : room);
    w->reply_len += (size_t)n < room ? n : (ssize_t)room;
  }
  w->saw_eof = 1; /* EOF or reset: the server hung up */
}

static void thread_done(void *arg) { ((world_t *)arg)->thread_done = 1; }

static void *raw_client(void *arg)
{
  world_t *w = arg;
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)w->port)};
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
    w->script(w, fd);
  if (fd >= 0)
    close(fd);
  rmx_ctx_post(w->ctx, thread_done, w);
  return NULL;
}

static void play(world_t *w, int (*script)(world_t *, int))
{
  pthread_t th;
  w->script = script;
  assert_int_equal(pthread_create(&th, NULL, raw_client, w), 0);
  run_until(w, &w->thread_done, 1);
  pthread_join(th, NULL);
}

static world_t W;

static int setup(void **state)
{
  rmx_config_t cfg;
  char uri[128];
  memset(&W, 0, sizeof(W));
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.max_msg_size = 1 << 20;
  cfg.connect_timeout_ms = 1000; /* short for the silent peer, long enough under load */
  assert_int_equal(rmx_ctx_create(&W.ctx, NULL, &cfg), 0);
  assert_int_equal(rmx_listen(W.ctx, "tcp://127.0.0.1:0", on_accept, &W, &W.l), 0);
  assert_int_equal(rmx_listener_uri(W.l, uri, sizeof(uri)), 0);
  W.port = atoi(strrchr(uri, ':') + 1);
  alarm(120);
  return 0;
}

/* A well-behaved client still gets through afterwards. */
static int good_connected, good_status, good_closed, good_sent;
static void good_on_conn(rmx_conn_t *c, int st, void *a) { good_connected++, good_status = st; }
static void good_on_sent(rmx_conn_t *c, int st, void *a) { good_sent += st == 0; }
static void good_on_closed(rmx_conn_t *c, void *a) { good_closed++; }

static void still_serving(world_t *w)
{
  char uri[128];
  rmx_conn_t *c;
  good_connected = good_closed = good_sent = 0;
  snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%d", w->port);
  assert_int_equal(rmx_connect(w->ctx, uri, good_on_conn, NULL, &c), 0);
  run_until(w, &good_connected, 1);
  assert_int_equal(good_status, 0);
  assert_int_equal(rmx_send(c, "ok", 2, good_on_sent, NULL), 0);
  run_until(w, &good_sent, 1);
  assert_int_equal(rmx_conn_close(c, good_on_closed, NULL), 0);
  run_until(w, &good_closed, 1);
}

static int teardown(void **state)
{
  int hostile_disconnects = W.disconnects;
  still_serving(&W);
  /* the good client's orderly close, then every accepted one is closed */
  run_until(&W, &W.disconnects, hostile_disconnects + 1);
  assert_int_equal(W.last_disconnect, 0);
  run_until(&W, &W.closed, W.accepted);
  rmx_listener_close(W.l);
  assert_int_equal(rmx_ctx_destroy(W.ctx), 0);
  return 0;
}

static int s_garbage(world_t *w, int fd)
{
  const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  assert_int_equal(write(fd, req, sizeof(req) - 1), (ssize_t)sizeof(req) - 1);
  drain(w, fd);
  return 0;
}

static void garbage_is_cut_off(void **state)
{
  play(&W, s_garbage);
  assert_true(W.saw_eof);
  assert_int_equal(W.reply_len, 0);
  assert_int_equal(W.accepted, 0);
}

static int s_other_version(world_t *w, int fd)
{
  uint8_t h[RMX_WIRE_HELLO_LEN];
  hello(h, RMX_WIRE_VERSION + 1);
  tf(fd, TF_HELLO, h, sizeof(h));
  drain(w, fd);
  return 0;
}

static void other_version_is_refused(void **state)
{
  play(&W, s_other_version);
  assert_true(W.saw_eof);
  /* a REJECT frame that says why */
  assert_int_equal(W.reply_len, 12);
  assert_int_equal(rmx_get32(W.reply), 4);
  assert_int_equal(W.reply[4], TF_REJECT);
  assert_int_equal((int32_t)rmx_get32(W.reply + 8), RMX_EVERSION);
  assert_int_equal(W.accepted, 0);
}

/* Read exactly len bytes: 0, or -1 at EOF or error. */
static int read_all(int fd, uint8_t *p, size_t len)
{
  for (size_t got = 0; got < len;) {
    ssize_t n = read(fd, p + got, len - got);
    if (n <= 0)
      return -1;
    got += (size_t)n;
  }
  return 0;
}

/* A version-4 hello (no range); the answer is read by its length, which
 * grows with what the server appends (its range). */
static int handshake(world_t *w, int fd)
{
  uint8_t h[RMX_WIRE_HELLO_LEN], r[8], body[256];
  hello(h, RMX_WIRE_VERSION_MIN);
  tf(fd, TF_HELLO, h, sizeof(h));
  if (read_all(fd, r, sizeof(r)) != 0 || r[4] != TF_HELLO_ACK)
    return -1;
  uint32_t blen = rmx_get32(r);
  if (blen < RMX_WIRE_HELLO_LEN || blen > sizeof(body) || read_all(fd, body, blen) != 0)
    return -1;
  return rmx_get16(body + 4) == RMX_WIRE_VERSION_MIN ? 0 : -1;
}

static int s_huge_frame(world_t *w, int fd)
{
  if (handshake(w, fd) == 0) {
    uint8_t h[8] = {0xff, 0xff, 0xff, 0x7f, TF_FRAME + 1, 0, 0, 0}; /* DATA of 2 GiB */
    assert_int_equal(write(fd, h, 8), 8);
  }
  drain(w, fd);
  return 0;
}

static void huge_frame_closes_connection(void **state)
{
  play(&W, s_huge_frame);
  assert_true(W.saw_eof);
  run_until(&W, &W.disconnects, 1);
  assert_int_equal(W.accepted, 1);
  assert_int_equal(W.last_disconnect, RMX_EPROTO);
}

static int s_huge_rts(world_t *w, int fd)
{
  if (handshake(w, fd) == 0) {
    uint8_t f[64];
    rmx_wire_rts_t rts = {.id = 1, .addr = 4096, .size = (1ull << 20) + 1, .rkey = 1};
    size_t n = rmx__wire_rts_encode(f, 0, &rts);
    rmx_frame(fd, f, n);
  }
  drain(w, fd);
  return 0;
}

static void message_over_maximum_closes_connection(void **state)
{
  play(&W, s_huge_rts);
  assert_true(W.saw_eof);
  run_until(&W, &W.disconnects, 1);
  assert_int_equal(W.last_disconnect, RMX_EPROTO);
}

static int s_bad_read(world_t *w, int fd)
{
  /* a remote read of memory nobody registered: refused, nothing leaks out */
  if (handshake(w, fd) == 0) {
    uint8_t body[32] = {0};
    rmx_put64(body, 7);
    rmx_put64(body + 8, (uintptr_t)&W);
    rmx_put64(body + 16, sizeof(W));
    rmx_put64(body + 24, 12345);
    tf(fd, 5 /* read request */, body, sizeof(body));
    uint8_t r[20];
    size_t got = 0;
    while (got < sizeof(r)) {
      ssize_t n = read(fd, r + got, sizeof(r) - got);
      if (n <= 0)
        break;
      got += (size_t)n;
    }
    memcpy(w->reply, r, got);
    w->reply_len = (ssize_t)got;
  }
  return 0;
}

static void unregistered_read_is_refused(void **state)
{
  play(&W, s_bad_read);
  assert_int_equal(W.reply_len, 20); /* header + id + status, no data */
  assert_int_equal(rmx_get32(W.reply), 12);
  assert_int_equal((int32_t)rmx_get32(W.reply + 16), RMX_EACCES);
}

static int s_silent(world_t *w, int fd)
{
  drain(w, fd); /* say nothing; the handshake timer hangs up */
  return 0;
}

static void silent_peer_is_dropped(void **state)
{
  play(&W, s_silent);
  assert_true(W.saw_eof);
  assert_int_equal(W.accepted, 0);
}

/* ---- the client side facing a foreign server ---- */

typedef struct fake_server {
  int lfd, port;
  uint16_t version;
  world_t *w;
} fake_server_t;

static void *fake_server(void *arg)
{
  fake_server_t *fs = arg;
  int fd = accept(fs->lfd, NULL, NULL);
  if (fd >= 0) {
    uint8_t buf[64];
    if (read(fd, buf, sizeof(buf)) > 0) {
      uint8_t h[RMX_WIRE_HELLO_LEN];
      hello(h, fs->version);
      tf(fd, TF_HELLO_ACK, h, sizeof(h));
    }
    drain(fs->w, fd);
    close(fd);
  }
  return NULL;
}

static int connected, connect_status, cclosed;
static void on_conn(rmx_conn_t *c, int st, void *a) { connected++, connect_status = st; }
static void on_cclosed(rmx_conn_t *c, void *a) { cclosed++; }

static void server_with_other_version_is_refused(void **state)
{
  fake_server_t fs = {.version = RMX_WIRE_VERSION + 7, .w = &W};
  struct sockaddr_in sa = {.sin_family = AF_INET};
  socklen_t sl = sizeof(sa);
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  fs.lfd = socket(AF_INET, SOCK_STREAM, 0);
  assert_int_equal(bind(fs.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(fs.lfd, 1), 0);
  getsockname(fs.lfd, (struct sockaddr *)&sa, &sl);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, fake_server, &fs), 0);
  char uri[64];
  rmx_conn_t *c;
  snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%d", ntohs(sa.sin_port));
  connected = cclosed = 0;
  assert_int_equal(rmx_connect(W.ctx, uri, on_conn, NULL, &c), 0);
  while (!connected)
    uv_run(rmx_ctx_loop(W.ctx), UV_RUN_ONCE);
  assert_int_equal(connect_status, RMX_EVERSION);
  rmx_conn_close(c, on_cclosed, NULL);
  while (!cclosed)
    uv_run(rmx_ctx_loop(W.ctx), UV_RUN_ONCE);
  pthread_join(th, NULL);
  close(fs.lfd);
}

int main(void)
{
  signal(SIGPIPE, SIG_IGN);
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
    T(garbage_is_cut_off), T(other_version_is_refused), T(huge_frame_closes_connection),
    T(message_over_maximum_closes_connection), T(unregistered_read_is_refused),
    T(silent_peer_is_dropped), T(server_with_other_version_is_refused),
  };
  return cmocka_run_group_tests_name("tcp-hostile", tests, NULL, NULL);
}
