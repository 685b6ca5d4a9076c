/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Transfer requests: many (local, remote, length) entries, all reads or all
 * writes, posted to one connection as one operation with one completion.
 *
 * Preparing does everything that does not change between posts: checks
 * the keys and ranges, merges entries contiguous on both sides into
 * segments, and resolves each segment's local registration (holding the
 * cache's entry). Posting then only walks the segments: one op in the
 * connection's rmaq posts parts of at most the connection's io_max while
 * the send ring and the peer's window have room, and the transport reports
 * each part, in the order posted, against that op. The first part that
 * fails stops the posting; the request ends once every posted part is
 * reported. A write request with a notification sends it as a message
 * (RMX_FF_NOTIFY) after every part has been reported in place, so the
 * target sees it only after the bytes, on any transport (docs/transfer.md).
 *
 * With rails (src/rails.c) a large request's parts go over several lanes:
 * each lane's op takes the next part while its window has room, so the
 * faster lanes take more, and reports its own parts in order (its ring).
 * A rail lost hands its unreported parts back (redo) to the lanes left.
 */
#include <stdlib.h>
#include <string.h>

#include "rails.h"
#include "rmx_int.h"

typedef struct xseg {
  uint8_t *laddr;
  uint64_t raddr, rkey;
  size_t len;
  size_t entry;       /* the first entry it covers */
  rmx_tp_mem_t *lmem; /* its local registration (NULL where none is needed) */
  uint32_t ki;        /* its key in x->keys: the rails' */
} xseg_t;

/* One part posted: where in which segment. */
typedef struct xpart {
  uint32_t seg, len;
  uint64_t off;
} xpart_t;

/* One lane a post uses: the connection (0) or one of its rails (the lane
 * of an op is its connection's: conn->lane). Each reports its parts in
 * the order posted, kept in its ring. */
typedef struct xlane {
  rmx__op_t *op;   /* while this post uses the lane */
  uint8_t l, queued, dead; /* queued: op is in the lane's rmaq */
  uint32_t cap, head, n;
  uint32_t share;  /* parts it keeps out at once: an even split of the request */
  xpart_t *ring;
} xlane_t;

struct rmx_xfer {
  rmx_ctx_t *ctx;
  rmx_conn_t *c;   /* NULL once the connection is freed */
  rmx_list_t link; /* in c->xfers */
  uint8_t kind;    /* RMX_TP_EV_READ / WRITE */
  uint8_t busy;    /* posted, not ended */
  uint8_t stop;    /* a part failed: post no more */
  uint8_t notifies; /* this post carries a notification (maybe of 0 bytes) */
  uint8_t lanes_key; /* lanes every key of the request holds one for */
  uint8_t striped; /* this post uses more than one lane (each then keeps a ring) */
  xseg_t *seg;
  size_t nseg;
  size_t *elen;    /* the entries' lengths, to name the one that failed */
  size_t nent;
  uint64_t bytes;
  rmx__rc_entry_t **cached; /* per segment: the cache entry held, or NULL */
  uint64_t (*keys)[RMX__LANES]; /* the request's keys, by lane */
  size_t nkeys;
  xlane_t lane[RMX__LANES];
  xpart_t *redo;   /* parts of rails lost, to post again */
  size_t nredo, redo_cap;
  size_t most;     /* part size of this post */
  size_t next_seg, next_off; /* what is posted next */
  size_t rep_seg, rep_off;   /* one lane: the part it reports next */
  uint64_t posted, done;
  int status, lane_err;
  size_t failed;
  uint8_t *notify;
  size_t notify_len, notify_cap;
  rmx_xfer_cb cb;
  void *arg;
  rmx__deferred_t defer; /* a request with nothing to move still ends from the loop */
};

/* ---- ending ---- */

static void finish(rmx_xfer_t *x, int status, size_t failed)
{
  x->busy = 0;
  x->status = status;
  x->failed = status ? failed : RMX_XFER_NO_ENTRY;
  if (status && x->c)
    x->c->st.errors++;
  if (x->cb)
    x->cb(x, status, x->failed, x->arg);
}

static void notify_sent(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  finish(arg, status, RMX_XFER_NO_ENTRY);
}

