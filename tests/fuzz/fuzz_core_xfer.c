/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_core's transfer-request steps (programs whose hello byte has bit 7
 * set): requests of reads or writes prepared from a few entries (some
 * contiguous on both sides so they merge, some longer than the fake's
 * io_max so they split, some refused), posted with or without a
 * notification, released and polled; notifications from the peer kept,
 * taken, or handed to an on_notify that calls back into rmx; the transport
 * refusing a part (the connection goes down with parts in flight and the
 * rest queued). Every part the core posts is checked against the entries
 * (the next bytes of the request, merged and split as documented), and so
 * is every outcome:
 * - each post's callback runs exactly once, never after on_closed, and
 *   only once every posted part is reported; rmx_xfer_status agrees;
 * - 0 only when every byte moved and the notification went; the first
 *   refused part names its entry, a lost connection none;
 * - a notification leaves only after every part of its post was reported
 *   in place, once, with its bytes;
 * - notifications from the peer arrive once each, in order, intact.
 * The program's second byte sets io_max, the peer's window, on_notify, and
 * (bit 6) a fake that reports reads and writes in any order, which the
 * transports do not: all of the above must hold but the entry named.
 */
#include <string.h>

#include "fuzz_core.h"

#define NS 4  /* requests at once */
#define NE 8  /* entries per request */
#define NSEQ 4096

int fx_on;
/* FX_TRACE=1: what the steps did, to read an input back */
#define TRACE(...) (getenv("FX_TRACE") ? (void)fprintf(stderr, "fx: " __VA_ARGS__) : (void)0)

typedef struct slot {
  rmx_xfer_t *x;
  int write;
  size_t n;
  uint8_t *addr[NE];
  size_t len[NE];
  uint64_t raddr[NE], key[NE];
  rmx_mem_t *mem[NE];
  size_t total;
  /* the current (or last) post */
  uint32_t gen;
  int busy, notify, notified, ended;
  size_t notify_len;
  size_t pe, po;                       /* where the next part must start */
  size_t posted, ok, bad, bytes_ok;    /* its parts */
  int first_err;
  size_t first_err_entry;
  int status;
  size_t failed;
} slot_t;

static slot_t S[NS];
static prog_t *G;                   /* callbacks read their choices from the program too */
static rmx_conn_cbs_t base;         /* the connection's callbacks, on_notify aside */
static int with_notify;
static rmx_mem_t *msrc, *mdst, *msmall;
static uint8_t xsrc[64 << 10], xdst[64 << 10];
static rmx_rkey_t rk_rw, rk_alt, rk_ro, rk_wo, rk_other;
static uint32_t seq_sent, last_cb_seq, last_take_seq;
static int anon; /* notifications too short to say whose, sent, not yet matched */
static size_t seq_len[NSEQ];
static uint8_t seq_seen[NSEQ];

static int conn_ok(void) { return !app.closed && app.c->state == RMX_CS_ESTABLISHED; }

/* ---- checking the parts ---- */

static void skip_empty(const slot_t *s, size_t *e)
{
  while (*e < s->n && s->len[*e] == 0)
    (*e)++;
}

/* Entry b continues entry a on both sides: the core merges them. */
static int merges(const slot_t *s, size_t a, size_t b)
{
  return b < s->n && s->addr[a] + s->len[a] == s->addr[b] &&
         s->raddr[a] + s->len[a] == s->raddr[b] && s->key[a] == s->key[b] &&
         s->mem[a] == s->mem[b];
}

int fx_rma_posted(void *op, rmx_tp_ev_type_t type, const void *addr, size_t len,
                  uint64_t raddr, uint64_t rkey, uint32_t *gen)
{
  rmx__op_t *o = op;
  if (!fx_on || !o || o->kind != RMX_OP_XFER)
    return 0;
  int i = 0;
  while (i < NS && (!S[i].x || S[i].x != o->arg))
    i++;
  FUZZ_CHECK(i < NS);
  slot_t *s = &S[i];
  FUZZ_CHECK(s->busy && !s->bad); /* nothing after a part failed */
  FUZZ_CHECK(type == (s->write ? RMX_TP_EV_WRITE : RMX_TP_EV_READ));
  FUZZ_CHECK(len > 0 && len <= fk_io_max_now);
  skip_empty(s, &s->pe);
  size_t e = s->pe, first = e;
  FUZZ_CHECK(e < s->n); /* not past the request's end */
  FUZZ_CHECK(addr == s->addr[e] + s->po && raddr == s->raddr[e] + s->po && rkey == s->key[e]);
  size_t left = len;
  for (;;) {
    size_t take = s->len[e] - s->po < left ? s->len[e] - s->po : left;
    left -= take;
    s->po += take;
    if (s->po < s->len[e])
      break;
    size_t nx = e + 1;
    skip_empty(s, &nx);
    int m = merges(s, e, nx);
    s->pe = nx;
    s->po = 0;
    if (!left) {
      /* a part ends short of io_max only where its segment ends */
      FUZZ_CHECK(len == fk_io_max_now || !m);
      break;
    }
    FUZZ_CHECK(m); /* a part spans entries only where they merge */
    e = nx;
  }
  FUZZ_CHECK(!left);
  s->posted++;
  TRACE("slot %d part %zu: %zu bytes at entry %zu\n", i, s->posted, len, first);
  *gen = s->gen;
  return (int)(first << 4 | (size_t)(i + 1));
}

