/*
 * Peer authentication with a shared secret (docs/protocol.md, "Peer
 * authentication").
 *
 * Over the public API, on either transport (argv[1] = tcp | rdma): the same
 * secret connects and carries messages (eager and rendezvous) and an RPC;
 * another secret, or a secret on one side only (both ways), is refused with
 * RMX_EACCES at the connecting side and nothing reaches the other.
 *
 * On TCP only, raw peers in a helper thread, written from docs/protocol.md
 * (their framing and proofs are this file's own, with libsodium as the
 * page says): a client that skips AUTH and sends DATA or RTS first, one
 * that replays a recorded exchange (HELLO with its nonce + AUTH) on a new
 * connection, one holding another key, wrong-length and malformed AUTH,
 * AUTH_OK from a client, a hello with the flag and no nonce, a client that
 * never authenticates (deadline), destroy while a peer is in the middle;
 * and raw servers against an rmx client: DATA before AUTH_OK, a replayed
 * server hello, a hello without its proof. In every refusal the peer is cut
 * off and nothing it sent reaches on_recv or on_accept.
 *
 * Both contexts share one loop on the main thread; cmocka asserts run on
 * the main thread only (a raw peer records what went wrong in its why[]).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <sodium.h>
#include <uv.h>

#include "harness.h"

#define SECRET_A "correct horse battery staple, 32+ bytes of it"
#define SECRET_B "another secret entirely, also long enough......"

/* ------------------------------------------------------------------ */
/* The loop and the contexts                                           */
/* ------------------------------------------------------------------ */

/* One loop per test: a test that fails leaves its contexts behind, and
 * their loop is abandoned rather than run forever. */
static uv_loop_t loops[64];
static uv_timer_t ticks[64];
static int cur;
#define loop loops[cur]
#define tick ticks[cur]

