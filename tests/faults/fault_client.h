/* SPDX-License-Identifier: BSD-3-Clause */
/* The client role's state, shared by its workload (fault_client.c) and its
 * connection's life and checks (fault_run.c). */
#ifndef RMX_FAULT_CLIENT_H
#define RMX_FAULT_CLIENT_H

#include "fault_peer.h"

enum { WL_MSGS, WL_RPC, WL_WRITE, WL_IDLE };
enum { OP_SEND, OP_BIG, OP_CALL, OP_WRITE, OP_VERIFY };
#define MAX_OPS 1100 /* the largest window (1,000 calls) and the verify call */

/* One operation whose callback is owed. The callback's arg points here. */
typedef struct op {
  int live; /* issued, callback not yet run */
  int kind;
  uint32_t seed;
  size_t len;
  int slot;
  struct op *next; /* on the free list */
} op_t;

typedef struct fp_client {
  const fp_client_opts_t *o;
  int wl;
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  rmx_rkey_t *rk;
  int closing; /* rmx_conn_close() called: ECANCELED is now expected */

  /* every callback, counted */
  int connect_cbs, connect_status, disc_cbs, disc_status, closed_cbs, after_closed;
  long send_cbs, reply_cbs, write_cbs, recv_cbs;

  /* operations */
  long issued, ok, failed, outstanding, outstanding_at_disc;
  long doubles, late, ok_after_fail, canceled_unasked, bad_data, issue_errors;
  long issue_down; /* RMX_ENOTCONN: the library had the connection down, its on_disconnect due */
  int first_err, big_inflight, big_at_loss, loaded;

  /* the end of a counted run */
  int verify_sent, verify_ok, verify_status;
  fp_verify_rep_t verify;

  /* times, from CLOCK_MONOTONIC, in ms; 0: not yet */
  double t_loaded, t_last_ok, t_fault, t_disc;
  int fault_after_disc; /* the fault file was first seen from on_disconnect */
  int deadline_hit, destroy_rc;
} fp_client_t;

extern fp_client_t C;

int fp_workload_init(void);
void fp_workload_start(void);
void fp_workload_fini(void);
void fp_client_close(void);

#endif
