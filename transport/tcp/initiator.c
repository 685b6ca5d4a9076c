/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The initiator of one-sided operations: remote reads, writes and atomics
 * we ask of the peer. Each goes out as one request frame (a write's data
 * right behind it) and waits in a FIFO for its response, since the peer
 * answers in request order. A read's answer is not reassembled: after each
 * chunk's header, its data streams straight into the destination.
 */
#include <string.h>

#include "tcp.h"

/* The event that answers a pending request of this kind. */
static rmx_tp_ev_type_t pend_ev(const rd_t *rd)
{
  return rd->kind == TF_RD_REQ   ? RMX_TP_EV_READ
         : rd->kind == TF_WR_REQ ? RMX_TP_EV_WRITE
                                 : RMX_TP_EV_ATOMIC;
}

static rd_t *pend_new(rmx_tp_conn_t *tc, uint8_t kind, void *op)
{
  rd_t *rd = rec_get(&tc->tp->free_rd, &tc->tp->nfree_rd, sizeof(*rd));
  if (!rd)
    return NULL;
  memset(rd, 0, sizeof(*rd));
  rd->id = ++tc->rd_seq;
  rd->kind = kind;
  rd->op = op;
  return rd;
}

/* A request that will be answered: its pending entry (*out, for the caller
 * to complete: no answer comes before the loop runs again) and its frame,
 * with a write's data (r->len bytes) after it, in the batch the owner's
 * flush writes (after the sends posted before it). */
static int pend_post(rmx_tp_conn_t *tc, uint8_t kind, tf_req_t *r, const void *data, void *op,
                     rd_t **out)
{
  if (tc->dead || tc->closing || tc->state != TC_UP)
    return RMX_ENOTCONN;
  rd_t *rd = pend_new(tc, kind, op);
  wreq_t *w = rd ? rmx__tcp_wreq_get(tc, W_CTRL, NULL) : NULL;
  if (!w) {
    if (rd)
      RD_PUT(tc->tp, rd);
    return RMX_ENOMEM;
  }
  r->id = rd->id;
  size_t head = rmx__tf_req_put(w->hdr, kind, r);
  if (kind == TF_RD_DIR || kind == TF_WR_DIR) { /* answered as the plain kinds */
    rd->kind = kind == TF_RD_DIR ? TF_RD_REQ : TF_WR_REQ;
    rd->direct = 1;
  }
  /* Not uv_buf_init: a call into libuv per buffer, on every part posted. */
  uv_buf_t bufs[2] = {{.base = (char *)w->hdr, .len = head},
                      {.base = (char *)(uintptr_t)data, .len = r->len}};
  rmx__tcp_batch_add(tc, w, bufs, kind == TF_WR_REQ && r->len ? 2 : 1);
  rmx_list_push(&tc->rd_pending, &rd->link);
  *out = rd;
  return 0;
}

/* Does a read or write of len bytes go by the pipe's one copy? */
static int by_copy(rmx_tp_conn_t *tc, size_t len)
{
  size_t min = tc->tp->pipe->direct ? tc->tp->pipe->direct(tc, 0) : 0;
  return min && len >= min && len <= TF_MAX_IO;
}

int rmx__tcp_read(rmx_tp_conn_t *tc, void *dst, size_t len, rmx_tp_mem_t *dst_mem, uint64_t raddr,
                  uint64_t rkey, void *op)
{
  tf_req_t r = {.addr = raddr, .len = len, .key = rkey, .from = (uintptr_t)dst};
  rd_t *rd;
  (void)dst_mem; /* reads of any length: the answer comes in chunks */
  int rc = pend_post(tc, by_copy(tc, len) ? TF_RD_DIR : TF_RD_REQ, &r, NULL, op, &rd);
  if (rc == 0) {
    rd->dst = dst;
    rd->len = len;
    rd->raddr = raddr;
  }
  return rc;
}

int rmx__tcp_write(rmx_tp_conn_t *tc, const void *src, size_t len, rmx_tp_mem_t *src_mem,
                   uint64_t raddr, uint64_t rkey, const uint32_t *imm, void *op)
{
  tf_req_t r = {.addr = raddr, .len = len, .key = rkey, .flags = imm ? 1 : 0,
                .imm = imm ? *imm : 0, .from = (uintptr_t)src};
  rd_t *rd;
  (void)src_mem;
  if (len > TF_MAX_IO)
    return RMX_EMSGSIZE;
  return pend_post(tc, by_copy(tc, len) ? TF_WR_DIR : TF_WR_REQ, &r, src, op, &rd);
}

int rmx__tcp_atomic(rmx_tp_conn_t *tc, rmx_tp_atomic_t kind, uint64_t raddr, uint64_t rkey,
                    uint64_t cmp_add, uint64_t swap, uint64_t *old, void *op)
{
  tf_req_t r = {.addr = raddr, .key = rkey, .op = (uint32_t)kind, .cmp_add = cmp_add,
                .swap = swap};
  rd_t *rd;
  int rc = pend_post(tc, TF_AT_REQ, &r, NULL, op, &rd);
  if (rc == 0)
    rd->old = old;
  return rc;
}

