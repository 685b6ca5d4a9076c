/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Transfer requests and notifications, per transport:
 *   rmx-xfer-test SCHEME [FILTER]
 * SCHEME is tcp (127.0.0.1) or rdma ($RMX_TEST_ADDR, else $RXE_VM_ADDR);
 * FILTER runs the cases whose name contains it. One context holds both
 * ends: a target that registers a region and packs a key for its
 * connection, and an initiator that prepares requests against it.
 *
 * What is checked: every byte of every entry for writes and reads, 1 to
 * 4,096 entries, contiguous (merged) and scattered, prepared once and
 * posted many times; each notification arrives only once its request's
 * bytes are in place (the target compares them at on_notify) and in order;
 * notifications kept for rmx_notify_take hold their credits; a request with
 * one refused entry fails once naming it, while the connection's other
 * requests end exactly once; a request cut by a close ends once; misuse
 * gets its error codes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rmx/rmx.h>

#define TEST_NAME "xfer"
#include "test_util.h"

#define REGION (32u << 20)
#define GUARD 4096

static struct {
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  rmx_conn_t *c, *t; /* initiator, target */
  int connected, accepted, closed, tclosed;
  uint8_t *region;   /* the target's memory, GUARD bytes of 0x5a after it */
  rmx_mem_t *mem;
  rmx_rkey_t *rk;
  int rdma;
} W;

/* Per-request outcome, for exactly-once checks. */
typedef struct done {
  int calls, status;
  size_t failed;
} done_t;

static void xfer_cb(rmx_xfer_t *x, int status, size_t failed, void *arg)
{
  done_t *d = arg;
  (void)x;
  d->calls++;
  d->status = status;
  d->failed = failed;
}

static void fill(uint8_t *p, size_t len, uint32_t seed)
{
  uint32_t v = seed * 2654435761u + 1;
  for (size_t i = 0; i < len; i++) {
    v = v * 1103515245u + 12345u;
    p[i] = (uint8_t)(v >> 16);
  }
}

static uint32_t rnd_state = 12345;
static uint32_t rnd(void)
{
  rnd_state = rnd_state * 1103515245u + 12345u;
  return rnd_state >> 8;
}

static void run_until(const int *a, int want) { progress_until(W.ctx, a, NULL, want, 120); }

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  (void)l;
  (void)arg;
  W.t = c;
  W.accepted++;
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  (void)arg;
  if (status)
    FAIL("connect: %s", rmx_strerror(status));
  W.connected++;
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  (void)c;
  (*(int *)arg)++;
}

static rmx_rkey_t *key_for(rmx_mem_t *m)
{
  uint8_t blob[RMX_RKEY_MAX];
  size_t len = sizeof(blob);
  rmx_rkey_t *rk;
  if (rmx_mem_pack_for(m, W.t, blob, &len) || rmx_rkey_unpack(W.c, blob, len, &rk))
    FAIL("key");
  return rk;
}

static void connect_pair(const char *uri)
{
  W.connected = W.accepted = 0;
  if (rmx_connect(W.ctx, uri, on_connected, NULL, &W.c))
    FAIL("connect");
  run_until(&W.connected, 1);
  run_until(&W.accepted, 1);
}

static void close_pair(void)
{
  W.closed = W.tclosed = 0;
  if (rmx_conn_close(W.c, on_closed, &W.closed) || rmx_conn_close(W.t, on_closed, &W.tclosed))
    FAIL("close");
  run_until(&W.closed, 1);
  run_until(&W.tclosed, 1);
}

/* ---- bytes: every entry, both ways ---- */

/* n entries of up to bs bytes each: contiguous (entry i right after i-1 on
 * both sides: one merged segment) or scattered (random lengths and places,
 * never overlapping at the target). Writes them, checks the region; reads
 * them back into zeroed memory, checks that. */