/* A lane's op goes (its connection may then be freed). */
static void lane_put(xlane_t *ln)
{
  if (ln->queued)
    rmx_list_del(&ln->op->link);
  ln->queued = 0;
  rmx__op_put(ln->op);
  ln->op = NULL;
}

/* Every posted part is reported: send the notification, or end. */
static void parts_over(rmx_xfer_t *x)
{
  rmx_conn_t *c = x->c;
  int status = x->status;
  if (x->lane[0].op) {
    status = rmx__op_status(x->lane[0].op->conn, status);
    lane_put(&x->lane[0]);
  }
  for (unsigned l = 1; l < RMX__LANES; l++)
    if (x->lane[l].op)
      lane_put(&x->lane[l]);
  if (status == 0 && x->notifies) {
    status = c ? rmx__msg_send(c, x->notify, x->notify_len, NULL, RMX_FF_NOTIFY, NULL,
                               notify_sent, x, NULL)
               : RMX_ENOTCONN;
    if (status == 0)
      return;
    status = c ? rmx__op_status(c, status) : status; /* closed here: RMX_ECANCELED */
    x->failed = RMX_XFER_NO_ENTRY;
  }
  finish(x, status, x->failed);
}

static void deferred_over(rmx__deferred_t *d)
{
  parts_over(rmx_container_of(d, rmx_xfer_t, defer));
}

/* The entry that holds byte off of segment s. */
static size_t entry_at(const rmx_xfer_t *x, size_t s, size_t off)
{
  size_t e = x->seg[s].entry;
  while (e + 1 < x->nent && off >= x->elen[e]) {
    off -= x->elen[e];
    e++;
  }
  return e;
}

static int all_reported(const rmx_xfer_t *x)
{
  return x->done == x->posted && (x->stop || (x->next_seg == x->nseg && !x->nredo));
}

/* Parts came back from a lost rail: the lanes still up take them. None
 * left: the request fails with the rail's error. */
static void lanes_kick(rmx_xfer_t *x)
{
  int live = 0;
  for (unsigned l = 0; l < RMX__LANES; l++) {
    xlane_t *ln = &x->lane[l];
    if (!ln->op || ln->dead || ln->op->conn->state != RMX_CS_ESTABLISHED)
      continue;
    live = 1;
    if (!ln->queued) {
      ln->queued = 1;
      rmx_list_push(&ln->op->conn->rmaq, &ln->op->link);
      rmx__msg_progress(ln->op->conn);
    }
  }
  if (!live && !x->stop) {
    x->status = x->lane_err;
    x->failed = RMX_XFER_NO_ENTRY;
    x->stop = 1;
  }
}

/* ---- posting ---- */

/* One lane: the parts in order, as they will be reported; nothing else to
 * keep. The cursor and the window in locals: nothing calls back while
 * posting. */
static int post_one(rmx_conn_t *c, rmx__op_t *op, rmx_xfer_t *x)
{
  const int reading = x->kind == RMX_TP_EV_READ;
  size_t si = x->next_seg, off = x->next_off;
  uint32_t out = c->rma_out;
  int rc = 0;
  while (!x->stop && si < x->nseg) {
    if (out >= c->rma_window) {
      rc = RMX_EAGAIN; /* the peer's window is full: after a completion */
      break;
    }
    const xseg_t *s = &x->seg[si];
    size_t n = s->len - off < x->most ? s->len - off : x->most;
    rc = reading ? c->ops->read(c->tc, s->laddr + off, n, s->lmem, s->raddr + off, s->rkey, op)
                 : c->ops->write(c->tc, s->laddr + off, n, s->lmem, s->raddr + off, s->rkey,
                                 NULL, op);
    if (rc)
      break; /* RMX_EAGAIN: the ring is full, again after a completion */
    out++;
    x->posted++;
    if ((off += n) == s->len) {
      si++;
      off = 0;
    }
  }
  x->next_seg = si;
  x->next_off = off;
  c->rma_out = out;
  if (!rc)
    x->lane[0].queued = 0; /* rmx__rma_progress takes it off the rmaq */
  return rc;
}

/* Several lanes: the next part (or one given back), within the lane's
 * share, remembered in its ring. */
