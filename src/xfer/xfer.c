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

#include "xfer_int.h"

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

/* Entry i is refused for why: one line (at most one a second: a loop that
 * prepares bad requests must not fill the log), then rc for the caller. */
static int refuse_entry(const rmx_xfer_t *x, const rmx_xfer_entry_t *e, size_t i, int rc,
                        const char *why)
{
  RMX_LOG_LIMITED(x->ctx, &x->ctx->rl_xfer, WARN,
                  "transfer request on %s: entry %zu refused (%s): %s, %zu bytes at offset %llu",
                  x->c->peer, i, rmx_err_name(rc), why, e->len, (unsigned long long)e->offset);
  return rc;
}

/* Check entry i and add it to the segments, merged with the last where both
 * sides continue it. */
static int add_entry(rmx_xfer_t *x, rmx_mem_t **segmem, const rmx_xfer_entry_t *e, size_t i,
                     unsigned need)
{
  rmx_conn_t *c = x->c;
  const rmx_rkey_t *rk = e->rkey;
  x->elen[i] = e->len;
  if (!e->addr && e->len)
    return refuse_entry(x, e, i, RMX_EINVAL, "a NULL address");
  if (!rk || rk->tpi != c->tpi)
    return refuse_entry(x, e, i, RMX_EINVAL, !rk ? "no key" : "a key of another transport");
  if (!(rk->access & need))
    return refuse_entry(x, e, i, RMX_EACCES, "the key lacks the right");
  if (e->offset > rk->len || e->len > rk->len - e->offset)
    return refuse_entry(x, e, i, RMX_EACCES, "the range leaves the region");
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
  x->defer.fn = rmx__xfer_deferred_over;
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
          rmx__xfer_lane_put(&x->lane[l]);
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