static void one_request(size_t n, size_t bs, int scattered)
{
  size_t span = n * bs;
  if (span > REGION / 2)
    FAIL("case too large");
  uint8_t *src = malloc(span * 2), *dst = calloc(1, span * 2);
  rmx_xfer_entry_t *e = calloc(n, sizeof(*e)), *r = calloc(n, sizeof(*r));
  size_t *perm = malloc(n * sizeof(*perm));
  if (!src || !dst || !e || !r || !perm)
    FAIL("malloc");
  fill(src, span * 2, (uint32_t)(n * 31 + bs + (size_t)scattered));
  for (size_t i = 0; i < n; i++)
    perm[i] = i;
  if (scattered)
    for (size_t i = n; i > 1; i--) {
      size_t j = rnd() % i, t = perm[i - 1];
      perm[i - 1] = perm[j];
      perm[j] = t;
    }
  memset(W.region, 0, span * 2);
  for (size_t i = 0; i < n; i++) {
    size_t len = scattered ? rnd() % (bs + 1) : bs; /* some of length 0 */
    size_t lo = scattered ? (span * 2 - bs) / n * i : i * bs;
    size_t ro = scattered ? perm[i] * 2 * bs + rnd() % bs : i * bs;
    e[i] = (rmx_xfer_entry_t){.addr = src + lo, .len = len, .rkey = W.rk, .offset = ro};
    r[i] = e[i];
    r[i].addr = dst + lo;
  }
  rmx_xfer_t *xw, *xr;
  done_t dw = {0}, dr = {0};
  int rc = rmx_xfer_prep(W.c, RMX_XFER_WRITE, e, n, &xw);
  if (rc || (rc = rmx_xfer_prep(W.c, RMX_XFER_READ, r, n, &xr)))
    FAIL("prep %zu x %zu: %s", n, bs, rmx_strerror(rc));
  if (rmx_xfer_post(xw, NULL, 0, xfer_cb, &dw))
    FAIL("post write");
  run_until(&dw.calls, 1);
  if (dw.status)
    FAIL("write %zu x %zu: %s at entry %zu", n, bs, rmx_strerror(dw.status), dw.failed);
  for (size_t i = 0; i < n; i++)
    if (memcmp(W.region + e[i].offset, e[i].addr, e[i].len))
      FAIL("write %zu x %zu%s: entry %zu not in place", n, bs, scattered ? " scattered" : "", i);
  if (rmx_xfer_post(xr, NULL, 0, xfer_cb, &dr))
    FAIL("post read");
  run_until(&dr.calls, 1);
  if (dr.status)
    FAIL("read: %s at entry %zu", rmx_strerror(dr.status), dr.failed);
  for (size_t i = 0; i < n; i++)
    if (memcmp(r[i].addr, e[i].addr, e[i].len))
      FAIL("read %zu x %zu%s: entry %zu differs", n, bs, scattered ? " scattered" : "", i);
  if (dw.calls != 1 || dr.calls != 1)
    FAIL("callbacks: %d and %d", dw.calls, dr.calls);
  if (rmx_xfer_release(xw) || rmx_xfer_release(xr))
    FAIL("release");
  free(src);
  free(dst);
  free(e);
  free(r);
  free(perm);
}

static void case_bytes(void)
{
  static const size_t ns[] = {1, 2, 7, 128, 1000, 4096};
  for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
    one_request(ns[i], 4096, 0);
    one_request(ns[i], 4096, 1);
    one_request(ns[i], 64, 1);
  }
  one_request(3, 5u << 20, 0); /* longer than the transport takes at once: split */
  one_request(3, 3u << 20, 1);
}

/* The KV-cache pattern: one request prepared, posted again and again with
 * new contents, each checked. */
static void case_repost(void)
{
  enum { N = 64, BS = 1024, POSTS = 200 };
  static uint8_t src[N * BS];
  rmx_xfer_entry_t e[N];
  for (int i = 0; i < N; i++)
    e[i] = (rmx_xfer_entry_t){.addr = src + i * BS, .len = BS, .rkey = W.rk,
                              .offset = (uint64_t)(N - 1 - i) * BS};
  rmx_xfer_t *x;
  if (rmx_xfer_prep(W.c, RMX_XFER_WRITE, e, N, &x))
    FAIL("prep");
  if (rmx_xfer_status(x, NULL) != 0)
    FAIL("a request never posted reports 0");
  for (int p = 0; p < POSTS; p++) {
    done_t d = {0};
    fill(src, sizeof(src), (uint32_t)p);
    if (rmx_xfer_post(x, NULL, 0, xfer_cb, &d))
      FAIL("post %d", p);
    if (rmx_xfer_status(x, NULL) != RMX_EINPROGRESS)
      FAIL("status while posted");
    if (rmx_xfer_post(x, NULL, 0, xfer_cb, &d) != RMX_EBUSY || rmx_xfer_release(x) != RMX_EBUSY)
      FAIL("a posted request must refuse a second post and a release");
    run_until(&d.calls, 1);
    if (d.status || rmx_xfer_status(x, NULL) != 0)
      FAIL("post %d: %s", p, rmx_strerror(d.status));
    for (int i = 0; i < N; i++)
      if (memcmp(W.region + e[i].offset, e[i].addr, BS))
        FAIL("post %d: entry %d", p, i);
  }
  rmx_xfer_release(x);
}