static int post_parts(rmx_conn_t *c, rmx__op_t *op)
{
  rmx_xfer_t *x = op->arg;
  xlane_t *ln = &x->lane[c->lane];
  if (!x->striped)
    return post_one(c, op, x);
  const int reading = x->kind == RMX_TP_EV_READ;
  const unsigned l = ln->l;
  size_t si = x->next_seg, off = x->next_off;
  uint32_t out = c->rma_out;
  int rc = 0;
  if (l && c->state != RMX_CS_ESTABLISHED)
    ln->dead = 1; /* a rail closing: the other lanes take the rest */
  while (!x->stop && !ln->dead && ln->n < ln->share) {
    if (out >= c->rma_window) {
      rc = RMX_EAGAIN; /* the peer's window is full: after a completion */
      break;
    }
    xpart_t p;
    if (x->nredo) {
      p = x->redo[x->nredo - 1];
    } else if (si < x->nseg) {
      size_t left = x->seg[si].len - off;
      p = (xpart_t){.seg = (uint32_t)si, .off = off,
                    .len = (uint32_t)(left < x->most ? left : x->most)};
    } else {
      break;
    }
    const xseg_t *s = &x->seg[p.seg];
    uint64_t key = l ? x->keys[s->ki][l] : s->rkey;
    rc = reading ? c->ops->read(c->tc, s->laddr + p.off, p.len, s->lmem, s->raddr + p.off, key,
                                op)
                 : c->ops->write(c->tc, s->laddr + p.off, p.len, s->lmem, s->raddr + p.off, key,
                                 NULL, op);
    if (rc)
      break; /* RMX_EAGAIN: the ring is full, again after a completion */
    out++;
    x->posted++;
    ln->ring[(ln->head + ln->n++) % ln->cap] = p;
    if (x->nredo) {
      x->nredo--;
    } else if ((off += p.len) == x->seg[si].len) {
      si++;
      off = 0;
    }
  }
  x->next_seg = si;
  x->next_off = off;
  c->rma_out = out;
  if (!rc)
    ln->queued = 0; /* rmx__rma_progress takes it off the rmaq */
  return rc;
}

/* The transport reported one part (each lane in the order posted). */
static void part_done(rmx_conn_t *c, rmx__op_t *op, int status)
{
  rmx_xfer_t *x = op->arg;
  xlane_t *ln = &x->lane[c->lane];
  xpart_t p;
  if (x->striped) {
    p = ln->ring[ln->head];
    ln->head = (ln->head + 1) % ln->cap;
    ln->n--;
  } else { /* one lane: the part after the last reported */
    size_t left = x->seg[x->rep_seg].len - x->rep_off;
    p = (xpart_t){.seg = (uint32_t)x->rep_seg, .off = x->rep_off,
                  .len = (uint32_t)(left < x->most ? left : x->most)};
    if (left > x->most) {
      x->rep_off += x->most;
    } else {
      x->rep_seg++;
      x->rep_off = 0;
    }
  }
  x->done++;
  int again = 0;
  if (status && ln->l)
    status = rmx__op_status(c, status); /* a rail's loss, not a cancel */
  if (!status && c->rails) {
    c->rails->parts[ln->l]++;
    c->rails->bytes[ln->l] += p.len;
  }
  if (status == RMX_EACCES || status == RMX_EINVAL) {
    /* An entry is to blame for what the target refused, also where the
     * refusal ended the connection (verbs: its DISCONNECTED comes first);
     * for none where a connection was lost: docs/transfer.md. */
    if (!x->status) {
      x->status = status;
      x->failed = entry_at(x, p.seg, p.off);
    }
    x->stop = 1;
  } else if (status && ln->l && x->c && x->c->state == RMX_CS_ESTABLISHED && !x->stop) {
    /* A rail lost: its part goes again over the lanes left. */
    x->redo[x->nredo++] = p;
    x->lane_err = status;
    ln->dead = 1;
    again = 1;
  } else if (status) {
    if (!x->status) {
      x->status = status;
      x->failed = RMX_XFER_NO_ENTRY;
    }
    x->stop = 1;
  }
  if (ln->dead && !ln->n)
    lane_put(ln); /* the rail may go */
  else if (x->striped && ln->op && !ln->queued && !ln->dead && !x->stop &&
           (x->nredo || x->next_seg < x->nseg)) {
    ln->queued = 1; /* below its share again: it takes the next part */
    rmx_list_push(&c->rmaq, &op->link);
  }
  if (again)
    lanes_kick(x);
  if (all_reported(x))
    parts_over(x);
  /* A slot freed: what waited for room may go (also a drain before BYE). */
  if (c->state == RMX_CS_ESTABLISHED || c->bye_wait)
    rmx__msg_progress(c);
}

