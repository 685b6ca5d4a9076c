/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RPC: requests and replies ride the message path (eager or rendezvous,
 * credits, order) with an RPC extension in the frame (docs/protocol.md).
 *
 * Calls: a per-connection table by call id. The id is the caller's handle,
 * so a cancel after the end is RMX_ENOENT, never a dangling pointer. Each
 * call ends exactly once: reply, handler error, timeout, cancel, or the
 * connection's end. A call whose large request is still being read by the
 * peer delays a timeout or cancel until the read is over, so the caller may
 * free its buffer as soon as on_reply runs.
 *
 * Requests: a handler gets an rmx_rpc_req_t to answer once. At most
 * rpc_max_inflight requests are with handlers per connection; more wait,
 * copied, without their receive credit returned, so a flood stalls at the
 * sender instead of growing here. Replies never wait behind them.
 *
 * Ids from RMX_RPC_ID_RESERVED up are rmx's own (src/names.c serves two).
 * A request with call id 0 is one-way: its handler still answers it, to
 * release it, but nothing goes back, not even RMX_ENOHANDLER.
 */
#include <stdlib.h>
#include <string.h>

#include "rmx_int.h"

typedef struct rmx__call {
  rmx_list_t link;  /* in the connection's bucket */
  rmx_list_t tlink; /* in the context's deadline list */
  rmx__deferred_t defer;
  rmx_conn_t *c;
  uint64_t id;
  uint64_t deadline; /* loop time in ms; 0: none */
  rmx_rpc_reply_cb cb;
  void *arg;
  uint8_t rndv_open; /* the peer may still be reading the request */
  uint8_t ending;
  int end_status;
} rmx__call_t;

struct rmx_rpc_req {
  rmx_list_t link;
  rmx_conn_t *c;
  uint64_t call_id;
  uint32_t epoch; /* the transport connection it came on (reconnect) */
};

typedef struct rmx__handler {
  rmx_list_t link;
  uint32_t id;
  rmx_rpc_handler fn;
  void *arg;
} rmx__handler_t;

/* ---- the tables ---- */

static rmx_list_t *bucket(rmx_conn_t *c, uint64_t id) { return &c->calls[id % RMX_CALL_BUCKETS]; }

static rmx__call_t *call_find(rmx_conn_t *c, uint64_t id)
{
  rmx_list_t *n;
  rmx_list_foreach(n, bucket(c, id)) {
    rmx__call_t *k = rmx_container_of(n, rmx__call_t, link);
    if (k->id == id)
      return k;
  }
  return NULL;
}

static rmx__handler_t *handler_find(rmx_ctx_t *ctx, uint32_t id)
{
  rmx_list_t *n;
  rmx_list_foreach(n, &ctx->handlers[id % RMX_HANDLER_BUCKETS]) {
    rmx__handler_t *h = rmx_container_of(n, rmx__handler_t, link);
    if (h->id == id)
      return h;
  }
  return NULL;
}

int rmx_rpc_register(rmx_ctx_t *ctx, uint32_t id, rmx_rpc_handler fn, void *arg)
{
  if (!ctx || !fn || id >= RMX_RPC_ID_RESERVED)
    return RMX_EINVAL;
  return rmx__rpc_serve(ctx, id, fn, arg);
}

/* rmx's own handlers, on the reserved ids (src/names.c). */
int rmx__rpc_serve(rmx_ctx_t *ctx, uint32_t id, rmx_rpc_handler fn, void *arg)
{
  if (handler_find(ctx, id))
    return RMX_EALREADY;
  rmx__handler_t *h = malloc(sizeof(*h));
  if (!h)
    return RMX_ENOMEM;
  h->id = id;
  h->fn = fn;
  h->arg = arg;
  rmx_list_push(&ctx->handlers[id % RMX_HANDLER_BUCKETS], &h->link);
  return 0;
}

/* ---- deadlines: one timer for the context, a list sorted by deadline ---- */

static void timer_cb(uv_timer_t *t);