/* ---- notifications ---- */

enum { NOTE_REQS = 2000, NOTE_N = 4, NOTE_BS = 512, NOTE_INFLIGHT = 16 };
static int notes_seen, notes_bad, notes_order_bad, last_note = -1;

/* A notification says "request seq is in place": its bytes are compared
 * with what the initiator wrote, at this moment. */
static void on_notify(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  (void)c;
  (void)arg;
  uint32_t seq;
  uint8_t want[NOTE_N * NOTE_BS];
  if (len != sizeof(seq)) {
    notes_bad++;
    return;
  }
  memcpy(&seq, data, sizeof(seq));
  if ((int)seq != last_note + 1)
    notes_order_bad++;
  last_note = (int)seq;
  fill(want, sizeof(want), seq + 7);
  if (memcmp(W.region + (size_t)seq * sizeof(want), want, sizeof(want)))
    notes_bad++;
  notes_seen++;
}

static void case_notify(void)
{
  static uint8_t src[NOTE_INFLIGHT][NOTE_N * NOTE_BS];
  rmx_xfer_t *x[NOTE_INFLIGHT];
  done_t d[NOTE_INFLIGHT];
  int posted = 0, ended = 0;
  rmx_conn_set_cbs(W.t, &(rmx_conn_cbs_t){.on_notify = on_notify}, NULL);
  memset(W.region, 0, (size_t)NOTE_REQS * sizeof(src[0]));
  notes_seen = notes_bad = notes_order_bad = 0;
  last_note = -1;
  /* Slot k carries requests k, k + 16, ...: each to its own place, which
   * nothing writes again, so what on_notify sees is that request's. */
  uint32_t seqs[NOTE_INFLIGHT];
  for (int k = 0; k < NOTE_INFLIGHT; k++) {
    x[k] = NULL;
    d[k] = (done_t){0};
  }
  while (ended < NOTE_REQS) {
    for (int k = 0; k < NOTE_INFLIGHT && posted < NOTE_REQS; k++) {
      if (x[k] && d[k].calls == 0)
        continue;
      if (x[k]) {
        if (d[k].calls != 1 || d[k].status)
          FAIL("request %u: %d calls, %s", seqs[k], d[k].calls, rmx_strerror(d[k].status));
        rmx_xfer_release(x[k]);
        ended++;
      }
      uint32_t seq = (uint32_t)posted++;
      rmx_xfer_entry_t e[NOTE_N];
      fill(src[k], sizeof(src[k]), seq + 7);
      /* the entries go in reverse, so none merge */
      for (int i = 0; i < NOTE_N; i++)
        e[i] = (rmx_xfer_entry_t){.addr = src[k] + i * NOTE_BS, .len = NOTE_BS, .rkey = W.rk,
                                  .offset = (uint64_t)seq * sizeof(src[k]) + (uint64_t)i * NOTE_BS};
      if (rmx_xfer_prep(W.c, RMX_XFER_WRITE, e, NOTE_N, &x[k]))
        FAIL("prep %u", seq);
      d[k] = (done_t){0};
      seqs[k] = seq;
      if (rmx_xfer_post(x[k], &seq, sizeof(seq), xfer_cb, &d[k]))
        FAIL("post %u", seq);
    }
    if (rmx_ctx_progress(W.ctx) < 0)
      FAIL("progress");
    if (posted == NOTE_REQS) { /* the last ones */
      for (int k = 0; k < NOTE_INFLIGHT; k++)
        if (x[k]) {
          run_until(&d[k].calls, 1);
          if (d[k].status)
            FAIL("request %u: %s", seqs[k], rmx_strerror(d[k].status));
          rmx_xfer_release(x[k]);
          x[k] = NULL;
          ended++;
        }
    }
  }
  run_until(&notes_seen, NOTE_REQS);
  if (notes_bad || notes_order_bad)
    FAIL("notifications: %d before their bytes, %d out of order", notes_bad, notes_order_bad);
  rmx_conn_set_cbs(W.t, &(rmx_conn_cbs_t){0}, NULL);
}

