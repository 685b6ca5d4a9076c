/*
 * The API against an adversary, run per transport:  rmx-api-order SCHEME [filter]
 *
 * Every call from inside every callback, and in the same loop turn as every
 * other call. A tracking layer checks the callback contract on every
 * connection, whatever the case does: each callback of a call that returned
 * 0 runs exactly once, never from inside a call, and none of a call that
 * failed; on_disconnect at most once and never after a local close;
 * on_closed exactly once, after everything else, and nothing after it.
 * After each case every connection is closed, the context is destroyed, and
 * destroy must return promptly.
 */
#include <rmx/rmx.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include "harness.h"

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

/* ---- time, and a guard for hangs inside the library ---- */

static uint64_t now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static const char *volatile phase = "setup";

/* A hang inside an rmx call (rmx_ctx_destroy spinning) cannot fail a test
 * from the outside: say where, and exit. */
static void on_alarm(int sig)
{
  char msg[160];
  int n = snprintf(msg, sizeof(msg), "api-order: hung in %s\n", phase);
  (void)!write(STDERR_FILENO, msg, (size_t)n);
  _exit(1);
}

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
} trk_t;

typedef enum { OP_SEND, OP_CALL, OP_RMA } op_kind_t;

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
} op_t;

typedef struct held {
  rmx_rpc_req_t *req;
  trk_t *t;
} held_t;

static rmx_ctx_t *ctx;
static rmx_listener_t *lst;
static char lst_uri[128];
static trk_t trks[MAX_TRK];
static int ntrk;
static trk_t *CLT, *SVT; /* the client's connection, the server's last accepted */
static op_t ops[MAX_OPS];
static int nops;
static held_t held[MAX_HELD];
static int nheld;
static int violations, in_api;
static uint8_t *regions[2];
static rmx_mem_t *mems[2];
static uint8_t blobs[2][RMX_RKEY_MAX];
static size_t blob_len[2];
static int regions_ready;

static void violation(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "api-order: violation: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  violations++;
}

static trk_t *trk_new(rmx_conn_t *c, int side)
{
  assert_true(ntrk < MAX_TRK);
  trk_t *t = &trks[ntrk++];
  memset(t, 0, sizeof(*t));
  t->c = c;
  t->side = side;
  t->live = 1;
  return t;
}

/* The live record of a connection, keyed by its handle. */
static trk_t *trk_find(rmx_conn_t *c)
{
  for (int i = ntrk - 1; i >= 0; i--)
    if (trks[i].live && trks[i].c == c)
      return &trks[i];
  return NULL;
}

/* Every callback starts here: is it allowed to run at all? */
static int cb_enter(trk_t *t, rmx_conn_t *c, const char *what)
{
  if (in_api)
    violation("%s ran from inside an API call", what);
  if (!t) {
    violation("%s for connection %p that the test does not know", what, (void *)c);
    return 0;
  }
  if (t->c != c)
    violation("%s: handle %p, the record says %p", what, (void *)c, (void *)t->c);
  if (!t->live) {
    violation("%s after on_closed (connection %p)", what, (void *)c);
    return 0;
  }
  return 1;
}

static op_t *op_new(trk_t *t, op_kind_t kind)
{
  assert_true(nops < MAX_OPS);
  op_t *op = &ops[nops++];
  memset(op, 0, sizeof(*op));
  op->t = t;
  op->kind = kind;
  return op;
}

/* A send, op or reply callback: exactly once per call that returned 0. */
static int op_fire(op_t *op, rmx_conn_t *c, int status, const char *what)
{
  if (!cb_enter(op->t, c, what))
    return 0;
  if (!op->issued)
    violation("%s of a call that returned an error", what);
  if (op->fired)
    violation("%s ran %d times (status %s now, %s first)", what, op->fired + 1,
              rmx_err_name(status), rmx_err_name(op->status));
  if (op->canceled && status != RMX_ECANCELED)
    violation("%s of a canceled call: %s, not RMX_ECANCELED", what, rmx_err_name(status));
  if (op->fired++ == 0)
    op->status = status;
  op->t->fired++;
  return op->fired == 1;
}

/* ---- what a case does, and where ---- */

typedef enum {
  EV_CONNECTED, EV_ACCEPT, EV_RECV, EV_SENT, EV_REPLY, EV_HANDLER, EV_DISCONNECT, EV_OP, EV_IMM,
  EV_CLOSED, EV_N
} ev_t;
static const char *const ev_names[EV_N] = {"on_connected", "on_accept", "on_recv",
                                           "on_sent", "on_reply", "handler",
                                           "on_disconnect", "op callback", "on_imm",
                                           "on_closed"};

typedef enum {
  A_NONE, A_CLOSE, A_CLOSE_PEER, A_SEND_SMALL, A_SEND_LARGE, A_CALL_ECHO, A_CALL_HOLD,
  A_CALL_LARGE, A_CANCEL, A_CANCEL_TWICE, A_WRITE, A_READ, A_WRITE_IMM, A_REPLY,
  A_REPLY_HELD, A_CLOSE_LISTENER, A_N
} act_t;
static const char *const act_names[A_N] = {
  "nothing", "close", "close the peer", "send small", "send large", "call echo",
  "call held", "call large", "cancel", "cancel twice", "write", "read", "write_imm",
  "reply", "reply held", "close the listener"};

typedef struct plan {
  ev_t ev;
  int side;
  int nth;      /* at the nth such event on that side (0: the first) */
  int err;      /* count only events that report an error */
  act_t act[4]; /* in this order, in the same turn */
  int seen, ran;
} plan_t;

/* Up to two plans a case: one may cause what the other acts in. */
static plan_t P[2];
static int plan_on;
static const void *req_data; /* the request in the handler running now */
static size_t req_len;
static int ev_count[EV_N][2];
static int acts_run;

static void run_act(act_t a, trk_t *t, rmx_rpc_req_t **req);

