/*
 * The runtime under every core layer: deferred work (it runs from the
 * loop, never inside an API call), the op freelist (no allocation per
 * message in steady state), and the one place a connection's reference
 * count moves.
 */
#include <stdlib.h>
#include <string.h>

#include "rmx_int.h"

/* ---- deferred work ---- */

static void idle_cb(uv_idle_t *h)
{
  rmx_ctx_t *ctx = h->data;
  rmx_list_t *n;
  ctx->in_cb++;
  /* Take one at a time: a callback may queue more or free neighbours. */
  while ((n = rmx_list_pop(&ctx->deferred)) != NULL) {
    rmx__deferred_t *d = rmx_container_of(n, rmx__deferred_t, link);
    d->fn(d);
  }
  uv_idle_stop(h);
  ctx->in_cb--;
}

void rmx__defer(rmx_ctx_t *ctx, rmx__deferred_t *d)
{
  if (rmx_list_empty(&ctx->deferred))
    uv_idle_start(&ctx->idle, idle_cb);
  rmx_list_push(&ctx->deferred, &d->link);
}

/* ---- connection references ---- */

void rmx__conn_hold(rmx_conn_t *c) { c->ops_out++; }

void rmx__conn_release(rmx_conn_t *c)
{
  if (--c->ops_out == 0 && c->finished && c->user_closed)
    rmx__defer_once(c->ctx, &c->defer_free);
}

/* ---- ops ---- */

rmx__op_t *rmx__op_get(rmx_ctx_t *ctx, rmx_conn_t *c, rmx__op_kind_t kind)
{
  rmx_list_t *n = rmx_list_pop(&ctx->free_ops);
  rmx__op_t *op;
  if (n) {
    op = rmx_container_of(n, rmx__op_t, link);
  } else {
    op = malloc(sizeof(*op));
    if (!op)
      return NULL;
    ctx->ops_allocated++;
  }
  memset(op, 0, offsetof(rmx__op_t, frame));
  rmx_list_init(&op->link);
  op->conn = c;
  op->kind = (uint8_t)kind;
  rmx__conn_hold(c);
  return op;
}

void rmx__op_put(rmx__op_t *op)
{
  rmx_conn_t *c = op->conn;
  rmx_list_push(&c->ctx->free_ops, &op->link);
  rmx__conn_release(c);
}

void rmx__op_done(rmx_conn_t *c, rmx__op_t *op, int status)
{
  c->ctx->opc[op->kind]->done(c, op, status);
}

void rmx__op_fail(rmx__op_t *op, int status)
{
  op->conn->ctx->opc[op->kind]->fail(op, status);
}