/* Without on_notify they wait for rmx_notify_take, in order, each holding
 * a credit: a sender that posts more than the target has receive buffers
 * sees its later requests end only as the target takes them. */
static void case_notify_take(void)
{
  enum { MANY = 400 };
  static uint8_t src[64];
  rmx_xfer_entry_t e = {.addr = src, .len = sizeof(src), .rkey = W.rk, .offset = 0};
  rmx_xfer_t *x[MANY];
  done_t d[MANY];
  uint8_t buf[64];
  size_t len;
  if (rmx_notify_take(W.t, buf, sizeof(buf), &len) != RMX_EAGAIN)
    FAIL("nothing to take yet");
  for (uint32_t i = 0; i < MANY; i++) {
    d[i] = (done_t){0};
    if (rmx_xfer_prep(W.c, RMX_XFER_WRITE, &e, 1, &x[i]) ||
        rmx_xfer_post(x[i], &i, sizeof(i), xfer_cb, &d[i]))
      FAIL("post %u", i);
  }
  uint64_t end = now_ms() + 300;
  while (now_ms() < end)
    rmx_ctx_progress(W.ctx);
  int ended = 0;
  for (int i = 0; i < MANY; i++)
    ended += d[i].calls;
  if (ended >= MANY)
    FAIL("%d notifications went with none taken: kept ones must hold their credits", MANY);
  if (rmx_notify_take(W.t, buf, 2, &len) != RMX_EMSGSIZE || len != 4)
    FAIL("a short buffer gets RMX_EMSGSIZE and the length");
  for (uint32_t i = 0; i < MANY; i++) {
    uint32_t v;
    uint64_t t = now_ms() + 60000;
    int rc;
    while ((rc = rmx_notify_take(W.t, &v, sizeof(v), &len)) == RMX_EAGAIN && now_ms() < t)
      rmx_ctx_progress(W.ctx);
    if (rc || len != 4 || v != i)
      FAIL("take %u: rc %d, len %zu, value %u", i, rc, len, v);
  }
  for (int i = 0; i < MANY; i++) {
    run_until(&d[i].calls, 1);
    if (d[i].calls != 1 || d[i].status)
      FAIL("request %d: %d calls, %s", i, d[i].calls, rmx_strerror(d[i].status));
    rmx_xfer_release(x[i]);
  }
}

/* ---- failures ---- */

/* Entry K of a request uses a key the target has revoked: the request
 * fails once, naming K; the requests around it end exactly once (over TCP
 * they complete: a refused access does not end the connection; over RDMA
 * the device's remote access error ends it, so they fail). */