static uint64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Run the loop until cond (a 20 s guard; the tick keeps turns short). */
#define PUMP_UNTIL(cond)                                                        \
  do {                                                                          \
    uint64_t t0_ = now_ms();                                                    \
    while (!(cond)) {                                                           \
      uv_run(&loop, UV_RUN_ONCE);                                               \
      if (now_ms() - t0_ > 20000)                                               \
        fail_msg("%s:%d: timed out waiting for %s", __FILE__, __LINE__, #cond); \
    }                                                                           \
  } while (0)

static void pump_for(unsigned ms)
{
  uint64_t t0 = now_ms();
  while (now_ms() - t0 < ms)
    uv_run(&loop, UV_RUN_ONCE);
}

static void tick_cb(uv_timer_t *t) { (void)t; }

static int setup(void **state)
{
  assert_int_equal(uv_loop_init(&loop), 0);
  uv_timer_init(&loop, &tick);
  uv_timer_start(&tick, tick_cb, 1, 1);
  return 0;
}

static int teardown(void **state)
{
  uv_close((uv_handle_t *)&tick, NULL);
  uint64_t t0 = now_ms();
  while (uv_run(&loop, UV_RUN_NOWAIT) && now_ms() - t0 < 2000)
    ;
  if (uv_loop_close(&loop) != 0) { /* a failed test left something open */
    assert_true(cur + 1 < 64);
    cur++;
    fail_msg("handles were left on the loop");
  }
  return 0;
}

static rmx_ctx_t *mkctx(const char *secret, uint32_t connect_timeout_ms)
{
  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  assert_int_equal(rmx_config_init(&cfg), 0);
  snprintf(cfg.auth_secret, sizeof(cfg.auth_secret), "%s", secret ? secret : "");
  cfg.max_msg_size = 4u << 20;
  if (connect_timeout_ms)
    cfg.connect_timeout_ms = connect_timeout_ms;
  assert_int_equal(rmx_ctx_create(&ctx, &loop, &cfg), 0);
  return ctx;
}

/* ---- a server: echoes messages, serves RPC 42 (the request reversed) ---- */

typedef struct srv {
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  char uri[128];
  int port;
  rmx_conn_t *conns[16];
  int n, accepted, recvs, disconnects, closed;
} srv_t;

static void s_sent(rmx_conn_t *c, int st, void *a) { free(a); }
static void s_closed(rmx_conn_t *c, void *a) { ((srv_t *)a)->closed++; }

static void s_recv(rmx_conn_t *c, const void *d, size_t n, void *a)
{
  srv_t *s = a;
  s->recvs++;
  void *copy = malloc(n ? n : 1);
  assert_non_null(copy);
  memcpy(copy, d, n);
  assert_int_equal(rmx_send(c, copy, n, s_sent, copy), 0);
}

static void s_disc(rmx_conn_t *c, int st, void *a)
{
  srv_t *s = a;
  s->disconnects++;
  for (int i = 0; i < s->n; i++)
    if (s->conns[i] == c) {
      s->conns[i] = s->conns[--s->n];
      assert_int_equal(rmx_conn_close(c, s_closed, s), 0);
      return;
    }
}

static void s_accept(rmx_listener_t *l, rmx_conn_t *c, void *a)
{
  srv_t *s = a;
  rmx_conn_cbs_t cbs = {.on_recv = s_recv, .on_disconnect = s_disc};
  rmx_conn_set_cbs(c, &cbs, s);
  assert_true(s->n < 16);
  s->conns[s->n++] = c;
  s->accepted++;
}

static void rpc_reverse(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  uint8_t out[256];
  assert_true(len <= sizeof(out));
  for (size_t i = 0; i < len; i++)
    out[i] = ((const uint8_t *)data)[len - 1 - i];
  assert_int_equal(rmx_rpc_reply(req, out, len), 0);
}

static void srv_open_ctx(srv_t *s, rmx_ctx_t *ctx)
{
  char uri[128];
  memset(s, 0, sizeof(*s));
  s->ctx = ctx;
  assert_int_equal(rmx_rpc_register(s->ctx, 42, rpc_reverse, NULL), 0);
  uri_for(uri, sizeof(uri), 0);
  assert_int_equal(rmx_listen(s->ctx, uri, s_accept, s, &s->l), 0);
  assert_int_equal(rmx_listener_uri(s->l, s->uri, sizeof(s->uri)), 0);
  s->port = atoi(strrchr(s->uri, ':') + 1);
}

static void srv_open(srv_t *s, const char *secret, uint32_t connect_timeout_ms)
{
  srv_open_ctx(s, mkctx(secret, connect_timeout_ms));
}

static void srv_close(srv_t *s)
{
  if (s->l)
    rmx_listener_close(s->l);
  int want = s->closed + s->n;
  while (s->n)
    assert_int_equal(rmx_conn_close(s->conns[--s->n], s_closed, s), 0);
  PUMP_UNTIL(s->closed >= want);
  assert_int_equal(rmx_ctx_destroy(s->ctx), 0);
}

/* ---- a client ---- */

typedef struct cl {
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  int connected, status, recvs, bad, disconnects, closed, sent;
  int rpc_done, rpc_status;
  uint8_t rpc_reply[64];
  size_t rpc_len;
  const uint8_t *expect[16];
  size_t expect_len[16];
} cl_t;

static void c_connected(rmx_conn_t *c, int st, void *a)
{
  cl_t *k = a;
  k->connected++;
  k->status = st;
}
static void c_recv(rmx_conn_t *c, const void *d, size_t n, void *a)
{
  cl_t *k = a;
  int i = k->recvs++;
  if (i >= 16 || n != k->expect_len[i] || memcmp(d, k->expect[i], n) != 0)
    k->bad++;
}
static void c_disc(rmx_conn_t *c, int st, void *a) { ((cl_t *)a)->disconnects++; }
static void c_closed(rmx_conn_t *c, void *a) { ((cl_t *)a)->closed++; }
static void c_sent(rmx_conn_t *c, int st, void *a)
{
  assert_int_equal(st, 0);
  ((cl_t *)a)->sent++;
}
static void c_reply(rmx_conn_t *c, int st, const void *d, size_t n, void *a)
{
  cl_t *k = a;
  k->rpc_done++;
  k->rpc_status = st;
  k->rpc_len = n < sizeof(k->rpc_reply) ? n : sizeof(k->rpc_reply);
  memcpy(k->rpc_reply, d, k->rpc_len);
}

/* Connect with this secret to uri and wait for on_connected. */
static void cl_connect(cl_t *k, const char *secret, const char *uri)
{
  memset(k, 0, sizeof(*k));
  k->ctx = mkctx(secret, 0);
  assert_int_equal(rmx_connect(k->ctx, uri, c_connected, k, &k->c), 0);
  rmx_conn_cbs_t cbs = {.on_recv = c_recv, .on_disconnect = c_disc};
  rmx_conn_set_cbs(k->c, &cbs, k);
  PUMP_UNTIL(k->connected);
  assert_int_equal(k->connected, 1);
}

static void cl_close(cl_t *k)
{
  assert_int_equal(rmx_conn_close(k->c, c_closed, k), 0);
  PUMP_UNTIL(k->closed);
  assert_int_equal(rmx_ctx_destroy(k->ctx), 0);
}

/* ------------------------------------------------------------------ */
/* Over the public API, either transport                               */
/* ------------------------------------------------------------------ */

static void same_secret_connects_and_carries_messages_and_rpc(void **state)
{
  srv_t s;
  cl_t k;
  static uint8_t small[100], big[300000]; /* big goes by rendezvous */
  srv_open(&s, SECRET_A, 0);
  cl_connect(&k, SECRET_A, s.uri);
  assert_int_equal(k.status, 0);
  PUMP_UNTIL(s.accepted == 1);
  for (size_t i = 0; i < sizeof(small); i++)
    small[i] = (uint8_t)(i * 7 + 1);
  for (size_t i = 0; i < sizeof(big); i++)
    big[i] = (uint8_t)(i * 13 + 5);
  k.expect[0] = small, k.expect_len[0] = sizeof(small);
  k.expect[1] = big, k.expect_len[1] = sizeof(big);
  k.expect[2] = small, k.expect_len[2] = 1;
  assert_int_equal(rmx_send(k.c, small, sizeof(small), c_sent, &k), 0);
  assert_int_equal(rmx_send(k.c, big, sizeof(big), c_sent, &k), 0);
  assert_int_equal(rmx_send(k.c, small, 1, c_sent, &k), 0);
  PUMP_UNTIL(k.recvs == 3 && k.sent == 3);
  assert_int_equal(k.bad, 0);
  assert_int_equal(s.recvs, 3);
  assert_int_equal(rmx_rpc_call(k.c, 42, "abcdef", 6, 10000, c_reply, &k, NULL), 0);
  PUMP_UNTIL(k.rpc_done);
  assert_int_equal(k.rpc_status, 0);
  assert_int_equal(k.rpc_len, 6);
  assert_memory_equal(k.rpc_reply, "fedcba", 6);
  /* A second connection authenticates on its own (new nonces). */
  cl_t k2;
  cl_connect(&k2, SECRET_A, s.uri);
  assert_int_equal(k2.status, 0);
  PUMP_UNTIL(s.accepted == 2);
  cl_close(&k2);
  cl_close(&k);
  PUMP_UNTIL(s.disconnects == 2);
  assert_int_equal(k.disconnects, 0);
  srv_close(&s);
}

/* A connect that must be refused: EACCES at the client, nothing at the
 * server (no on_accept, so no message could reach it). */
static void refused_case(const char *server_secret, const char *client_secret)
{
  srv_t s;
  cl_t k;
  srv_open(&s, server_secret, 0);
  cl_connect(&k, client_secret, s.uri);
  assert_int_equal(k.status, RMX_EACCES);
  assert_int_equal(rmx_send(k.c, "x", 1, c_sent, &k), RMX_ENOTCONN);
  pump_for(100);
  assert_int_equal(s.accepted, 0);
  assert_int_equal(s.recvs, 0);
  assert_int_equal(k.recvs, 0);
  assert_int_equal(k.disconnects, 0); /* on_connected reported it, once */
  cl_close(&k);
  /* The server carries on: a right client still gets in. */
  if (server_secret) {
    cl_connect(&k, server_secret, s.uri);
    assert_int_equal(k.status, 0);
    PUMP_UNTIL(s.accepted == 1);
    cl_close(&k);
    PUMP_UNTIL(s.disconnects == 1);
  }
  srv_close(&s);
}

static void different_secrets_are_refused(void **state) { refused_case(SECRET_B, SECRET_A); }
static void secret_on_server_only_is_refused(void **state) { refused_case(SECRET_A, NULL); }
static void secret_on_client_only_is_refused(void **state) { refused_case(NULL, SECRET_A); }

/* ------------------------------------------------------------------ */
/* The configuration                                                   */
/* ------------------------------------------------------------------ */

static char tmp_path[64];

static void secret_file(const void *data, size_t len)
{
  snprintf(tmp_path, sizeof(tmp_path), "/tmp/rmx-auth-test-XXXXXX");
  int fd = mkstemp(tmp_path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, data, len), (ssize_t)len);
  close(fd);
  setenv("RMX_AUTH_SECRET_FILE", tmp_path, 1);
}

