/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The TCP transport's stream parser, and the core behind it, through the
 * public API only (the parser is transport/tcp/stream.c). One server
 * context listens on 127.0.0.1; each input goes into a fresh plain socket
 * connected to it.
 *
 * fuzz_tcp_stream: byte 0 picks a prefix (none, a valid HELLO, or a valid
 *   HELLO with small limits), so the fuzzer gets past the handshake or
 *   attacks it; the rest is written as it is.
 * fuzz_tcp_session (FUZZ_TCP_SESSION): a valid HELLO (byte 0 picks which),
 *   then the input is a list of frames, each u8 kind, u16 body length,
 *   body; the harness writes their stream headers. The body of an rmx
 *   frame (kind 16 and up) starts with the 3 bytes its stream header
 *   carries: the frame's flags and credits. In a body, the 8-byte
 *   words (at multiples of 8) "@KEY@@@@" and "@ADR" + i32 offset become the
 *   key and the address (plus offset) of a real registration, so remote
 *   reads, writes and atomics reach memory ASan watches.
 *
 * The server echoes small messages, answers RPC 1 at once and holds RPC 2
 * until it closes the connection, and closes every connection it accepted. The
 * client shuts its write side after the input, reads and drops what the
 * server sends, and waits for the server to hang up: a server that does not
 * within HANG_NS (FUZZ_HANG_S overrides) is a bug, and so is anything left
 * open after. FUZZ_LOG=1 turns the server's log on, to see why it refused.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "rmx_int.h"
#include "conn/hello.h"


enum { TF_HELLO = 1, TF_FRAME = 16 };
#define HANG_NS (5ull * 1000 * 1000 * 1000)
#define REGION 4096
#define MAX_OPEN 8
#define MAX_HELD 32

static struct server {
  rmx_ctx_t *ctx;
  uv_loop_t *loop;
  rmx_listener_t *l;
  struct sockaddr_in sa;
  rmx_conn_t *open[MAX_OPEN]; /* accepted, not yet closed by us */
  int nopen, closing;         /* closing: rmx_conn_close called, on_closed not yet */
  rmx_rpc_req_t *held[MAX_HELD];
  int nheld;
  uint8_t *region; /* registered with every remote right */
  rmx_mem_t *mem;
  uint64_t key;
  uint64_t hang_ns;
  int verbose;
} S;

static void on_closed(rmx_conn_t *c, void *arg) { S.closing--; }

static void close_conn(rmx_conn_t *c)
{
  for (int i = 0; i < S.nopen; i++)
    if (S.open[i] == c) {
      S.open[i] = S.open[--S.nopen];
      FUZZ_CHECK(rmx_conn_close(c, on_closed, NULL) == 0);
      S.closing++;
      /* A request keeps its connection until answered: answer the held
       * ones now, after the close (that just releases them). */
      for (int k = 0; k < S.nheld; k++)
        rmx_rpc_reply(S.held[k], "late", 4);
      S.nheld = 0;
      return;
    }
  FUZZ_CHECK(!"close of a connection that is not open");
}

static void on_disconnect(rmx_conn_t *c, int status, void *arg) { close_conn(c); }

static void on_sent(rmx_conn_t *c, int status, void *arg) {}

static void on_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  if (len <= 200) /* eager at any peer's limits, so copied */
    rmx_send(c, data, len, on_sent, NULL);
}

static void on_imm(rmx_conn_t *c, uint32_t imm, size_t len, void *arg) {}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  static const rmx_conn_cbs_t cbs = {.on_recv = on_recv, .on_disconnect = on_disconnect,
                                     .on_imm = on_imm};
  rmx_conn_set_cbs(c, &cbs, NULL);
  if (S.nopen == MAX_OPEN) { /* one client per input: cannot happen */
    FUZZ_CHECK(rmx_conn_close(c, on_closed, NULL) == 0);
    S.closing++;
    return;
  }
  S.open[S.nopen++] = c;
}

static void rpc_echo(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  if (len <= 200)
    rmx_rpc_reply(req, data, len);
  else
    rmx_rpc_reply_error(req, RMX_EMSGSIZE);
}