void fx_rma_done(int tag, uint32_t gen, const void *addr, size_t len, int status)
{
  slot_t *s = &S[(tag & 15) - 1];
  TRACE("slot %d part: reported %d\n", (tag & 15) - 1, status);
  FUZZ_CHECK(s->x && s->busy && s->gen == gen); /* reported before its callback */
  if (status == 0) {
    s->ok++;
    s->bytes_ok += len;
  } else if (s->bad++ == 0) {
    s->first_err = status;
    s->first_err_entry = (size_t)tag >> 4;
  }
}

void fx_notify_sent(const rmx_frame_t *fr)
{
  FUZZ_CHECK(fx_on);
  size_t len = fr->payload_len;
  slot_t *s = NULL;
  if (len >= 6) {
    FUZZ_CHECK(fr->payload[0] == 'N' && fr->payload[1] < NS);
    s = &S[fr->payload[1]];
    FUZZ_CHECK(s->gen == rmx_get32(fr->payload + 2));
  } else {
    /* too short to say whose: one that may send it now must exist; its
     * callback takes it (0 only with a notification sent before) */
    for (int i = 0; i < NS && !s; i++)
      if (S[i].x && S[i].busy && S[i].notify && S[i].notify_len == len &&
          S[i].ok == S[i].posted && S[i].bytes_ok == S[i].total && !S[i].bad)
        s = &S[i];
    FUZZ_CHECK(s);
    anon++;
    TRACE("a notification of %zu bytes sent\n", len);
    return;
  }
  FUZZ_CHECK(s && s->x && s->busy && s->notify && !s->notified && s->notify_len == len);
  /* only after every part was reported in place */
  FUZZ_CHECK(s->bad == 0 && s->ok == s->posted && s->bytes_ok == s->total);
  for (size_t k = 6; k < len; k++)
    FUZZ_CHECK(fr->payload[k] == (uint8_t)(k * 7 + s->gen));
  s->notified = 1;
  TRACE("slot %d post %u: notification of %zu bytes sent\n", (int)(s - S), s->gen, len);
}

/* ---- the application's calls ---- */

static void post(int i);
static void take(void);

/* What a callback does besides its own: 0 nothing, 1 take a notification,
 * 2 post a request, 3 close the connection. */
static void call_into_rmx(unsigned what)
{
  if (what == 1)
    take();
  else if (what == 2)
    post((int)(next8(G) % NS));
  else if (what == 3 && !app.app_closed)
    fc_close();
}

static void xfer_cb(rmx_xfer_t *x, int status, size_t failed, void *arg)
{
  slot_t *s = arg;
  FUZZ_CHECK(!app.closed);            /* nothing after on_closed */
  FUZZ_CHECK(s->x == x && s->busy);   /* once per post */
  FUZZ_CHECK(s->ok + s->bad == s->posted); /* the transport is done with the buffers */
  TRACE("slot %d post %u: callback %d, entry %zu (%zu/%zu parts, %zu bad)\n", (int)(s - S),
        s->gen, status, failed, s->ok + s->bad, s->posted, s->bad);
  s->busy = 0;
  s->ended = 1;
  s->status = status;
  s->failed = failed;
  size_t f = 0;
  FUZZ_CHECK(rmx_xfer_status(x, &f) == status && f == failed);
  if (status == 0) {
    FUZZ_CHECK(!s->bad && s->bytes_ok == s->total && failed == RMX_XFER_NO_ENTRY);
    if (s->notify && s->notify_len < 6) {
      FUZZ_CHECK(anon > 0);
      anon--;
    } else {
      FUZZ_CHECK(!s->notify || s->notified);
    }
  } else if (s->bad && s->first_err == RMX_EACCES && fk_reorder) {
    FUZZ_CHECK(failed < s->n); /* out of order: some entry, maybe not the one */
  } else if (s->bad && s->first_err == RMX_EACCES) {
    FUZZ_CHECK(failed == s->first_err_entry); /* the first refused part's entry */
  } else {
    FUZZ_CHECK(failed == RMX_XFER_NO_ENTRY); /* no entry to blame */
  }
  FUZZ_CHECK(!s->bad || status);
  unsigned what = next8(G) % 6;
  if (what == 4) { /* the same request again */
    post((int)(s - S));
  } else if (what == 5) {
    FUZZ_CHECK(rmx_xfer_release(x) == 0);
    s->x = NULL;
  } else {
    call_into_rmx(what);
  }
}

