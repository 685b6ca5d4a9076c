/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the API-order cases (api_order_*.c) share: the tracking layer that
 * checks the callback contract on every connection (api_order_track.c), and
 * the calls, the bounded loop and a world per case (api_order_world.c).
 */
#ifndef RMX_TEST_API_ORDER_H
#define RMX_TEST_API_ORDER_H

#include <stddef.h>
#include <stdint.h>
#include <rmx/rmx.h>

#include "harness.h"
#include "test_util.h" /* now_ms */

#define SMALL 100
#define LARGE (100u << 10) /* above the eager size: rendezvous */
#define REGION (1u << 20)
#define RMA_LEN 4096
#define BURST 100 /* sends in one turn: more than the default 64 credits */
#define MAX_TRK 256
#define MAX_OPS 8192
#define MAX_HELD 4096

enum { H_ECHO = 1, H_HOLD = 2 };
enum { CL, SV };

/* Where the case is, for the alarm's message on a hang inside rmx. */
extern const char *volatile phase;

/* ---- the tracking layer ---- */

typedef struct trk {
  rmx_conn_t *c;
  int side;
  int live;         /* the handle is valid: on_closed has not run */
  int close_called; /* rmx_conn_close() returned 0 */
  int connected, connect_status, disconnects, disconnect_status, closed;
  int recvs, imms;
  int issued, fired; /* send/op/reply callbacks promised, and run */
  int held;          /* requests with a handler here, not answered */
  rmx_rkey_t *rk;    /* the peer's region, on this connection */
  int notifies;      /* notifications it got (on_notify or taken) */
} trk_t;

typedef enum { OP_SEND, OP_CALL, OP_RMA, OP_XFER } op_kind_t;

typedef struct op {
  trk_t *t;
  op_kind_t kind;
  int issued;   /* the call returned 0 */
  int fired, status;
  int canceled; /* rmx_rpc_cancel() returned 0 for it */
  int hold;     /* a call the server holds */
  uint64_t call;
  uint8_t *buf; /* the source or destination; freed by the callback */
  size_t len;
  int check;    /* a reply must echo buf's pattern */
  int rc;       /* what the call returned */
  struct xreq *xr; /* OP_XFER: the request posted (api_order_xfer.c) */
  int notify, notified; /* OP_XFER: with a notification; times it arrived */
  uint32_t seed;   /* OP_XFER: the pattern its bytes carry */
} op_t;

typedef struct held {
  rmx_rpc_req_t *req;
  trk_t *t;
} held_t;

extern rmx_ctx_t *ctx;
extern rmx_listener_t *lst;
extern char lst_uri[128];
extern trk_t trks[MAX_TRK];
extern int ntrk;
extern trk_t *CLT, *SVT; /* the client's connection, the server's last accepted */
extern op_t ops[MAX_OPS];
extern int nops;
extern held_t held[MAX_HELD];
extern int nheld;
extern int violations, in_api, bad_requests;

void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
trk_t *trk_new(rmx_conn_t *c, int side);
op_t *op_new(trk_t *t, op_kind_t kind);

/* ---- what a case does, and where ---- */

typedef enum {
  EV_CONNECTED, EV_ACCEPT, EV_RECV, EV_SENT, EV_REPLY, EV_HANDLER, EV_DISCONNECT, EV_OP, EV_IMM,
  EV_CLOSED, EV_XFER, EV_NOTIFY, EV_N
} ev_t;
extern const char *const ev_names[EV_N];

typedef enum {
  A_NONE, A_CLOSE, A_CLOSE_PEER, A_SEND_SMALL, A_SEND_LARGE, A_CALL_ECHO, A_CALL_HOLD,
  A_CALL_LARGE, A_CANCEL, A_CANCEL_TWICE, A_WRITE, A_READ, A_WRITE_IMM, A_REPLY,
  A_REPLY_HELD, A_CLOSE_LISTENER, A_XFER, A_XFER_NOTIFY, A_XFER_RELEASE, A_NOTIFY_TAKE, A_N
} act_t;
extern const char *const act_names[A_N];

typedef struct plan {
  ev_t ev;
  int side;
  int nth;      /* at the nth such event on that side (0: the first) */
  int err;      /* count only events that report an error */
  act_t act[4]; /* in this order, in the same turn */
  int seen, ran;
} plan_t;

/* Up to two plans a case: one may cause what the other acts in. */
extern plan_t P[2];
extern int plan_on;
extern const void *req_data; /* the request in the handler running now */
extern size_t req_len;
extern int ev_count[EV_N][2];
extern int acts_run;

/* ---- callbacks and handlers (api_order_track.c) ---- */

