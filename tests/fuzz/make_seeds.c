/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Writes the seed corpus of every fuzz target: a few small valid inputs and
 * near misses each, built with the library's own encoders so they stay in
 * step with the wire format.
 *   fuzz_make_seeds tests/fuzz/corpus
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "rmx_int.h"
#include "conn/hello.h"
#include "../../transport/shm/seg.h"

static const char *root;

static void seed(const char *target, const char *name, const void *p, size_t n)
{
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", root, target);
  if (mkdir(path, 0755) != 0 && errno != EEXIST) {
    perror(path);
    exit(1);
  }
  snprintf(path, sizeof(path), "%s/%s/%s", root, target, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
    perror(path);
    exit(1);
  }
}

/* A byte buffer to build inputs in. */
typedef struct buf {
  uint8_t p[2048];
  size_t n;
} buf_t;

static void put(buf_t *b, const void *d, size_t n)
{
  if (n)
    memcpy(b->p + b->n, d, n);
  b->n += n;
}
static void put8(buf_t *b, uint8_t v) { put(b, &v, 1); }
static void put16(buf_t *b, uint16_t v) { rmx_put16(b->p + b->n, v); b->n += 2; }
static void put32(buf_t *b, uint32_t v) { rmx_put32(b->p + b->n, v); b->n += 4; }
static void put64(buf_t *b, uint64_t v) { rmx_put64(b->p + b->n, v); b->n += 8; }

/* ---- core frames ---- */

static size_t data_frame(uint8_t *f, const char *payload, uint8_t rpc_flag, uint32_t handler)
{
  size_t ext = rpc_flag ? RMX_WIRE_RPC_LEN : 0, plen = strlen(payload);
  size_t n = rmx__wire_hdr_encode(f, RMX_FR_DATA, 0, (uint32_t)plen);
  memcpy(f + n + ext, payload, plen);
  if (rpc_flag) {
    rmx_wire_rpc_t x = {.call_id = 1, .handler = handler, .status = 0};
    rmx__wire_rpc_add(f, rpc_flag, f + n, &x);
  }
  return n + ext + plen;
}

/* A transfer request's notification: DATA flagged NOTIFY, no extension. */
static size_t notify_frame(uint8_t *f, const char *payload)
{
  size_t n = data_frame(f, payload, 0, 0);
  rmx__wire_notify_mark(f);
  return n;
}

static size_t rts_frame(uint8_t *f, uint64_t size, uint8_t rpc_flag)
{
  rmx_wire_rts_t r = {.id = 1, .addr = 0x7f0000001000, .size = size, .rkey = 0x1234};
  size_t n = rmx__wire_rts_encode(f, 0, &r);
  if (rpc_flag) {
    rmx_wire_rpc_t x = {.call_id = 2, .handler = 1};
    rmx__wire_rpc_add(f, rpc_flag, f + n, &x);
    n += RMX_WIRE_RPC_LEN;
  }
  return n;
}

static void frames(void)
{
  uint8_t f[256];
  size_t n;
  n = rmx__wire_hdr_encode(f, RMX_FR_DATA, 0, 0);
  seed("fuzz_frame", "data-empty", f, n);
  seed("fuzz_frame", "data", f, data_frame(f, "hello", 0, 0));
  seed("fuzz_frame", "data-rpc-req", f, data_frame(f, "ping", RMX_FF_RPC_REQ, 1));
  seed("fuzz_frame", "data-rpc-rep", f, data_frame(f, "pong", RMX_FF_RPC_REP, 0));
  seed("fuzz_frame", "data-notify", f, notify_frame(f, "layer 3 in place"));
  seed("fuzz_frame", "rts", f, rts_frame(f, 100000, 0));
  seed("fuzz_frame", "rts-rpc", f, rts_frame(f, 100000, RMX_FF_RPC_REQ));
  rmx_wire_fin_t fin = {.id = 1, .status = RMX_EACCES};
  seed("fuzz_frame", "fin", f, rmx__wire_fin_encode(f, 2, &fin));
  seed("fuzz_frame", "credit", f, rmx__wire_hdr_encode(f, RMX_FR_CREDIT, 3, 0));
  seed("fuzz_frame", "bye", f, rmx__wire_hdr_encode(f, RMX_FR_BYE, 0, 0));
  /* near misses: a flag on a control frame, a wrong length, a short one */
  n = rmx__wire_hdr_encode(f, RMX_FR_CREDIT, 3, 0);
  f[1] = RMX_FF_RPC_REQ;
  seed("fuzz_frame", "credit-flagged", f, n);
  n = rts_frame(f, 1, 0);
  seed("fuzz_frame", "rts-short", f, n - 1);
  seed("fuzz_frame", "header-short", f, 5);
}