static void post(int i)
{
  slot_t *s = &S[i];
  static uint8_t note[2048];
  if (!s->x)
    return;
  unsigned c = next8(G);
  size_t len = 0;
  const void *p = NULL;
  if (c & 1) { /* a notification */
    p = note;
    len = c >> 1 & 1 ? 0 : 6 + next8(G) % 80;
    if ((c >> 2 & 7) == 7) /* one byte too long */
      len = app.closed ? 300 : app.c->eager_max + 1;
  } else if ((c >> 1 & 15) == 15) {
    len = 3; /* NULL with a length */
  }
  uint32_t gen = s->gen + 1;
  note[0] = 'N';
  note[1] = (uint8_t)i;
  rmx_put32(note + 2, gen);
  for (size_t k = 6; k < len; k++)
    note[k] = (uint8_t)(k * 7 + gen);
  int want = 0;
  if ((!p && len) || (p && !s->write))
    want = RMX_EINVAL;
  else if (s->busy)
    want = RMX_EBUSY;
  else if (!conn_ok())
    want = RMX_ENOTCONN;
  else if (p && len > app.c->eager_max)
    want = RMX_EMSGSIZE;
  slot_t was = *s; /* parts may go inside the call: the books open first */
  if (!want) {
    s->gen = gen;
    s->busy = 1;
    s->notify = p != NULL;
    s->notify_len = len;
    s->notified = 0;
    s->pe = s->po = 0;
    s->posted = s->ok = s->bad = s->bytes_ok = 0;
    s->first_err = 0;
  }
  int rc = rmx_xfer_post(s->x, p, len, xfer_cb, s);
  TRACE("slot %d post: notify %s len %zu: %d\n", i, p ? "yes" : "no", len, rc);
  FUZZ_CHECK(rc == want);
  if (rc)
    *s = was;
  else
    FUZZ_CHECK(rmx_xfer_status(s->x, NULL) == RMX_EINPROGRESS);
}

/* A kept notification taken: once, in order. */
static void took(const uint8_t *buf, size_t len)
{
  if (len < 4)
    return;
  uint32_t q = rmx_get32(buf);
  FUZZ_CHECK(q < NSEQ && !seq_seen[q] && q > last_take_seq && seq_len[q] == len);
  seq_seen[q] = 1;
  last_take_seq = q;
}

static void take(void)
{
  uint8_t buf[128];
  size_t cap = next8(G) & 1 ? sizeof(buf) : next8(G) % 8, len = 0;
  if (app.closed)
    return;
  int empty = rmx_list_empty(&app.c->notifq);
  int rc = rmx_notify_take(app.c, buf, cap, &len);
  if (empty) {
    FUZZ_CHECK(rc == RMX_EAGAIN);
    return;
  }
  FUZZ_CHECK(rc == 0 || (rc == RMX_EMSGSIZE && len > cap));
  if (rc == 0)
    took(buf, len);
}

static void on_notify(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  FUZZ_CHECK(!app.closed && c == app.c);
  if (len >= 4) {
    uint32_t q = rmx_get32(data);
    FUZZ_CHECK(q < NSEQ && !seq_seen[q] && q > last_cb_seq && seq_len[q] == len);
    for (size_t k = 4; k < len; k++)
      FUZZ_CHECK(((const uint8_t *)data)[k] == (uint8_t)(q + k));
    seq_seen[q] = 1;
    last_cb_seq = q;
  }
  unsigned what = next8(G) % 5;
  if (what == 4) {
    base.on_notify = NULL; /* the rest are kept */
    rmx_conn_set_cbs(c, &base, NULL);
  } else {
    call_into_rmx(what);
  }
}

void fx_cbs(rmx_conn_cbs_t *cbs)
{
  base = *cbs;
  base.on_notify = with_notify ? on_notify : NULL;
  *cbs = base;
}