/* A lane's connection is gone and every part it posted was reported. */
static void parts_fail(rmx__op_t *op, int status)
{
  rmx_xfer_t *x = op->arg;
  xlane_t *ln = &x->lane[op->conn->lane];
  ln->queued = 0;
  if (ln->l && x->c && x->c->state == RMX_CS_ESTABLISHED && !x->stop) {
    x->lane_err = status;
    ln->dead = 1;
    lane_put(ln);
    lanes_kick(x);
  } else if (!x->status) {
    x->status = status;
    x->failed = RMX_XFER_NO_ENTRY;
    x->stop = 1;
  }
  if (all_reported(x))
    parts_over(x);
}

const rmx__op_class_t rmx__xfer_class = {.done = part_done, .fail = parts_fail, .post = post_parts};

/* ---- the calls ---- */

static void xfer_free(rmx_xfer_t *x)
{
  for (size_t i = 0; x->cached && i < x->nseg; i++)
    if (x->cached[i])
      rmx__regcache_put(x->ctx, x->cached[i]);
  if (x->c)
    rmx_list_del(&x->link);
  x->ctx->nxfers--;
  for (unsigned l = 0; l < RMX__LANES; l++)
    free(x->lane[l].ring);
  free(x->redo);
  free(x->keys);
  free(x->seg);
  free(x->elen);
  free(x->cached);
  free(x->notify);
  free(x);
}

/* The key entry for rk: the last one where rk continues it, else a new one. */
static int key_add(rmx_xfer_t *x, const rmx_rkey_t *rk, uint32_t *ki)
{
  if (x->nkeys && x->keys[x->nkeys - 1][0] == rk->key) {
    *ki = (uint32_t)(x->nkeys - 1);
    x->lanes_key &= rk->lanes;
    return 0;
  }
  if ((x->nkeys & (x->nkeys - 1)) == 0) { /* 0, 1, 2, 4 ...: grow */
    void *p = realloc(x->keys, (x->nkeys ? 2 * x->nkeys : 1) * sizeof(*x->keys));
    if (!p)
      return RMX_ENOMEM;
    x->keys = p;
  }
  memcpy(x->keys[x->nkeys], rk->lane_key, sizeof(x->keys[0]));
  x->lanes_key &= rk->lanes;
  *ki = (uint32_t)x->nkeys++;
  return 0;
}

/* Check entry i and add it to the segments, merged with the last where both
 * sides continue it. */
static int add_entry(rmx_xfer_t *x, rmx_mem_t **segmem, const rmx_xfer_entry_t *e, size_t i,
                     unsigned need)
{
  rmx_conn_t *c = x->c;
  const rmx_rkey_t *rk = e->rkey;
  x->elen[i] = e->len;
  if ((!e->addr && e->len) || !rk || rk->tpi != c->tpi)
    return RMX_EINVAL;
  if (!(rk->access & need) || e->offset > rk->len || e->len > rk->len - e->offset) {
    RMX_LOG(c->ctx, DEBUG, "transfer entry %zu: %s", i,
            !(rk->access & need) ? "the key lacks the right" : "the range leaves the region");
    return RMX_EACCES;
  }
  if (!e->len)
    return 0;
  uint32_t ki;
  int rc = key_add(x, rk, &ki);
  if (rc)
    return rc;
  x->bytes += e->len;
  uint8_t *laddr = e->addr;
  uint64_t raddr = rk->base + e->offset;
  xseg_t *p = x->nseg ? &x->seg[x->nseg - 1] : NULL;
  if (p && p->laddr + p->len == laddr && p->raddr + p->len == raddr && p->rkey == rk->key &&
      segmem[x->nseg - 1] == e->mem) {
    p->len += e->len;
    return 0;
  }
  segmem[x->nseg] = e->mem;
  x->seg[x->nseg++] = (xseg_t){.laddr = laddr, .raddr = raddr, .rkey = rk->key, .len = e->len,
                               .entry = i, .ki = ki};
  return 0;
}

