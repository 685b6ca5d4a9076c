/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The kills test's operations toward its client: started to keep the
 * round's window full, each completion counted and judged once (exactly
 * once, not after on_disconnect or on_closed, no success after the first
 * failure or from a client already killed or stopped, every failure's
 * status noted), read data checked, written ranges kept for a clean
 * round's verify call. fault_kills.c says what the rounds are.
 */
#include <stdio.h>
#include <string.h>

#include "fault_kills_srv.h"

fk_server_t K;

const char *const fk_kind_name[] = {"xfer-write", "xfer-read", "write", "read", "send", "call",
                                    "verify"};

uint64_t fk_rnd64(void)
{
  uint64_t z = (K.rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

long fk_rnd(long n)
{
  return n > 0 ? (long)(fk_rnd64() % (uint64_t)n) : 0;
}

/* 1 byte to FK_SLOT, about evenly over the powers of two */
static size_t rnd_len(size_t min)
{
  size_t e = (size_t)1 << fk_rnd(19);
  size_t len = e + (size_t)fk_rnd((long)e);
  return len < min ? min : len > FK_SLOT ? FK_SLOT : len;
}

/* Failures by kind and status, for the summary. */
static void hist(int kind, int status)
{
  long i = 0;
  while (i < K.hist_n && (K.hist_kind[i] != kind || K.hist_code[i] != status))
    i++;
  if (i == HIST_MAX)
    return;
  if (i == K.hist_n) {
    K.hist_kind[i] = kind;
    K.hist_code[K.hist_n++] = status;
  }
  K.hist_count[i]++;
}

static uint8_t *op_slot(const kop_t *o)
{
  return K.arena + (size_t)(o - K.ops) * FK_SLOT;
}


/* The one completion of an operation: counted and judged. 0 when it was
 * the first (the caller then looks at its data), -1 for a second. */
static int op_done(kop_t *o, int status)
{
  kconn_t *kc = o->kc;
  R.after_closed += kc->closed_cbs;
  if (!o->live) {
    R.doubles++;
    return -1;
  }
  o->live = 0;
  R.outstanding--;
  R.late += kc->disc_cbs;
  if (status == 0) {
    R.ok++;
    R.ok_after_fail += R.failed > 0;
    /* Its answer cannot exist: the peer was dead or stopped when it went.
     * A send's success is local (its bytes taken), so not for sends. */
    R.ok_after_fault += o->after_fault && o->kind != K_SEND;
  } else {
    R.failed++;
    hist(o->kind, status);
    if (!R.first_err) {
      R.first_err = status;
      R.first_err_kind = o->kind;
    }
    if (status != R.first_err && !R.other_err) {
      R.other_err = status;
      R.other_err_kind = o->kind;
    }
    R.canceled += status == RMX_ECANCELED && !kc->closing;
  }
  return 0;
}

static void after_op(kop_t *o, int status)
{
  if (status == 0 && R.kind == R_STOP && !R.faulted && R.ok >= R.stop_after)
    fk_do_fault(SIGSTOP);
  if (R.kill_pending && R.mode == M_COMPLETION)
    fk_do_fault(SIGKILL);
  fk_pump();
}

static void record_write(uint32_t off, uint32_t len)
{
  if (R.kind == R_CLEAN && R.nranges < FK_RANGES)
    K.vq.r[R.nranges++] = (fk_range_t){off, len};
}

static void check_read(const kop_t *o)
{
  for (int j = 0; j < o->np; j++)
    if (fp_check(op_slot(o) + o->p[j].loff, o->p[j].len, FK_RSEED, o->p[j].roff))
      R.bad_data++;
}

static void landed(const kop_t *o)
{
  if (o->kind == K_XREAD || o->kind == K_READ)
    check_read(o);
  else
    for (int j = 0; j < o->np; j++)
      record_write(o->p[j].roff, o->p[j].len);
}

static void xfer_cb(rmx_xfer_t *x, int status, size_t failed, void *arg)
{
  kop_t *o = arg;
  int first = o->live;
  if (first && status == 0) {
    landed(o);
    R.notes_ok += o->noted;
  }
  R.blamed += status != 0 && failed != RMX_XFER_NO_ENTRY;
  if (op_done(o, status) == 0) {
    rmx_xfer_release(x);
    o->x = NULL;
    after_op(o, status);
  }
}

static void rma_cb(rmx_conn_t *c, int status, void *arg)
{
  kop_t *o = arg;
  if (o->live && status == 0)
    landed(o);
  if (op_done(o, status) == 0)
    after_op(o, status);
}

static void sent_cb(rmx_conn_t *c, int status, void *arg)
{
  kop_t *o = arg;
  if (o->live && status == 0)
    R.sends_ok++;
  if (op_done(o, status) == 0)
    after_op(o, status);
}

static void reply_cb(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  kop_t *o = arg;
  if (o->live && status == 0 && (len != o->len || memcmp(data, op_slot(o), len)))
    R.bad_data++;
  if (op_done(o, status) == 0)
    after_op(o, status);
}

/* 1..max pieces of o->len bytes: each at a random offset of the area
 * (scattered: the engine does not merge them), back to back in the slot. */
static void cut(kop_t *o, int max, int contiguous)
{
  o->np = 1 + (int)fk_rnd(max);
  if ((size_t)o->np > o->len)
    o->np = (int)o->len;
  uint32_t at = (uint32_t)fk_rnd((long)(FK_AREA - o->len + 1)), loff = 0;
  for (int j = 0; j < o->np; j++) {
    uint32_t len = (uint32_t)(j + 1 < o->np ? o->len / (size_t)o->np : o->len - loff);
    uint32_t roff = contiguous ? at + loff : (uint32_t)fk_rnd((long)(FK_AREA - len + 1));
    o->p[j] = (piece_t){roff, loff, len};
    loff += len;
  }
}

static int start_xfer(kconn_t *kc, kop_t *o, int write)
{
  rmx_xfer_entry_t e[MAX_PIECES];
  uint8_t note[NOTE_LEN];
  cut(o, MAX_PIECES, 0);
  for (int j = 0; j < o->np; j++) {
    const piece_t *p = &o->p[j];
    e[j] = (rmx_xfer_entry_t){
        .addr = write ? K.src + p->roff : op_slot(o) + p->loff, .len = p->len,
        .mem = write ? K.src_mem : K.arena_mem, .rkey = kc->rk,
        .offset = (write ? FK_AREA : 0) + p->roff};
  }
  int rc = rmx_xfer_prep(kc->c, write ? RMX_XFER_WRITE : RMX_XFER_READ, e, (size_t)o->np, &o->x);
  if (rc)
    return rc;
  o->noted = write && fk_rnd(2);
  if (o->noted)
    fp_msg_fill(note, sizeof(note), (uint32_t)fk_rnd64());
  rc = rmx_xfer_post(o->x, o->noted ? note : NULL, o->noted ? sizeof(note) : 0, xfer_cb, o);
  if (rc) {
    rmx_xfer_release(o->x);
    o->x = NULL;
  }
  return rc;
}

static int start_rma(kconn_t *kc, kop_t *o, int write)
{
  rmx_iov_t iov[3];
  cut(o, 3, 1);
  for (int j = 0; j < o->np; j++)
    iov[j] = (rmx_iov_t){write ? K.src + o->p[j].roff : op_slot(o) + o->p[j].loff, o->p[j].len,
                         write ? K.src_mem : K.arena_mem};
  uint32_t at = o->p[0].roff;
  return write ? rmx_write(kc->c, iov, o->np, kc->rk, FK_AREA + at, rma_cb, o)
               : rmx_read(kc->c, iov, o->np, kc->rk, at, rma_cb, o);
}

static int start_op(kconn_t *kc, kop_t *o)
{
  switch (o->kind) {
  case K_XWRITE:
  case K_XREAD:
    return start_xfer(kc, o, o->kind == K_XWRITE);
  case K_WRITE:
  case K_READ:
    return start_rma(kc, o, o->kind == K_WRITE);
  default:
    o->len = o->len < sizeof(fp_msg_hdr_t) ? sizeof(fp_msg_hdr_t) : o->len;
    fp_msg_fill(op_slot(o), o->len, (uint32_t)fk_rnd64());
    /* no timeout: only the connection's end may end a call */
    return o->kind == K_SEND ? rmx_send(kc->c, op_slot(o), o->len, sent_cb, o)
                             : rmx_rpc_call(kc->c, FP_RPC_ECHO, op_slot(o), o->len, 0, reply_cb,
                                            o, NULL);
  }
}

static kop_t *op_get(void)
{
  for (int i = 0; i < FK_WINDOW; i++)
    if (!K.ops[i].live && !K.ops[i].x)
      return &K.ops[i];
  return NULL;
}

static void verify_cb(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  kop_t *o = arg;
  kconn_t *kc = o->kc;
  if (o->live && status == 0 && len == sizeof(K.vrep)) {
    memcpy(&K.vrep, data, len);
    R.verified = K.vrep.msgs == (uint64_t)R.sends_ok && !K.vrep.bad_msgs &&
                 K.vrep.notes == (uint64_t)R.notes_ok && !K.vrep.bad_notes && !K.vrep.bad_ranges;
  }
  if (op_done(o, status) == 0)
    fk_conn_close(kc); /* the orderly end: the client sees its peer close */
}

static void verify(kconn_t *kc)
{
  kop_t *o = &K.ops[FK_WINDOW];
  *o = (kop_t){.live = 1, .kind = K_VERIFY, .kc = kc};
  K.vq.n = R.nranges;
  R.verify_sent = 1;
  R.outstanding++;
  int rc = rmx_rpc_call(kc->c, FK_RPC_VERIFY, &K.vq, sizeof(K.vq), 0, verify_cb, o, NULL);
  if (rc) {
    fprintf(stderr, "fault-kills: verify: %s\n", rmx_strerror(rc));
    o->live = 0;
    R.outstanding--;
    R.issue_errors++;
  }
}

/* Keep the round's window full: from the key's arrival until the first
 * failure or the loss (a clean round: CLEAN_OPS, then verify). */
void fk_pump(void)
{
  static const int weight[K_KINDS] = {2, 2, 1, 1, 2, 2};
  kconn_t *kc = R.kc;
  if (!kc || kc->disc_cbs || kc->closing || R.failed || R.issue_down || R.issue_errors)
    return;
  while (R.outstanding < R.window && !(R.kind == R_CLEAN && R.started >= CLEAN_OPS)) {
    kop_t *o = op_get();
    if (!o)
      return;
    long w = fk_rnd(10);
    int kind = 0;
    while (w >= weight[kind])
      w -= weight[kind++];
    *o = (kop_t){.live = 1, .kind = kind, .kc = kc, .after_fault = R.faulted,
                 .len = rnd_len(1)};
    if (R.big_calls) { /* answers this side reads from the client (rendezvous) */
      o->kind = K_CALL;
      o->len = FK_SLOT / 4 + (size_t)fk_rnd((long)(FK_SLOT - FK_SLOT / 4));
    }
    int rc = start_op(kc, o);
    if (rc) {
      o->live = 0;
      /* the library has the connection down already: its on_disconnect is due */
      if (rc == RMX_ENOTCONN && R.faulted)
        R.issue_down++;
      else {
        fprintf(stderr, "fault-kills: round %ld: starting a %s: %s\n", R.no, fk_kind_name[o->kind],
                rmx_strerror(rc));
        R.issue_errors++;
      }
      return;
    }
    R.started++;
    R.outstanding++;
    R.after_fault += R.faulted;
    if (R.kind == R_KILL)
      K.kill_started++;
    if (R.kind == R_KILL && !R.faulted && !R.kill_pending && R.started == R.kill_at) {
      R.kill_pending = 1;
      if (R.mode == M_SYNC)
        fk_do_fault(SIGKILL);
      else if (R.mode != M_COMPLETION)
        uv_timer_start(&K.kill_timer, fk_on_kill_timer, R.mode == M_TIMER ? 1 + (uint64_t)fk_rnd(3) : 0,
                       0);
    }
  }
  if (R.kind == R_CLEAN && R.started >= CLEAN_OPS && !R.outstanding && !R.verify_sent)
    verify(kc);
}