/* Where every callback offers the case its turn. *req: a handler's request,
 * set to NULL once an action answered it. */
static void hook(ev_t ev, trk_t *t, rmx_rpc_req_t **req, int status)
{
  ev_count[ev][t->side]++;
  for (int k = 0; plan_on && k < 2; k++) {
    plan_t *p = &P[k];
    if (p->ran || p->act[0] == A_NONE || p->ev != ev || p->side != t->side ||
        (p->err && !status) || ++p->seen != (p->nth ? p->nth : 1))
      continue;
    p->ran = 1;
    acts_run++;
    for (int i = 0; i < 4 && p->act[i] != A_NONE; i++)
      run_act(p->act[i], t, req);
  }
}

/* ---- callbacks ---- */

static void on_closed(rmx_conn_t *c, void *arg);

static void close_conn(trk_t *t)
{
  if (!t || !t->live)
    return;
  in_api++;
  int rc = rmx_conn_close(t->c, on_closed, t);
  in_api--;
  if (t->close_called && rc != RMX_EALREADY)
    violation("a second close returned %s, not RMX_EALREADY", rmx_err_name(rc));
  if (!t->close_called && rc != 0)
    violation("close returned %s", rmx_err_name(rc));
  t->close_called = 1;
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  trk_t *t = arg;
  if (!cb_enter(t, c, "on_closed"))
    return;
  if (!t->close_called)
    violation("on_closed without a close");
  if (t->issued != t->fired)
    violation("on_closed with %d of %d callbacks still to run", t->issued - t->fired, t->issued);
  if (t->held)
    violation("on_closed with %d requests unanswered", t->held);
  if (t->side == CL && t->connected != 1)
    violation("on_closed after %d on_connected", t->connected);
  int issued = t->issued;
  hook(EV_CLOSED, t, NULL, 0); /* the handle is still valid here */
  if (t->issued != issued)
    violation("a call from inside on_closed returned 0");
  t->closed++;
  t->live = 0;
}

static void on_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  trk_t *t = arg;
  if (!cb_enter(t, c, "on_recv"))
    return;
  if (t->close_called)
    violation("on_recv after a local close");
  uint8_t *want = malloc(len ? len : 1);
  pattern(want, len, (uint32_t)len);
  if (memcmp(want, data, len) != 0)
    violation("on_recv: %zu bytes that were not sent", len);
  free(want);
  t->recvs++;
  hook(EV_RECV, t, NULL, 0);
}

static void on_disconnect(rmx_conn_t *c, int status, void *arg)
{
  trk_t *t = arg;
  if (!cb_enter(t, c, "on_disconnect"))
    return;
  if (t->disconnects++)
    violation("on_disconnect ran %d times", t->disconnects);
  if (t->close_called)
    violation("on_disconnect after a local close");
  if (t->issued != t->fired)
    violation("on_disconnect with %d operations still outstanding", t->issued - t->fired);
  t->disconnect_status = status;
  hook(EV_DISCONNECT, t, NULL, status);
  if (t->live && !t->close_called)
    close_conn(t); /* what every application does */
}

static void on_imm(rmx_conn_t *c, uint32_t imm, size_t len, void *arg)
{
  trk_t *t = arg;
  if (!cb_enter(t, c, "on_imm"))
    return;
  if (t->close_called)
    violation("on_imm after a local close");
  t->imms++;
  hook(EV_IMM, t, NULL, 0);
}

static const rmx_conn_cbs_t cbs = {.on_recv = on_recv, .on_disconnect = on_disconnect,
                                   .on_imm = on_imm};

static rmx_rkey_t *unpack_for(trk_t *t)
{
  rmx_rkey_t *rk = NULL;
  int peer = t->side == CL ? SV : CL;
  assert_int_equal(rmx_rkey_unpack(t->c, blobs[peer], blob_len[peer], &rk), 0);
  return rk;
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  trk_t *t = arg;
  if (!cb_enter(t, c, "on_connected"))
    return;
  if (t->connected++)
    violation("on_connected ran %d times", t->connected);
  t->connect_status = status;
  if (t->close_called && status != RMX_ECANCELED)
    violation("on_connected after a close: %s, not RMX_ECANCELED", rmx_err_name(status));
  if (status == 0)
    hook(EV_CONNECTED, t, NULL, status);
}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  if (in_api)
    violation("on_accept ran from inside an API call");
  if (trk_find(c))
    violation("on_accept for a connection already known");
  trk_t *t = trk_new(c, SV);
  SVT = t;
  rmx_conn_set_cbs(c, &cbs, t);
  hook(EV_ACCEPT, t, NULL, 0);
}

static void on_sent(rmx_conn_t *c, int status, void *arg)
{
  op_t *op = arg;
  if (!op_fire(op, c, status, "on_sent"))
    return;
  free(op->buf); /* the source may go now: a late read of it is ASan's to see */
  op->buf = NULL;
  hook(EV_SENT, op->t, NULL, status);
}

static void on_reply(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  op_t *op = arg;
  if (!op_fire(op, c, status, "on_reply"))
    return;
  if (status == 0 && op->check && (len != op->len || memcmp(data, op->buf, len) != 0))
    violation("on_reply: %zu bytes that are not the echo of %zu", len, op->len);
  free(op->buf); /* the request may go now, even a large one */
  op->buf = NULL;
  hook(EV_REPLY, op->t, NULL, status);
}

static void on_op(rmx_conn_t *c, int status, void *arg)
{
  op_t *op = arg;
  if (!op_fire(op, c, status, "op callback"))
    return;
  free(op->buf);
  op->buf = NULL;
  hook(EV_OP, op->t, NULL, status);
}

/* ---- handlers ---- */

static int bad_requests;

static trk_t *req_trk(rmx_rpc_req_t *req, const void *data, size_t len)
{
  rmx_conn_t *c = rmx_rpc_req_conn(req);
  trk_t *t = trk_find(c);
  cb_enter(t, c, "handler");
  uint8_t *want = malloc(len ? len : 1);
  pattern(want, len, (uint32_t)len);
  if (memcmp(want, data, len) != 0)
    bad_requests++, violation("handler: a %zu-byte request that was not sent", len);
  free(want);
  return t;
}