static void case_bad_entry(void)
{
  enum { N = 32, K = 17, OTHERS = 8 };
  static uint8_t src[N * 256];
  uint8_t *other = calloc(1, 4096);
  rmx_mem_t *m2;
  if (!other || rmx_mem_reg(W.ctx, other, 4096, RMX_MEM_REMOTE_WRITE, &m2))
    FAIL("reg");
  rmx_rkey_t *bad = key_for(m2);
  uint64_t bound = now_ms() + 100; /* RDMA: the window's bind executes first */
  while (now_ms() < bound)
    rmx_ctx_progress(W.ctx);
  if (rmx_mem_revoke(m2, W.t))
    FAIL("revoke");
  rmx_xfer_entry_t e[N];
  for (int i = 0; i < N; i++)
    e[i] = (rmx_xfer_entry_t){.addr = src + i * 256, .len = 256, .rkey = i == K ? bad : W.rk,
                              .offset = (uint64_t)(N - i) * 4096};
  e[K].offset = 0;
  rmx_xfer_t *x, *ok[OTHERS];
  done_t d = {0}, dok[OTHERS];
  if (rmx_xfer_prep(W.c, RMX_XFER_WRITE, e, N, &x))
    FAIL("prep");
  rmx_rkey_release(bad); /* the request copied what it needs */
  for (int i = 0; i < OTHERS; i++) {
    dok[i] = (done_t){0};
    if (rmx_xfer_prep(W.c, RMX_XFER_WRITE, e, K, &ok[i]))
      FAIL("prep");
  }
  for (int i = 0; i < OTHERS / 2; i++)
    rmx_xfer_post(ok[i], NULL, 0, xfer_cb, &dok[i]);
  if (rmx_xfer_post(x, "never", 5, xfer_cb, &d))
    FAIL("post");
  for (int i = OTHERS / 2; i < OTHERS; i++)
    rmx_xfer_post(ok[i], NULL, 0, xfer_cb, &dok[i]);
  run_until(&d.calls, 1);
  for (int i = 0; i < OTHERS; i++)
    run_until(&dok[i].calls, 1);
  if (d.status == 0 || d.failed != K)
    FAIL("the request with a revoked key: %s at entry %zu (want an error at %d)",
         rmx_strerror(d.status), d.failed, K);
  if (!W.rdma && d.status != RMX_EACCES)
    FAIL("TCP: want RMX_EACCES, got %s", rmx_strerror(d.status));
  for (int i = 0; i < OTHERS; i++)
    if (!W.rdma && dok[i].status)
      FAIL("TCP: request %d around it: %s", i, rmx_strerror(dok[i].status));
  uint64_t end = now_ms() + 200; /* nothing fires twice */
  while (now_ms() < end)
    rmx_ctx_progress(W.ctx);
  if (d.calls != 1)
    FAIL("%d callbacks", d.calls);
  for (int i = 0; i < OTHERS; i++) {
    if (dok[i].calls != 1)
      FAIL("request %d: %d callbacks", i, dok[i].calls);
    rmx_xfer_release(ok[i]);
  }
  rmx_xfer_release(x);
  rmx_mem_dereg(m2);
  free(other);
  if (W.rdma) { /* the connection is gone: a new one for what follows */
    close_pair();
    char uri[128];
    rmx_listener_uri(W.l, uri, sizeof(uri));
    rmx_rkey_release(W.rk);
    connect_pair(uri);
    W.rk = key_for(W.mem);
  }
}

/* A close while a large request is in flight: it ends once, with
 * RMX_ECANCELED; afterwards the request no longer names the connection and
 * posting it is refused. */
static void case_close_mid(void)
{
  enum { N = 2048, BS = 8192 };
  uint8_t *src = calloc(N, BS);
  rmx_xfer_entry_t *e = calloc(N, sizeof(*e));
  if (!src || !e)
    FAIL("malloc");
  for (int i = 0; i < N; i++)
    e[i] = (rmx_xfer_entry_t){.addr = src + (size_t)i * BS, .len = BS - 1, .rkey = W.rk,
                              .offset = (uint64_t)i * BS};
  rmx_xfer_t *x;
  done_t d = {0};
  if (rmx_xfer_prep(W.c, RMX_XFER_WRITE, e, N, &x) || rmx_xfer_post(x, NULL, 0, xfer_cb, &d))
    FAIL("post");
  rmx_ctx_progress(W.ctx);
  close_pair();
  if (d.calls != 1 || (d.status != RMX_ECANCELED && d.status != 0))
    FAIL("closed mid-request: %d calls, %s", d.calls, rmx_strerror(d.status));
  if (rmx_xfer_conn(x) != NULL || rmx_xfer_post(x, NULL, 0, xfer_cb, &d) != RMX_ENOTCONN)
    FAIL("after on_closed a request must not name the connection");
  if (rmx_xfer_release(x))
    FAIL("release");
  free(src);
  free(e);
  char uri[128];
  rmx_listener_uri(W.l, uri, sizeof(uri));
  rmx_rkey_release(W.rk);
  connect_pair(uri);
  W.rk = key_for(W.mem);
}