/* ---- hello ---- */

/* A hello as this build's core sends it, with the limits changed. */
static rmx_ctx_t *ctx;

static void hello_bytes(uint8_t out[RMX_WIRE_HELLO_LEN], uint16_t version, uint32_t eager,
                        uint32_t depth)
{
  rmx_wire_hello_t h;
  rmx__hello_local(ctx, out);
  rmx__wire_hello_decode(out, RMX_WIRE_HELLO_LEN, &h);
  h.version = version;
  h.eager_size = eager;
  h.rx_depth = depth;
  h.max_msg = 1 << 20;
  rmx__wire_hello_encode(&h, out);
}

static void hellos(void)
{
  uint8_t h[RMX_WIRE_HELLO_LEN + 8] = {0};
  hello_bytes(h, RMX_WIRE_VERSION_MIN, 8192, 64);
  seed("fuzz_hello", "valid", h, RMX_WIRE_HELLO_LEN);
  seed("fuzz_hello", "longer", h, sizeof(h));
  rmx__hello_range_local(h + RMX_WIRE_HELLO_LEN); /* the range after it (version 5) */
  seed("fuzz_hello", "ranged", h, sizeof(h));
  memset(h + RMX_WIRE_HELLO_LEN, 0, 8);
  seed("fuzz_hello", "short", h, RMX_WIRE_HELLO_LEN - 1);
  seed("fuzz_hello", "magic-version-only", h, 6);
  hello_bytes(h, RMX_WIRE_VERSION + 1, 8192, 64);
  seed("fuzz_hello", "next-version", h, RMX_WIRE_HELLO_LEN);
  h[0] ^= 0x20;
  seed("fuzz_hello", "bad-magic", h, RMX_WIRE_HELLO_LEN);
  /* a rail's hello (flag RAIL, docs/protocol.md "Rails"): the token follows
   * the 32 bytes, or the nonce with AUTH */
  uint8_t r[RMX_WIRE_HELLO_LEN + 16 + 8] = {0};
  hello_bytes(r, RMX_WIRE_VERSION, 8192, 64);
  rmx_put16(r + 6, RMX_HELLO_F_RAIL);
  rmx_put64(r + RMX_WIRE_HELLO_LEN, 0x0123456789abcdefull);
  seed("fuzz_hello", "rail-token", r, RMX_WIRE_HELLO_LEN + 8);
  seed("fuzz_hello", "rail-no-token", r, RMX_WIRE_HELLO_LEN);
  rmx_put64(r + RMX_WIRE_HELLO_LEN, 0);
  seed("fuzz_hello", "rail-token-0", r, RMX_WIRE_HELLO_LEN + 8);
  rmx_put16(r + 6, RMX_HELLO_F_RAIL | RMX_HELLO_F_AUTH);
  memset(r + RMX_WIRE_HELLO_LEN, 0x5a, 16); /* the nonce */
  rmx_put64(r + RMX_WIRE_HELLO_LEN + 16, 0xfedcba9876543210ull);
  seed("fuzz_hello", "rail-auth-token", r, sizeof(r));
  rmx_put16(r + 6, 0x4 | RMX_HELLO_F_RAIL);
  seed("fuzz_hello", "rail-unknown-flag", r, RMX_WIRE_HELLO_LEN + 8);
}

/* ---- packed remote keys (input: u8 wire id | 0x80 to have it sealed, blob) ---- */