static int reply_rc_ok(trk_t *t, int rc)
{
  if (rc == 0)
    return t && !t->close_called;
  return rc == RMX_ENOTCONN;
}

static void answer(trk_t *t, rmx_rpc_req_t *req, const void *data, size_t len)
{
  in_api++;
  int rc = rmx_rpc_reply(req, data, len);
  in_api--;
  if (!reply_rc_ok(t, rc))
    violation("rmx_rpc_reply returned %s%s", rmx_err_name(rc),
              t && t->close_called ? " after a local close" : "");
  if (t)
    t->held--;
}

static void h_echo(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  trk_t *t = req_trk(req, data, len);
  if (!t)
    return;
  t->held++;
  req_data = data;
  req_len = len;
  hook(EV_HANDLER, t, &req, 0);
  if (req)
    answer(t, req, data, len);
}

static void h_hold(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  trk_t *t = req_trk(req, data, len);
  if (!t)
    return;
  t->held++;
  req_data = data;
  req_len = len;
  hook(EV_HANDLER, t, &req, 0);
  if (req) {
    assert_true(nheld < MAX_HELD);
    held[nheld++] = (held_t){req, t};
  }
}

static void answer_held(trk_t *only)
{
  int keep = 0;
  for (int i = 0; i < nheld; i++) {
    if (only && held[i].t != only) {
      held[keep++] = held[i];
      continue;
    }
    answer(held[i].t, held[i].req, "late", 4);
  }
  nheld = keep;
}

/* ---- the calls, each checked for what it may return ---- */

static int closing_seen(trk_t *t)
{
  return t->close_called || t->disconnects || (CLT && CLT->close_called) ||
         (SVT && SVT->close_called) || !t->live;
}

/* 0, or an error that says why; after a local close, never 0. */
static void check_rc(trk_t *t, const char *what, int rc, int busy_ok)
{
  if (t->close_called && rc == 0)
    violation("%s after a local close returned 0", what);
  else if (rc && !closing_seen(t) && !(busy_ok && rc == RMX_EAGAIN))
    violation("%s on an open connection returned %s", what, rmx_err_name(rc));
  else if (rc && rc != RMX_ENOTCONN && !(busy_ok && rc == RMX_EAGAIN))
    violation("%s returned %s", what, rmx_err_name(rc));
}

static uint8_t *patterned(size_t len)
{
  uint8_t *p = malloc(len ? len : 1);
  assert_non_null(p);
  pattern(p, len, (uint32_t)len);
  return p;
}

static op_t *do_send(trk_t *t, size_t len)
{
  op_t *op = op_new(t, OP_SEND);
  op->buf = patterned(len);
  op->len = len;
  in_api++;
  int rc = op->rc = rmx_send(t->c, op->buf, len, on_sent, op);
  in_api--;
  check_rc(t, "rmx_send", rc, 0);
  if (rc == 0) {
    op->issued = 1;
    t->issued++;
  } else {
    free(op->buf);
    op->buf = NULL;
  }
  return op;
}

static op_t *do_call(trk_t *t, uint32_t h, size_t len, uint32_t timeout_ms)
{
  op_t *op = op_new(t, OP_CALL);
  op->buf = patterned(len);
  op->len = len;
  op->check = h == H_ECHO;
  op->hold = h == H_HOLD;
  in_api++;
  int rc = op->rc = rmx_rpc_call(t->c, h, op->buf, len, timeout_ms, on_reply, op, &op->call);
  in_api--;
  check_rc(t, "rmx_rpc_call", rc, 1);
  if (rc == 0) {
    op->issued = 1;
    t->issued++;
  } else {
    free(op->buf);
    op->buf = NULL;
  }
  return op;
}

/* Cancel op's call; what it must return follows from what we know. */
static int do_cancel(trk_t *t, op_t *op)
{
  in_api++;
  int rc = rmx_rpc_cancel(t->c, op ? op->call : 987654321);
  in_api--;
  if (!op || !op->issued || op->fired || op->canceled) {
    if (rc != RMX_ENOENT)
      violation("cancel of a call that ended returned %s", rmx_err_name(rc));
  } else if (rc == 0) {
    op->canceled = 1;
  } else if (!(rc == RMX_ENOENT && closing_seen(t))) {
    violation("cancel of a live call returned %s", rmx_err_name(rc));
  }
  return rc;
}

static op_t *last_call(trk_t *t)
{
  for (int i = nops - 1; i >= 0; i--)
    if (ops[i].t == t && ops[i].kind == OP_CALL && ops[i].issued && !ops[i].fired &&
        !ops[i].canceled)
      return &ops[i];
  return NULL;
}

static op_t *do_rma(trk_t *t, act_t a)
{
  static uint32_t next_off;
  op_t *op = op_new(t, OP_RMA);
  if (!regions_ready)
    return op; /* no key yet (rdma before its first connection): nothing to do */
  if (!t->rk)
    t->rk = unpack_for(t);
  op->buf = patterned(RMA_LEN);
  op->len = RMA_LEN;
  rmx_iov_t v = {op->buf, RMA_LEN, NULL};
  uint64_t off = (next_off++ % (REGION / RMA_LEN)) * RMA_LEN;
  const char *what = a == A_WRITE ? "rmx_write" : a == A_READ ? "rmx_read" : "rmx_write_imm";
  int rc;
  in_api++;
  if (a == A_WRITE)
    rc = rmx_write(t->c, &v, 1, t->rk, off, on_op, op);
  else if (a == A_READ)
    rc = rmx_read(t->c, &v, 1, t->rk, off, on_op, op);
  else
    rc = rmx_write_imm(t->c, &v, 1, t->rk, off, 7, on_op, op);
  in_api--;
  op->rc = rc;
  check_rc(t, what, rc, 0);
  if (rc == 0) {
    op->issued = 1;
    t->issued++;
  } else {
    free(op->buf);
    op->buf = NULL;
  }
  return op;
}

