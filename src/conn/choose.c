/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * auto:// per peer (docs/architecture.md, "auto:// per peer"). A connect
 * tries RMX_TRANSPORTS' transports in order, each this context can open:
 * shm first, which answers only where the peer's address is this host's
 * and its listener's alias answers (at the call: a Unix socket says at
 * once), then rdma, then tcp. A transport that refuses at the call gives
 * way to the next at once; one whose set-up fails later (no rdma listener
 * there, the peer under another kernel) gives way with a warning that
 * says why, on the same handle, before on_connected is called. A peer's
 * own refusal (authentication, versions, a full listener's answer on the
 * last transport) is reported as it is.
 *
 * A listener at tcp:// or rdma:// also answers over shm, at its alias; one
 * at auto:// on every transport listed that this context opens, on the
 * same port. The aliases are listeners of their own, hidden: on_accept
 * gets the listener the application made, and closing it closes them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "choose.h"

/* A transport that cannot open here (verbs without a device) is not
 * tried again by every auto:// connect: the context keeps why. */
static int tp_open(rmx_ctx_t *ctx, int slot)
{
  if (!ctx->tp_ops[slot])
    return RMX_ENOTSUP;
  if (ctx->tp[slot])
    return 0;
  if (ctx->tp_refused[slot])
    return ctx->tp_refused[slot];
  int rc = ctx->tp_ops[slot]->init(&ctx->tp_env, &ctx->tp[slot]);
  if (rc)
    ctx->tp_refused[slot] = rc;
  return rc;
}

int rmx__choose_slots(rmx_ctx_t *ctx, int slots[RMX_TP_COUNT])
{
  int order[RMX_TP_COUNT], req = 0, n = 0, rc = RMX_ENODEV;
  const char *why = "";
  int k = rmx__tp_order(ctx->cfg.transports, order, &req, &why);
  if (k < 0)
    return k; /* rmx__config_check refused it already */
  for (int i = 0; i < k; i++) {
    if ((rc = tp_open(ctx, order[i])) == 0)
      slots[n++] = order[i];
    else if (req)
      RMX_LOG(ctx, ERROR, "RMX_TRANSPORTS=%s: that transport cannot be used here (%s): no "
              "fall back", ctx->cfg.transports, rmx_strerror(rc));
  }
  return n ? n : rc;
}

int rmx__choose_auto(rmx_conn_t *c)
{
  int slots[RMX_TP_COUNT];
  int n = rmx__choose_slots(c->ctx, slots);
  if (n < 0)
    return n;
  for (int i = 0; i < n; i++)
    c->auto_slot[i] = (uint8_t)slots[i];
  c->auto_n = (uint8_t)n;
  c->auto_i = 0;
  c->tpi = slots[0];
  c->ops = c->ctx->tp_ops[slots[0]];
  return 0;
}

static int may_move(const rmx_conn_t *c) { return c->auto_i + 1 < c->auto_n; }

static void move_on(rmx_conn_t *c)
{
  c->auto_i++;
  c->tpi = c->auto_slot[c->auto_i];
  c->ops = c->ctx->tp_ops[c->tpi];
}

int rmx__choose_next(rmx_conn_t *c, int rc)
{
  if (!may_move(c) || rc == RMX_ENOMEM)
    return 0;
  const char *from = c->ops->name;
  move_on(c);
  /* A socket name's transport refusing an IP address says only that the
   * peer is not on this host: the usual case, no warning. */
  if (c->ctx->tp_ops[c->auto_slot[c->auto_i - 1]]->flags & RMX_TP_F_LOCAL_NAME)
    RMX_LOG(c->ctx, DEBUG, "auto: peer %s is not reached over %s here: trying %s", c->peer,
            from, c->ops->name);
  else
    RMX_LOG(c->ctx, WARN, "auto: peer %s: %s refused the connect (%s): trying %s", c->peer,
            from, rmx_strerror(rc), c->ops->name);
  return 1;
}

int rmx__choose_fallback(rmx_conn_t *c, int status)
{
  if (!may_move(c) || c->user_closed || c->was_established || c->passive || c->ctx->dying ||
      status == RMX_EACCES || status == RMX_EVERSION || status == RMX_ECANCELED)
    return 0;
  const char *from = c->ops->name;
  move_on(c);
  RMX_LOG(c->ctx, WARN, "auto: peer %s: %s set-up failed (%s): trying %s", c->peer, from,
          rmx_strerror(status), c->ops->name);
  return 1;
}

/* ---- listeners over several transports ---- */

static rmx_listener_t *alias_open(rmx_listener_t *l, int slot, const struct sockaddr *sa,
                                  int *rc)
{
  rmx_ctx_t *ctx = l->ctx;
  rmx_listener_t *a = calloc(1, sizeof(*a));
  if (!a) {
    *rc = RMX_ENOMEM;
    return NULL;
  }
  a->ctx = ctx;
  a->tpi = slot;
  a->on_accept = l->on_accept;
  a->arg = l->arg;
  a->refs = 1;
  a->parent = l;
  rmx_list_init(&a->evict);
  if ((*rc = ctx->tp_ops[slot]->listen(ctx->tp[slot], sa, a, &a->tl)) != 0) {
    free(a);
    return NULL;
  }
  return a;
}

void rmx__choose_aliases(rmx_listener_t *l, int is_auto)
{
  rmx_ctx_t *ctx = l->ctx;
  struct sockaddr_storage ss;
  char uri[160] = "?";
  int order[RMX_TP_COUNT], req = 0, n = 0, rc;
  const char *why;
  if (ctx->tp_ops[l->tpi]->flags & RMX_TP_F_LOCAL_NAME)
    return; /* shm:// itself: a name of its own */
  if (ctx->tp_ops[l->tpi]->listen_addr(l->tl, &ss) != 0 ||
      (n = rmx__tp_order(ctx->cfg.transports, order, &req, &why)) <= 0)
    return;
  rmx__uri_of(ctx->tp_ops[l->tpi]->name, &ss, uri, sizeof(uri));
  for (int i = 0, k = 0; i < n; i++) {
    int s = order[i], local = ctx->tp_ops[s] && (ctx->tp_ops[s]->flags & RMX_TP_F_LOCAL_NAME);
    if (s == l->tpi || (!is_auto && !local) || tp_open(ctx, s) != 0)
      continue; /* tcp:// and rdma:// add only shm's alias */
    rmx_listener_t *a = alias_open(l, s, (struct sockaddr *)&ss, &rc);
    if (!a) {
      if (local)
        RMX_LOG(ctx, INFO, "listener %s: peers on this host reach it over TCP only: its "
                "shm name is taken (%s)", uri, rmx_strerror(rc));
      else
        RMX_LOG(ctx, WARN, "listener %s: not also over %s: %s", uri, ctx->tp_ops[s]->name,
                rmx_strerror(rc));
      continue;
    }
    l->alias[k++] = a;
    RMX_LOG(ctx, DEBUG, "listener %s also answers over %s", uri, ctx->tp_ops[s]->name);
  }
}

void rmx__choose_aliases_close(rmx_listener_t *l)
{
  for (int k = 0; k < RMX_TP_COUNT - 1; k++) {
    rmx_listener_t *a = l->alias[k];
    if (!a)
      continue;
    l->alias[k] = NULL;
    a->closed = 1;
    a->ctx->tp_ops[a->tpi]->listen_close(a->tl);
    rmx__listener_unref(a);
  }
}