int rmx_xfer_prep(rmx_conn_t *c, rmx_xfer_op_t op, const rmx_xfer_entry_t *e, size_t n,
                  rmx_xfer_t **out)
{
  if (!c || !e || !out || n < 1 || n > RMX_XFER_MAX_ENTRIES ||
      (op != RMX_XFER_WRITE && op != RMX_XFER_READ))
    return RMX_EINVAL;
  if (c->state != RMX_CS_ESTABLISHED)
    return RMX_ENOTCONN;
  rmx_xfer_t *x = calloc(1, sizeof(*x));
  rmx_mem_t **segmem = malloc(n * sizeof(*segmem));
  if (x) {
    x->seg = malloc(n * sizeof(*x->seg));
    x->elen = malloc(n * sizeof(*x->elen));
  }
  if (!x || !segmem || !x->seg || !x->elen) {
    if (x) {
      free(x->seg);
      free(x->elen);
    }
    free(x);
    free(segmem);
    return RMX_ENOMEM;
  }
  x->ctx = c->ctx;
  x->c = c;
  x->kind = op == RMX_XFER_READ ? RMX_TP_EV_READ : RMX_TP_EV_WRITE;
  x->nent = n;
  x->status = 0;
  x->failed = RMX_XFER_NO_ENTRY;
  x->lanes_key = 0xff;
  for (unsigned l = 0; l < RMX__LANES; l++)
    x->lane[l].l = (uint8_t)l;
  rmx_list_init(&x->defer.link);
  x->defer.fn = deferred_over;
  rmx_list_push(&c->xfers, &x->link);
  c->ctx->nxfers++;
  unsigned need = op == RMX_XFER_READ ? RMX_MEM_REMOTE_READ : RMX_MEM_REMOTE_WRITE;
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++)
    rc = add_entry(x, segmem, &e[i], i, need);
  if (!rc && x->nseg && !(x->cached = calloc(x->nseg, sizeof(*x->cached))))
    rc = RMX_ENOMEM;
  unsigned acc = op == RMX_XFER_READ ? RMX_TP_ACC_LOCAL : 0;
  for (size_t i = 0; i < x->nseg && !rc; i++)
    rc = rmx__mem_local(c, x->seg[i].laddr, x->seg[i].len, acc, segmem[i], &x->seg[i].lmem,
                        &x->cached[i]);
  free(segmem);
  if (rc) {
    xfer_free(x);
    return rc;
  }
  *out = x;
  return 0;
}

/* Each lane of this post: an op in its connection's rmaq, and a ring for
 * as many parts as its peer's window lets out at once. */
static int lanes_open(rmx_xfer_t *x, rmx_conn_t *const lc[RMX__LANES])
{
  size_t redo = 0;
  for (unsigned l = 0; x->striped && l < RMX__LANES; l++) {
    xlane_t *ln = &x->lane[l];
    if (!lc[l])
      continue;
    uint32_t want = lc[l]->rma_window;
    if (ln->cap < want) {
      xpart_t *r = realloc(ln->ring, want * sizeof(*r));
      if (!r)
        return RMX_ENOMEM;
      ln->ring = r;
      ln->cap = want;
    }
    redo += ln->cap;
  }
  if (x->redo_cap < redo) {
    xpart_t *r = realloc(x->redo, redo * sizeof(*r));
    if (!r)
      return RMX_ENOMEM;
    x->redo = r;
    x->redo_cap = redo;
  }
  for (unsigned l = 0; l < RMX__LANES; l++) {
    xlane_t *ln = &x->lane[l];
    if (!lc[l])
      continue;
    if (!(ln->op = rmx__op_get(x->ctx, lc[l], RMX_OP_XFER))) {
      while (l--)
        if (x->lane[l].op)
          lane_put(&x->lane[l]);
      return RMX_ENOMEM;
    }
    ln->op->arg = x; /* the lane is its connection's: x->lane[conn->lane] */
    ln->head = ln->n = 0;
    ln->dead = 0;
    ln->queued = 1;
    rmx_list_push(&lc[l]->rmaq, &ln->op->link);
  }
  return 0;
}