static void run_act(act_t a, trk_t *t, rmx_rpc_req_t **req)
{
  trk_t *peer = t->side == CL ? SVT : CLT;
  if (!t->live)
    return;
  switch (a) {
  case A_NONE: break;
  case A_CLOSE: close_conn(t); break;
  case A_CLOSE_PEER: close_conn(peer); break;
  case A_SEND_SMALL: do_send(t, SMALL); break;
  case A_SEND_LARGE: do_send(t, LARGE); break;
  case A_CALL_ECHO: do_call(t, H_ECHO, SMALL, 0); break;
  case A_CALL_HOLD: do_call(t, H_HOLD, SMALL, 0); break;
  case A_CALL_LARGE: do_call(t, H_ECHO, LARGE, 0); break;
  case A_CANCEL: do_cancel(t, last_call(t)); break;
  case A_CANCEL_TWICE: {
    op_t *op = last_call(t);
    do_cancel(t, op);
    do_cancel(t, op);
    break;
  }
  case A_WRITE:
  case A_READ:
  case A_WRITE_IMM: do_rma(t, a); break;
  case A_REPLY:
    if (req && *req) {
      answer(t, *req, req_data, req_len); /* what an echo would say */
      *req = NULL;
    }
    break;
  case A_REPLY_HELD: answer_held(NULL); break;
  case A_CLOSE_LISTENER:
    if (lst) {
      in_api++;
      rmx_listener_close(lst);
      in_api--;
      lst = NULL;
    }
    break;
  case A_N: break;
  }
}

/* ---- the loop, bounded ---- */

static void turn(void)
{
  uv_run(rmx_ctx_loop(ctx), UV_RUN_NOWAIT);
  usleep(50);
}

typedef int (*cond_fn)(void);

/* Run the loop until cond() or ms pass; 1 when cond() held. */
static int run_for(cond_fn cond, uint64_t ms)
{
  uint64_t end = now_ms() + ms;
  while (!cond()) {
    if (now_ms() > end)
      return 0;
    turn();
  }
  return 1;
}

static void run_ms(uint64_t ms)
{
  uint64_t end = now_ms() + ms;
  while (now_ms() < end)
    turn();
}

static op_t *wait_op;
static int op_done(void) { return wait_op->fired > 0; }

/* Run until op's callback ran, or fail the case. */
static void wait_fired(op_t *op, uint64_t ms)
{
  wait_op = op;
  if (!run_for(op_done, ms))
    fail_msg("a callback did not run within %llu ms", (unsigned long long)ms);
}

static int cl_reported(void) { return CLT->connected > 0; }

/* Nothing left that will end by itself: only held calls stay open. */
static int quiet(void)
{
  for (int i = 0; i < nops; i++)
    if (ops[i].issued && !ops[i].fired && !(ops[i].hold && ops[i].t->live && !ops[i].canceled))
      return 0;
  /* closing, unless a request the application holds keeps it open */
  for (int i = 0; i < ntrk; i++)
    if (trks[i].live && (trks[i].close_called || trks[i].disconnects) && !trks[i].held)
      return 0;
  return 1;
}

static int all_closed(void)
{
  for (int i = 0; i < ntrk; i++)
    if (trks[i].live)
      return 0;
  return 1;
}

/* Connect, with the record as the callback's argument: it exists before
 * any callback can name the handle. */
static trk_t *connect_tracked(void)
{
  rmx_conn_t *c;
  trk_t *t = trk_new(NULL, CL);
  in_api++;
  int rc = rmx_connect(ctx, lst_uri, on_connected, t, &c);
  in_api--;
  if (rc)
    t->live = 0;
  assert_int_equal(rc, 0);
  t->c = c;
  rmx_conn_set_cbs(c, &cbs, t);
  return t;
}

/* ---- a world per case: a context, a server and a client in it ---- */

/* Each side's region, packed for the other. TCP packs once listening; an
 * RDMA transport may need a connection first: then after connecting. */
static void regions_up(void)
{
  if (regions_ready)
    return;
  for (int s = 0; s < 2; s++) {
    regions[s] = calloc(1, REGION);
    assert_non_null(regions[s]);
    assert_int_equal(rmx_mem_reg(ctx, regions[s], REGION,
                                 RMX_MEM_LOCAL | RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE,
                                 &mems[s]), 0);
    blob_len[s] = sizeof(blobs[s]);
    int rc = rmx_mem_pack(mems[s], blobs[s], &blob_len[s]);
    if (rc == RMX_ENOTCONN) {
      rmx_mem_dereg(mems[s]);
      free(regions[s]);
      if (s)
        rmx_mem_dereg(mems[0]), free(regions[0]);
      return;
    }
    assert_int_equal(rc, 0);
  }
  regions_ready = 1;
}

static void world_up(uint32_t rpc_max, int wait_established)
{
  rmx_config_t cfg;
  char uri[128];
  memset(trks, 0, sizeof(trks));
  ntrk = nops = nheld = violations = in_api = acts_run = bad_requests = regions_ready = 0;
  memset(ev_count, 0, sizeof(ev_count));
  CLT = SVT = NULL;
  phase = "world_up";
  alarm(60);
  assert_int_equal(rmx_config_init(&cfg), 0);
  if (rpc_max)
    cfg.rpc_max_inflight = rpc_max;
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), 0);
  assert_int_equal(rmx_rpc_register(ctx, H_ECHO, h_echo, NULL), 0);
  assert_int_equal(rmx_rpc_register(ctx, H_HOLD, h_hold, NULL), 0);
  uri_for(uri, sizeof(uri), 0);
  assert_int_equal(rmx_listen(ctx, uri, on_accept, NULL, &lst), 0);
  assert_int_equal(rmx_listener_uri(lst, lst_uri, sizeof(lst_uri)), 0);
  regions_up();
  if (!wait_established)
    return;
  CLT = connect_tracked();
  phase = "connecting";
  if (!run_for(cl_reported, 10000))
    fail_msg("on_connected did not run");
  regions_up();
}