static void rkey_blob(buf_t *b, uint8_t sel, uint8_t version, uint16_t access, uint64_t base,
                      uint64_t len, int n)
{
  put8(b, sel);
  put8(b, version);
  put8(b, (uint8_t)n);
  put16(b, access);
  put32(b, 0); /* CRC: the harness seals it */
  put64(b, base);
  put64(b, len);
  for (int i = 0; i < n; i++) {
    put8(b, (uint8_t)(i + 1));
    for (int k = 0; k < 7; k++)
      put8(b, 0);
    put64(b, 0x1111111100000001ull * (uint64_t)(i + 1));
  }
}

/* Entries given as (transport, lane) pairs: rmx_mem_pack_for's layout with
 * a key per rail (docs/protocol.md "Remote keys"). */
static void rkey_lanes(buf_t *b, uint8_t sel, const uint8_t (*tl)[2], int n)
{
  put8(b, sel);
  put8(b, 2);
  put8(b, (uint8_t)n);
  put16(b, 6);
  put32(b, 0); /* CRC: the harness seals it */
  put64(b, 0x10000);
  put64(b, 1 << 20);
  for (int i = 0; i < n; i++) {
    put8(b, tl[i][0]);
    put8(b, tl[i][1]);
    for (int k = 0; k < 6; k++)
      put8(b, 0);
    put64(b, 0x2222222200000001ull * (uint64_t)(i + 1));
  }
}

static void no_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg) {}

static void rkeys(void)
{
  /* a real one, from rmx_mem_pack over TCP, as an application sends it */
  rmx_listener_t *l;
  rmx_mem_t *m;
  static uint8_t region[4096];
  buf_t b = {.n = 1};
  size_t len = RMX_RKEY_MAX;
  /* the TCP transport comes up with the first listener */
  if (rmx_listen(ctx, "tcp://127.0.0.1:0", no_accept, NULL, &l) ||
      rmx_mem_reg(ctx, region, sizeof(region), RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE, &m) ||
      rmx_mem_pack(m, b.p + 1, &len)) {
    fprintf(stderr, "make_seeds: cannot pack a key\n");
    exit(1);
  }
  b.p[0] = fuzz_tcp_wire_id();
  seed("fuzz_rkey", "packed-tcp", b.p, 1 + len);
  b.p[0] = 2; /* the same, asked for the other transport */
  seed("fuzz_rkey", "packed-other-transport", b.p, 1 + len);
  b.p[1 + 20] ^= 1; /* damaged */
  b.p[0] = fuzz_tcp_wire_id();
  seed("fuzz_rkey", "packed-damaged", b.p, 1 + len);
  rmx_mem_dereg(m);
  rmx_listener_close(l);

  b.n = 0;
  rkey_blob(&b, 0x80 | 2, 2, 15, 0x10000, 4096, 2);
  seed("fuzz_rkey", "two-transports", b.p, b.n);
  b.n = 0;
  rkey_blob(&b, 0x80 | 1, 2, 2, UINT64_MAX - 10, 4096, 1);
  seed("fuzz_rkey", "wraps", b.p, b.n);
  b.n = 0;
  rkey_blob(&b, 0x80 | 1, 1, 2, 0x10000, 4096, 1);
  seed("fuzz_rkey", "version-1", b.p, b.n);
  b.n = 0;
  rkey_blob(&b, 0x80 | 1, 2, 0x12, 0x10000, 4096, 1);
  seed("fuzz_rkey", "bad-access", b.p, b.n);

  /* keys per rail: lane entries */
  static const uint8_t lanes[][2] = {{1, 0}, {1, 1}, {1, 7}, {2, 0}, {2, 3}};
  b.n = 0;
  rkey_lanes(&b, 0x80 | 1, lanes, 5);
  seed("fuzz_rkey", "lanes", b.p, b.n);
  static const uint8_t full[][2] = {{1, 0}, {1, 1}, {1, 2}, {1, 3}, {1, 4}, {1, 5}, {1, 6},
                                    {1, 7}};
  b.n = 0;
  rkey_lanes(&b, 0x80 | 1, full, 8);
  seed("fuzz_rkey", "lanes-all-eight", b.p, b.n);
  static const uint8_t twice[][2] = {{1, 0}, {1, 2}, {1, 2}};
  b.n = 0;
  rkey_lanes(&b, 0x80 | 1, twice, 3);
  seed("fuzz_rkey", "lane-repeated", b.p, b.n);
  static const uint8_t over[][2] = {{1, 0}, {1, 8}};
  b.n = 0;
  rkey_lanes(&b, 0x80 | 1, over, 2);
  seed("fuzz_rkey", "lane-8", b.p, b.n);
  static const uint8_t no0[][2] = {{1, 1}, {2, 0}};
  b.n = 0;
  rkey_lanes(&b, 0x80 | 1, no0, 2);
  seed("fuzz_rkey", "lane-0-missing", b.p, b.n);
}