static void arm(rmx_ctx_t *ctx)
{
  if (rmx_list_empty(&ctx->deadlines)) {
    uv_timer_stop(&ctx->rpc_timer);
    return;
  }
  rmx__call_t *k = rmx_container_of(ctx->deadlines.next, rmx__call_t, tlink);
  uint64_t now = uv_now(ctx->loop);
  uv_timer_start(&ctx->rpc_timer, timer_cb, k->deadline > now ? k->deadline - now : 0, 0);
}

static void deadline_add(rmx__call_t *k, uint32_t timeout_ms)
{
  rmx_ctx_t *ctx = k->c->ctx;
  rmx_list_t *n;
  k->deadline = uv_now(ctx->loop) + timeout_ms;
  /* from the back: with one timeout everywhere this is the first step */
  for (n = ctx->deadlines.prev; n != &ctx->deadlines; n = n->prev)
    if (rmx_container_of(n, rmx__call_t, tlink)->deadline <= k->deadline)
      break;
  rmx_list_push(n->next, &k->tlink); /* after n */
  if (ctx->deadlines.next == &k->tlink)
    arm(ctx);
}

static void deadline_del(rmx__call_t *k)
{
  if (k->deadline) {
    rmx_list_del(&k->tlink);
    k->deadline = 0;
  }
}

/* ---- ending calls ---- */

/*
 * The one place a call ends: out of every list that can still name it (its
 * bucket, the deadlines, the deferred queue), so no other path finds it
 * again, then its callback. Everything else finds a call by id.
 */
static void call_finish(rmx__call_t *k, int status, const void *data, size_t len)
{
  rmx_conn_t *c = k->c;
  rmx_rpc_reply_cb cb = k->cb;
  void *arg = k->arg;
  rmx_list_del(&k->link);
  deadline_del(k);
  if (!rmx_list_empty(&k->defer.link))
    rmx_list_del(&k->defer.link); /* a cancel's callback still queued */
  c->rpc_out--;
  rmx_list_push(&c->ctx->free_calls, &k->link);
  rmx__conn_release(c);
  cb(c, status, data, len, arg);
}

static void deferred_end(rmx__deferred_t *d)
{
  rmx__call_t *k = rmx_container_of(d, rmx__call_t, defer);
  call_finish(k, k->end_status, NULL, 0);
}

/* End a call without a reply. In_loop: may the callback run now? */
static void call_end(rmx__call_t *k, int status, int in_loop)
{
  if (k->ending)
    return;
  k->ending = 1;
  k->end_status = status;
  deadline_del(k);
  if (k->rndv_open)
    return; /* finished when the peer is done with the request */
  if (in_loop)
    call_finish(k, status, NULL, 0);
  else
    rmx__defer(k->c->ctx, &k->defer);
}

static void timer_cb(uv_timer_t *t)
{
  rmx_ctx_t *ctx = t->data;
  uint64_t now = uv_now(ctx->loop);
  rmx__cb_enter(ctx);
  while (!rmx_list_empty(&ctx->deadlines)) {
    rmx__call_t *k = rmx_container_of(ctx->deadlines.next, rmx__call_t, tlink);
    if (k->deadline > now)
      break;
    call_end(k, RMX_ETIMEDOUT, 1);
  }
  arm(ctx);
  ctx->in_cb--;
}

/* The polling fast path, before a pass handles completions: deadlines
 * that are due end first, as the loop's timer would have ended them (the
 * loop turns seldom while an application spins). */
void rmx__rpc_due(rmx_ctx_t *ctx)
{
  uv_update_time(ctx->loop);
  rmx__call_t *k = rmx_container_of(ctx->deadlines.next, rmx__call_t, tlink);
  if (k->deadline <= uv_now(ctx->loop))
    timer_cb(&ctx->rpc_timer);
}

/* The request's send completed: the peer has the bytes, or never will. */
static void req_sent(rmx_conn_t *c, int status, void *arg)
{
  rmx__call_t *k = call_find(c, (uintptr_t)arg);
  if (!k)
    return; /* ended already */
  k->rndv_open = 0;
  if (k->ending) /* a cancel or timeout waited for this, or is queued */
    call_finish(k, k->end_status, NULL, 0);
  else if (status)
    call_end(k, status, 1);
}