static void world_down(void)
{
  int ok = 1;
  phase = "world_down: closing";
  if (lst) {
    rmx_listener_close(lst);
    lst = NULL;
  }
  answer_held(NULL);
  for (int i = 0; i < ntrk; i++)
    if (trks[i].live && !trks[i].close_called)
      close_conn(&trks[i]);
  if (!run_for(all_closed, 10000)) {
    for (int i = 0; i < ntrk; i++)
      if (trks[i].live)
        fprintf(stderr, "api-order: connection %p (%s) never closed: %d of %d callbacks ran\n",
                (void *)trks[i].c, trks[i].side == CL ? "client" : "server", trks[i].fired,
                trks[i].issued);
    ok = 0;
  }
  plan_on = 0;
  for (int i = 0; i < nops; i++)
    if (ops[i].issued && ops[i].fired != 1) {
      violation("operation %d (kind %d) ran its callback %d times", i, ops[i].kind, ops[i].fired);
      free(ops[i].buf); /* leaked only because of the bug reported */
      ops[i].buf = NULL;
    }
  for (int i = 0; i < ntrk; i++)
    if (trks[i].rk) {
      rmx_rkey_release(trks[i].rk);
      trks[i].rk = NULL;
    }
  if (!ok) {
    /* Destroy would spin on the connection that never closes: leave it. */
    ctx = NULL;
    fail_msg("connections did not close within 10 s (%d violations)", violations);
  }
  for (int s = 0; regions_ready && s < 2; s++) {
    rmx_mem_dereg(mems[s]);
    free(regions[s]);
  }
  regions_ready = 0;
  phase = "rmx_ctx_destroy";
  alarm(20);
  uint64_t t0 = now_ms();
  assert_int_equal(rmx_ctx_destroy(ctx), 0);
  uint64_t took = now_ms() - t0;
  ctx = NULL;
  alarm(0);
  if (took > 2000)
    fail_msg("rmx_ctx_destroy took %llu ms", (unsigned long long)took);
  if (violations)
    fail_msg("%d violations of the callback contract", violations);
}

static int setup(void **state)
{
  plan_on = 0;
  memset(P, 0, sizeof(P));
  return 0;
}

static int teardown(void **state)
{
  if (ctx) /* a case that failed before its own world_down */
    world_down();
  return 0;
}

/* ---- cancel ---- */

/* The call limit shows the connection's count of calls is exact. */
static void limit_is_exact(trk_t *t, int max)
{
  for (int i = 0; i < max; i++) {
    op_t *op = do_call(t, H_HOLD, SMALL, 0);
    if (!op->issued)
      fail_msg("call %d of %d refused after a cancel: the call count is off", i + 1, max);
  }
  assert_int_equal(do_call(t, H_HOLD, SMALL, 0)->rc, RMX_EAGAIN);
}

static void cancel_same_turn(uint32_t h, size_t len)
{
  world_up(4, 1);
  op_t *op = do_call(CLT, h, len, 0);
  assert_true(op->issued);
  assert_int_equal(do_cancel(CLT, op), 0);
  assert_int_equal(op->fired, 0); /* never from inside the call */
  wait_fired(op, 5000);
  assert_int_equal(op->status, RMX_ECANCELED);
  run_ms(100); /* a second callback would come now */
  assert_int_equal(op->fired, 1);
  assert_int_equal(violations, 0);
  limit_is_exact(CLT, 4);
  world_down();
}

static void cancel_same_turn_held_small(void **state) { cancel_same_turn(H_HOLD, SMALL); }
static void cancel_same_turn_echo_small(void **state) { cancel_same_turn(H_ECHO, SMALL); }
static void cancel_same_turn_held_large(void **state) { cancel_same_turn(H_HOLD, LARGE); }
static void cancel_same_turn_echo_large(void **state) { cancel_same_turn(H_ECHO, LARGE); }

/* Many at once, every other one canceled at once, the rest later. */
static void cancel_many_orders(void **state)
{
  world_up(64, 1);
  op_t *k[64];
  for (int i = 0; i < 64; i++) {
    k[i] = do_call(CLT, i % 3 ? H_ECHO : H_HOLD, i % 4 ? SMALL : LARGE, 0);
    assert_true(k[i]->issued);
    if (i % 2)
      assert_int_equal(do_cancel(CLT, k[i]), 0);
  }
  turn();
  for (int i = 0; i < 64; i += 2)
    do_cancel(CLT, k[i]); /* 0 or ENOENT, as do_cancel checks */
  for (int i = 0; i < 64; i++)
    wait_fired(k[i], 5000);
  run_ms(100);
  for (int i = 0; i < 64; i++)
    assert_int_equal(k[i]->fired, 1);
  limit_is_exact(CLT, 64);
  world_down();
}

static void cancel_twice(void **state)
{
  world_up(0, 1);
  op_t *a = do_call(CLT, H_HOLD, SMALL, 0), *b = do_call(CLT, H_HOLD, LARGE, 0);
  assert_int_equal(do_cancel(CLT, a), 0);
  assert_int_equal(do_cancel(CLT, a), RMX_ENOENT);
  run_ms(50);
  assert_int_equal(b->fired, 0);
  assert_int_equal(do_cancel(CLT, b), 0);
  assert_int_equal(do_cancel(CLT, b), RMX_ENOENT);
  wait_fired(a, 5000);
  wait_fired(b, 5000);
  assert_int_equal(do_cancel(CLT, a), RMX_ENOENT);
  assert_int_equal(a->status, RMX_ECANCELED);
  assert_int_equal(b->status, RMX_ECANCELED);
  world_down();
}