/* ---- URIs ---- */

static void uris(void)
{
  static const char *const u[] = {
    "tcp://127.0.0.1:7471", "rdma://[fe80::1]:1", "auto://host", "tcp://[::1]",
    "tcp://h:65536", "tcp://h:", "udp://h:1", "tcp://a]b:1", "tcp://[::1:1",
  };
  char name[16];
  for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++) {
    snprintf(name, sizeof(name), "uri-%zu", i);
    seed("fuzz_uri", name, u[i], strlen(u[i]));
  }
}

/* ---- TCP stream and session ---- */

enum { TF_HELLO = 1, TF_HELLO_ACK, TF_REJECT, TF_RD_REQ = 5, TF_RD_RESP, TF_WR_REQ,
       TF_WR_RESP, TF_AT_REQ, TF_AT_RESP, TF_FRAME = 16 };

/* The stream form: u32 body length, u8 kind, u8 flags, u16 reserved, body. */
static void tf(buf_t *b, uint8_t kind, const void *body, uint32_t blen)
{
  put32(b, blen);
  put8(b, kind);
  put8(b, 0);
  put16(b, 0);
  put(b, body, blen);
}

/* An rmx frame the core encoded (n bytes, its header first) in the stream
 * form: its type, flags and credits in the stream header. */
static void tf_rmx(buf_t *b, const uint8_t *f, size_t n)
{
  put32(b, (uint32_t)(n - 8));
  put8(b, (uint8_t)(TF_FRAME + f[0]));
  put(b, f + 1, 3);
  put(b, f + 8, n - 8);
}

static void streams(void)
{
  uint8_t h[RMX_WIRE_HELLO_LEN], f[256];
  buf_t b = {.n = 0};
  /* mode 0: the input is the whole stream, its HELLO included */
  put8(&b, 0);
  hello_bytes(h, RMX_WIRE_VERSION, 8192, 64);
  tf(&b, TF_HELLO, h, sizeof(h));
  tf_rmx(&b, f, data_frame(f, "hi", 0, 0));
  seed("fuzz_tcp_stream", "raw-hello-msg", b.p, b.n);
  b.n = 1;
  hello_bytes(h, RMX_WIRE_VERSION + 1, 8192, 64);
  tf(&b, TF_HELLO, h, sizeof(h));
  seed("fuzz_tcp_stream", "raw-hello-next-version", b.p, b.n);
  b.n = 1;
  hello_bytes(h, RMX_WIRE_VERSION, 16, 1);
  tf(&b, TF_HELLO, h, sizeof(h));
  seed("fuzz_tcp_stream", "raw-hello-bad-limits", b.p, b.n);
  b.n = 1;
  put(&b, "GET / HTTP/1.1\r\n\r\n", 18);
  seed("fuzz_tcp_stream", "raw-http", b.p, b.n);
  /* mode 1 and 2: a HELLO goes first, the input follows it */
  b.n = 0;
  put8(&b, 1);
  tf_rmx(&b, f, data_frame(f, "hello", 0, 0));
  tf_rmx(&b, f, data_frame(f, "ping", RMX_FF_RPC_REQ, 1));
  tf_rmx(&b, f, rmx__wire_hdr_encode(f, RMX_FR_BYE, 0, 0));
  seed("fuzz_tcp_stream", "hello-msgs-bye", b.p, b.n);
  b.n = 0;
  put8(&b, 2);
  tf_rmx(&b, f, rts_frame(f, 3000, 0));
  uint8_t resp[12 + 16] = {0};
  rmx_put64(resp, 1);
  tf(&b, TF_RD_RESP, resp, 12); /* of the wrong length */
  seed("fuzz_tcp_stream", "small-hello-rts", b.p, b.n);
  b.n = 0;
  put8(&b, 1);
  uint8_t rd[32] = {0};
  rmx_put64(rd + 16, 64);
  tf(&b, TF_RD_REQ, rd, sizeof(rd));
  tf(&b, 200, NULL, 0);
  seed("fuzz_tcp_stream", "hello-rdreq-unknown", b.p, b.n);
}