/* ---- calling ---- */

int rmx_rpc_call(rmx_conn_t *c, uint32_t id, const void *req, size_t len, uint32_t timeout_ms,
                 rmx_rpc_reply_cb on_reply, void *arg, uint64_t *call)
{
  int rc, rndv = 0;
  if (!c || !on_reply || (!req && len))
    return RMX_EINVAL;
  if (c->state != RMX_CS_ESTABLISHED)
    return RMX_ENOTCONN;
  if (c->rpc_out >= c->ctx->cfg.rpc_max_inflight)
    return RMX_EAGAIN;
  rmx_list_t *n = rmx_list_pop(&c->ctx->free_calls);
  rmx__call_t *k = n ? rmx_container_of(n, rmx__call_t, link) : malloc(sizeof(*k));
  if (!k)
    return RMX_ENOMEM;
  memset(k, 0, sizeof(*k));
  k->c = c;
  k->id = ++c->next_call;
  k->cb = on_reply;
  k->arg = arg;
  k->defer.fn = deferred_end;
  rmx_list_init(&k->defer.link);
  rmx_wire_rpc_t x = {.call_id = k->id, .handler = id};
  /* Only a rendezvous request needs to hear of its send (req_sent): an
   * eager one that fails takes the connection down, which ends the call
   * (rmx__rpc_fail_all), and without a callback it may take the narrow
   * path (src/msg/send.c). */
  int eager = len + RMX_WIRE_RPC_LEN <= c->eager_max;
  rc = rmx__msg_send(c, req, len, NULL, RMX_FF_RPC_REQ, &x, eager ? NULL : req_sent,
                     (void *)(uintptr_t)k->id, &rndv);
  if (rc) {
    rmx_list_push(&c->ctx->free_calls, &k->link);
    return rc;
  }
  k->rndv_open = (uint8_t)rndv;
  rmx_list_push(bucket(c, k->id), &k->link);
  c->rpc_out++;
  rmx__conn_hold(c); /* the call keeps the connection */
  if (timeout_ms)
    deadline_add(k, timeout_ms);
  if (call)
    *call = k->id;
  return 0;
}

/* A one-way request (call id 0): nothing is kept, no reply comes. Small
 * enough to go eager (copied); 0, or why it could not be sent. */
int rmx__rpc_notify(rmx_conn_t *c, uint32_t id, const void *data, size_t len)
{
  rmx_wire_rpc_t x = {.call_id = 0, .handler = id};
  if (c->state != RMX_CS_ESTABLISHED)
    return RMX_ENOTCONN;
  if (len + RMX_WIRE_RPC_LEN > c->eager_max)
    return RMX_EMSGSIZE;
  return rmx__msg_send(c, data, len, NULL, RMX_FF_RPC_REQ, &x, NULL, NULL, NULL);
}

int rmx_rpc_cancel(rmx_conn_t *c, uint64_t call)
{
  rmx__call_t *k = c ? call_find(c, call) : NULL;
  if (!k || k->ending)
    return RMX_ENOENT;
  call_end(k, RMX_ECANCELED, 0);
  return 0;
}

/* ---- serving ---- */

static void rpc_resume(rmx_conn_t *c);

static void req_release(rmx_rpc_req_t *r)
{
  rmx_conn_t *c = r->c;
  rmx_list_del(&r->link); /* from reqs_out */
  c->rpc_in--;
  rmx_list_push(&c->ctx->free_reqs, &r->link);
  rpc_resume(c);
  rmx__conn_release(c);
}