static void cancel_after_reply(void **state)
{
  world_up(0, 1);
  op_t *a = do_call(CLT, H_ECHO, SMALL, 0);
  wait_fired(a, 5000);
  assert_int_equal(a->status, 0);
  assert_int_equal(do_cancel(CLT, a), RMX_ENOENT);
  run_ms(50);
  assert_int_equal(a->fired, 1);
  world_down();
}

/* Inside on_reply of one call: cancel it (ended) and another (live). */
static void cancel_inside_on_reply(void **state)
{
  world_up(0, 1);
  op_t *b = do_call(CLT, H_HOLD, SMALL, 0);
  op_t *a = do_call(CLT, H_ECHO, SMALL, 0);
  P[0] = (plan_t){.ev = EV_REPLY, .side = CL, .act = {A_CANCEL, A_CANCEL}};
  plan_on = 1;
  /* the first A_CANCEL takes b (the last live call), the second finds none */
  wait_fired(a, 5000);
  assert_int_equal(acts_run, 1);
  assert_int_equal(b->canceled, 1);
  wait_fired(b, 5000);
  assert_int_equal(b->status, RMX_ECANCELED);
  world_down();
}

/* The reply and the deadline in the same turn, both orders; and a large
 * request's timeout waits until the peer has read it. */
static void timeout_racing_reply(void **state)
{
  world_up(0, 1);
  /* the deadline passes with the reply already in the socket: the timer
   * runs first in the turn; the reply that follows is dropped */
  for (int i = 0; i < 10; i++) {
    op_t *k = do_call(CLT, H_HOLD, SMALL, 5);
    while (nheld == 0 && !k->fired)
      turn();
    answer_held(NULL);
    usleep(20000);
    wait_fired(k, 5000);
    assert_int_equal(k->status, RMX_ETIMEDOUT);
  }
  /* the reply first, the deadline right after */
  for (int i = 0; i < 10; i++) {
    op_t *k = do_call(CLT, H_HOLD, SMALL, 30);
    while (nheld == 0)
      turn();
    answer_held(NULL);
    wait_fired(k, 5000);
  }
  /* a spread of deadlines around the round trip */
  op_t *k[200];
  for (int i = 0; i < 200; i++)
    k[i] = do_call(CLT, H_ECHO, i % 10 ? SMALL : LARGE, 1 + (uint32_t)i % 4);
  for (int i = 0; i < 200; i++) {
    wait_fired(k[i], 5000);
    if (k[i]->status != 0 && k[i]->status != RMX_ETIMEDOUT)
      fail_msg("call %d ended with %s", i, rmx_err_name(k[i]->status));
  }
  run_ms(100);
  /* large request, tiny deadline: on_reply frees it; the peer must be done */
  for (int i = 0; i < 5; i++) {
    op_t *l = do_call(CLT, H_HOLD, 4u << 20, 1);
    wait_fired(l, 10000);
    assert_int_equal(l->status, RMX_ETIMEDOUT);
  }
  run_ms(100);
  assert_int_equal(bad_requests, 0);
  world_down();
}

/* ---- close from inside every callback ---- */

/* The standard traffic: every callback of both sides runs at least once. */
static void workload(void)
{
  if (!CLT || !CLT->live || CLT->connect_status)
    return;
  do_send(CLT, SMALL);
  do_send(CLT, LARGE);
  for (int i = 0; i < BURST; i++) /* beyond the credits: some wait in the queue */
    do_send(CLT, 1 + (size_t)i % 64);
  do_call(CLT, H_ECHO, SMALL, 0);
  do_call(CLT, H_ECHO, LARGE, 0);
  do_call(CLT, H_HOLD, SMALL, 0);
  do_rma(CLT, A_WRITE);
  do_rma(CLT, A_READ);
  do_rma(CLT, A_WRITE_IMM);
  if (SVT && SVT->live) {
    do_send(SVT, SMALL);
    do_send(SVT, LARGE);
    do_rma(SVT, A_WRITE_IMM);
  }
}

/* The server's end is known, unless the client closed before it could be. */
static int sv_known(void) { return SVT != NULL || !CLT->live || CLT->close_called; }

static int acted(void) { return acts_run > 0; }

/* One case: the plans act in their events, on top of the workload. The
 * first plan's event must come; the second's (one that reports an error,
 * say) may not. */
static void scenario2(const plan_t *p, const plan_t *q)
{
  memset(P, 0, sizeof(P));
  P[0] = *p;
  if (q)
    P[1] = *q;
  plan_on = 1;
  world_up(0, 1);
  phase = "scenario";
  run_for(sv_known, 2000); /* the server's end, unless the client closed first */
  workload();
  run_for(quiet, 3000);
  if (P[0].ev == EV_DISCONNECT && !P[0].ran) {
    /* a disconnect needs a cause: the other side closes */
    close_conn(P[0].side == CL ? SVT : CLT);
    answer_held(NULL);
    run_for(acted, 3000);
    run_for(quiet, 3000);
  }
  world_down();
  if (!P[0].ran)
    fail_msg("%s on the %s side never ran", ev_names[P[0].ev],
             P[0].side == CL ? "client" : "server");
}

static void scenario(const plan_t *p) { scenario2(p, NULL); }

#define CLOSE_IN(name, e, s, ...)                                        \
  static void name(void **state)                                         \
  {                                                                      \
    scenario(&(plan_t){.ev = (e), .side = (s), .act = {__VA_ARGS__}}); \
  }