static void case_misuse(void)
{
  static uint8_t b[64];
  rmx_xfer_entry_t e = {.addr = b, .len = sizeof(b), .rkey = W.rk, .offset = 0};
  rmx_xfer_t *x;
  uint8_t big[1 << 16] = {0};
  if (rmx_xfer_prep(NULL, RMX_XFER_WRITE, &e, 1, &x) != RMX_EINVAL ||
      rmx_xfer_prep(W.c, RMX_XFER_WRITE, &e, 0, &x) != RMX_EINVAL ||
      rmx_xfer_prep(W.c, (rmx_xfer_op_t)3, &e, 1, &x) != RMX_EINVAL)
    FAIL("bad arguments must be RMX_EINVAL");
  e.offset = REGION - 1;
  if (rmx_xfer_prep(W.c, RMX_XFER_WRITE, &e, 1, &x) != RMX_EACCES)
    FAIL("an entry past the region's end must be RMX_EACCES");
  e.offset = 0;
  e.rkey = NULL;
  if (rmx_xfer_prep(W.c, RMX_XFER_WRITE, &e, 1, &x) != RMX_EINVAL)
    FAIL("an entry without a key must be RMX_EINVAL");
  e.rkey = W.rk;
  if (rmx_xfer_prep(W.c, RMX_XFER_READ, &e, 1, &x))
    FAIL("prep read");
  if (rmx_xfer_post(x, "n", 1, NULL, NULL) != RMX_EINVAL)
    FAIL("a notification on a read must be RMX_EINVAL");
  rmx_xfer_release(x);
  if (rmx_xfer_prep(W.c, RMX_XFER_WRITE, &e, 1, &x))
    FAIL("prep write");
  if (rmx_xfer_post(x, big, sizeof(big), NULL, NULL) != RMX_EMSGSIZE)
    FAIL("a notification beyond the eager size must be RMX_EMSGSIZE");
  if (rmx_xfer_post(x, NULL, 3, NULL, NULL) != RMX_EINVAL)
    FAIL("NULL notification with a length");
  /* no callback: polled */
  if (rmx_xfer_post(x, NULL, 0, NULL, NULL))
    FAIL("post without a callback");
  uint64_t end = now_ms() + 60000;
  size_t failed = 0;
  int rc;
  while ((rc = rmx_xfer_status(x, &failed)) == RMX_EINPROGRESS && now_ms() < end)
    rmx_ctx_progress(W.ctx);
  if (rc != 0 || failed != RMX_XFER_NO_ENTRY)
    FAIL("polled: %s", rmx_strerror(rc));
  if (rmx_ctx_destroy(W.ctx) != RMX_EBUSY)
    FAIL("destroy with a request not released");
  rmx_xfer_release(x);
  if (rmx_xfer_release(NULL) != 0 || rmx_xfer_status(NULL, NULL) != RMX_EINVAL)
    FAIL("NULL");
}

int main(int argc, char **argv)
{
  static const struct { const char *name; void (*fn)(void); } cases[] = {
    {"bytes", case_bytes}, {"repost", case_repost}, {"notify", case_notify},
    {"notify_take", case_notify_take}, {"bad_entry", case_bad_entry},
    {"close_mid", case_close_mid}, {"misuse", case_misuse},
  };
  char uri[128];
  if (argc < 2)
    FAIL("usage: rmx-xfer-test tcp|rdma [filter]");
  W.rdma = strcmp(argv[1], "rdma") == 0;
  listen_uri(argv[1], uri, sizeof(uri));
  alarm(600);
  if (rmx_ctx_create(&W.ctx, NULL, NULL) || rmx_listen(W.ctx, uri, on_accept, NULL, &W.l) ||
      rmx_listener_uri(W.l, uri, sizeof(uri)))
    FAIL("listen");
  connect_pair(uri);
  W.region = calloc(1, REGION + GUARD);
  if (!W.region)
    FAIL("malloc");
  memset(W.region + REGION, 0x5a, GUARD);
  if (rmx_mem_reg(W.ctx, W.region, REGION,
                  RMX_MEM_LOCAL | RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE, &W.mem))
    FAIL("reg");
  W.rk = key_for(W.mem);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    if (argc > 2 && !strstr(cases[i].name, argv[2]))
      continue;
    uint64_t t0 = now_ms();
    cases[i].fn();
    printf("xfer %s: %s ok (%llu ms)\n", argv[1], cases[i].name,
           (unsigned long long)(now_ms() - t0));
    fflush(stdout);
  }
  for (int i = 0; i < GUARD; i++)
    if (W.region[REGION + i] != 0x5a)
      FAIL("byte %d after the region changed", i);
  rmx_rkey_release(W.rk);
  close_pair();
  rmx_listener_close(W.l);
  rmx_mem_dereg(W.mem);
  free(W.region);
  if (rmx_ctx_destroy(W.ctx))
    FAIL("destroy");
  printf("xfer %s: all passed\n", argv[1]);
  return 0;
}