static int reply_send(rmx_rpc_req_t *r, int status, const void *data, size_t len, rmx_buf_t *b)
{
  rmx_conn_t *c = r->c;
  rmx_wire_rpc_t x = {.call_id = r->call_id, .status = status};
  /* Nothing goes to a reconnected peer, nor for a one-way request (call id 0). */
  int rc = r->call_id ? RMX_ENOTCONN : 0;
  if (r->call_id && c->state == RMX_CS_ESTABLISHED && r->epoch == c->epoch) {
    /* An eager reply is copied by the send itself (the narrow path, when
     * nothing waits ahead); a larger one goes from rmx's own copy, since
     * the caller's memory may go when this returns. */
    int eager = len + RMX_WIRE_RPC_LEN <= c->eager_max;
    if (!b && len && !eager && (rc = rmx__buf_alloc(c->ctx, len, &b)) != 0)
      goto out;
    if (b && data && len)
      memcpy(rmx_buf_data(b), data, len);
    if (b)
      data = rmx_buf_data(b); /* send from rmx's copy: the caller's may go now */
    rc = rmx__msg_send(c, data, len, b, RMX_FF_RPC_REP, &x, NULL, NULL, NULL);
    if (rc == 0)
      b = NULL; /* the send owns it now */
    if (rc == RMX_EMSGSIZE) { /* too big to answer with: the caller learns why */
      x.status = RMX_EMSGSIZE;
      rmx__msg_send(c, NULL, 0, NULL, RMX_FF_RPC_REP, &x, NULL, NULL, NULL);
    }
  }
out:
  if (b)
    rmx__buf_free(c->ctx, b);
  req_release(r);
  return rc;
}

int rmx_rpc_reply(rmx_rpc_req_t *req, const void *data, size_t len)
{
  if (!req || (!data && len))
    return RMX_EINVAL;
  return reply_send(req, 0, data, len, NULL);
}

int rmx_rpc_reply_buf(rmx_rpc_req_t *req, rmx_buf_t *b, size_t len)
{
  if (!req || !b || len > b->cap)
    return RMX_EINVAL;
  return reply_send(req, 0, NULL, len, b);
}

int rmx_rpc_reply_error(rmx_rpc_req_t *req, int status)
{
  if (!req || status >= 0)
    return RMX_EINVAL;
  return reply_send(req, status, NULL, 0, NULL);
}

rmx_conn_t *rmx_rpc_req_conn(const rmx_rpc_req_t *req) { return req->c; }

/* A request with a handler slot: run the handler. */
static void dispatch(rmx_conn_t *c, const rmx_wire_rpc_t *x, const void *data, size_t len)
{
  rmx__handler_t *h = handler_find(c->ctx, x->handler);
  if (!h) {
    rmx_wire_rpc_t e = {.call_id = x->call_id, .status = RMX_ENOHANDLER};
    RMX_LOG(c->ctx, DEBUG, "rpc: no handler %u", x->handler);
    if (x->call_id) /* a one-way request: no reply */
      rmx__msg_send(c, NULL, 0, NULL, RMX_FF_RPC_REP, &e, NULL, NULL, NULL);
    return;
  }
  rmx_list_t *n = rmx_list_pop(&c->ctx->free_reqs);
  rmx_rpc_req_t *r = n ? rmx_container_of(n, rmx_rpc_req_t, link) : malloc(sizeof(*r));
  if (!r) {
    rmx__conn_down(c, RMX_ENOMEM);
    return;
  }
  r->c = c;
  r->call_id = x->call_id;
  r->epoch = c->epoch;
  rmx_list_push(&c->reqs_out, &r->link);
  c->rpc_in++;
  rmx__conn_hold(c); /* the request keeps the connection until answered */
  h->fn(r, data, len, h->arg);
}

/*
 * A frame with an RPC extension reached the head of the delivery order.
 * Returns 1 when the request was held (its credit stays owed), else 0.
 */