static int config_from(const void *data, size_t len, rmx_config_t *cfg)
{
  secret_file(data, len);
  int rc = rmx_config_init(cfg);
  unlink(tmp_path);
  unsetenv("RMX_AUTH_SECRET_FILE");
  return rc;
}

static void secret_file_is_read_and_checked(void **state)
{
  rmx_config_t cfg;
  char line[200];
  assert_int_equal(config_from("first line\nsecond\n", 18, &cfg), 0);
  assert_string_equal(cfg.auth_secret, "first line");
  assert_int_equal(config_from("no newline", 10, &cfg), 0);
  assert_string_equal(cfg.auth_secret, "no newline");
  assert_int_equal(config_from("", 0, &cfg), RMX_EINVAL);
  assert_int_equal(config_from("\nsecret on line 2\n", 18, &cfg), RMX_EINVAL);
  assert_int_equal(config_from("nul\0inside\n", 11, &cfg), RMX_EINVAL);
  memset(line, 'x', sizeof(line));
  line[127] = '\n';
  assert_int_equal(config_from(line, 128, &cfg), 0);
  assert_int_equal(strlen(cfg.auth_secret), 127);
  assert_int_equal(config_from(line, 127, &cfg), 0); /* 127 bytes, no newline */
  line[127] = 'x';
  assert_int_equal(config_from(line, 128, &cfg), RMX_EINVAL); /* 128 before any newline */
  assert_int_equal(config_from(line, sizeof(line), &cfg), RMX_EINVAL);
  setenv("RMX_AUTH_SECRET_FILE", "/nonexistent/rmx-secret", 1);
  assert_int_equal(rmx_config_init(&cfg), RMX_EINVAL);
  unsetenv("RMX_AUTH_SECRET_FILE");
  assert_int_equal(rmx_config_init(&cfg), 0);
  assert_string_equal(cfg.auth_secret, ""); /* default: no authentication */

  /* A context configured from the file talks to one given the same secret
   * in the field, and rmx_ctx_create(NULL cfg) reads the file too. */
  srv_t s;
  cl_t k;
  rmx_ctx_t *ctx;
  secret_file(SECRET_A "\n", strlen(SECRET_A) + 1);
  assert_int_equal(rmx_ctx_create(&ctx, &loop, NULL), 0);
  unlink(tmp_path);
  unsetenv("RMX_AUTH_SECRET_FILE");
  srv_open_ctx(&s, ctx);
  cl_connect(&k, SECRET_A, s.uri);
  assert_int_equal(k.status, 0);
  cl_close(&k);
  cl_connect(&k, SECRET_B, s.uri);
  assert_int_equal(k.status, RMX_EACCES);
  cl_close(&k);
  PUMP_UNTIL(s.accepted == 1 && s.disconnects == 1);
  srv_close(&s);

  /* An unterminated field is refused by rmx_ctx_create. */
  assert_int_equal(rmx_config_init(&cfg), 0);
  memset(cfg.auth_secret, 'a', sizeof(cfg.auth_secret));
  assert_int_equal(rmx_ctx_create(&ctx, &loop, &cfg), RMX_EINVAL);
}

