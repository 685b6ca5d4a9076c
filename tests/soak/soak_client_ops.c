/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The soak client's traffic: on each connection up to SOAK_SLOTS operations
 * at once, each a random pick of a message the server echoes, an RPC it
 * answers with a transform, a one-sided write read back from the same
 * place, or a read of the lane the server filled. Every result is checked
 * byte for byte; every callback is matched to the operation it belongs to.
 */
#include <stdio.h>
#include <string.h>

#include "soak_client.h"

#define ID_ARG(id) ((void *)(uintptr_t)(id))

static op_t *op_find(cconn_t *cc, uint64_t id)
{
  for (int i = 0; i <= SOAK_SLOTS; i++)
    if (cc->ops[i].id == id)
      return &cc->ops[i];
  return NULL;
}

static op_t *op_new(cconn_t *cc, int slot, int kind, size_t len)
{
  op_t *op = &cc->ops[slot];
  memset(op, 0, sizeof(*op));
  op->id = cc->next_id++;
  op->kind = kind;
  op->len = len;
  op->seq = cc->seq++;
  op->need_cb = 1;
  return op;
}

/* The callback of operation arg on connection c: it must be owed. */
static op_t *arrive(rmx_conn_t *c, void *arg, cconn_t **ccp)
{
  uint64_t id = (uint64_t)(uintptr_t)arg;
  cconn_t *cc = soak_find(c);
  *ccp = cc;
  if (!cc) {
    soak_violation(NULL, "callback on a connection we do not have", id);
    return NULL;
  }
  if (cc->closed)
    soak_violation(cc, "callback after on_closed", id);
  op_t *op = op_find(cc, id);
  if (!op || !op->need_cb) {
    soak_violation(cc, "callback of an operation not in flight (twice?)", id);
    return NULL;
  }
  op->need_cb = 0;
  return op;
}

/* A failed operation: explained only if the connection is lost next. */
static void failed(cconn_t *cc, op_t *op)
{
  cc->errs_pending++;
  op->id = 0;
}

static void finish(cconn_t *cc, op_t *op, unsigned long *kind_count)
{
  if (op->need_cb || op->need_echo)
    return;
  (*kind_count)++;
  C.ops++;
  op->id = 0;
  soak_pump(cc);
}

static void count_bad(cconn_t *cc, size_t bad, const op_t *op, const char *what)
{
  if (!bad)
    return;
  C.corrupt += bad;
  fprintf(stderr, "soak client %d: %zu bad bytes in %s of op %#llx (%zu bytes at %llu) on %s\n",
          C.idx, bad, what, (unsigned long long)op->id, op->len, (unsigned long long)op->off,
          cc->uri);
}

/* Where a reply's bad bytes lie (one stretch, or runs scattered over it:
 * two copies into one buffer) and how many are zero or the request itself
 * untransformed, for whoever reads the log. */
static void where_bad(const unsigned char *got, const unsigned char *sent, size_t n)
{
  size_t first = n, last = 0, runs = 0, zero = 0, raw = 0;
  for (size_t i = 0; i < n; i++) {
    if ((got[i] ^ SOAK_XOR) == sent[i])
      continue;
    if (first == n)
      first = i;
    if (i == 0 || (got[i - 1] ^ SOAK_XOR) == sent[i - 1])
      runs++;
    last = i;
    zero += got[i] == 0;
    raw += got[i] == sent[i];
  }
  fprintf(stderr, "soak client %d: bad bytes from %zu to %zu in %zu runs; %zu zero, %zu equal to "
          "the request untransformed\n", C.idx, first, last, runs, zero, raw);
}

/* ---- messages: sent, then echoed in order ---- */

static void msg_sent(rmx_conn_t *c, int status, void *arg)
{
  cconn_t *cc;
  op_t *op = arrive(c, arg, &cc);
  if (!op)
    return;
  if (status) {
    failed(cc, op);
    return;
  }
  finish(cc, op, &C.msgs);
}

void soak_on_recv(rmx_conn_t *c, const void *data, size_t n, void *arg)
{
  cconn_t *cc = arg;
  op_t *op = NULL;
  if (cc->closed)
    soak_violation(cc, "message after on_closed", 0);
  for (int i = 0; i < SOAK_SLOTS; i++) /* the oldest echo owed is this one */
    if (cc->ops[i].id && cc->ops[i].need_echo && (!op || cc->ops[i].seq < op->seq))
      op = &cc->ops[i];
  if (!op) {
    soak_violation(cc, "an echo nobody waits for (sent again?)", 0);
    return;
  }
  op->need_echo = 0;
  if (n != op->len)
    count_bad(cc, n > op->len ? n : op->len, op, "an echo's length");
  else
    count_bad(cc, soak_payload_check(data, n, op->id), op, "an echo");
  finish(cc, op, &C.msgs);
}