static void rpc_hold(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  if (S.nheld < MAX_HELD)
    S.held[S.nheld++] = req;
  else
    rmx_rpc_reply_error(req, RMX_EAGAIN);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  rmx_config_t cfg;
  char uri[128];
  signal(SIGPIPE, SIG_IGN);
  FUZZ_CHECK(rmx_config_init(&cfg) == 0);
  /* small limits, so credits, eager and rendezvous bounds are near */
  cfg.eager_size = 1024;
  cfg.rx_depth = 8;
  cfg.max_msg_size = 64 << 10;
  cfg.rndv_depth = 2;
  cfg.rpc_max_inflight = 16;
  cfg.connect_timeout_ms = 2000;
  S.verbose = getenv("FUZZ_LOG") != NULL;
  cfg.log_level = S.verbose ? RMX_LOG_DEBUG : RMX_LOG_NONE;
  S.hang_ns = getenv("FUZZ_HANG_S") ? strtoull(getenv("FUZZ_HANG_S"), NULL, 10) * 1000000000ull
                                    : HANG_NS;
  FUZZ_CHECK(rmx_ctx_create(&S.ctx, NULL, &cfg) == 0);
  S.loop = rmx_ctx_loop(S.ctx);
  FUZZ_CHECK(rmx_listen(S.ctx, "tcp://127.0.0.1:0", on_accept, NULL, &S.l) == 0);
  FUZZ_CHECK(rmx_listener_uri(S.l, uri, sizeof(uri)) == 0);
  S.sa.sin_family = AF_INET;
  S.sa.sin_port = htons((uint16_t)atoi(strrchr(uri, ':') + 1));
  inet_pton(AF_INET, "127.0.0.1", &S.sa.sin_addr);
  FUZZ_CHECK(rmx_rpc_register(S.ctx, 1, rpc_echo, NULL) == 0);
  FUZZ_CHECK(rmx_rpc_register(S.ctx, 2, rpc_hold, NULL) == 0);

  /* A registration a peer may read, write and run atomics on; its key as a
   * peer would get it, from the packed form. */
  uint8_t blob[RMX_RKEY_MAX];
  size_t blen = sizeof(blob);
  rmx_rkey_t k;
  S.region = calloc(1, REGION);
  FUZZ_CHECK(S.region);
  FUZZ_CHECK(rmx_mem_reg(S.ctx, S.region, REGION,
                         RMX_MEM_LOCAL | RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE |
                             RMX_MEM_REMOTE_ATOMIC,
                         &S.mem) == 0);
  FUZZ_CHECK(rmx_mem_pack(S.mem, blob, &blen) == 0);
  FUZZ_CHECK(rmx__rkey_decode(blob, blen, fuzz_tcp_wire_id(), &k) == 0);
  S.key = k.key;
  return 0;
}

/* ---- building what the client writes ---- */

typedef struct out {
  uint8_t *p;
  size_t len, cap;
} out_t;

static void put(out_t *o, const void *d, size_t n)
{
  if (o->len + n > o->cap) {
    o->cap = (o->len + n) * 2 + 64;
    o->p = realloc(o->p, o->cap);
    FUZZ_CHECK(o->p);
  }
  if (n)
    memcpy(o->p + o->len, d, n);
  o->len += n;
}

static void put_frame_hdr(out_t *o, uint8_t kind, uint8_t flags, const uint8_t res[2],
                          uint32_t blen)
{
  uint8_t h[8] = {0};
  rmx_put32(h, blen);
  h[4] = kind;
  h[5] = flags;
  memcpy(h + 6, res, 2);
  put(o, h, sizeof(h));
}

/* A valid HELLO frame: the server's own hello (so every field the core
 * checks is sane), with the limits changed; small: at their minimum. */
static void put_hello(out_t *o, int small)
{
  uint8_t b[RMX_WIRE_HELLO_LEN];
  rmx_wire_hello_t h;
  rmx__hello_local(S.ctx, b);
  FUZZ_CHECK(rmx__wire_hello_decode(b, sizeof(b), &h) == 0);
  h.eager_size = small ? 256 : 8192;
  h.rx_depth = small ? 4 : 64;
  h.max_msg = small ? 4096 : 1 << 20;
  rmx__wire_hello_encode(&h, b);
  put_frame_hdr(o, TF_HELLO, 0, (const uint8_t[2]){0}, sizeof(b));
  put(o, b, sizeof(b));
}

