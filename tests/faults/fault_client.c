/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The client role: keeps a workload in flight, counts every callback, and
 * when the connection drops checks what rmx.h promises of a lost peer:
 * every callback exactly once, every operation outstanding at the loss
 * failed (none succeeds after the first failure, none is reported as
 * canceled since we never closed), on_disconnect once with a nonzero
 * status after all of them, nothing after on_closed, and a context that
 * destroys. The connection's life, the checks and the result line are in
 * fault_run.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_client.h"

fp_client_t C;

static const size_t msg_sizes[] = {64, 4096, 100000, 1u << 20, 300, FP_BIG, 8192, 64,
                                   200000, 4096, 64, 1u << 20, 500, 64, 16384, 64};
#define NCLASS (sizeof(msg_sizes) / sizeof(msg_sizes[0]))
static uint8_t *msg_buf[NCLASS];
static uint8_t *slot_src[FP_SLOTS];
static int slot_busy[FP_SLOTS];
static uint32_t slot_seed[FP_SLOTS];

static op_t ops[MAX_OPS];
static op_t *free_ops;

/* ---- counting, common to every callback ---- */

static void cb_enter(void)
{
  if (C.closed_cbs)
    C.after_closed++;
}

static op_t *op_get(void)
{
  op_t *o = free_ops;
  if (!o)
    return NULL;
  free_ops = o->next;
  memset(o, 0, sizeof(*o));
  o->live = 1;
  C.issued++;
  C.outstanding++;
  return o;
}

/* The call that would have completed it refused: its callback never runs. */
static int op_undo(op_t *o, int rc)
{
  if (rc == 0)
    return 0;
  o->live = 0;
  C.issued--;
  C.outstanding--;
  o->next = free_ops;
  free_ops = o;
  return rc;
}

/* An operation's one completion: counted, judged, then the slot is free.
 * Returns 0 when it was a valid first completion. */
static int op_done(op_t *o, int status)
{
  cb_enter();
  if (!o->live) {
    C.doubles++;
    return -1;
  }
  o->live = 0;
  C.outstanding--;
  if (C.disc_cbs)
    C.late++; /* on_disconnect promised everything had completed */
  if (status == 0) {
    C.ok++;
    C.t_last_ok = fp_now_ms();
    if (C.failed)
      C.ok_after_fail++;
  } else {
    if (!C.failed++) /* sent_cb has already taken a failing big one off */
      C.big_at_loss = C.big_inflight + (o->kind == OP_BIG);
    if (!C.first_err)
      C.first_err = status;
    if (status == RMX_ECANCELED && !C.closing)
      C.canceled_unasked++;
  }
  o->next = free_ops;
  free_ops = o;
  return 0;
}

static void maybe_loaded(void)
{
  /* msgs: the messages ahead of the first 64 MiB one; across two TCG VMs
   * one such message takes half a minute, so waiting for more costs. */
  static const long need_msgs = 5, need_rpc = 1000, need_write = FP_SLOTS, need_idle = 1;
  long need = C.wl == WL_MSGS ? need_msgs : C.wl == WL_RPC ? need_rpc
            : C.wl == WL_WRITE ? need_write : need_idle;
  /* Messages: announce it while a 64 MiB message is on its way, so a
   * fault injected at once lands in the middle of one. */
  if (C.loaded || C.ok < need || (C.wl == WL_MSGS && !C.big_inflight))
    return;
  C.loaded = 1;
  C.t_loaded = fp_now_ms();
  /* The file first: a script that reacts to the line may look for it. */
  if (C.o->loaded_file && fp_write_file(C.o->loaded_file, "loaded\n") != 0)
    perror(C.o->loaded_file);
  printf("fault-peer: loaded (%ld completed, %ld in flight)\n", C.ok, C.outstanding);
}

static void pump(void);
static void verify(void);

/* Operations a counted run issues before it verifies: idle issues one. */
static long target(void)
{
  return C.wl == WL_IDLE && C.o->ops ? 1 : C.o->ops;
}

/* After any completion: more work, or the end of a counted run. */
static void progress(void)
{
  maybe_loaded();
  /* After a failure the connection is on its way down: issue nothing more
   * (a call would be refused with RMX_ENOTCONN, or fail the same way). */
  if (C.disc_cbs || C.closing || C.failed)
    return;
  pump();
  if (target() && C.issued >= target() && C.outstanding == 0 && !C.verify_sent)
    verify();
}

/* ---- the workloads ---- */

static void sent_cb(rmx_conn_t *c, int status, void *arg)
{
  op_t *o = arg;
  C.send_cbs++;
  if (o->live && o->kind == OP_BIG)
    C.big_inflight--;
  if (op_done(o, status) == 0)
    progress();
}

static void reply_cb(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  op_t *o = arg;
  C.reply_cbs++;
  if (status == 0 && o->live) {
    fp_msg_hdr_t h = {0};
    if (len >= sizeof(h))
      memcpy(&h, data, sizeof(h));
    if (len != o->len || h.seed != o->seed || !fp_msg_ok(data, len))
      C.bad_data++;
  }
  if (op_done(o, status) == 0)
    progress();
}