/* Session inputs: u8 hello choice, then frames as u8 kind, u16 length, body. */
static void sframe(buf_t *b, uint8_t kind, const void *body, uint16_t blen)
{
  put8(b, kind);
  put16(b, blen);
  put(b, body, blen);
}

/* An rmx frame in a session: kind TF_FRAME + type, then flags, credits, body. */
static void sframe_rmx(buf_t *b, const uint8_t *f, size_t n)
{
  put8(b, (uint8_t)(TF_FRAME + f[0]));
  put16(b, (uint16_t)(n - 8 + 3));
  put(b, f + 1, 3);
  put(b, f + 8, n - 8);
}

static void put_marker_addr(uint8_t *p, int32_t off)
{
  memcpy(p, "@ADR", 4);
  rmx_put32(p + 4, (uint32_t)off);
}

static void sessions(void)
{
  uint8_t f[256];
  buf_t b = {.n = 0};
  put8(&b, 0);
  sframe_rmx(&b, f, data_frame(f, "hello", 0, 0));
  sframe_rmx(&b, f, data_frame(f, "echo me", RMX_FF_RPC_REQ, 1));
  sframe_rmx(&b, f, data_frame(f, "hold me", RMX_FF_RPC_REQ, 2));
  sframe_rmx(&b, f, data_frame(f, "nobody", RMX_FF_RPC_REQ, 9));
  sframe_rmx(&b, f, rmx__wire_hdr_encode(f, RMX_FR_CREDIT, 1, 0));
  seed("fuzz_tcp_session", "msgs-rpc", b.p, b.n);

  /* notifications between messages (kept: the harness sets no on_notify) */
  b.n = 0;
  put8(&b, 0);
  sframe_rmx(&b, f, data_frame(f, "before", 0, 0));
  sframe_rmx(&b, f, notify_frame(f, "blocks 0..127 in place"));
  sframe_rmx(&b, f, notify_frame(f, ""));
  sframe_rmx(&b, f, data_frame(f, "after", 0, 0));
  seed("fuzz_tcp_session", "notify", b.p, b.n);

  /* a rendezvous: the server reads 100 bytes from us, read id 1 */
  b.n = 0;
  put8(&b, 1);
  sframe_rmx(&b, f, rts_frame(f, 1500, 0));
  uint8_t resp[12 + 1500] = {0};
  rmx_put64(resp, 1);
  memset(resp + 12, 'x', 1500);
  sframe(&b, TF_RD_RESP, resp, sizeof(resp));
  seed("fuzz_tcp_session", "rts-read", b.p, b.n);

  /* one-sided: read, write (plain and immediate), atomics, on the real region */
  b.n = 0;
  put8(&b, 0);
  uint8_t rd[32] = {0};
  rmx_put64(rd, 1);
  put_marker_addr(rd + 8, 16);
  rmx_put64(rd + 16, 64);
  memcpy(rd + 24, "@KEY@@@@", 8);
  sframe(&b, TF_RD_REQ, rd, sizeof(rd));
  uint8_t wr[40 + 32] = {0};
  rmx_put64(wr, 2);
  put_marker_addr(wr + 8, 4064);
  rmx_put64(wr + 16, 32);
  memcpy(wr + 24, "@KEY@@@@", 8);
  memset(wr + 40, 'w', 32);
  sframe(&b, TF_WR_REQ, wr, sizeof(wr));
  rmx_put32(wr + 32, 1); /* with an immediate */
  rmx_put32(wr + 36, 0xabcd);
  sframe(&b, TF_WR_REQ, wr, sizeof(wr));
  uint8_t at[48] = {0};
  rmx_put64(at, 3);
  put_marker_addr(at + 8, 8);
  memcpy(at + 16, "@KEY@@@@", 8);
  rmx_put32(at + 24, 0);
  rmx_put64(at + 32, 5);
  sframe(&b, TF_AT_REQ, at, sizeof(at));
  rmx_put32(at + 24, 1);
  rmx_put64(at + 40, 9);
  sframe(&b, TF_AT_REQ, at, sizeof(at));
  seed("fuzz_tcp_session", "one-sided", b.p, b.n);

  /* near misses: past the region's end, misaligned atomic, unknown key */
  b.n = 0;
  put8(&b, 1);
  put_marker_addr(rd + 8, 4090);
  sframe(&b, TF_RD_REQ, rd, sizeof(rd));
  put_marker_addr(at + 8, 4);
  sframe(&b, TF_AT_REQ, at, sizeof(at));
  memset(wr + 24, 0x77, 8);
  sframe(&b, TF_WR_REQ, wr, sizeof(wr));
  seed("fuzz_tcp_session", "refused", b.p, b.n);
}