CLOSE_IN(close_in_on_connected, EV_CONNECTED, CL, A_CLOSE)
CLOSE_IN(close_in_on_accept, EV_ACCEPT, SV, A_CLOSE)
CLOSE_IN(close_in_on_recv_server, EV_RECV, SV, A_CLOSE)
CLOSE_IN(close_in_on_recv_client, EV_RECV, CL, A_CLOSE)
CLOSE_IN(close_in_on_sent, EV_SENT, CL, A_CLOSE)
CLOSE_IN(close_in_on_reply, EV_REPLY, CL, A_CLOSE)
CLOSE_IN(close_in_handler_before_reply, EV_HANDLER, SV, A_CLOSE, A_REPLY)
CLOSE_IN(close_in_handler_after_reply, EV_HANDLER, SV, A_REPLY, A_CLOSE)
CLOSE_IN(close_in_on_disconnect, EV_DISCONNECT, CL, A_CLOSE, A_SEND_SMALL, A_CALL_ECHO)
CLOSE_IN(close_in_op_callback, EV_OP, CL, A_CLOSE)
CLOSE_IN(close_in_op_callback_server, EV_OP, SV, A_CLOSE)
CLOSE_IN(close_in_on_imm, EV_IMM, SV, A_CLOSE)
CLOSE_IN(close_peer_in_on_imm, EV_IMM, CL, A_CLOSE_PEER)

/* Each one-sided kind alone, closed in its own callback. */
static void close_in_write_and_read_callbacks(void **state)
{
  for (act_t a = A_WRITE; a <= A_WRITE_IMM; a++) {
    P[0] = (plan_t){.ev = EV_OP, .side = CL, .act = {A_CLOSE}};
    plan_on = 1;
    world_up(0, 1);
    op_t *k[8];
    for (int i = 0; i < 8; i++)
      k[i] = do_rma(CLT, a);
    for (int i = 0; i < 8; i++) {
      assert_true(k[i]->issued);
      wait_fired(k[i], 5000);
    }
    assert_int_equal(acts_run, 1);
    assert_int_equal(k[0]->status, 0);
    for (int i = 1; i < 8; i++)
      if (k[i]->status != 0 && k[i]->status != RMX_ECANCELED)
        fail_msg("%s %d after the close: %s", act_names[a], i, rmx_err_name(k[i]->status));
    world_down();
  }
}

/* ---- close in the same turn as another call ---- */

/* Close after 0, 1, 2, ... turns of a connect: every state it passes. */
static void close_same_turn_as_connect(void **state)
{
  world_up(0, 0);
  for (int turns = 0; turns < 40; turns++) {
    trk_t *t = connect_tracked();
    for (int i = 0; i < turns; i++)
      turn();
    close_conn(t);
    if (turns == 0) {
      run_for(all_closed, 5000);
      assert_int_equal(t->connected, 1);
      assert_int_equal(t->connect_status, RMX_ECANCELED);
    }
  }
  world_down();
}

static void close_same_turn_as_large_send(void **state)
{
  world_up(0, 1);
  op_t *k[4];
  for (int i = 0; i < 4; i++)
    k[i] = do_send(CLT, i % 2 ? LARGE : 4u << 20);
  close_conn(CLT);
  op_t *after = do_send(CLT, LARGE);
  assert_int_equal(after->issued, 0);
  for (int i = 0; i < 4; i++)
    wait_fired(k[i], 5000);
  world_down();
}

static void close_same_turn_as_rpc_call(void **state)
{
  world_up(0, 1);
  op_t *k[4] = {do_call(CLT, H_ECHO, SMALL, 0), do_call(CLT, H_HOLD, SMALL, 0),
                do_call(CLT, H_ECHO, LARGE, 0), do_call(CLT, H_HOLD, LARGE, 100)};
  close_conn(CLT);
  for (int i = 0; i < 4; i++) {
    assert_true(k[i]->issued);
    wait_fired(k[i], 5000);
    assert_int_equal(k[i]->status, RMX_ECANCELED);
  }
  world_down();
}

/* After close: every call fails and calls nothing; a late answer only
 * releases the request. */
static void calls_after_close(void **state)
{
  world_up(0, 1);
  op_t *k = do_call(CLT, H_HOLD, SMALL, 0);
  while (nheld == 0)
    turn();
  close_conn(SVT);
  close_conn(CLT);
  assert_false(do_send(CLT, SMALL)->issued);
  assert_false(do_send(CLT, LARGE)->issued);
  assert_false(do_call(CLT, H_ECHO, SMALL, 0)->issued);
  assert_false(do_rma(CLT, A_WRITE)->issued);
  assert_false(do_rma(CLT, A_READ)->issued);
  assert_false(do_rma(CLT, A_WRITE_IMM)->issued);
  assert_false(do_send(SVT, SMALL)->issued);
  answer_held(NULL); /* ENOTCONN, released: the server's end can close */
  wait_fired(k, 5000);
  assert_int_equal(k->status, RMX_ECANCELED);
  world_down();
}

/* ---- the matrices ---- */

static const act_t matrix_acts[] = {
  A_CLOSE, A_CLOSE_PEER, A_SEND_SMALL, A_SEND_LARGE, A_CALL_ECHO, A_CALL_HOLD, A_CALL_LARGE,
  A_CANCEL, A_CANCEL_TWICE, A_WRITE, A_READ, A_WRITE_IMM, A_REPLY_HELD, A_CLOSE_LISTENER,
};
#define NACTS (sizeof(matrix_acts) / sizeof(matrix_acts[0]))

static const char *side_name(int side) { return side == CL ? "client" : "server"; }

/* Every action, then a close, from inside every callback of both sides, at
 * the first and the second such callback. */
static void every_action_in_every_callback(void **state)
{
  for (int nth = 1; nth <= 2; nth++)
    for (int ev = 0; ev < EV_N; ev++)
      for (int side = CL; side <= SV; side++) {
        if ((ev == EV_CONNECTED && side == SV) || (ev == EV_ACCEPT && side == CL) ||
            (ev == EV_HANDLER && side == CL) || (ev == EV_REPLY && side == SV))
          continue; /* no such event there in this workload */
        if (nth == 2 && (ev == EV_CONNECTED || ev == EV_ACCEPT || ev == EV_DISCONNECT ||
                         ev == EV_CLOSED || ev == EV_IMM || (ev == EV_RECV && side == CL) ||
                         (ev == EV_OP && side == SV)))
          continue; /* once only */
        for (size_t a = 0; a < NACTS; a++) {
          plan_t p = {.ev = (ev_t)ev, .side = side, .nth = nth, .act = {matrix_acts[a], A_CLOSE}};
          fprintf(stderr, "[ %s #%d / %s: %s, close ]\n", ev_names[ev], nth, side_name(side),
                  act_names[matrix_acts[a]]);
          scenario(&p);
        }
      }
}