int rmx__rpc_deliver(rmx_conn_t *c, uint8_t flag, const rmx_wire_rpc_t *x, const void *data,
                     size_t len)
{
  if (flag == RMX_FF_RPC_REP) {
    rmx__call_t *k = call_find(c, x->call_id);
    if (!k || k->ending) {
      RMX_LOG(c->ctx, DEBUG, "rpc: reply to call %llu dropped: it already ended",
              (unsigned long long)x->call_id);
      return 0;
    }
    call_finish(k, x->status, data, len);
    return 0;
  }
  if (c->rpc_in < c->ctx->cfg.rpc_max_inflight && rmx_list_empty(&c->reqq)) {
    dispatch(c, x, data, len);
    return 0;
  }
  rmx__op_t *op = rmx__op_get(c->ctx, c, RMX_OP_RX);
  if (!op || (len && rmx__buf_alloc(c->ctx, len, &op->buf) != 0)) {
    if (op)
      rmx__op_put(op);
    rmx__conn_down(c, RMX_ENOMEM);
    return 0;
  }
  if (len)
    memcpy(rmx_buf_data(op->buf), data, len);
  op->len = len;
  op->rpcx = *x;
  c->rpc_held_bytes += len;
  rmx_list_push(&c->reqq, &op->link);
  return 1;
}

/* A handler slot freed: start held requests, and give their credits back. */
static void rpc_resume(rmx_conn_t *c)
{
  rmx_list_t *n;
  uint64_t held = c->rpc_held_bytes;
  while (c->state == RMX_CS_ESTABLISHED && c->rpc_in < c->ctx->cfg.rpc_max_inflight &&
         (n = rmx_list_pop(&c->reqq)) != NULL) {
    rmx__op_t *op = rmx_container_of(n, rmx__op_t, link);
    rmx__msg_credit_back(c);
    c->rpc_held_bytes -= op->len;
    dispatch(c, &op->rpcx, op->buf ? rmx_buf_data(op->buf) : NULL, op->len);
    if (op->buf)
      rmx__buf_free(c->ctx, op->buf);
    rmx__op_put(op);
  }
  if (c->rpc_held_bytes < held && c->state == RMX_CS_ESTABLISHED)
    rmx__msg_progress(c); /* large messages not read while too much was held */
}

/* The connection ended: every call ends with why; held requests go. */
void rmx__rpc_fail_all(rmx_conn_t *c, int status)
{
  rmx_list_t *n;
  while ((n = rmx_list_pop(&c->reqq)) != NULL) {
    rmx__op_t *op = rmx_container_of(n, rmx__op_t, link);
    c->rpc_held_bytes -= op->len;
    if (op->buf)
      rmx__buf_free(c->ctx, op->buf);
    rmx__op_put(op);
  }
  for (int i = 0; i < RMX_CALL_BUCKETS; i++)
    while ((n = c->calls[i].next) != &c->calls[i]) {
      rmx__call_t *k = rmx_container_of(n, rmx__call_t, link);
      /* a cancel not yet delivered is delivered now, with its own status */
      call_finish(k, k->ending ? k->end_status : status, NULL, 0);
    }
}

void rmx__rpc_drop_unanswered(rmx_conn_t *c)
{
  rmx_list_t *n;
  while ((n = rmx_list_pop(&c->reqs_out)) != NULL) {
    free(rmx_container_of(n, rmx_rpc_req_t, link));
    c->rpc_in--;
    rmx__conn_release(c);
  }
}

void rmx__rpc_ctx_init(rmx_ctx_t *ctx)
{
  for (int i = 0; i < RMX_HANDLER_BUCKETS; i++)
    rmx_list_init(&ctx->handlers[i]);
  rmx_list_init(&ctx->deadlines);
  rmx_list_init(&ctx->free_calls);
  rmx_list_init(&ctx->free_reqs);
  uv_timer_init(ctx->loop, &ctx->rpc_timer);
  ctx->rpc_timer.data = ctx;
  uv_unref((uv_handle_t *)&ctx->rpc_timer);
}

void rmx__rpc_ctx_fini(rmx_ctx_t *ctx)
{
  rmx_list_t *n;
  for (int i = 0; i < RMX_HANDLER_BUCKETS; i++)
    while ((n = rmx_list_pop(&ctx->handlers[i])) != NULL)
      free(rmx_container_of(n, rmx__handler_t, link));
  while ((n = rmx_list_pop(&ctx->free_calls)) != NULL)
    free(rmx_container_of(n, rmx__call_t, link));
  while ((n = rmx_list_pop(&ctx->free_reqs)) != NULL)
    free(rmx_container_of(n, rmx_rpc_req_t, link));
}