extern const rmx_conn_cbs_t tracked_cbs;
void close_conn(trk_t *t);
void on_connected(rmx_conn_t *c, int status, void *arg);
void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg);
void on_sent(rmx_conn_t *c, int status, void *arg);
void on_reply(rmx_conn_t *c, int status, const void *data, size_t len, void *arg);
void on_op(rmx_conn_t *c, int status, void *arg);
/* The tracking every callback shares (api_order_track.c). */
int cb_enter(trk_t *t, rmx_conn_t *c, const char *what);
int op_fire(op_t *op, rmx_conn_t *c, int status, const char *what);
void hook(ev_t ev, trk_t *t, rmx_rpc_req_t **req, int status);
void h_echo(rmx_rpc_req_t *req, const void *data, size_t len, void *arg);
void h_hold(rmx_rpc_req_t *req, const void *data, size_t len, void *arg);
void answer(trk_t *t, rmx_rpc_req_t *req, const void *data, size_t len);
/* Answer the held requests (of only's connection, or all). */
void answer_held(trk_t *only);

/* ---- the calls, the loop, the world (api_order_world.c) ---- */

op_t *do_send(trk_t *t, size_t len);
op_t *do_call(trk_t *t, uint32_t h, size_t len, uint32_t timeout_ms);
/* Cancel op's call; what it must return follows from what we know. */
int do_cancel(trk_t *t, op_t *op);
op_t *do_rma(trk_t *t, act_t a);
void run_act(act_t a, trk_t *t, rmx_rpc_req_t **req);
/* The regions (api_order_world.c): each side's, and whether they exist. */
extern uint8_t *regions[2];
extern int regions_ready;
rmx_rkey_t *unpack_for(trk_t *t);
void check_rc(trk_t *t, const char *what, int rc, int busy_ok);

/* ---- transfer requests and notifications (api_order_xfer.c) ---- */

/* Post a request of t's (one that ended again, or a new one). */
op_t *do_xfer(trk_t *t, int notify);
void do_xfer_release(trk_t *t);
void do_notify_take(trk_t *t);
void on_notify(rmx_conn_t *c, const void *data, size_t len, void *arg);
/* After every connection closed: the requests name none; release them. */
void xfer_world_down(void);

void turn(void);
typedef int (*cond_fn)(void);
/* Run the loop until cond() or ms pass; 1 when cond() held. */
int run_for(cond_fn cond, uint64_t ms);
void run_ms(uint64_t ms);
/* Run until op's callback ran, or fail the case. */
void wait_fired(op_t *op, uint64_t ms);
/* Nothing left that will end by itself: only held calls stay open. */
int quiet(void);
int all_closed(void);
trk_t *connect_tracked(void);

void world_up(uint32_t rpc_max, int wait_established);
void world_down(void);
int setup(void **state);
int teardown(void **state);

/* ---- scenarios (api_order_close.c) ---- */

/* The server's end is known, unless the client closed before it could be. */
int sv_known(void);
/* One case: the plans act in their events, on top of the workload. */
void scenario2(const plan_t *p, const plan_t *q);
void scenario(const plan_t *p);

/* ---- the cases ---- */

void cancel_same_turn_held_small(void **state); /* api_order_cancel.c */
void cancel_same_turn_echo_small(void **state);
void cancel_same_turn_held_large(void **state);
void cancel_same_turn_echo_large(void **state);
void cancel_many_orders(void **state);
void cancel_twice(void **state);
void cancel_after_reply(void **state);
void cancel_inside_on_reply(void **state);
void timeout_racing_reply(void **state);
void close_in_on_connected(void **state); /* api_order_close.c */
void close_in_on_accept(void **state);
void close_in_on_recv_server(void **state);
void close_in_on_recv_client(void **state);
void close_in_on_sent(void **state);
void close_in_on_reply(void **state);
void close_in_handler_before_reply(void **state);
void close_in_handler_after_reply(void **state);
void close_in_on_disconnect(void **state);
void close_in_op_callback(void **state);
void close_in_op_callback_server(void **state);
void close_in_on_imm(void **state);
void close_peer_in_on_imm(void **state);
void close_in_write_and_read_callbacks(void **state);
void close_same_turn_as_connect(void **state);
void close_same_turn_as_large_send(void **state);
void close_same_turn_as_rpc_call(void **state);
void calls_after_close(void **state);
void sends_before_close_arrive(void **state);
void close_with_sends_waiting_for_credits(void **state);
void every_action_in_every_callback(void **state); /* api_order_matrix.c */
void every_action_in_failing_callbacks(void **state);
void every_pair_in_one_turn(void **state);
void every_xfer_action_in_every_callback(void **state); /* api_order_xfer.c */
void every_xfer_pair_in_one_turn(void **state);
void every_action_in_failing_xfer_callbacks(void **state);

#endif