/* ------------------------------------------------------------------ */
/* The protocol, from docs/protocol.md                                 */
/* ------------------------------------------------------------------ */

enum { K_HELLO = 1, K_HELLO_ACK, K_REJECT, K_MSG };
enum { F_DATA = 1, F_RTS, F_FIN, F_CREDIT, F_BYE, F_AUTH, F_AUTH_OK };
#define HELLO_LEN 32
#define NONCE_LEN 16
#define PROOF_LEN 32
#define C_HELLO_LEN (HELLO_LEN + NONCE_LEN)   /* 48 */
#define S_HELLO_LEN (C_HELLO_LEN + PROOF_LEN) /* 80 */

static void p16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void p32(uint8_t *p, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static void p64(uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t g16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t g32(const uint8_t *p)
{
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t g64(const uint8_t *p) { return g32(p) | (uint64_t)g32(p + 4) << 32; }

/* A 32-byte hello: eager 8192, depth 64, 1 MiB, rendezvous 4, window 64. */
static void hello_enc(uint8_t *o, uint16_t flags)
{
  p32(o, 0x31584d52u);
  p16(o + 4, 1);
  p16(o + 6, flags);
  p32(o + 8, 8192);
  p32(o + 12, 64);
  p64(o + 16, 1u << 20);
  p32(o + 24, 4);
  p32(o + 28, 64);
}

/* K = BLAKE2b-256("rmx auth key v1" || secret). */
static void derive(const char *secret, uint8_t k[32])
{
  crypto_generichash_state h;
  crypto_generichash_init(&h, NULL, 0, 32);
  crypto_generichash_update(&h, (const uint8_t *)"rmx auth key v1", 15);
  crypto_generichash_update(&h, (const uint8_t *)secret, strlen(secret));
  crypto_generichash_final(&h, k, 32);
}

/* HMAC-SHA-512-256(K, label || C || S), label "rmx auth server" / "client". */
static void proof(const uint8_t k[32], const char *who, const uint8_t *c, const uint8_t *s,
                  uint8_t out[32])
{
  uint8_t m[15 + 2 * C_HELLO_LEN];
  memcpy(m, "rmx auth ", 9);
  memcpy(m + 9, who, 6); /* "server" or "client": 15 bytes, no terminator */
  memcpy(m + 15, c, C_HELLO_LEN);
  memcpy(m + 15 + C_HELLO_LEN, s, C_HELLO_LEN);
  crypto_auth(out, m, sizeof(m), k);
}

/* TCP stream frame: u32 body length, u8 kind, u8 flags, u16 reserved. */
static size_t tframe(uint8_t *o, uint8_t kind, const void *body, uint32_t blen)
{
  p32(o, blen);
  o[4] = kind;
  o[5] = 0;
  p16(o + 6, 0);
  if (blen)
    memcpy(o + 8, body, blen);
  return 8 + blen;
}

/* A TCP MSG carrying one rmx frame: u8 type, u8 flags, u16 credits, u32 length. */
static size_t mframe(uint8_t *o, uint8_t type, uint8_t flags, uint16_t credits, const void *body,
                     uint32_t blen)
{
  uint8_t f[8 + 128];
  if (blen > 128)
    abort();
  f[0] = type;
  f[1] = flags;
  p16(f + 2, credits);
  p32(f + 4, blen);
  if (blen)
    memcpy(f + 8, body, blen);
  return tframe(o, K_MSG, f, 8 + blen);
}

/* ---- raw peers: a blocking socket in a helper thread ---- */

typedef struct raw raw_t;
typedef int (*script_fn)(raw_t *r);

struct raw {
  int fd, lfd; /* lfd: a raw server's listening socket */
  int port;
  pthread_t th;
  script_fn script;
  int mode;
  atomic_int done, step;
  char why[300];
  uint8_t rec[512]; /* bytes recorded from an exchange, to replay */
  uint8_t srv_nonce[NONCE_LEN]; /* the server's, in that exchange */
  size_t reclen;
  int32_t reject; /* a REJECT's status */
  uint64_t rd_addr, rd_key; /* RC_READ_FIRST: a registration at the server */
  uint64_t ms;    /* how long until the server hung up */
};

#define RCHECK(r, cond, ...)                                       \
  do {                                                             \
    if (!(cond)) {                                                 \
      int n_ = snprintf((r)->why, sizeof((r)->why), "line %d: ", __LINE__); \
      snprintf((r)->why + n_, sizeof((r)->why) - (size_t)n_, __VA_ARGS__);  \
      return -1;                                                   \
    }                                                              \
  } while (0)

static int wr_all(int fd, const void *b, size_t n)
{
  const uint8_t *p = b;
  while (n) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0)
      return -1;
    p += k, n -= (size_t)k;
  }
  return 0;
}

static int rd_all(int fd, void *b, size_t n)
{
  uint8_t *p = b;
  while (n) {
    ssize_t k = recv(fd, p, n, 0);
    if (k <= 0)
      return -1;
    p += k, n -= (size_t)k;
  }
  return 0;
}

/* One stream frame: 0, or -1 at EOF, error or timeout. */
static int rd_tframe(int fd, uint8_t *kind, uint8_t *body, uint32_t *blen, size_t cap)
{
  uint8_t h[8];
  if (rd_all(fd, h, 8) != 0)
    return -1;
  *kind = h[4];
  *blen = g32(h);
  if (*blen > cap)
    return -1;
  return rd_all(fd, body, *blen);
}

/* 1 when the other side closes within ms with no byte more, 0 if a byte
 * came, -1 if it stayed open. */
static int wait_eof(int fd, unsigned ms)
{
  struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  uint8_t b;
  ssize_t k = recv(fd, &b, 1, 0);
  if (k == 0 || (k < 0 && errno == ECONNRESET))
    return 1;
  return k > 0 ? 0 : -1;
}

/* Read and drop until the other side closes (1), or ms pass (-1). */
static int drain_eof(int fd, unsigned ms)
{
  uint64_t t0 = now_ms();
  int rc;
  while ((rc = wait_eof(fd, ms)) == 0)
    if (now_ms() - t0 > ms)
      return -1;
  return rc;
}

static void *raw_main(void *a)
{
  raw_t *r = a;
  if (r->script(r) != 0 && !r->why[0])
    snprintf(r->why, sizeof(r->why), "script failed");
  atomic_store(&r->done, 1);
  return NULL;
}

/* Called from helper threads too: no cmocka asserts. */
static int tcp_socket(void)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    abort();
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  struct timeval tv = {.tv_sec = 10};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  return fd;
}

