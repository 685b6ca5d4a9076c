/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The soak's client, shared between its connection lifecycle
 * (soak_client.c) and its operations (soak_client_ops.c).
 */
#ifndef RMX_TEST_SOAK_CLIENT_H
#define RMX_TEST_SOAK_CLIENT_H

#include <uv.h>

#include <rmx/rmx.h>

#include "soak.h"

#define SOAK_MAX_SERVERS 16

enum { OP_MSG = 1, OP_RPC, OP_WRITE, OP_READBACK, OP_READ, OP_KEY };

/* One operation in flight. Its id is the callback's argument: a callback
 * whose id is not in flight any more ran twice (or was never ours). */
typedef struct op {
  uint64_t id;   /* 0: slot free */
  int kind;
  size_t len;
  uint64_t off;  /* in the server's region (one-sided) */
  uint64_t ref;  /* a read-back's write: whose pattern it must find */
  uint64_t seq;  /* issue order: echoes come back in it */
  int need_cb;   /* the send/RPC/one-sided callback is still owed */
  int need_echo; /* a message's echo is still owed */
} op_t;

/* The key operation has a slot of its own, after the traffic slots. */
#define SOAK_KEY_SLOT SOAK_SLOTS

typedef struct cconn {
  int idx;
  char uri[160];
  rmx_conn_t *c;
  int up, closed, closing;
  unsigned last_attempt;  /* on_reconnect numbers attempts 1, 2, ... per loss */
  rmx_rkey_t *rk;         /* the current server's region; NULL until fetched */
  soak_key_t key;
  op_t ops[SOAK_SLOTS + 1];
  unsigned char *buf[SOAK_SLOTS];
  uint64_t seq, next_id;
  unsigned long errs_pending; /* failed operations not yet explained by a loss */
  uv_timer_t again;           /* a new first connect after a refused one */
} cconn_t;

typedef struct client {
  uv_loop_t loop;
  rmx_ctx_t *ctx;
  int idx, gen, nconns, draining, finished, old_handles, trace;
  uint64_t rng, start_ms, warm_ms;
  cconn_t conns[SOAK_MAX_SERVERS];
  /* what is reported */
  unsigned long ops, msgs, rpcs, writes, reads, failed_at_loss, losses, reconnects;
  unsigned long corrupt, violations, errors, call_errors, unfinished;
  int fd_warm, fd_max, fd_end, checkpoints;
  size_t rss_warm, rss_max, rss_end;
} client_t;

extern client_t C;

/* soak_client.c */
void soak_violation(cconn_t *cc, const char *what, uint64_t id);
cconn_t *soak_find(rmx_conn_t *c);

/* soak_client_ops.c */
void soak_pump(cconn_t *cc);
void soak_fetch_key(cconn_t *cc);
/* A loss: what is owed fails here; returns the operations that failed. */
void soak_fail_all(cconn_t *cc);
int soak_idle(const cconn_t *cc);
/* on_recv: a message's echo, checked against the oldest one owed. */
void soak_on_recv(rmx_conn_t *c, const void *data, size_t n, void *arg);

#endif
