/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Connections through rdma_cm: resolving the address and the route,
 * connect/accept with the hello in private data, listen, reject with a
 * status, and the event channel; how a connection ends is ep.c's. Events
 * are copied and acknowledged at once, then handled, so a handler may
 * destroy the id the event was for.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

#define CONNECT_PDATA_MAX 56 /* what an RC connect request can carry */

static void timer_cb(uv_timer_t *t)
{
  struct rmx_tp_conn *tc = t->data;
  if (tc->established || tc->closing)
    return;
  if (tc->passive) /* an incoming peer can leave connections half made at will */
    RMX_TP_LOG_LIMITED(tc->tp->env, &tc->tp->rl_refused, uv_now(tc->tp->loop), WARN,
                       "rdma: connection from %s not established within %u ms", tc->peer,
                       tc->tp->env->cfg->connect_timeout_ms);
  else
    RMX_TP_LOG(tc->tp->env, WARN, "rdma: connection to %s not established within %u ms",
               tc->peer, tc->tp->env->cfg->connect_timeout_ms);
  rmx__vb_fail(tc, RMX_ETIMEDOUT);
}

static struct rmx_tp_conn *tc_new(struct rmx_tp *tp, struct rdma_cm_id *id)
{
  struct rmx_tp_conn *tc = calloc(1, sizeof(*tc));
  if (!tc)
    return NULL;
  tc->tp = tp;
  tc->id = id;
  id->context = tc;
  rmx_list_init(&tc->repost_link);
  rmx_list_init(&tc->flush_link);
  rmx_list_init(&tc->windows);
  rmx_list_init(&tc->bind_wait);
  rmx_list_init(&tc->pdmrs);
  uv_timer_init(tp->loop, &tc->timer);
  tc->timer.data = tc;
  tc->timer_open = 1;
  uv_timer_start(&tc->timer, timer_cb, tp->env->cfg->connect_timeout_ms, 0);
  rmx_list_push(&tp->conns, &tc->link);
  vb_tp_live(tp);
  return tc;
}

/* ---- active side ---- */

int rmx__vb_connect(struct rmx_tp *tp, const struct sockaddr *sa, const void *hello, size_t len,
                    void *owner, struct rmx_tp_conn **out)
{
  struct rdma_cm_id *id;
  if (len > CONNECT_PDATA_MAX)
    return RMX_EINVAL;
  if (rdma_create_id(tp->ech, &id, NULL, RDMA_PS_TCP))
    return rmx__vb_err_from_errno(errno);
  struct rmx_tp_conn *tc = tc_new(tp, id);
  if (!tc) {
    rdma_destroy_id(id);
    return RMX_ENOMEM;
  }
  memcpy(tc->hello, hello, len);
  tc->hello_len = len;
  rmx__sa_str(sa, tc->peer, sizeof(tc->peer));
  tc->state = VC_RESOLVING;
  tc->owner = owner;
  if (rdma_resolve_addr(id, NULL, (struct sockaddr *)sa,
                        (int)tp->env->cfg->connect_timeout_ms)) {
    int rc = rmx__vb_err_from_errno(errno);
    char a[80];
    RMX_TP_LOG(tp->env, ERROR, "rdma: cannot resolve %s: %s", rmx__sa_str(sa, a, sizeof(a)),
            strerror(errno));
    tc->owner = NULL;
    tc->closing = 1;
    tc->state = VC_DONE;
    vb_kick(tp);
    return rc;
  }
  *out = tc;
  return 0;
}

static void on_addr_resolved(struct rmx_tp_conn *tc)
{
  int rc = rmx__vb_dev_get(tc->tp, tc->id->verbs, &tc->dev);
  if (rc == 0 && rdma_resolve_route(tc->id, (int)tc->tp->env->cfg->connect_timeout_ms))
    rc = rmx__vb_err_from_errno(errno);
  if (rc)
    rmx__vb_fail(tc, rc);
}