/* ---- RPC: the reply is the request with every byte ^ SOAK_XOR ---- */

static void rpc_reply(rmx_conn_t *c, int status, const void *data, size_t n, void *arg)
{
  cconn_t *cc;
  op_t *op = arrive(c, arg, &cc);
  if (!op)
    return;
  if (status) {
    failed(cc, op);
    return;
  }
  const unsigned char *got = data, *sent = cc->buf[op - cc->ops];
  size_t bad = n == op->len ? 0 : (n > op->len ? n : op->len);
  for (size_t i = 0; n == op->len && i < n; i++)
    bad += (got[i] ^ SOAK_XOR) != sent[i];
  count_bad(cc, bad, op, "an RPC reply");
  if (bad && n == op->len)
    where_bad(got, sent, n);
  finish(cc, op, &C.rpcs);
}

/* ---- one-sided ---- */

static void readback_done(rmx_conn_t *c, int status, void *arg)
{
  cconn_t *cc;
  op_t *op = arrive(c, arg, &cc);
  if (!op)
    return;
  if (status) {
    failed(cc, op);
    return;
  }
  unsigned char *dst = cc->buf[op - cc->ops] + SOAK_LANE;
  count_bad(cc, soak_pattern_check(dst, op->len, soak_mix(op->ref), 0), op, "a read-back");
  finish(cc, op, &C.reads);
}

static void write_done(rmx_conn_t *c, int status, void *arg)
{
  cconn_t *cc;
  op_t *op = arrive(c, arg, &cc);
  if (!op)
    return;
  if (status) {
    failed(cc, op);
    return;
  }
  C.writes++;
  C.ops++;
  /* Read the same bytes back into the slot's other half: a new operation. */
  int slot = (int)(op - cc->ops);
  uint64_t ref = op->id, off = op->off;
  size_t n = op->len;
  if (C.draining) {
    op->id = 0;
    return;
  }
  op = op_new(cc, slot, OP_READBACK, n);
  op->ref = ref;
  op->off = off;
  unsigned char *dst = cc->buf[slot] + SOAK_LANE;
  memset(dst, 0xee, n); /* stale bytes must not pass for read ones */
  int rc = rmx_read(cc->c, &(rmx_iov_t){dst, n, NULL}, 1, cc->rk, off, readback_done,
                    ID_ARG(op->id));
  if (rc) {
    op->id = 0;
    if (rc != RMX_ENOTCONN) {
      C.call_errors++;
      fprintf(stderr, "soak client %d: rmx_read: %s\n", C.idx, rmx_strerror(rc));
    }
  }
}

static void read_done(rmx_conn_t *c, int status, void *arg)
{
  cconn_t *cc;
  op_t *op = arrive(c, arg, &cc);
  if (!op)
    return;
  if (status) {
    failed(cc, op);
    return;
  }
  uint64_t lane_off = op->off - (uint64_t)cc->key.lanes * cc->key.lane;
  count_bad(cc, soak_pattern_check(cc->buf[op - cc->ops], op->len, cc->key.seed, lane_off),
            op, "a read of the server's lane");
  finish(cc, op, &C.reads);
}

/* ---- the key of the current server's region ---- */

static void key_reply(rmx_conn_t *c, int status, const void *data, size_t n, void *arg)
{
  cconn_t *cc;
  op_t *op = arrive(c, arg, &cc);
  if (!op)
    return;
  if (status) {
    failed(cc, op);
    return;
  }
  op->id = 0;
  int rc = RMX_EINVAL;
  if (n > sizeof(soak_key_t)) {
    memcpy(&cc->key, data, sizeof(soak_key_t));
    rc = rmx_rkey_unpack(c, (const char *)data + sizeof(soak_key_t), n - sizeof(soak_key_t),
                         &cc->rk);
  }
  if (rc || cc->key.lane != SOAK_LANE || cc->key.lanes != SOAK_LANES ||
      rmx_rkey_size(cc->rk) != SOAK_REGION) {
    C.call_errors++;
    fprintf(stderr, "soak client %d: a bad key from %s (%s)\n", C.idx, cc->uri, rmx_strerror(rc));
    if (!rc)
      rmx_rkey_release(cc->rk);
    cc->rk = NULL;
    return;
  }
  soak_pump(cc);
}