/* ---- core programs (see fuzz_core.c: u8 hello, then steps) ---- */

/* Transfer requests (fuzz_core_xfer.c): the hello byte has bit 7 set, the
 * next byte sets io_max, the peer's window and on_notify; steps 13..19. */
static void xfer_programs(void)
{
  /* three entries, two merged, split at an io_max of 1000; its notification after the parts */
  static const uint8_t xfer_write_notify[] = {
    0x85, 0x29, 0x0d, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x02, 0xd0, 0x07, 0x03, 0x00, 0x00, 0x11,
    0x63, 0xff, 0x0e, 0x00, 0x01, 0x0a, 0x03, 0x01, 0x03, 0x01, 0x03, 0x01, 0x03, 0x01, 0x03, 0x01,
    0x03, 0x01, 0x03, 0x01, 0x02, 0x00, 0x00, 0x02, 0x00, 0x00, 0x06, 0x12, 0x00, 0x01, 0x14, 0x00,
    0x11, 0x00, 0x01, 0x06
  };
  /* a read refused at its second part; a notification kept and taken; a close mid-request */
  static const uint8_t xfer_read_refused[] = {
    0x81, 0x02, 0x0d, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x03, 0x10, 0x00, 0x01, 0x32, 0xff, 0x0e,
    0x01, 0x00, 0x03, 0x01, 0x03, 0x00, 0x03, 0x01, 0x06, 0x00, 0x12, 0x00, 0x02, 0x0a, 0x11, 0x01,
    0x01, 0x10, 0x01, 0x0d, 0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0xff, 0x0e, 0x02,
    0x00, 0x03, 0x01, 0x0a, 0x03, 0x01, 0x06
  };
  /* a notification of 0 bytes is still a notification */
  static const uint8_t xfer_empty_notify[] = {
    0x80, 0x00, 0x0d, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x01, 0x09, 0xff, 0x0e, 0x00, 0x03, 0x03,
    0x01, 0x06, 0x02, 0x00, 0x06, 0x00, 0x11, 0x00, 0x01
  };
  /* notifications to an on_notify that comes and goes */
  static const uint8_t xfer_on_notify[] = {
    0x85, 0x20, 0x12, 0x00, 0x01, 0x0c, 0x01, 0x01, 0x12, 0x00, 0x01, 0x08, 0x02, 0x01, 0x00, 0x0d,
    0x01, 0x01, 0x01, 0x00, 0x00, 0x00, 0x01, 0x1e, 0x02, 0x00, 0x01, 0xff, 0x12, 0x00, 0x01, 0x09,
    0x02, 0x01, 0x00, 0x13, 0x00, 0x12, 0x00, 0x00, 0x0a, 0x12, 0x00, 0x00, 0x03, 0x13, 0x00, 0x11,
    0x00, 0x01, 0x11, 0x00, 0x00, 0x02, 0x03, 0x01, 0x03, 0x01, 0x06, 0x02, 0x00, 0x12, 0x00, 0x01,
    0x1e, 0x03
  };
  /* the transport breaks with a write and a read in flight */
  static const uint8_t xfer_broken[] = {
    0x81, 0x0d, 0x0d, 0x00, 0x01, 0x01, 0x05, 0x00, 0x00, 0x03, 0x00, 0x00, 0x12, 0x00, 0x01, 0xff,
    0x0d, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01, 0xff, 0x0e, 0x00, 0x01, 0x14, 0x0e,
    0x01, 0x00, 0x03, 0x01, 0x03, 0x01, 0x09, 0x00, 0x03, 0x00, 0x03, 0x00, 0x00, 0x06, 0x11, 0x00,
    0x00, 0x10, 0x00, 0x0e, 0x01, 0x00, 0x06
  };
  /* entries refused at prep (each kind), a notification one byte too long */
  static const uint8_t xfer_refused_prep[] = {
    0x80, 0x00, 0x0d, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x01, 0x0a, 0x01, 0x0a, 0x01, 0x0a, 0x00,
    0x01, 0x0d, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x01, 0x0a, 0x01, 0x0a, 0x01, 0x0a, 0x06, 0x00,
    0x0d, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x0a, 0x01, 0x0a, 0x01, 0x0a, 0x03, 0x02, 0x0d,
    0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x81, 0x0a, 0x81, 0x0a, 0x81, 0x0a, 0x04, 0x01, 0x0d, 0x00,
    0x01, 0x02, 0x00, 0x00, 0x00, 0x01, 0x0a, 0x41, 0x0a, 0x01, 0x0a, 0xff, 0x0e, 0x00, 0x1d, 0x0e,
    0x00, 0x1e, 0x10, 0x00, 0x0e, 0x00, 0x00, 0x03, 0x01, 0x03, 0x01, 0x06, 0x00, 0x10, 0x00
  };
  /* a part refused: its notification never goes */
  static const uint8_t xfer_refused_notify[] = {
    0x85, 0x29, 0x0d, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x02, 0xd0, 0x07, 0x03, 0x00, 0x00, 0x11,
    0x63, 0xff, 0x0e, 0x00, 0x01, 0x0a, 0x03, 0x01, 0x03, 0x00, 0x03, 0x01, 0x03, 0x01, 0x03, 0x01,
    0x03, 0x01, 0x03, 0x01, 0x02, 0x00, 0x00, 0x02, 0x00, 0x00, 0x06, 0x11, 0x00, 0x01, 0x06
  };
  /* the transport refuses a part: the connection goes down mid-request */
  static const uint8_t xfer_post_refused[] = {
    0x81, 0x01, 0x0d, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0xff, 0x0e, 0x00, 0x00,
    0x13, 0x02, 0x03, 0x01, 0x00, 0x06, 0x03, 0x01, 0x06, 0x0d, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x0a, 0xff, 0x13, 0x02, 0x0e, 0x01, 0x00, 0x06, 0x06
  };
  seed("fuzz_core", "xfer-post-refused", xfer_post_refused, sizeof(xfer_post_refused));
  seed("fuzz_core", "xfer-refused-notify", xfer_refused_notify, sizeof(xfer_refused_notify));
  seed("fuzz_core", "xfer-write-notify", xfer_write_notify, sizeof(xfer_write_notify));
  seed("fuzz_core", "xfer-read-refused", xfer_read_refused, sizeof(xfer_read_refused));
  seed("fuzz_core", "xfer-empty-notify", xfer_empty_notify, sizeof(xfer_empty_notify));
  seed("fuzz_core", "xfer-on-notify", xfer_on_notify, sizeof(xfer_on_notify));
  seed("fuzz_core", "xfer-broken", xfer_broken, sizeof(xfer_broken));
  seed("fuzz_core", "xfer-refused-prep", xfer_refused_prep, sizeof(xfer_refused_prep));
}

