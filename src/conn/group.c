/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Listeners: made and closed (rmx_listen's address resolution is
 * connect.c's). Listener groups: one listening address, several contexts,
 * each run by its own thread.
 *
 * The group owns the transport's gate (a listening socket, or an rdma_cm
 * listener on its own event channel) and no loop. Every member's loop
 * watches the gate's fd; the member that sees it readable takes what
 * waits (GATE_BATCH at most), under the group's lock, and hands each peer
 * to the member at the head of the ring, which then goes to the back: the
 * peers are spread in turn, whatever thread happens to wake. A peer
 * handed to another member goes into that member's mailbox and its loop
 * is woken (uv_async); that loop feeds it to its own transport listener,
 * where it waits as in a listen backlog until the member has a handshake
 * slot. From there on the connection is that context's alone.
 *
 * Nothing taken is lost: a member that leaves (rmx_listener_close) gives
 * back its mailbox and what its transport listener still holds untaken,
 * and they are handed to the others, or kept for the next member to join
 * while there is none. Peers still in the kernel's backlog or the
 * device's never left it. When the last reference goes (the application's
 * rmx_group_close and every member's), the peers kept are refused.
 *
 * The lock covers the ring, the mailboxes, the kept peers and the gate.
 * A member's handles belong to its loop: only uv_async_send of another
 * member's wake is called from a foreign thread, under the lock, while
 * that member is in the ring (it leaves under the lock before closing the
 * handle).
 */
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "choose.h"
#include "group.h"
#include "../registry.h"

#define GATE_BATCH 64     /* peers taken per wake-up */
#define GATE_RETRY_MS 200 /* the gate could not take (out of descriptors): try again */

struct rmx_group {
  uv_mutex_t mu;
  int tpi;
  const rmx_tp_ops_t *ops;
  rmx_tp_gate_t *gate;
  int fd;
  rmx_list_t ring;    /* rmx__member_t: the head gets the next peer */
  rmx_list_t kept;    /* peers taken while no member was there */
  uint32_t refs;      /* the application's, and one per member until its handles close */
};

typedef struct rmx__member {
  rmx_group_t *g;
  rmx_listener_t *l;
  rmx_list_t link;   /* in g->ring */
  rmx_list_t mail;   /* peers handed here, not fed yet */
  uv_async_t wake;   /* another member handed us peers */
  uv_poll_t poll;    /* the gate's fd, in this member's loop */
  uv_timer_t retry;
  int handles;
} rmx__member_t;

static void group_unref(rmx_group_t *g)
{
  uv_mutex_lock(&g->mu);
  int last = --g->refs == 0;
  uv_mutex_unlock(&g->mu);
  if (!last)
    return;
  rmx_list_t *n;
  while ((n = rmx_list_pop(&g->kept)) != NULL)
    g->ops->gate_drop(rmx_container_of(n, rmx_tp_raw_t, link));
  g->ops->gate_close(g->gate);
  uv_mutex_destroy(&g->mu);
  free(g);
}

/* Under g->mu: the next member in turn gets raw, or it is kept. */
static void hand(rmx_group_t *g, rmx_tp_raw_t *raw)
{
  if (rmx_list_empty(&g->ring)) {
    if (g->ops->gate_give(g->gate, raw, NULL) == 0)
      rmx_list_push(&g->kept, &raw->link);
    else
      g->ops->gate_drop(raw);
    return;
  }
  rmx__member_t *m = rmx_container_of(g->ring.next, rmx__member_t, link);
  rmx_list_del(&m->link);
  rmx_list_push(&g->ring, &m->link);
  if (g->ops->gate_give(g->gate, raw, m->l->ctx->tp[g->tpi]) != 0) {
    g->ops->gate_drop(raw);
    return;
  }
  rmx_list_push(&m->mail, &raw->link);
  uv_async_send(&m->wake);
}

static void on_wake(uv_async_t *a)
{
  rmx__member_t *m = a->data;
  rmx_list_t mail, *n;
  rmx_list_init(&mail);
  uv_mutex_lock(&m->g->mu);
  rmx_list_splice(&mail, &m->mail);
  uv_mutex_unlock(&m->g->mu);
  while ((n = rmx_list_pop(&mail)) != NULL)
    m->g->ops->feed(m->l->tl, rmx_container_of(n, rmx_tp_raw_t, link));
}

static void on_gate(uv_poll_t *p, int status, int events);

static void retry_cb(uv_timer_t *t)
{
  rmx__member_t *m = t->data;
  uv_poll_start(&m->poll, UV_READABLE, on_gate);
}