static void write_cb(rmx_conn_t *c, int status, void *arg)
{
  op_t *o = arg;
  C.write_cbs++;
  if (o->live) {
    slot_busy[o->slot] = 0;
    slot_seed[o->slot] = status == 0 ? o->seed : FP_NO_SEED;
  }
  if (op_done(o, status) == 0)
    progress();
}

static int send_one(void)
{
  static size_t next;
  size_t k = next % NCLASS;
  /* At most one 64 MiB message at a time keeps the peers' memory bounded. */
  if (msg_sizes[k] == FP_BIG && C.big_inflight)
    k = (k + 1) % NCLASS;
  op_t *o = op_get();
  o->kind = msg_sizes[k] == FP_BIG ? OP_BIG : OP_SEND;
  int rc = rmx_send(C.c, msg_buf[k], msg_sizes[k], sent_cb, o);
  if (rc == 0) {
    next = k + 1;
    C.big_inflight += o->kind == OP_BIG;
  }
  return op_undo(o, rc);
}

static int call_one(void)
{
  uint8_t req[272];
  op_t *o = op_get();
  o->seed = (uint32_t)C.issued;
  o->len = 16 + (size_t)C.issued % 256;
  fp_msg_fill(req, o->len, o->seed);
  /* No timeout: only the connection's end may end these calls. */
  return op_undo(o, rmx_rpc_call(C.c, FP_RPC_ECHO, req, o->len, 0, reply_cb, o, NULL));
}

static int write_one(void)
{
  int s = 0;
  while (s < FP_SLOTS && slot_busy[s])
    s++;
  if (s == FP_SLOTS)
    return RMX_EAGAIN;
  op_t *o = op_get();
  o->slot = s;
  o->seed = (uint32_t)C.issued;
  fp_fill(slot_src[s], FP_SLOT, o->seed, 0);
  rmx_iov_t iov = {slot_src[s], FP_SLOT, NULL};
  int rc = rmx_write(C.c, &iov, 1, C.rk, (uint64_t)s * FP_SLOT, write_cb, o);
  if (rc == 0)
    slot_busy[s] = 1;
  return op_undo(o, rc);
}

/* Keep the window full: 32 messages, 1,000 calls or 8 writes in flight. */
static void pump(void)
{
  long window = C.wl == WL_MSGS ? 32 : C.wl == WL_RPC ? 1000 : C.wl == WL_WRITE ? 8 : 1;
  if (C.wl == WL_IDLE && C.issued >= 1)
    window = 0; /* one call to prove the path, then silence */
  while (free_ops && C.outstanding < window && (!target() || C.issued < target())) {
    int rc = C.wl == WL_MSGS ? send_one() : C.wl == WL_WRITE ? write_one() : call_one();
    if (rc == RMX_EAGAIN && C.wl == WL_WRITE)
      return; /* every slot busy: the next completion frees one */
    if (rc == RMX_ENOTCONN) {
      /* A completion that succeeded before the loss can be reported after
       * the library took the connection down, before on_disconnect runs:
       * nothing more is issued; the verdict wants that disconnect. */
      C.issue_down++;
      return;
    }
    if (rc) {
      fprintf(stderr, "fault-peer client: issuing failed: %s\n", rmx_strerror(rc));
      C.issue_errors++;
      return;
    }
  }
}

static void verify_cb(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  C.reply_cbs++;
  op_t *o = arg;
  if (o->live) {
    C.verify_status = status;
    if (status == 0 && len == sizeof(C.verify))
      memcpy(&C.verify, data, len), C.verify_ok = 1;
  }
  if (op_done(o, status) == 0 && !C.disc_cbs && !C.closing)
    fp_client_close();
}

static void verify(void)
{
  fp_verify_req_t q = {.nseeds = C.wl == WL_WRITE ? FP_SLOTS : 0};
  memcpy(q.seeds, slot_seed, sizeof(slot_seed));
  op_t *o = op_get();
  o->kind = OP_VERIFY;
  C.verify_sent = 1;
  int rc = op_undo(o, rmx_rpc_call(C.c, FP_RPC_VERIFY, &q, sizeof(q), 0, verify_cb, o, NULL));
  if (rc) {
    fprintf(stderr, "fault-peer client: verify: %s\n", rmx_strerror(rc));
    C.issue_errors++;
    fp_client_close();
  }
}

/* ---- set-up and tear-down of the workload's buffers ---- */

int fp_workload_init(void)
{
  for (int i = 0; i < MAX_OPS; i++) {
    ops[i].next = free_ops;
    free_ops = &ops[i];
  }
  for (int s = 0; s < FP_SLOTS; s++)
    slot_seed[s] = FP_NO_SEED;
  if (C.wl == WL_MSGS)
    for (size_t k = 0; k < NCLASS; k++) {
      if (!(msg_buf[k] = malloc(msg_sizes[k])))
        return -1;
      fp_msg_fill(msg_buf[k], msg_sizes[k], (uint32_t)k);
    }
  if (C.wl == WL_WRITE)
    for (int s = 0; s < FP_SLOTS; s++)
      if (!(slot_src[s] = malloc(FP_SLOT)))
        return -1;
  return 0;
}

void fp_workload_start(void)
{
  pump();
}

void fp_workload_fini(void)
{
  for (size_t k = 0; k < NCLASS; k++)
    free(msg_buf[k]);
  for (int s = 0; s < FP_SLOTS; s++)
    free(slot_src[s]);
}