static void pend_done(rmx_tp_conn_t *tc, rd_t *rd, int status)
{
  rmx_tp_ev_type_t t = pend_ev(rd);
  void *op = rd->op;
  rmx_list_del(&rd->link);
  RD_PUT(tc->tp, rd);
  tc_ev(tc, t, status, op, NULL, 0);
}

/* The oldest outstanding request, if it is of this kind. Reads lost to the
 * peer's end (they lead the list) wait for the connection's. */
static rd_t *pend_head(rmx_tp_conn_t *tc, uint8_t kind, uint64_t id)
{
  rmx_list_t *n;
  rmx_list_foreach(n, &tc->rd_pending) {
    rd_t *rd = rmx_container_of(n, rd_t, link);
    if (!rd->lost)
      return rd->kind == kind && rd->id == id ? rd : NULL;
  }
  return NULL;
}

/* Reads still owed an answer complete now, before CLOSED. */
void rmx__tcp_pend_cancel(rmx_tp_conn_t *tc)
{
  rmx_list_t *n;
  while ((n = rmx_list_pop(&tc->rd_pending)) != NULL) {
    rd_t *rd = rmx_container_of(n, rd_t, link);
    if (tc->owner)
      tc_ev(tc, pend_ev(rd), RMX_ECANCELED, rd->op, NULL, 0);
    RD_PUT(tc->tp, rd);
  }
}

/* A chunk of a read is in place; the read is done with its last. */
static void rd_landed(rmx_tp_conn_t *tc)
{
  rd_t *rd = tc->sink.rd;
  if (rd->got == rd->len)
    pend_done(tc, rd, 0);
}

/* A read response: match it to the oldest read, then stream its data. A
 * read is answered by one frame or more (chunks, in order); an error ends
 * it at any point. */
static void on_rd_resp(rmx_tp_conn_t *tc, const tf_resp_t *r, uint32_t blen)
{
  size_t dlen = blen - TF_RESP_SUB;
  rd_t *rd = pend_head(tc, TF_RD_REQ, r->id);

  if (!rd) {
    rmx__tcp_proto_fail(tc, "read response for no outstanding read");
    return;
  }
  if (r->status ? (dlen != 0 || r->status > 0)
                : rd->direct ? dlen != 0
                             : (dlen > rd->len - rd->got || (!dlen && rd->len))) {
    rmx__tcp_proto_fail(tc, "read response of the wrong length");
    return;
  }
  if (r->status || rd->direct) {
    int st = rmx__wire_status(r->status);
    /* The target checked the read, after every request before it, and
     * said yes: the bytes are ours to take from its memory, which it keeps
     * until our done. */
    if (st == 0 && rd->len) {
      st = tc->tp->pipe->pull(tc, rd->dst, rd->raddr, rd->len);
      if (st == RMX_EPROTO) {
        rmx__tcp_proto_fail(tc, "direct read answered on a connection that agreed to no such thing");
        return;
      }
      if (st == RMX_ECONNRESET) {
        /* The peer ended across the copy and may have reused the memory:
         * the bytes may not be the read's. The read fails with the
         * connection, which ends with what the peer sent before it. */
        rd->lost = 1;
        return;
      }
      if (st == 0)
        tc->tp->direct_bytes += rd->len;
      uint8_t id[TF_RDDONE_LEN];
      rmx__tf_done_put(id, rd->id);
      int rc = rmx__tcp_write_small(tc, W_CTRL, TF_RD_DONE, id, sizeof(id));
      if (rc) {
        rmx__tcp_fail(tc, rc);
        return;
      }
    }
    pend_done(tc, rd, st);
    return;
  }
  tc->sink = (sink_t){.dst = rd->dst + rd->got, .left = dlen, .done = rd_landed, .rd = rd};
  rd->got += dlen;
  rmx__tcp_sink_start(tc);
}

/* A response: to the oldest outstanding request, or the peer is cut off. */
void rmx__tcp_on_resp(rmx_tp_conn_t *tc, uint8_t kind, const uint8_t *body, uint32_t blen)
{
  tf_resp_t r;
  rmx__tf_resp_get(body, kind, &r);
  if (kind == TF_RD_RESP) {
    on_rd_resp(tc, &r, blen);
    return;
  }
  rd_t *rd = pend_head(tc, kind == TF_WR_RESP ? TF_WR_REQ : TF_AT_REQ, r.id);
  if (!rd) {
    rmx__tcp_proto_fail(tc, kind == TF_WR_RESP ? "write response for no outstanding write"
                                               : "atomic response for no outstanding atomic");
    return;
  }
  int32_t st = rmx__wire_status(r.status);
  if (kind == TF_AT_RESP && st == 0)
    *rd->old = r.old;
  pend_done(tc, rd, st);
}