/* Prepare a request in slot i from a few entries, now and then one refused. */
static void prep(int i)
{
  slot_t *s = &S[i];
  rmx_xfer_entry_t e[NE];
  if (s->x || app.closed)
    return;
  memset(s, 0, sizeof(*s));
  s->write = next8(G) & 1;
  uint8_t *buf = s->write ? xsrc : xdst;
  rmx_mem_t *own = s->write ? msrc : mdst;
  size_t n = 1 + next8(G) % NE, at = next8(G), k;
  uint64_t roff = next16(G) * 8u;
  for (k = 0; k < n; k++) {
    unsigned c = next8(G);
    unsigned cls = c & 3; /* empty, short, medium, longer than io_max (split) */
    size_t len = cls == 1 ? 1 + next8(G)
                 : cls == 2 ? 1 + next16(G) % 3000
                 : cls == 3 ? 4097 + next16(G) % 6000 : 0;
    if (at + len > sizeof(xsrc))
      break;
    rmx_rkey_t *rk = c & 0x40 ? &rk_alt : &rk_rw;
    e[k] = (rmx_xfer_entry_t){.addr = buf + at, .len = len, .mem = c & 0x80 ? own : NULL,
                              .rkey = rk, .offset = roff};
    s->addr[k] = buf + at;
    s->len[k] = len;
    s->raddr[k] = rk->base + roff;
    s->key[k] = rk->key;
    s->mem[k] = e[k].mem;
    s->total += len;
    /* contiguous on both sides unless told otherwise: merged */
    at += len + (c & 0x10 ? 1 + (c >> 5 & 1) : 0);
    roff += len + (c & 0x20 ? 8 : 0);
  }
  if (!k)
    return;
  s->n = n = k;
  int want = conn_ok() ? 0 : RMX_ENOTCONN;
  unsigned f = next8(G);
  if (f < 40 && want == 0) { /* one entry refused: nothing is prepared */
    rmx_xfer_entry_t *b = &e[next8(G) % n];
    switch (f % 5) {
    case 0: /* the key lacks the right */
      b->rkey = s->write ? &rk_ro : &rk_wo;
      want = RMX_EACCES;
      break;
    case 1: /* past the region's end */
      b->offset = rk_rw.len - b->len + 1;
      want = RMX_EACCES;
      break;
    case 2:
      b->addr = NULL;
      b->len = b->len ? b->len : 1;
      want = RMX_EINVAL;
      break;
    case 3: /* a registration that does not cover it */
      b->mem = msmall;
      want = !b->len || (s->write && (uint8_t *)b->addr >= buf &&
                         (uint8_t *)b->addr + b->len <= buf + 64)
                 ? 0
                 : RMX_EINVAL;
      s->mem[b - e] = msmall;
      break;
    default: /* a key of another transport */
      b->rkey = &rk_other;
      want = RMX_EINVAL;
    }
  }
  int rc = rmx_xfer_prep(app.c, s->write ? RMX_XFER_WRITE : RMX_XFER_READ, e, n, &s->x);
  TRACE("slot %d prep: %s of %zu entries, %zu bytes: %d\n", i, s->write ? "write" : "read", n,
        s->total, rc);
  FUZZ_CHECK(rc == want);
  if (rc) {
    s->x = NULL;
    return;
  }
  FUZZ_CHECK(rmx_xfer_conn(s->x) == app.c);
  size_t failed = 0;
  FUZZ_CHECK(rmx_xfer_status(s->x, &failed) == 0 && failed == RMX_XFER_NO_ENTRY);
}

/* A notification from the peer: u32 sequence, then bytes that follow it. */
static void recv_notify(void)
{
  uint8_t f[RMX_WIRE_HDR_LEN + 64];
  unsigned credits = next8(G) % 4;
  size_t len = next8(G) % 64;
  uint32_t q = ++seq_sent;
  if (q >= NSEQ)
    return;
  size_t n = rmx__wire_hdr_encode(f, RMX_FR_DATA, (uint16_t)credits, (uint32_t)len);
  rmx__wire_notify_mark(f);
  seq_len[q] = len;
  if (len >= 4)
    rmx_put32(f + n, q);
  for (size_t k = 4; k < len; k++)
    f[n + k] = (uint8_t)(q + k);
  fc_recv(f, n + len, credits);
}