static void on_gate(uv_poll_t *p, int status, int events)
{
  rmx__member_t *m = p->data;
  rmx_group_t *g = m->g;
  rmx_tp_raw_t *raw;
  int rc = status ? rmx__uv_err(status) : 0;
  (void)events;
  uv_mutex_lock(&g->mu);
  for (int i = 0; i < GATE_BATCH && rc == 0; i++)
    if ((rc = g->ops->gate_take(g->gate, &raw)) == 0)
      hand(g, raw);
  uv_mutex_unlock(&g->mu);
  if (rc == 0 || rc == RMX_EAGAIN)
    return;
  /* Peers wait where they are (the backlog) until the retry. */
  rmx_ctx_t *ctx = m->l->ctx;
  RMX_LOG_LIMITED(ctx, &m->l->rl_full, ERROR, "listener group: cannot take a peer: %s; "
                  "trying again in %d ms", rmx_strerror(rc), GATE_RETRY_MS);
  uv_poll_stop(&m->poll);
  uv_timer_start(&m->retry, retry_cb, GATE_RETRY_MS, 0);
}

static void member_closed(uv_handle_t *h)
{
  rmx__member_t *m = h->data;
  if (--m->handles)
    return;
  rmx_group_t *g = m->g;
  rmx__listener_unref(m->l);
  free(m);
  group_unref(g);
}

/* A member's listener is closing: hand on what it has not taken. */
static void group_leave(rmx_listener_t *l)
{
  rmx__member_t *m = l->member;
  rmx_group_t *g = m->g;
  rmx_list_t *n;
  rmx_tp_raw_t *raw;
  uv_mutex_lock(&g->mu);
  rmx_list_del(&m->link);
  while ((n = rmx_list_pop(&m->mail)) != NULL)
    hand(g, rmx_container_of(n, rmx_tp_raw_t, link));
  while ((raw = g->ops->unfeed(l->tl)) != NULL)
    hand(g, raw);
  uv_mutex_unlock(&g->mu);
  l->member = NULL;
  uv_close((uv_handle_t *)&m->poll, member_closed);
  uv_close((uv_handle_t *)&m->retry, member_closed);
  uv_close((uv_handle_t *)&m->wake, member_closed);
}

/* The listener's address as a URI, with the port it was given: a
 * member's is its group's. */
int rmx_listener_uri(rmx_listener_t *l, char *buf, size_t len)
{
  struct sockaddr_storage ss;
  const rmx_tp_ops_t *ops = l->ctx->tp_ops[l->tpi];
  int rc = l->member ? l->member->g->ops->gate_addr(l->member->g->gate, &ss)
                     : ops->listen_addr(l->tl, &ss);
  return rc ? rc : rmx__uri_of(ops->name, &ss, buf, len);
}

int rmx__listener_open(rmx_ctx_t *ctx, int tpi, const struct sockaddr *sa,
                       rmx_accept_cb on_accept, void *arg, rmx_listener_t **out)
{
  int rc = ctx->tp[tpi] ? 0 : ctx->tp_ops[tpi]->init(&ctx->tp_env, &ctx->tp[tpi]);
  if (rc)
    return rc;
  rmx_listener_t *l = calloc(1, sizeof(*l));
  if (!l)
    return RMX_ENOMEM;
  l->ctx = ctx;
  l->tpi = tpi;
  l->on_accept = on_accept;
  l->arg = arg;
  l->refs = 1;
  rmx_list_init(&l->evict);
  if ((rc = ctx->tp_ops[tpi]->listen(ctx->tp[tpi], sa, l, &l->tl)) != 0) {
    free(l);
    return rc;
  }
  rmx_list_push(&ctx->listeners, &l->link);
  *out = l;
  return 0;
}

void rmx_listener_close(rmx_listener_t *l)
{
  if (!l || l->closed)
    return;
  l->closed = 1;
  rmx_list_del(&l->link);
  if (l->member)
    group_leave(l);
  rmx__choose_aliases_close(l);
  l->ctx->tp_ops[l->tpi]->listen_close(l->tl);
  rmx__listener_unref(l);
}

/* A group belongs to no context: its errors are logged unless RMX_LOG=none. */
#define GROUP_LOG(...)                                              \
  do {                                                              \
    const char *lv_ = getenv("RMX_LOG");                            \
    if (!lv_ || strcasecmp(lv_, "none") != 0)                       \
      rmx__log(RMX_LOG_ERROR, __VA_ARGS__);                         \
  } while (0)