int rmx_xfer_post(rmx_xfer_t *x, const void *notify, size_t notify_len, rmx_xfer_cb cb,
                  void *arg)
{
  if (!x || (!notify && notify_len) || (notify && x->kind == RMX_TP_EV_READ))
    return RMX_EINVAL;
  if (x->busy)
    return RMX_EBUSY;
  rmx_conn_t *c = x->c;
  if (!c || c->state != RMX_CS_ESTABLISHED)
    return RMX_ENOTCONN;
  if (notify && notify_len > c->eager_max)
    return RMX_EMSGSIZE;
  if (notify_len > x->notify_cap) {
    uint8_t *p = realloc(x->notify, notify_len);
    if (!p)
      return RMX_ENOMEM;
    x->notify = p;
    x->notify_cap = notify_len;
  }
  /* The lanes: the connection, and for a request large enough its rails
   * that every key covers. */
  rmx_conn_t *lc[RMX__LANES] = {c};
  unsigned nl = 1;
  for (unsigned l = 1; c->rails && x->bytes >= RMX_RAIL_MIN_BYTES && l < RMX__LANES; l++)
    if ((x->lanes_key >> l & 1) && (lc[l] = rmx__rail_up(c->rails, l)) != NULL)
      nl++;
  x->striped = nl > 1;
  if (x->nseg && lanes_open(x, lc) != 0)
    return RMX_ENOMEM;
  if (notify_len)
    memcpy(x->notify, notify, notify_len);
  x->notify_len = notify_len;
  x->notifies = notify != NULL;
  x->busy = 1;
  x->stop = 0;
  x->status = x->lane_err = 0;
  x->failed = RMX_XFER_NO_ENTRY;
  x->cb = cb;
  x->arg = arg;
  x->next_seg = x->next_off = x->rep_seg = x->rep_off = 0;
  x->posted = x->done = 0;
  x->nredo = 0;
  x->most = rmx__io_most(c);
  uint32_t share = UINT32_MAX;
  if (nl > 1) { /* parts of at most 1 MiB, an even share of them on each lane */
    uint64_t parts = 0;
    x->most = x->most < RMX_RAIL_MIN_BYTES ? x->most : RMX_RAIL_MIN_BYTES;
    for (size_t i = 0; i < x->nseg; i++)
      parts += (x->seg[i].len + x->most - 1) / x->most;
    share = (uint32_t)((parts + nl - 1) / nl);
  }
  for (unsigned l = 0; l < RMX__LANES; l++)
    x->lane[l].share = share;
  if (!x->nseg) { /* nothing to move: only the notification, if any */
    rmx__defer(c->ctx, &x->defer);
    return 0;
  }
  for (unsigned l = 0; l < RMX__LANES; l++)
    if (x->lane[l].op)
      rmx__msg_progress(lc[l]);
  return 0;
}

int rmx_xfer_status(const rmx_xfer_t *x, size_t *failed)
{
  if (!x)
    return RMX_EINVAL;
  if (failed)
    *failed = x->busy ? RMX_XFER_NO_ENTRY : x->failed;
  return x->busy ? RMX_EINPROGRESS : x->status;
}

int rmx_xfer_release(rmx_xfer_t *x)
{
  if (!x)
    return 0;
  if (x->busy)
    return RMX_EBUSY;
  xfer_free(x);
  return 0;
}

rmx_conn_t *rmx_xfer_conn(const rmx_xfer_t *x) { return x ? x->c : NULL; }

void rmx__xfer_conn_gone(rmx_conn_t *c)
{
  rmx_list_t *n;
  while ((n = rmx_list_pop(&c->xfers)) != NULL) {
    rmx_xfer_t *x = rmx_container_of(n, rmx_xfer_t, link);
    rmx_list_init(&x->link);
    x->c = NULL;
  }
  rmx__notify_conn_gone(c);
}