#ifdef FUZZ_TCP_SESSION
static void build(out_t *o, const uint8_t *data, size_t size)
{
  if (size < 1)
    return;
  put_hello(o, data[0] & 1);
  size_t i = 1;
  while (i + 3 <= size) {
    uint8_t kind = data[i];
    size_t blen = rmx_get16(data + i + 1);
    i += 3;
    if (blen > size - i)
      blen = size - i;
    uint8_t flags = 0, res[2] = {0};
    if (kind >= TF_FRAME && blen >= 3) { /* an rmx frame's flags and credits */
      flags = data[i];
      memcpy(res, data + i + 1, 2);
      i += 3, blen -= 3;
    }
    put_frame_hdr(o, kind, flags, res, (uint32_t)blen);
    size_t at = o->len;
    put(o, data + i, blen);
    i += blen;
    for (size_t w = 0; w + 8 <= blen; w += 8) {
      uint8_t *p = o->p + at + w;
      if (memcmp(p, "@KEY@@@@", 8) == 0)
        rmx_put64(p, S.key);
      else if (memcmp(p, "@ADR", 4) == 0)
        rmx_put64(p, (uint64_t)(uintptr_t)S.region + (uint64_t)(int64_t)(int32_t)rmx_get32(p + 4));
    }
  }
}
#else
static void build(out_t *o, const uint8_t *data, size_t size)
{
  if (size < 1)
    return;
  switch (data[0] % 3) {
  case 1:
    put_hello(o, 0);
    break;
  case 2:
    put_hello(o, 1);
    break;
  }
  put(o, data + 1, size - 1);
}
#endif

/* ---- one input ---- */

static int idle_wait(int fd)
{
  struct pollfd pf[2] = {{.fd = fd, .events = POLLIN},
                         {.fd = uv_backend_fd(S.loop), .events = POLLIN}};
  return poll(pf, 2, 1);
}

/* Thousands of connections a second. Nonblocking, so libFuzzer's timer
 * signals interrupt nothing; closed with a reset where the server hung up
 * first, so the server's side leaves no TIME_WAIT behind to hold up a later
 * connection from the same port. */
static int client_connect(void)
{
  struct linger lg = {.l_onoff = 1, .l_linger = 0};
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  FUZZ_CHECK(fd >= 0);
  FUZZ_CHECK(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
  int rc = connect(fd, (struct sockaddr *)&S.sa, sizeof(S.sa)), err = rc ? errno : 0;
  uint64_t start = uv_hrtime();
  while (err == EINPROGRESS || err == EINTR) {
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    if (poll(&pf, 1, 100) > 0) {
      socklen_t len = sizeof(err);
      FUZZ_CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0);
    } else if (uv_hrtime() - start > S.hang_ns) {
      err = ETIMEDOUT;
    }
  }
  if (err) {
    fprintf(stderr, "fuzz_tcp: connect: %s\n", strerror(err));
    abort();
  }
  return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  out_t o = {0};
  build(&o, data, size);

  int fd = client_connect();

  size_t off = 0;
  int wr_done = 0, eof = 0;
  uint64_t start = uv_hrtime();
  static uint8_t drop[1 << 16];
  for (;;) {
    uv_run(S.loop, UV_RUN_NOWAIT);
    int moved = 0;
    if (!wr_done) {
      ssize_t n = off < o.len ? send(fd, o.p + off, o.len - off, MSG_NOSIGNAL) : 0;
      if (n > 0) {
        off += (size_t)n;
        moved = 1;
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        wr_done = 1; /* the server hung up first */
      }
      if (off == o.len && !wr_done) {
        shutdown(fd, SHUT_WR);
        wr_done = 1;
      }
    }
    while (!eof) {
      ssize_t n = recv(fd, drop, sizeof(drop), 0);
      if (n > 0) {
        moved = 1;
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        eof = 1;
      break;
    }
    if (eof && wr_done && S.nopen == 0 && S.closing == 0)
      break;
    if (uv_hrtime() - start > S.hang_ns) {
      fprintf(stderr, "fuzz_tcp: the server did not finish the connection (eof %d, open %d, "
                      "closing %d, wrote %zu of %zu)\n", eof, S.nopen, S.closing, off, o.len);
      abort();
    }
    if (!moved)
      idle_wait(fd);
  }
  close(fd);
  free(o.p);
  if (S.verbose)
    fprintf(stderr, "fuzz_tcp: done after %.3f s\n", (double)(uv_hrtime() - start) / 1e9);
  FUZZ_CHECK(S.nheld == 0);
  /* let deferred frees and handle closes run */
  for (int i = 0; i < 4; i++)
    uv_run(S.loop, UV_RUN_NOWAIT);
  return 0;
}