static void programs(void)
{
  static const uint8_t send_and_credits[] = {
    0x05, 4, 10, 0, 4, 10, 0, 4, 10, 0, 2, 0, 2, 0, 1, 3, 0, 2, 0, 6,
  };
  static const uint8_t rendezvous[] = {
    0x09, 1, 2, 0, 0, 0, 0, 0, 0, 0xa0, 0x0f, 5, 3, 1, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 6,
  };
  static const uint8_t large_send_fin[] = {
    0x01, 4, 0x88, 0x13, 2, 0, 1, 3, 0, 0, 0, 0, 0, 0, 0, 6,
  };
  static const uint8_t rpc_and_rma[] = {
    0x06, 5, 1, 8, 0, 1, 0, 2, 0, 1, 0, 0, 0, 8, 3, 1, 0, 16, 0, 8, 1, 2, 0, 64, 0,
    3, 1, 3, 1, 7, 16, 0, 12, 11,
  };
  static const uint8_t raw_garbage[] = {0x00, 0, 3, 0xff, 0x00, 0x01};
  seed("fuzz_core", "send-credits", send_and_credits, sizeof(send_and_credits));
  seed("fuzz_core", "rendezvous", rendezvous, sizeof(rendezvous));
  seed("fuzz_core", "large-send-fin", large_send_fin, sizeof(large_send_fin));
  seed("fuzz_core", "rpc-rma", rpc_and_rma, sizeof(rpc_and_rma));
  seed("fuzz_core", "raw-garbage", raw_garbage, sizeof(raw_garbage));
  xfer_programs();
}