/* Every action inside callbacks that report an error, so from inside the
 * connection's end: the peer closes (in each of its callbacks), or the
 * connection itself is closed, and then each failing callback acts. */
static void every_action_in_failing_callbacks(void **state)
{
  static const plan_t causes[] = {
    {.ev = EV_RECV, .side = SV, .act = {A_CLOSE}},
    {.ev = EV_HANDLER, .side = SV, .act = {A_CLOSE}},
    {.ev = EV_ACCEPT, .side = SV, .act = {A_CLOSE}},
    {.ev = EV_OP, .side = CL, .act = {A_CLOSE_PEER}},
    {.ev = EV_SENT, .side = CL, .act = {A_CLOSE}},
    {.ev = EV_REPLY, .side = CL, .act = {A_CLOSE}},
  };
  static const ev_t failing[] = {EV_SENT, EV_REPLY, EV_OP};
  int ran = 0, n = 0;
  for (size_t c = 0; c < sizeof(causes) / sizeof(causes[0]); c++)
    for (size_t e = 0; e < sizeof(failing) / sizeof(failing[0]); e++)
      for (size_t a = 0; a < NACTS; a++) {
        plan_t q = {.ev = failing[e], .side = CL, .err = 1, .act = {matrix_acts[a], A_CLOSE}};
        fprintf(stderr, "[ %s / %s: %s; failing %s: %s, close ]\n", ev_names[causes[c].ev],
                side_name(causes[c].side), act_names[causes[c].act[0]], ev_names[failing[e]],
                act_names[matrix_acts[a]]);
        scenario2(&causes[c], &q);
        ran += P[1].ran;
        n++;
      }
  fprintf(stderr, "[ %d of %d failing callbacks acted ]\n", ran, n);
  assert_true(ran >= n / 2); /* the causes do make callbacks fail */
}

/* Sends waiting for credits when the close comes: each ends once. */
static void close_with_sends_waiting_for_credits(void **state)
{
  world_up(0, 1);
  run_for(sv_known, 2000);
  op_t *k[3 * BURST];
  for (int i = 0; i < 3 * BURST; i++)
    k[i] = do_send(CLT, i % 50 ? SMALL : LARGE);
  close_conn(CLT);
  for (int i = 0; i < 3 * BURST; i++) {
    assert_true(k[i]->issued);
    wait_fired(k[i], 5000);
    if (k[i]->status != 0 && k[i]->status != RMX_ECANCELED)
      fail_msg("send %d ended with %s", i, rmx_err_name(k[i]->status));
  }
  assert_int_not_equal(k[3 * BURST - 1]->status, 0); /* it had no credit */
  world_down();
}

/* Sends handed over before a close arrive before the peer sees it. */
static void sends_before_close_arrive(void **state)
{
  world_up(0, 1);
  run_for(sv_known, 2000);
  assert_non_null(SVT);
  op_t *k[10];
  for (int i = 0; i < 10; i++)
    k[i] = do_send(CLT, SMALL);
  close_conn(CLT);
  for (int i = 0; i < 10; i++)
    wait_fired(k[i], 5000);
  while (!SVT->disconnects && SVT->live)
    turn(); /* bounded by the alarm */
  assert_int_equal(SVT->recvs, 10);
  assert_int_equal(SVT->disconnect_status, 0);
  world_down();
}

/* Every ordered pair of actions in one turn, then everything settles. */
static void every_pair_in_one_turn(void **state)
{
  for (size_t a = 0; a < NACTS; a++)
    for (size_t b = 0; b < NACTS; b++) {
      fprintf(stderr, "[ %s; %s ]\n", act_names[matrix_acts[a]], act_names[matrix_acts[b]]);
      world_up(0, 1);
      run_for(sv_known, 2000);
      do_call(CLT, H_HOLD, SMALL, 0); /* something to cancel and answer */
      do_call(CLT, H_ECHO, LARGE, 0);
      while (nheld == 0 && CLT->live)
        turn();
      run_act(matrix_acts[a], CLT, NULL);
      run_act(matrix_acts[b], CLT, NULL);
      run_for(quiet, 3000);
      world_down();
    }
}

int main(int argc, char **argv)
{
  if (harness_args(argc, argv) != 0)
    return 2;
  if (argc > 2)
    cmocka_set_test_filter(argv[2]);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGALRM, on_alarm);
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
    T(cancel_same_turn_held_small), T(cancel_same_turn_echo_small),
    T(cancel_same_turn_held_large), T(cancel_same_turn_echo_large),
    T(cancel_many_orders), T(cancel_twice), T(cancel_after_reply), T(cancel_inside_on_reply),
    T(timeout_racing_reply),
    T(close_in_on_connected), T(close_in_on_accept), T(close_in_on_recv_server),
    T(close_in_on_recv_client), T(close_in_on_sent), T(close_in_on_reply),
    T(close_in_handler_before_reply), T(close_in_handler_after_reply),
    T(close_in_on_disconnect), T(close_in_op_callback), T(close_in_op_callback_server),
    T(close_in_on_imm), T(close_peer_in_on_imm), T(close_in_write_and_read_callbacks),
    T(close_same_turn_as_connect), T(close_same_turn_as_large_send),
    T(close_same_turn_as_rpc_call), T(calls_after_close),
    T(sends_before_close_arrive), T(close_with_sends_waiting_for_credits),
    T(every_action_in_every_callback), T(every_action_in_failing_callbacks),
    T(every_pair_in_one_turn),
  };
  char name[64];
  snprintf(name, sizeof(name), "api-order/%s", scheme);
  return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