static int raw_dial(int port)
{
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  int fd = tcp_socket();
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void raw_start(raw_t *r, script_fn fn, int mode)
{
  r->script = fn;
  r->mode = mode;
  r->why[0] = '\0';
  atomic_store(&r->done, 0);
  assert_int_equal(pthread_create(&r->th, NULL, raw_main, r), 0);
}

static void raw_join(raw_t *r)
{
  PUMP_UNTIL(atomic_load(&r->done));
  pthread_join(r->th, NULL);
  if (r->why[0])
    fail_msg("raw peer: %s", r->why);
}

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
    n = mframe(buf, F_DATA, 0, 0, "replayed", 8);
    wr_all(fd, buf, n); /* may fail: the server may have hung up already */
    RCHECK(r, rd_tframe(fd, &kind, body, &blen, sizeof(body)) == 0 && kind == K_HELLO_ACK &&
                  blen >= S_HELLO_LEN, "no HELLO_ACK for the replayed hello");
    RCHECK(r, memcmp(body + HELLO_LEN, r->srv_nonce, NONCE_LEN) != 0, "the same server nonce");
    RCHECK(r, wait_eof(fd, 5000) == 1, "the server took a replayed AUTH");
    return 0;
  }
  hello_enc(c, r->mode == RC_NO_FLAG ? 0 : 1);
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
    n = mframe(buf, F_AUTH, 0, 0, pr, PROOF_LEN);
    break;
  case RC_DATA_FIRST:
    n = mframe(buf, F_DATA, 0, 0, "unauthenticated", 15);
    break;
  case RC_RTS_FIRST: {
    uint8_t rts[32];
    p64(rts, 1), p64(rts + 8, 4096), p64(rts + 16, 64), p64(rts + 24, 1);
    n = mframe(buf, F_RTS, 0, 0, rts, 32);
    break;
  }
  case RC_CREDIT_FIRST:
    n = mframe(buf, F_CREDIT, 0, 0, NULL, 0);
    break;
  case RC_READ_FIRST: { /* TCP RD_REQ: id, address, length, key */
    uint8_t rq[32];
    p64(rq, 1), p64(rq + 8, r->rd_addr), p64(rq + 16, 64), p64(rq + 24, r->rd_key);
    n = tframe(buf, 5, rq, 32);
    break;
  }
  case RC_SHORT_AUTH:
    n = mframe(buf, F_AUTH, 0, 0, pr, PROOF_LEN - 1);
    break;
  case RC_LONG_AUTH:
    n = mframe(buf, F_AUTH, 0, 0, pr, PROOF_LEN + 1);
    break;
  case RC_FLAGGED_AUTH:
    n = mframe(buf, F_AUTH, 1, 0, pr, PROOF_LEN);
    break;
  case RC_AUTH_OK:
    n = mframe(buf, F_AUTH_OK, 0, 0, NULL, 0);
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
  RCHECK(r, kind == K_MSG && blen == 8 && body[0] == F_AUTH_OK && body[1] == 0 &&
                g32(body + 4) == 0 && g16(body + 2) <= 1,
         "AUTH_OK: kind %u, %u bytes, type %u", kind, blen, body[0]);
  if (r->mode == RC_TWO_AUTH) {
    RCHECK(r, wait_eof(fd, 5000) == 1, "a second AUTH was taken");
    return 0;
  }
  /* Return AUTH_OK's credit with a message; the server echoes it. */
  n = mframe(buf, F_DATA, 0, 1, "authenticated", 13);
  RCHECK(r, wr_all(fd, buf, n) == 0, "write DATA");
  RCHECK(r, rd_tframe(fd, &kind, body, &blen, sizeof(body)) == 0 && kind == K_MSG &&
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

static void authenticated_raw_client_is_served(void **state)
{
  srv_t s;
  raw_t r = {0};
  srv_open(&s, SECRET_A, 0);
  raw_client(&s, &r, RC_GOOD); /* the page alone is enough to get in */
  PUMP_UNTIL(s.accepted == 1 && s.recvs == 1);
  PUMP_UNTIL(s.disconnects == 1);
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
static void read_before_auth_is_cut_off(void **state)
{
  srv_t s;
  raw_t r = {0};
  static uint8_t secret_page[4096];
  uint8_t blob[RMX_RKEY_MAX];
  size_t len = sizeof(blob);
  rmx_mem_t *m;
  srv_open(&s, SECRET_A, 0);
  memset(secret_page, 0x5a, sizeof(secret_page));
  assert_int_equal(rmx_mem_reg(s.ctx, secret_page, sizeof(secret_page), RMX_MEM_REMOTE_READ, &m),
                   0);
  assert_int_equal(rmx_mem_pack(m, blob, &len), 0);
  r.rd_addr = g64(blob + 8);
  for (unsigned i = 0; i < blob[1]; i++)
    if (blob[24 + 16 * i] == 1) /* the TCP entry (docs/protocol.md) */
      r.rd_key = g64(blob + 32 + 16 * i);
  raw_client(&s, &r, RC_READ_FIRST);
  pump_for(50);
  assert_int_equal(s.accepted, 0);
  rmx_mem_dereg(m);
  srv_close(&s);
}

static void data_before_auth_is_cut_off(void **state) { refused_raw(RC_DATA_FIRST); }
static void rts_before_auth_is_cut_off(void **state) { refused_raw(RC_RTS_FIRST); }
static void credit_before_auth_is_cut_off(void **state) { refused_raw(RC_CREDIT_FIRST); }
static void auth_with_another_key_is_refused(void **state) { refused_raw(RC_WRONG_KEY); }
static void short_auth_is_refused(void **state) { refused_raw(RC_SHORT_AUTH); }
static void long_auth_is_refused(void **state) { refused_raw(RC_LONG_AUTH); }
static void flagged_auth_is_refused(void **state) { refused_raw(RC_FLAGGED_AUTH); }
static void auth_ok_from_a_client_is_refused(void **state) { refused_raw(RC_AUTH_OK); }

static void second_auth_is_a_protocol_error(void **state)
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

static void replayed_exchange_is_refused(void **state)
{
  srv_t s;
  raw_t r = {0};
  srv_open(&s, SECRET_A, 0);
  raw_client(&s, &r, RC_GOOD); /* records its HELLO and AUTH */
  PUMP_UNTIL(s.accepted == 1 && s.recvs == 1 && s.disconnects == 1);
  assert_true(r.reclen == 8 + C_HELLO_LEN + 8 + 8 + PROOF_LEN);
  raw_client(&s, &r, RC_REPLAY); /* the same bytes on a new connection */
  pump_for(50);
  assert_int_equal(s.accepted, 1);
  assert_int_equal(s.recvs, 1);
  srv_close(&s);
}

static void hello_without_nonce_or_flag_is_rejected(void **state)
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

static void silent_peer_is_cut_at_the_deadline(void **state)
{
  srv_t s;
  raw_t r = {0};
  srv_open(&s, SECRET_A, 600);
  raw_client(&s, &r, RC_SILENT);
  assert_true(r.ms >= 400 && r.ms < 5000);
  assert_int_equal(s.accepted, 0);
  srv_close(&s);
}

static void destroy_while_a_peer_authenticates(void **state)
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
  struct timeval tv = {.tv_sec = 10};
  setsockopt(r->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  RCHECK(r, rd_tframe(r->fd, &kind, body, &blen, sizeof(body)) == 0 && kind == K_HELLO &&
                blen == C_HELLO_LEN && (g16(body + 6) & 1), "client HELLO: kind %u, %u bytes",
         kind, blen);
  memcpy(c, body, C_HELLO_LEN);
  hello_enc(s, 1);
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
  RCHECK(r, rd_tframe(r->fd, &kind, body, &blen, sizeof(body)) == 0 && kind == K_MSG &&
                blen == 8 + PROOF_LEN && body[0] == F_AUTH && g16(body + 2) == 0,
         "client AUTH: kind %u, %u bytes, type %u", kind, blen, body[0]);
  derive(SECRET_A, k);
  proof(k, "client", c, s, pr);
  RCHECK(r, crypto_verify_32(pr, body + 8) == 0, "the client's proof does not verify");
  if (r->mode == RS_DATA_FIRST) {
    n = mframe(buf, F_DATA, 0, 0, "before AUTH_OK", 14);
    RCHECK(r, wr_all(r->fd, buf, n) == 0, "write");
    RCHECK(r, wait_eof(r->fd, 5000) == 1, "the client took DATA before AUTH_OK");
    return 0;
  }
  /* RS_REPLAY: finish this one, then replay its hello to the next. */
  n = mframe(buf, F_AUTH_OK, 0, 1, NULL, 0);
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

static void data_before_auth_ok_is_refused(void **state) { raw_server_case(RS_DATA_FIRST); }
static void server_hello_without_proof_is_refused(void **state) { raw_server_case(RS_NO_PROOF); }
static void replayed_server_hello_is_refused(void **state) { raw_server_case(RS_REPLAY); }

int main(int argc, char **argv)
{
  if (harness_args(argc, argv) != 0)
    return 2;
  unsetenv("RMX_AUTH_SECRET_FILE");
  if (sodium_init() < 0)
    return 2;
  const struct CMUnitTest api[] = {
    cmocka_unit_test_setup_teardown(same_secret_connects_and_carries_messages_and_rpc, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(different_secrets_are_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(secret_on_server_only_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(secret_on_client_only_is_refused, setup, teardown),
  };
  const struct CMUnitTest tcp[] = {
    cmocka_unit_test_setup_teardown(secret_file_is_read_and_checked, setup, teardown),
    cmocka_unit_test_setup_teardown(authenticated_raw_client_is_served, setup, teardown),
    cmocka_unit_test_setup_teardown(data_before_auth_is_cut_off, setup, teardown),
    cmocka_unit_test_setup_teardown(read_before_auth_is_cut_off, setup, teardown),
    cmocka_unit_test_setup_teardown(rts_before_auth_is_cut_off, setup, teardown),
    cmocka_unit_test_setup_teardown(credit_before_auth_is_cut_off, setup, teardown),
    cmocka_unit_test_setup_teardown(auth_with_another_key_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(short_auth_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(long_auth_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(flagged_auth_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(auth_ok_from_a_client_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(second_auth_is_a_protocol_error, setup, teardown),
    cmocka_unit_test_setup_teardown(replayed_exchange_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(hello_without_nonce_or_flag_is_rejected, setup, teardown),
    cmocka_unit_test_setup_teardown(silent_peer_is_cut_at_the_deadline, setup, teardown),
    cmocka_unit_test_setup_teardown(destroy_while_a_peer_authenticates, setup, teardown),
    cmocka_unit_test_setup_teardown(data_before_auth_ok_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(server_hello_without_proof_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown(replayed_server_hello_is_refused, setup, teardown),
  };
  int rc = cmocka_run_group_tests_name(scheme, api, NULL, NULL);
  if (strcmp(scheme, "tcp") == 0)
    rc |= cmocka_run_group_tests_name("tcp raw peers", tcp, NULL, NULL);
  return rc;
}