void fx_step(prog_t *g, unsigned what)
{
  int i = (int)(next8(g) % NS);
  slot_t *s = &S[i];
  size_t failed = 0;
  switch (what) {
  case 0:
    prep(i);
    break;
  case 1:
  case 2:
    post(i);
    break;
  case 3:
    if (s->x) {
      int rc = rmx_xfer_release(s->x);
      FUZZ_CHECK(rc == (s->busy ? RMX_EBUSY : 0));
      if (!rc)
        s->x = NULL;
    }
    break;
  case 4:
    if (s->x) {
      int rc = rmx_xfer_status(s->x, &failed);
      FUZZ_CHECK(rc == (s->busy ? RMX_EINPROGRESS : s->ended ? s->status : 0));
      FUZZ_CHECK(failed == (s->ended && !s->busy ? s->failed : RMX_XFER_NO_ENTRY));
      FUZZ_CHECK(rmx_xfer_conn(s->x) == (app.closed ? NULL : app.c));
    }
    take();
    break;
  case 5:
    if (fc_alive())
      recv_notify();
    break;
  default:
    if (i & 2) { /* the transport refuses a part: the connection goes down */
      fk_fail_post = 1;
    } else if (!app.closed) { /* on_notify comes and goes */
      base.on_notify = base.on_notify ? NULL : on_notify;
      rmx_conn_set_cbs(app.c, &base, NULL);
    }
  }
}

void fx_begin(prog_t *g, rmx_wire_hello_t *h)
{
  static const size_t io[4] = {4096, 1000, 512, 4095};
  unsigned c = next8(g);
  G = g;
  memset(S, 0, sizeof(S));
  memset(seq_seen, 0, sizeof(seq_seen));
  seq_sent = last_cb_seq = last_take_seq = 0;
  anon = 0;
  fk_io_max_now = io[c & 3];
  h->rma_window = 1 + (c >> 2 & 7) * 9; /* 1 .. 64 parts in flight */
  with_notify = c >> 5 & 1;
  fk_reorder = c >> 6 & 1;
  int tpi = app.c->tpi;
  rk_rw = (rmx_rkey_t){.tpi = tpi, .access = 15, .base = 0x100000, .len = 1 << 20, .key = 9};
  rk_alt = rk_rw;
  rk_alt.key = 10;
  rk_alt.base = 0x400000;
  rk_ro = rk_rw;
  rk_ro.access = RMX_MEM_REMOTE_READ;
  rk_wo = rk_rw;
  rk_wo.access = RMX_MEM_REMOTE_WRITE;
  rk_other = rk_rw;
  rk_other.tpi = tpi + 1;
  FUZZ_CHECK(rmx_mem_reg(app.ctx, xsrc, sizeof(xsrc), RMX_MEM_LOCAL, &msrc) == 0);
  FUZZ_CHECK(rmx_mem_reg(app.ctx, xdst, sizeof(xdst), RMX_MEM_LOCAL, &mdst) == 0);
  FUZZ_CHECK(rmx_mem_reg(app.ctx, xsrc, 64, RMX_MEM_LOCAL, &msmall) == 0);
}

void fx_closed(void)
{
  uint8_t buf[128];
  size_t len;
  for (int i = 0; i < NS; i++) {
    slot_t *s = &S[i];
    if (!s->x)
      continue;
    FUZZ_CHECK(!s->busy); /* every callback before on_closed */
    FUZZ_CHECK(rmx_xfer_post(s->x, NULL, 0, xfer_cb, s) == RMX_ENOTCONN);
  }
  while (rmx_notify_take(app.c, buf, sizeof(buf), &len) == 0)
    took(buf, len);
}

/* After on_closed: every post ended before it; the requests outlive the
 * connection, name none, refuse posts, and release. */
void fx_end(void)
{
  rmx_mem_dereg(msrc);
  rmx_mem_dereg(mdst);
  rmx_mem_dereg(msmall);
  for (int i = 0; i < NS; i++) {
    slot_t *s = &S[i];
    if (!s->x)
      continue;
    FUZZ_CHECK(!s->busy);
    FUZZ_CHECK(rmx_xfer_conn(s->x) == NULL);
    FUZZ_CHECK(rmx_xfer_post(s->x, NULL, 0, xfer_cb, s) == RMX_ENOTCONN);
    size_t failed = 0;
    FUZZ_CHECK(rmx_xfer_status(s->x, &failed) == (s->ended ? s->status : 0));
    FUZZ_CHECK(rmx_ctx_destroy(app.ctx) == RMX_EBUSY); /* not while one is held */
    FUZZ_CHECK(rmx_xfer_release(s->x) == 0);
    s->x = NULL;
  }
}