static void on_route_resolved(struct rmx_tp_conn *tc)
{
  struct rdma_conn_param p;
  int rc = rmx__vb_qp_create(tc);
  if (rc) {
    rmx__vb_fail(tc, rc);
    return;
  }
  rmx__vb_qp_conn_param(tc, &p);
  rmx__vb_qp_ack_timeout(tc);
  if (rdma_connect(tc->id, &p)) {
    rc = rmx__vb_err_from_errno(errno);
    RMX_TP_LOG(tc->tp->env, ERROR, "rdma: rdma_connect failed: %s", strerror(errno));
    rmx__vb_fail(tc, rc);
    return;
  }
  tc->state = VC_CONNECTING;
}

/* ---- passive side ---- */

int rmx__vb_listen(struct rmx_tp *tp, const struct sockaddr *sa, void *owner,
                   struct rmx_tp_listener **out)
{
  char a[80];
  struct rmx_tp_listener *l = calloc(1, sizeof(*l));
  if (!l)
    return RMX_ENOMEM;
  l->tp = tp;
  l->owner = owner;
  rmx_list_init(&l->held);
  if (!sa) /* a group member's: requests come from feed */
    goto made;
  if (rdma_create_id(tp->ech, &l->id, l, RDMA_PS_TCP)) {
    free(l);
    return rmx__vb_err_from_errno(errno);
  }
  int rc = 0;
  vb_dev_t *dev = NULL;
  if (rdma_bind_addr(l->id, (struct sockaddr *)sa)) {
    rc = rmx__vb_err_from_errno(errno);
    if (errno == EADDRNOTAVAIL || errno == ENODEV)
      RMX_TP_LOG(tp->env, ERROR, "rdma: no RDMA device has the address %s",
              rmx__sa_str(sa, a, sizeof(a)));
    else
      RMX_TP_LOG(tp->env, ERROR, "rdma: cannot listen on %s: bind failed: %s%s",
                 rmx__sa_str(sa, a, sizeof(a)), strerror(errno), rmx__listen_hint(rc));
  } else if (l->id->verbs && (rc = rmx__vb_dev_get(tp, l->id->verbs, &dev)) != 0) {
    /* the address belongs to a device this context will not use */
  } else if (rdma_listen(l->id, VB_BACKLOG)) {
    rc = rmx__vb_err_from_errno(errno);
    RMX_TP_LOG(tp->env, ERROR, "rdma: cannot listen on %s: %s%s", rmx__sa_str(sa, a, sizeof(a)),
               strerror(errno), rmx__listen_hint(rc));
  }
  if (rc) {
    rdma_destroy_id(l->id);
    free(l);
    return rc;
  }
  /* RMX_SRQ=1: the shared queue is made now, not in the first connect;
   * where it cannot be, each connection is refused with the reason (qp.c). */
  if (dev && tp->env->cfg->srq == RMX_SRQ_ON)
    (void)rmx__vb_srq_get(dev);
made:
  uv_timer_init(tp->loop, &l->timer);
  l->timer.data = l;
  vb_tp_live(tp);
  *out = l;
  return 0;
}

static void sa_copy(struct sockaddr_storage *ss, const struct sockaddr *sa)
{
  memset(ss, 0, sizeof(*ss));
  memcpy(ss, sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                            : sizeof(struct sockaddr_in));
}

int rmx__vb_listen_addr(struct rmx_tp_listener *l, struct sockaddr_storage *ss)
{
  sa_copy(ss, rdma_get_local_addr(l->id));
  return 0;
}

int rmx__vb_conn_label(struct rmx_tp_conn *tc, char *buf, size_t len)
{
  if (!tc->qp)
    return RMX_ENOTCONN;
  snprintf(buf, len, "QP 0x%x on %s", tc->qp->qp_num, tc->dev->name); /* which rail */
  return 0;
}

int rmx__vb_peer_addr(struct rmx_tp_conn *tc, struct sockaddr_storage *ss)
{
  if (!tc->id)
    return RMX_ENOTCONN;
  sa_copy(ss, rdma_get_peer_addr(tc->id));
  return 0;
}

