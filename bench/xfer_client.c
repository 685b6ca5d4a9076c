/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One rmx-xfer client thread: its own context and connection (one context
 * per thread, the rmx rule), its own window of the server's region, and
 * INFLIGHT transfer requests of BATCH blocks each, prepared once and posted
 * again as each completes (the KV-cache pattern), each post timed from
 * rmx_xfer_post() to its callback.
 *
 * The blocks of a request sit in order in the local buffer; at the server
 * they are spread over the window by a stride (block i goes to slot
 * i * stride mod the window's blocks), so that no two neighbours are
 * contiguous on both sides and the library cannot merge them: each block
 * is moved as one operation, as in a paged KV cache. --contig puts them in
 * order at the server too (then a request is one segment).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "perf.h"
#include "perf_clock.h"
#include "xfer.h"

typedef struct thr thr_t;

typedef struct xreq {
  rmx_xfer_t *x;
  thr_t *t;
  uint64_t t_post;
} xreq_t;

struct thr {
  const xfer_opts_t *o;
  xfer_thr_res_t *res;
  int id, polling, failed, up, have_key, done_flag, closed;
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  rmx_rkey_t *rk;
  uint64_t region_len;
  uint8_t *buf;
  size_t buf_len;
  rmx_mem_t *mem;
  uint64_t nblk, base, stride; /* blocks in the window; its offset; the spread */
  xreq_t *req;
  uint64_t goal, posted, ended, deadline, seq, seq_sum;
  int timing;
  size_t lat_cap;
  int ctl_done, ctl_st;
  int rail_done, found;
  xfer_ctl_reply_t rep;
};

static void fail(thr_t *t, const char *what, int st)
{
  if (!t->failed)
    fprintf(stderr, "rmx-xfer: thread %d: %s: %s\n", t->id, what,
            st ? rmx_strerror(st) : "wrong data");
  t->failed = 1;
  rmx_ctx_stop(t->ctx);
}

static void on_rail(rmx_conn_t *c, int st, unsigned rail, void *arg)
{
  thr_t *t = arg;
  (void)c;
  (void)rail;
  if (st)
    fail(t, "a rail", st);
  t->rail_done = 1;
  rmx_ctx_stop(t->ctx);
}

static void on_found(rmx_conn_t *c, int st, rmx_rkey_t *rk, void *arg)
{
  thr_t *t = arg;
  (void)c;
  if (st) {
    fail(t, "looking the region up", st);
  } else {
    rmx_rkey_release(t->rk); /* its key again, now with one for each rail */
    t->rk = rk;
  }
  t->found = 1;
  rmx_ctx_stop(t->ctx);
}

static void run_until(thr_t *t, const int *flag);

/* The rails, then the region's key again: the first one holds none for them. */
static void rails_open(thr_t *t)
{
  const xfer_opts_t *o = t->o;
  for (int i = 0; i < o->nrail && !t->failed; i++) {
    t->rail_done = 0;
    int rc = rmx_rail_add(t->c, o->rail[i], on_rail, t);
    if (rc)
      fail(t, "a rail", rc);
    else
      run_until(t, &t->rail_done);
  }
  if (!t->failed) {
    int rc = rmx_mem_lookup(t->c, XFER_NAME, 0, on_found, t);
    if (rc)
      fail(t, "looking the region up", rc);
    run_until(t, &t->found);
  }
}

/* Run the loop until *flag or a failure. */
static void run_until(thr_t *t, const int *flag)
{
  while (!*flag && !t->failed) {
    int rc = t->polling ? rmx_ctx_progress(t->ctx) : rmx_ctx_run(t->ctx);
    if (rc < 0)
      fail(t, "running the loop", rc);
  }
}

/* The remote offset of block i of the thread's window. */
static uint64_t remote_off(const thr_t *t, uint64_t i)
{
  return t->base + (i * t->stride % t->nblk) * t->o->block;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
  while (b) {
    uint64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

/* ---- connection and control ---- */

static void on_connected(rmx_conn_t *c, int st, void *arg)
{
  thr_t *t = arg;
  if (st)
    fail(t, "connect", st);
  t->up = st == 0;
}

static void on_reply(thr_t *t, const void *data, size_t len)
{
  if (len != sizeof(t->rep) || t->ctl_done) {
    fail(t, "the server's answer", RMX_EPROTO);
    return;
  }
  memcpy(&t->rep, data, sizeof(t->rep));
  t->ctl_st = t->rep.status;
  t->ctl_done = 1;
  rmx_ctx_stop(t->ctx);
}

/* The server's messages: its key first, then answers to control requests. */
static void on_msg(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  thr_t *t = arg;
  xfer_key_hdr_t h;
  int rc = RMX_EPROTO;
  if (t->have_key) {
    on_reply(t, data, len);
    return;
  }
  if (len >= sizeof(h)) {
    memcpy(&h, data, sizeof(h));
    if (h.magic == XFER_KEY_MAGIC && h.key_len == len - sizeof(h))
      rc = rmx_rkey_unpack(c, (const uint8_t *)data + sizeof(h), h.key_len, &t->rk);
  }
  if (rc) {
    fail(t, "the server's key", rc);
    return;
  }
  t->region_len = h.region_len;
  t->have_key = 1;
  rmx_ctx_stop(t->ctx);
}

static void on_disc(rmx_conn_t *c, int st, void *arg)
{
  fail(arg, "the server went away", st ? st : RMX_ECONNRESET);
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  thr_t *t = arg;
  t->closed = 1;
  rmx_ctx_stop(t->ctx); /* RMX_PROGRESS=poll: rmx_ctx_run spins until then */
}

static int ctl(thr_t *t, uint32_t cmd, uint32_t arg, uint64_t off, uint64_t len)
{
  xfer_ctl_t m = {cmd, arg, off, len};
  t->ctl_done = 0;
  int rc = rmx_send(t->c, &m, sizeof(m), NULL, NULL);
  if (rc == 0)
    run_until(t, &t->ctl_done);
  if (!t->failed && (rc || t->ctl_st))
    fail(t, "control call", rc ? rc : t->ctl_st);
  return t->failed ? -1 : 0;
}

/* ---- posting ---- */

static void on_done(rmx_xfer_t *x, int st, size_t failed, void *arg);

static int post(thr_t *t, xreq_t *r)
{
  xfer_note_t n = {XFER_NOTE_MAGIC, (uint32_t)t->id, ++t->seq};
  r->t_post = perf_ticks();
  int rc = rmx_xfer_post(r->x, t->o->notify ? &n : NULL, t->o->notify ? sizeof(n) : 0, on_done,
                         r);
  if (t->timing)
    t->res->post_ticks += perf_ticks() - r->t_post, t->res->posts++;
  if (rc) {
    fail(t, "rmx_xfer_post", rc);
    return rc;
  }
  if (t->o->notify)
    t->seq_sum += n.seq;
  t->posted++;
  return 0;
}

static void on_done(rmx_xfer_t *x, int st, size_t failed, void *arg)
{
  xreq_t *r = arg;
  thr_t *t = r->t;
  uint64_t now = perf_ticks();
  if (st) {
    char what[64];
    snprintf(what, sizeof(what), "a request (entry %zd)", (ssize_t)failed);
    fail(t, what, st);
    return;
  }
  t->ended++;
  if (t->timing) {
    if (t->res->nlat == t->lat_cap) {
      size_t cap = t->lat_cap ? 2 * t->lat_cap : 4096;
      double *p = realloc(t->res->lat, cap * sizeof(double));
      if (!p) {
        fail(t, "latency samples", RMX_ENOMEM);
        return;
      }
      t->res->lat = p;
      t->lat_cap = cap;
    }
    t->res->lat[t->res->nlat++] = perf_ns(r->t_post, now) / 1000.0;
    t->res->t1 = now;
  }
  int more = t->posted < t->goal && (!t->deadline || now < t->deadline);
  if (more)
    post(t, r);
  else if (t->ended == t->posted) {
    t->done_flag = 1;
    rmx_ctx_stop(t->ctx);
  }
}

/* Post until goal requests have ended (or the deadline passed and the
 * outstanding ones ended). */
static void phase(thr_t *t, uint64_t goal, uint64_t deadline, int timing)
{
  t->goal = goal;
  t->posted = t->ended = 0;
  t->deadline = deadline;
  t->timing = timing;
  t->done_flag = goal == 0;
  if (timing)
    t->res->t0 = t->res->t1 = perf_ticks();
  for (uint64_t i = 0; i < t->o->inflight && t->posted < goal && !t->failed; i++)
    post(t, &t->req[i]);
  run_until(t, &t->done_flag);
  t->timing = 0;
}

/* ---- the thread ---- */

static int prepare(thr_t *t)
{
  const xfer_opts_t *o = t->o;
  uint64_t win = o->inflight * o->batch * o->block;
  if (win > t->region_len / o->threads) {
    fprintf(stderr, "rmx-xfer: the server's region (%llu bytes) is smaller than threads x "
            "inflight x batch x block (%llu)\n", (unsigned long long)t->region_len,
            (unsigned long long)(win * o->threads));
    t->failed = 1;
    return -1;
  }
  t->nblk = o->inflight * o->batch;
  t->base = (uint64_t)t->id * win;
  t->stride = 1;
  if (!o->contig && t->nblk > 2) /* about a third of the way on, coprime: a permutation */
    for (t->stride = t->nblk / 3 + 1; gcd(t->stride, t->nblk) != 1; t->stride++)
      ;
  t->buf_len = win;
  t->buf = mmap(NULL, win, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (t->buf == MAP_FAILED) {
    t->buf = NULL;
    fail(t, "the local buffer", RMX_ENOMEM);
    return -1;
  }
  for (uint64_t i = 0; i < t->nblk; i++) /* touched here, not in the timed part */
    if (o->op == RMX_XFER_WRITE && o->check)
      for (uint64_t k = 0, r = remote_off(t, i); k < o->block; k++)
        t->buf[i * o->block + k] = pattern_at(r + k);
    else
      memset(t->buf + i * o->block, o->op == RMX_XFER_READ ? 0 : 0x5a, o->block);
  if (o->check && ctl(t, XCTL_FILL, o->op == RMX_XFER_READ, t->base, win) != 0)
    return -1;
  int rc = o->cache ? 0 : rmx_mem_reg(t->ctx, t->buf, win, RMX_MEM_LOCAL, &t->mem);
  if (rc) {
    fail(t, "registering the local buffer", rc);
    return -1;
  }
  rmx_ctx_stats_t s0, s1;
  rmx_ctx_stats_get(t->ctx, &s0, sizeof(s0));
  t->req = calloc(o->inflight, sizeof(*t->req));
  rmx_xfer_entry_t *e = calloc(o->batch, sizeof(*e));
  for (uint64_t r = 0; t->req && e && r < o->inflight && !rc; r++) {
    for (uint64_t j = 0; j < o->batch; j++) {
      uint64_t i = r * o->batch + j;
      e[j] = (rmx_xfer_entry_t){t->buf + i * o->block, o->block, t->mem, t->rk,
                                remote_off(t, i)};
    }
    t->req[r].t = t;
    rc = rmx_xfer_prep(t->c, (rmx_xfer_op_t)o->op, e, o->batch, &t->req[r].x);
  }
  free(e);
  if (!t->req || rc) {
    fail(t, "rmx_xfer_prep", t->req ? rc : RMX_ENOMEM);
    return -1;
  }
  rmx_ctx_stats_get(t->ctx, &s1, sizeof(s1));
  t->res->misses_prep = s1.reg_cache_misses - s0.reg_cache_misses;
  return 0;
}

/* Every byte: the local buffer after reads, the server's window after writes. */
static void check(thr_t *t)
{
  const xfer_opts_t *o = t->o;
  if (o->op == RMX_XFER_READ) {
    for (uint64_t i = 0; i < t->nblk && !t->failed; i++)
      for (uint64_t k = 0, r = remote_off(t, i); k < o->block; k++)
        if (t->buf[i * o->block + k] != pattern_at(r + k)) {
          fail(t, "read: a byte differs from the server's", 0);
          break;
        }
    t->res->checked = t->failed ? 0 : t->buf_len;
  } else if (ctl(t, XCTL_VERIFY, 0, t->base, t->buf_len) == 0) {
    if (t->rep.b || t->rep.a != t->buf_len)
      fprintf(stderr, "rmx-xfer: thread %d: the server found %llu of %llu bytes wrong\n", t->id,
              (unsigned long long)t->rep.b, (unsigned long long)t->rep.a);
    if (t->rep.b || t->rep.a != t->buf_len)
      fail(t, "write: the server's window is not what was written", 0);
    t->res->checked = t->failed ? 0 : t->rep.a;
  }
}

static void notes(thr_t *t)
{
  if (ctl(t, XCTL_NOTES, 0, 0, 0) != 0)
    return;
  t->res->notes = t->rep.a;
  if (t->rep.a != t->seq || t->rep.b != t->seq_sum || t->rep.c) {
    fprintf(stderr, "rmx-xfer: thread %d: the server counted %llu notifications (%llu "
            "malformed), %llu were sent\n", t->id, (unsigned long long)t->rep.a,
            (unsigned long long)t->rep.c, (unsigned long long)t->seq);
    fail(t, "notifications", 0);
  }
}

/* The connection first: after a failure requests may still be posted, and
 * they end (with an error, calling on_done) before it is closed. */
static void teardown(thr_t *t)
{
  if (t->c && rmx_conn_close(t->c, on_closed, t) == 0)
    while (!t->closed && rmx_ctx_run(t->ctx) >= 0 && !t->closed)
      ;
  for (uint64_t r = 0; t->req && r < t->o->inflight; r++)
    if (t->req[r].x && rmx_xfer_release(t->req[r].x) != 0)
      fail(t, "a request still posted after its connection closed", RMX_EBUSY);
  free(t->req);
  if (t->rk)
    rmx_rkey_release(t->rk);
  if (t->mem)
    rmx_mem_dereg(t->mem);
  if (t->buf)
    munmap(t->buf, t->buf_len);
  int rc = rmx_ctx_destroy(t->ctx);
  if (rc)
    fail(t, "destroying the context", rc);
}

void *xfer_thread(void *arg)
{
  xfer_thr_res_t *res = arg;
  thr_t T = {.o = res->o, .res = res, .id = res->id}, *t = &T;
  perf_ns_per_tick = t->o->ns_per_tick; /* this file's copy of the clock's calibration */
  rmx_config_t cfg;
  int rc = rmx_config_init(&cfg);
  if (rc == 0) {
    t->polling = cfg.progress == RMX_PROGRESS_POLL;
    rc = rmx_ctx_create(&t->ctx, NULL, &cfg);
  }
  if (rc) {
    fprintf(stderr, "rmx-xfer: thread %d: %s\n", t->id, rmx_strerror(rc));
    res->failed = 1;
    pthread_barrier_wait(res->barrier);
    pthread_barrier_wait(res->barrier);
    return NULL;
  }
  rmx_conn_cbs_t cbs = {.on_recv = on_msg, .on_disconnect = on_disc};
  rc = rmx_connect(t->ctx, t->o->uri, on_connected, t, &t->c);
  if (rc) {
    t->c = NULL;
    fail(t, "connect", rc);
  } else {
    rmx_conn_set_cbs(t->c, &cbs, t);
    run_until(t, &t->have_key);
  }
  if (!t->failed && t->o->nrail)
    rails_open(t);
  if (!t->failed && t->c)
    snprintf(res->transport, sizeof(res->transport), "%s", rmx_conn_transport(t->c));
  if (!t->failed)
    prepare(t);
  pthread_barrier_wait(res->barrier); /* every thread's requests are prepared */
  const xfer_opts_t *o = t->o;
  if (!t->failed && o->warmup)
    phase(t, o->warmup, 0, 0);
  pthread_barrier_wait(res->barrier);
  rmx_ctx_stats_t s0, s1;
  rmx_ctx_stats_get(t->ctx, &s0, sizeof(s0));
  if (!t->failed) {
    uint64_t per = o->batch * o->block, goal = UINT64_MAX, deadline = 0;
    if (o->seconds)
      deadline = perf_ticks() + (uint64_t)((double)o->seconds * 1e9 / perf_ns_per_tick);
    else { /* this thread's share of the requests that move --total */
      uint64_t n = (o->total + per - 1) / per;
      goal = n / o->threads + ((uint64_t)t->id < n % o->threads);
    }
    phase(t, goal, deadline, 1);
    res->requests = t->ended;
    res->bytes = t->ended * per;
  }
  rmx_ctx_stats_get(t->ctx, &s1, sizeof(s1));
  res->misses_run = s1.reg_cache_misses - s0.reg_cache_misses;
  res->hits_run = s1.reg_cache_hits - s0.reg_cache_hits;
  if (!t->failed && o->notify)
    notes(t);
  if (!t->failed && o->check)
    check(t);
  for (int l = 0; !t->failed && l <= o->nrail; l++) {
    rmx_rail_info_t in;
    if (rmx_rail_info(t->c, (unsigned)l, &in) == 0)
      res->lane_bytes[l] = in.bytes;
  }
  teardown(t);
  res->failed = t->failed;
  return NULL;
}