/* fuzz_shm: a segment header that passes and one off by a page; a ring
 * program (write, peek, copy across the end, consume, write, read, arm
 * both ends), then the same with the head stepped past the tail. */
static void shm_seeds(void)
{
  buf_t b = {.n = 0};
  put8(&b, 0), put32(&b, RMX_SHM_MAGIC), put16(&b, RMX_SHM_VERSION), put16(&b, RMX_SHM_HDR);
  put32(&b, RMX_SHM_RING_DEFAULT), put32(&b, 36864);
  b.n += RMX_SHM_HDR - 16;
  put32(&b, 36864);
  seed("fuzz_shm", "header", b.p, b.n);
  rmx_put32(b.p + b.n - 4, 36864 + 4096);
  seed("fuzz_shm", "header-size", b.p, b.n);
  b.n = 0;
  put8(&b, 1), put8(&b, 0), put16(&b, 4000), put8(&b, 50), put8(&b, 1);
  put8(&b, 2), put16(&b, 3990), put16(&b, 20), put8(&b, 3), put16(&b, 4000);
  put8(&b, 0), put16(&b, 200), put8(&b, 0), put8(&b, 4), put16(&b, 300), put8(&b, 5), put8(&b, 13);
  seed("fuzz_shm", "ring", b.p, b.n);
  put8(&b, 7), put32(&b, 5000), put8(&b, 1);
  seed("fuzz_shm", "ring-lapped", b.p, b.n);
}

/* fuzz_tcp_hdr: state (2 waiting for the hello, 3 up), frame limit, header. */
static void tcp_hdr_seed(const char *name, uint8_t state, uint8_t kind, uint32_t blen)
{
  buf_t b = {.n = 0};
  put8(&b, state), put32(&b, 8192 - RMX_EAGER_MIN), put32(&b, blen), put8(&b, kind);
  put8(&b, 0), put16(&b, 0);
  seed("fuzz_tcp_hdr", name, b.p, b.n);
}

int main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: %s <tests/fuzz/corpus>\n", argv[0]);
    return 2;
  }
  root = argv[1];
  mkdir(root, 0755);
  rmx_config_t cfg;
  rmx_config_init(&cfg);
  cfg.log_level = RMX_LOG_NONE;
  if (rmx_ctx_create(&ctx, NULL, &cfg)) {
    fprintf(stderr, "make_seeds: no context\n");
    return 1;
  }
  frames(), hellos(), rkeys(), uris();
  streams(), sessions(), programs(), shm_seeds();
  /* a message, a hello, a read response of the largest chunk (12 + 256 KiB) */
  tcp_hdr_seed("data", 3, TF_FRAME + 1, 100), tcp_hdr_seed("hello", 2, TF_HELLO, 32);
  tcp_hdr_seed("rd-resp", 3, TF_RD_RESP, 12 + (256u << 10));
  uv_run(rmx_ctx_loop(ctx), UV_RUN_NOWAIT);
  rmx_ctx_destroy(ctx);
  return 0;
}