int rmx__vb_local_addr(struct rmx_tp_conn *tc, struct sockaddr_storage *ss)
{
  const struct sockaddr *sa = tc->id ? rdma_get_local_addr(tc->id) : NULL;
  if (!sa || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
    return RMX_ENOTCONN; /* not bound yet: the route is still being resolved */
  sa_copy(ss, sa);
  return 0;
}

/* Refuse a request with a status: "RMXR", then the status (docs/protocol.md). */
static void reject_with(struct rdma_cm_id *id, int status)
{
  uint8_t pd[8];
  uint32_t magic = htonl(VB_REJECT_MAGIC);
  int32_t st = (int32_t)htonl((uint32_t)status);
  memcpy(pd, &magic, 4);
  memcpy(pd + 4, &st, 4);
  rdma_reject(id, pd, sizeof(pd));
}

/* ... one no connection was made for. */
void rmx__vb_refuse_id(struct rdma_cm_id *id, int status)
{
  reject_with(id, status);
  rdma_destroy_id(id);
}

static void listener_closed(uv_handle_t *h)
{
  struct rmx_tp_listener *l = h->data;
  struct rmx_tp *tp = l->tp;
  free(l);
  vb_tp_unlive(tp);
}

void rmx__vb_listen_close(struct rmx_tp_listener *l)
{
  rmx_list_t *n;
  while ((n = rmx_list_pop(&l->held)) != NULL) {
    vb_held_t *h = rmx_container_of(n, vb_held_t, raw.link);
    rmx__vb_refuse_id(h->id, RMX_ECONNREFUSED);
    free(h);
  }
  if (l->id)
    rdma_destroy_id(l->id);
  uv_close((uv_handle_t *)&l->timer, listener_closed);
}

static void on_request(struct rmx_tp_listener *l, struct rdma_cm_id *id, const void *pdata,
                       size_t len)
{
  struct rmx_tp *tp = l->tp;
  struct rmx_tp_conn *tc = tc_new(tp, id);
  if (!tc) {
    rdma_reject(id, NULL, 0);
    rdma_destroy_id(id);
    return;
  }
  tc->passive = 1;
  tc->state = VC_REQUESTED;
  /* A peer that asked may leave the connection half made: it holds a
   * handshake slot for the handshake's limit, not a connect's. */
  uv_timer_start(&tc->timer, timer_cb, tp->env->cfg->handshake_timeout_ms, 0);
  rmx__sa_str(rdma_get_peer_addr(id), tc->peer, sizeof(tc->peer));
  int rc = rmx__vb_dev_get(tp, id->verbs, &tc->dev);
  if (rc) {
    rmx__vb_reject(tc, rc);
    return;
  }
  l->tp->env->incoming(l->owner, tc, pdata, len); /* answers with accept or reject */
}

/*
 * While the core has paused the listener (its handshakes are at their
 * limit), requests wait here unanswered, oldest first, and the peer's
 * connection manager waits with them, as a TCP peer waits in the kernel's
 * backlog. A request held for RMX_CONNECT_TIMEOUT_MS is refused as busy
 * (a peer with the same settings has given up by then), and so is one
 * past VB_BACKLOG held. A held id has no context: the connection manager
 * gives it the listener's, and its events (the peer giving up) must not
 * be taken for a connection's.
 */
static void held_run(uv_timer_t *t)
{
  struct rmx_tp_listener *l = t->data;
  uint64_t now = uv_now(l->tp->loop), limit = l->tp->env->cfg->connect_timeout_ms;
  while (!rmx_list_empty(&l->held)) {
    vb_held_t *h = rmx_container_of(l->held.next, vb_held_t, raw.link);
    if (now - h->since < limit && l->paused) {
      uv_timer_start(&l->timer, held_run, h->since + limit - now, 0);
      return;
    }
    rmx_list_del(&h->raw.link);
    l->nheld--;
    if (now - h->since >= limit) {
      char a[96];
      RMX_TP_LOG_LIMITED(l->tp->env, &l->tp->rl_refused, now, WARN,
                         "rdma: refusing %s: its request waited %llu ms for a handshake slot "
                         "(RMX_MAX_HANDSHAKES, RMX_CONNECT_TIMEOUT_MS)",
                         rmx__sa_str(rdma_get_peer_addr(h->id), a, sizeof(a)),
                         (unsigned long long)(now - h->since));
      rmx__vb_refuse_id(h->id, RMX_EAGAIN);
    } else {
      on_request(l, h->id, h->pd, h->len); /* may pause the listener again */
    }
    free(h);
  }
}

/* Hold h, oldest first; taken from the timer at once unless paused. */
static void hold(struct rmx_tp_listener *l, vb_held_t *h)
{
  if (l->nheld >= VB_BACKLOG) {
    char a[96];
    RMX_TP_LOG_LIMITED(l->tp->env, &l->tp->rl_refused, uv_now(l->tp->loop), WARN,
                       "rdma: refusing %s: %u requests already wait for a handshake slot",
                       rmx__sa_str(rdma_get_peer_addr(h->id), a, sizeof(a)), l->nheld);
    rmx__vb_refuse_id(h->id, RMX_EAGAIN);
    free(h);
    return;
  }
  h->id->context = NULL;
  h->since = uv_now(l->tp->loop);
  rmx_list_push(&l->held, &h->raw.link);
  l->nheld++;
  if (!l->paused)
    uv_timer_start(&l->timer, held_run, 0, 0);
  else if (!uv_is_active((uv_handle_t *)&l->timer))
    uv_timer_start(&l->timer, held_run, l->tp->env->cfg->connect_timeout_ms, 0);
}

static void on_connect_request(struct rmx_tp_listener *l, struct rdma_cm_id *id,
                               const void *pdata, size_t len)
{
  if (!l->paused && !l->nheld) { /* in order: none overtakes one held */
    on_request(l, id, pdata, len);
    return;
  }
  vb_held_t *h = malloc(sizeof(*h));
  if (!h) {
    rmx__vb_refuse_id(id, RMX_ENOMEM);
    return;
  }
  h->id = id;
  h->len = len;
  memcpy(h->pd, pdata, len);
  hold(l, h);
}

void rmx__vb_listen_pause(struct rmx_tp_listener *l, int pause)
{
  l->paused = (uint8_t)(pause != 0);
  if (!l->paused && l->nheld) /* from the loop: this never calls back */
    uv_timer_start(&l->timer, held_run, 0, 0);
}

/* A request a group's gate moved to this member's channel: it waits as a
 * held one does, and is taken from the timer, never inside this call. */
void rmx__vb_feed(struct rmx_tp_listener *l, rmx_tp_raw_t *raw)
{
  hold(l, rmx_container_of(raw, vb_held_t, raw));
}

rmx_tp_raw_t *rmx__vb_unfeed(struct rmx_tp_listener *l)
{
  rmx_list_t *n = rmx_list_pop(&l->held);
  if (!n)
    return NULL;
  l->nheld--;
  return rmx_container_of(n, rmx_tp_raw_t, link);
}

int rmx__vb_accept(struct rmx_tp_conn *tc, void *owner, const void *hello, size_t len)
{
  struct rdma_conn_param p;
  if (len > sizeof(tc->hello))
    return RMX_EINVAL;
  memcpy(tc->hello, hello, len);
  tc->hello_len = len;
  int rc = rmx__vb_qp_create(tc);
  if (rc)
    return rc;
  rmx__vb_qp_conn_param(tc, &p);
  rmx__vb_qp_ack_timeout(tc);
  if (rdma_accept(tc->id, &p)) {
    rc = rmx__vb_err_from_errno(errno);
    RMX_TP_LOG(tc->tp->env, ERROR, "rdma: rdma_accept failed: %s", strerror(errno));
    rmx__vb_qp_destroy(tc);
    return rc;
  }
  tc->owner = owner;
  tc->state = VC_ACCEPTING;
  return 0;
}

/* Statuses that describe this side's own trouble (memory, the device):
 * the peer cannot act on them, so they reach it as a refusal, and the log
 * here says whose limit it was. */
static int local_trouble(int status)
{
  return status == RMX_EMEMLOCK || status == RMX_ENOMEM || status == RMX_ENODEV ||
         status == RMX_EIO || status == RMX_EAGAIN;
}

void rmx__vb_reject(struct rmx_tp_conn *tc, int status)
{
  if (local_trouble(status))
    RMX_TP_LOG_LIMITED(tc->tp->env, &tc->tp->rl_refused, uv_now(tc->tp->loop), ERROR,
                       "rdma: refusing %s: this side cannot take the connection (%s)", tc->peer,
                       rmx_strerror(status));
  reject_with(tc->id, status);
  tc->owner = NULL;
  tc->closing = 1;
  tc->state = VC_DONE;
  vb_kick(tc->tp);
}

/* ---- events ---- */

static int reject_status(struct rmx_tp_conn *tc, const uint8_t *pd, size_t len, int reason)
{
  uint32_t magic;
  int32_t st;
  if (len >= 8) {
    memcpy(&magic, pd, 4);
    memcpy(&st, pd + 4, 4);
    st = (int32_t)ntohl((uint32_t)st);
    if (ntohl(magic) == VB_REJECT_MAGIC && rmx__reject_status(st) == st) {
      if (!local_trouble(st))
        return st;
      /* Its limit, not ours: raising our own would not help. */
      RMX_TP_LOG(tc->tp->env, ERROR, "rdma: %s refused the connection: its side is short of "
                 "resources (%s there)", tc->peer, rmx_err_name(st));
      return RMX_ECONNREFUSED;
    }
  }
  RMX_TP_LOG(tc->tp->env, INFO, "rdma: %s refused the connection (reason %d)", tc->peer, reason);
  return RMX_ECONNREFUSED;
}

/* The connection is lost (status), as the CM tells. Completions already in
 * the CQ go first: an error completion or a flush names the cause better
 * than the CM's echo of it (the peer's disconnect after it hit our access
 * error, say), and so the status does not depend on which fd libuv reads
 * first. rmx__vb_fail reports once, whatever comes later. */
static void lost(struct rmx_tp_conn *tc, int status)
{
  struct ibv_qp_attr a;
  struct ibv_qp_init_attr ia;
  if (tc->qp && tc->dev)
    rmx__vb_cq_drain(tc->dev);
  if (tc->held) { /* our access was refused because the peer went (cq.c) */
    RMX_TP_LOG(tc->tp->env, INFO, "rdma: %s went away with our reads or writes in flight: its "
               "keys ended with it", tc->peer);
    rmx__vb_hold_end(tc, status);
    return;
  }
  /* On the SRQ no receive is flushed to say that our device refused the
   * peer: a QP already in the error state at the peer's disconnect says it
   * (we had not moved it: the connection was live). */
  if (tc->srq && tc->qp && tc->established && !tc->dead && !tc->closing &&
      ibv_query_qp(tc->qp, &a, IBV_QP_STATE, &ia) == 0 && a.qp_state == IBV_QPS_ERR) {
    rmx__vb_went_error(tc);
    return;
  }
  rmx__vb_fail(tc, status);
}

static void on_event(struct rmx_tp *tp, enum rdma_cm_event_type type, int status,
                     struct rdma_cm_id *id, struct rdma_cm_id *listen_id, const uint8_t *pd,
                     size_t pdlen)
{
  char peer[96] = "";
  if (tp->env->log_level >= RMX_LOG_DEBUG && type != RDMA_CM_EVENT_DEVICE_REMOVAL)
    rmx__sa_str(rdma_get_peer_addr(id), peer, sizeof(peer));
  RMX_TP_LOG(tp->env, DEBUG, "rdma: %s (status %d), peer %s", rdma_event_str(type), status,
             peer);
  if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
    on_connect_request(listen_id->context, id, pd, pdlen);
    return;
  }
  struct rmx_tp_conn *tc = id->context;
  if (!tc || tc->closing || tc->reaped)
    return;
  int up = tc->established && !tc->dead;
  switch (type) {
  case RDMA_CM_EVENT_ADDR_RESOLVED:
    on_addr_resolved(tc);
    break;
  case RDMA_CM_EVENT_ROUTE_RESOLVED:
    on_route_resolved(tc);
    break;
  case RDMA_CM_EVENT_ADDR_ERROR:
    RMX_TP_LOG(tp->env, ERROR, "rdma: no RDMA device routes to %s (%s)", tc->peer,
            strerror(-status));
    rmx__vb_fail(tc, RMX_EHOSTUNREACH);
    break;
  case RDMA_CM_EVENT_ROUTE_ERROR:
    RMX_TP_LOG(tp->env, ERROR, "rdma: no route to %s (%s)", tc->peer, strerror(-status));
    rmx__vb_fail(tc, RMX_EHOSTUNREACH);
    break;
  case RDMA_CM_EVENT_ESTABLISHED:
    rmx__vb_qp_srq_timer(tc); /* also when the peer's first message came before this event */
    if (!tc->established) {
      tc->established = 1;
      tc->state = VC_UP;
      uv_timer_stop(&tc->timer);
      rmx__vb_qp_log_timers(tc);
      rmx__vb_raise(tc, RMX_TP_EV_ESTABLISHED, 0, NULL, tc->passive ? NULL : pd,
                    tc->passive ? 0 : pdlen);
    }
    break;
  case RDMA_CM_EVENT_REJECTED:
    rmx__vb_fail(tc, reject_status(tc, pd, pdlen, status));
    break;
  case RDMA_CM_EVENT_UNREACHABLE:
    /* On the accepting side: the peer passed the hello and never sent the
     * RTU, which it can do on every attempt; limited like timer_cb's line. */
    if (tc->passive)
      RMX_TP_LOG_LIMITED(tp->env, &tp->rl_refused, uv_now(tp->loop), ERROR,
                         "rdma: %s did not finish the connection it asked for", tc->peer);
    else
      RMX_TP_LOG(tp->env, ERROR, "rdma: %s did not answer the connection request", tc->peer);
    rmx__vb_fail(tc, RMX_EHOSTUNREACH);
    break;
  case RDMA_CM_EVENT_CONNECT_ERROR:
    if (tc->passive)
      RMX_TP_LOG_LIMITED(tp->env, &tp->rl_refused, uv_now(tp->loop), ERROR,
                         "rdma: connection from %s failed (%s)", tc->peer, strerror(-status));
    else
      RMX_TP_LOG(tp->env, ERROR, "rdma: connecting with %s failed (%s)", tc->peer,
                 strerror(-status));
    lost(tc, RMX_ECONNRESET);
    break;
  case RDMA_CM_EVENT_DISCONNECTED:
    /* The peer's DREQ (or ours timing out: status -ETIMEDOUT). An orderly
     * close by the peer has its BYE in front of it, and then we are
     * closing already and never get here. */
    if (up)
      RMX_TP_LOG(tp->env, INFO, "rdma: %s disconnected%s", tc->peer,
                 status == -ETIMEDOUT ? " (no answer to our disconnect request)" : "");
    lost(tc, status == -ETIMEDOUT ? RMX_ETIMEDOUT : RMX_ECONNRESET);
    break;
  case RDMA_CM_EVENT_DEVICE_REMOVAL:
    RMX_TP_LOG(tp->env, ERROR, "rdma: device %s was removed under the connection to %s",
               tc->dev ? tc->dev->name : "?", tc->peer);
    lost(tc, RMX_ENODEV);
    break;
  case RDMA_CM_EVENT_ADDR_CHANGE:
    /* The local address moved to another port or went away: the QP's
     * path is gone with it. */
    RMX_TP_LOG(tp->env, ERROR, "rdma: the local address of the connection to %s changed",
               tc->peer);
    lost(tc, RMX_ENETUNREACH);
    break;
  case RDMA_CM_EVENT_TIMEWAIT_EXIT:
    /* Only after a disconnect, which was reported; alone, still a loss. */
    lost(tc, RMX_ECONNRESET);
    break;
  default:
    RMX_TP_LOG(tp->env, DEBUG, "rdma: %s ignored", rdma_event_str(type));
    break;
  }
}

void rmx__vb_cm_events(uv_poll_t *h, int status, int events)
{
  struct rmx_tp *tp = h->data;
  struct rdma_cm_event *ev;
  uint8_t pd[VB_PDATA_MAX];

  while (rdma_get_cm_event(tp->ech, &ev) == 0) {
    enum rdma_cm_event_type type = ev->event;
    int st = ev->status;
    struct rdma_cm_id *id = ev->id, *lid = ev->listen_id;
    size_t len = ev->param.conn.private_data_len;
    if (len > sizeof(pd))
      len = sizeof(pd);
    if (len && ev->param.conn.private_data)
      memcpy(pd, ev->param.conn.private_data, len);
    else
      len = 0;
    rdma_ack_cm_event(ev);
    on_event(tp, type, st, id, lid, pd, len);
  }
}