int rmx_group_open(const char *uri, rmx_group_t **out)
{
  rmx__uri_t u;
  struct addrinfo *res;
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  const char *why;
  int tpi, rc;
  if (!out || rmx__uri_parse(uri, &u) != 0)
    return RMX_EINVAL;
  if (strcmp(u.scheme, "auto") == 0)
    return RMX_ENOTSUP; /* a group serves one transport: name it */
  if ((rc = rmx__tp_lookup(u.scheme, &tpi, &why)) != 0)
    return rc;
  const rmx_tp_ops_t *ops = rmx__tp_ops(tpi);
  if (!ops || !ops->gate_open)
    return RMX_ENOTSUP;
  struct sockaddr_storage name; /* shm://: a socket name, nothing to resolve */
  struct addrinfo named = {.ai_addr = (struct sockaddr *)&name};
  int local = (ops->flags & RMX_TP_F_LOCAL_NAME) != 0;
  if (local && (rc = rmx__uri_unix(u.host, &name)) != 0)
    return rc;
  if (local)
    res = &named;
  else if (getaddrinfo(u.host, u.port, &hints, &res) != 0) {
    GROUP_LOG("listener group: cannot resolve '%s'", u.host);
    return RMX_ENORESOLVE;
  }
  rmx_group_t *g = calloc(1, sizeof(*g));
  if (!g) {
    if (!local)
      freeaddrinfo(res);
    return RMX_ENOMEM;
  }
  g->tpi = tpi;
  g->ops = ops;
  g->refs = 1;
  rmx_list_init(&g->ring);
  rmx_list_init(&g->kept);
  rc = ops->gate_open(res->ai_addr, &g->gate, &g->fd);
  if (rc) {
    char a[80];
    GROUP_LOG("listener group: cannot listen on %s://%s: %s%s", ops->name,
              rmx__sa_str(res->ai_addr, a, sizeof(a)), rmx_strerror(rc), rmx__listen_hint(rc));
  }
  if (!local)
    freeaddrinfo(res);
  if (rc == 0 && (rc = uv_mutex_init(&g->mu)) != 0) {
    ops->gate_close(g->gate);
    rc = rmx__uv_err(rc);
  }
  if (rc) {
    free(g);
    return rc;
  }
  *out = g;
  return 0;
}

int rmx_group_uri(rmx_group_t *g, char *buf, size_t len)
{
  struct sockaddr_storage ss;
  if (!g || !buf)
    return RMX_EINVAL;
  int rc = g->ops->gate_addr(g->gate, &ss);
  return rc ? rc : rmx__uri_of(g->ops->name, &ss, buf, len);
}

int rmx_listen_group(rmx_ctx_t *ctx, rmx_group_t *g, rmx_accept_cb on_accept, void *arg,
                     rmx_listener_t **out)
{
  rmx_list_t *n;
  int rc;
  if (!ctx || !g || !on_accept || !out)
    return RMX_EINVAL;
  rmx_list_foreach(n, &ctx->listeners) {
    rmx__member_t *other = rmx_container_of(n, rmx_listener_t, link)->member;
    if (other && other->g == g)
      return RMX_EALREADY;
  }
  rmx__member_t *m = calloc(1, sizeof(*m));
  if (!m)
    return RMX_ENOMEM;
  rmx_listener_t *l;
  if ((rc = rmx__listener_open(ctx, g->tpi, NULL, on_accept, arg, &l)) != 0) {
    free(m);
    return rc;
  }
  m->g = g;
  m->l = l;
  rmx_list_init(&m->mail);
  uv_async_init(ctx->loop, &m->wake, on_wake);
  uv_poll_init(ctx->loop, &m->poll, g->fd);
  uv_timer_init(ctx->loop, &m->retry);
  m->wake.data = m->poll.data = m->retry.data = m;
  m->handles = 3;
  l->member = m;
  l->refs++; /* until the member's handles are closed */
  uv_mutex_lock(&g->mu);
  g->refs++;
  rmx_list_push(&g->ring, &m->link);
  while ((n = rmx_list_pop(&g->kept)) != NULL)
    hand(g, rmx_container_of(n, rmx_tp_raw_t, link));
  uv_mutex_unlock(&g->mu);
  uv_poll_start(&m->poll, UV_READABLE, on_gate);
  *out = l;
  return 0;
}

void rmx_group_close(rmx_group_t *g)
{
  if (g)
    group_unref(g);
}