void soak_fetch_key(cconn_t *cc)
{
  op_t *op = op_new(cc, SOAK_KEY_SLOT, OP_KEY, 0);
  int rc = rmx_rpc_call(cc->c, SOAK_RPC_KEY, NULL, 0, 30000, key_reply, ID_ARG(op->id), NULL);
  if (rc) {
    op->id = 0;
    if (rc != RMX_ENOTCONN)
      C.call_errors++;
  }
}

/* ---- issuing ---- */

/* Sizes spread over every path: tiny, eager, small rendezvous, large. */
static size_t pick_len(size_t min, size_t max)
{
  uint64_t r = soak_range(&C.rng, 0, 99);
  size_t n = r < 30   ? soak_range(&C.rng, 0, 256)
             : r < 60 ? soak_range(&C.rng, 257, 8192)
             : r < 85 ? soak_range(&C.rng, 8193, 256 << 10)
                      : soak_range(&C.rng, (256 << 10) + 1, SOAK_MAX_MSG);
  return n < min ? min : n > max ? max : n;
}

static int start(cconn_t *cc, int slot)
{
  uint64_t r = soak_range(&C.rng, 0, 99);
  unsigned char *b = cc->buf[slot];
  op_t *op;
  if (r < 40) {
    op = op_new(cc, slot, OP_MSG, pick_len(0, SOAK_MAX_MSG));
    op->need_echo = 1;
    soak_payload(b, op->len, op->id);
    return rmx_send(cc->c, b, op->len, msg_sent, ID_ARG(op->id));
  }
  if (r < 70) {
    op = op_new(cc, slot, OP_RPC, pick_len(0, SOAK_MAX_MSG));
    soak_payload(b, op->len, op->id);
    return rmx_rpc_call(cc->c, SOAK_RPC_XFORM, b, op->len, 30000, rpc_reply, ID_ARG(op->id),
                        NULL);
  }
  if (r < 85) { /* in the slot's own lane: no other operation touches it */
    op = op_new(cc, slot, OP_WRITE, pick_len(1, SOAK_LANE));
    op->off = (uint64_t)slot * SOAK_LANE + soak_range(&C.rng, 0, SOAK_LANE - op->len);
    soak_pattern(b, op->len, soak_mix(op->id), 0);
    return rmx_write(cc->c, &(rmx_iov_t){b, op->len, NULL}, 1, cc->rk, op->off, write_done,
                     ID_ARG(op->id));
  }
  op = op_new(cc, slot, OP_READ, pick_len(1, SOAK_LANE));
  op->off = (uint64_t)SOAK_LANES * SOAK_LANE + soak_range(&C.rng, 0, SOAK_LANE - op->len);
  memset(b, 0xee, op->len);
  return rmx_read(cc->c, &(rmx_iov_t){b, op->len, NULL}, 1, cc->rk, op->off, read_done,
                  ID_ARG(op->id));
}

void soak_pump(cconn_t *cc)
{
  if (!cc->up || !cc->rk || C.draining || cc->closing)
    return;
  for (int slot = 0; slot < SOAK_SLOTS; slot++) {
    if (cc->ops[slot].id)
      continue;
    int rc = start(cc, slot);
    if (rc == 0)
      continue;
    cc->ops[slot].id = 0; /* refused: no callback will come */
    if (rc == RMX_ENOTCONN)
      return; /* going down; on_disconnect follows */
    C.call_errors++;
    fprintf(stderr, "soak client %d: an operation refused: %s\n", C.idx, rmx_strerror(rc));
    return;
  }
}

void soak_fail_all(cconn_t *cc)
{
  for (int i = 0; i <= SOAK_SLOTS; i++) {
    op_t *op = &cc->ops[i];
    if (!op->id)
      continue;
    if (op->need_cb)
      soak_violation(cc, "still owed a callback at on_disconnect", op->id);
    else if (op->need_echo)
      C.failed_at_loss++;
    op->id = 0;
  }
  C.failed_at_loss += cc->errs_pending;
  cc->errs_pending = 0;
  if (cc->rk)
    rmx_rkey_release(cc->rk); /* void: the server may be a new process */
  cc->rk = NULL;
}

int soak_idle(const cconn_t *cc)
{
  for (int i = 0; i <= SOAK_SLOTS; i++)
    if (cc->ops[i].id)
      return 0;
  return 1;
}
