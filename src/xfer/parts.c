/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A posted transfer request's parts (the RMX_OP_XFER op class): posting
 * them from the lanes' one-sided queues, their reports, the request's end
 * and its notification. xfer.c prepares and posts requests (see there for
 * the model).
 */
#include <stdlib.h>
#include <string.h>

#include "xfer_int.h"

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
void rmx__xfer_lane_put(xlane_t *ln)
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
    rmx__xfer_lane_put(&x->lane[0]);
  }
  for (unsigned l = 1; l < RMX__LANES; l++)
    if (x->lane[l].op)
      rmx__xfer_lane_put(&x->lane[l]);
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

void rmx__xfer_deferred_over(rmx__deferred_t *d)
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

/* The length of the part that starts off bytes into segment si. */
static inline size_t part_len(const rmx_xfer_t *x, size_t si, size_t off)
{
  size_t left = x->seg[si].len - off;
  return left < x->most ? left : x->most;
}

/* Hand one part to the lane's transport: 0, or RMX_EAGAIN (ring full). */
static inline int part_post(rmx_conn_t *c, const rmx_xfer_t *x, const xseg_t *s, size_t off,
                            size_t n, uint64_t key, rmx__op_t *op)
{
  return x->kind == RMX_TP_EV_READ
             ? c->ops->read(c->tc, s->laddr + off, n, s->lmem, s->raddr + off, key, op)
             : c->ops->write(c->tc, s->laddr + off, n, s->lmem, s->raddr + off, key, NULL, op);
}

/* One lane: the parts in order, as they will be reported; nothing else to
 * keep. The cursor and the window in locals: nothing calls back while
 * posting. */
static int post_one(rmx_conn_t *c, rmx__op_t *op, rmx_xfer_t *x)
{
  size_t si = x->next_seg, off = x->next_off;
  uint32_t out = c->rma_out;
  int rc = 0;
  while (!x->stop && si < x->nseg) {
    if (out >= c->rma_window) {
      rc = RMX_EAGAIN; /* the peer's window is full: after a completion */
      break;
    }
    const xseg_t *s = &x->seg[si];
    size_t n = part_len(x, si, off);
    if ((rc = part_post(c, x, s, off, n, s->rkey, op)) != 0)
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
      p = (xpart_t){.seg = (uint32_t)si, .off = off, .len = (uint32_t)part_len(x, si, off)};
    } else {
      break;
    }
    const xseg_t *s = &x->seg[p.seg];
    if ((rc = part_post(c, x, s, p.off, p.len, l ? x->keys[s->ki][l] : s->rkey, op)) != 0)
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
    p = (xpart_t){.seg = (uint32_t)x->rep_seg, .off = x->rep_off,
                  .len = (uint32_t)part_len(x, x->rep_seg, x->rep_off)};
    if ((x->rep_off += p.len) == x->seg[x->rep_seg].len) {
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
    rmx__xfer_lane_put(ln); /* the rail may go */
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
    rmx__xfer_lane_put(ln);
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
