/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A device's async events (QP fatal, port down, device fatal): the
 * per-process reader thread, their routing to the contexts using the
 * device, and their handling on each context's own loop.
 *
 * A device's async events come on one fd that belongs to its ibv_context,
 * and librdmacm shares that context across the process, so they cannot be
 * read per rmx context (two readers steal each other's events). One reader
 * per device per process: a small thread, started by the first context that
 * opens the device and joined by the last one to let it go, so no context's
 * destruction silences the others. It blocks in poll() on the async fd and
 * an eventfd that tells it to stop.
 *
 * The thread never touches a connection. It routes each event to the
 * subscribers (one per rmx context using the device, a vb_dev_t): a QP
 * event to the context whose PD the QP was made in, a CQ event to the CQ's
 * owner, port and device events to every one. The subscriber's inbox takes
 * a copy, and a uv_async_t wakes the context's own loop, which looks the QP
 * up among its connections by pointer and number, on its own thread. The
 * thread acks each event once routed: the QP cannot be destroyed before
 * the ack (libibverbs waits for it), so the QP's fields are safe to read
 * until then, and acking first means no owner ever waits on the reader.
 * An event for a QP that is gone by the time its owner looks finds nothing
 * and is dropped.
 *
 * Locks: g_async_lock guards the readers' subscriber lists and inboxes (the
 * thread takes it per event). g_async_life serializes starting and joining
 * readers, so a device never has two threads reading its fd, even while the
 * last subscriber is joining the old one and a new context arrives.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "verbs.h"

typedef struct vb_async_ev {
  rmx_list_t link;
  enum ibv_event_type type;
  struct ibv_qp *qp; /* QP events: compared, never dereferenced by the owner */
  uint32_t qp_num;
  int port;
} vb_async_ev_t;

typedef struct vb_async_reader {
  rmx_list_t link; /* in g_readers */
  struct ibv_context *verbs;
  rmx_list_t subs; /* vb_dev_t.async_link */
  int stop_fd;     /* eventfd: stop */
  pthread_t thread;
} vb_async_reader_t;

static pthread_mutex_t g_async_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_async_life = PTHREAD_MUTEX_INITIALIZER;
static rmx_list_t g_readers = {&g_readers, &g_readers};

static int is_qp_event(enum ibv_event_type t)
{
  switch (t) {
  case IBV_EVENT_QP_FATAL: case IBV_EVENT_QP_REQ_ERR: case IBV_EVENT_QP_ACCESS_ERR:
  case IBV_EVENT_COMM_EST: case IBV_EVENT_SQ_DRAINED: case IBV_EVENT_PATH_MIG:
  case IBV_EVENT_PATH_MIG_ERR: case IBV_EVENT_QP_LAST_WQE_REACHED:
    return 1;
  default:
    return 0;
  }
}

static int is_port_event(enum ibv_event_type t)
{
  switch (t) {
  case IBV_EVENT_PORT_ACTIVE: case IBV_EVENT_PORT_ERR: case IBV_EVENT_LID_CHANGE:
  case IBV_EVENT_PKEY_CHANGE: case IBV_EVENT_SM_CHANGE: case IBV_EVENT_CLIENT_REREGISTER:
  case IBV_EVENT_GID_CHANGE:
    return 1;
  default:
    return 0;
  }
}

/* Reader thread, g_async_lock held: queue a copy for dev and wake its loop. */
static void async_deliver(vb_dev_t *dev, const struct ibv_async_event *ev)
{
  vb_async_ev_t *e = calloc(1, sizeof(*e));
  if (!e)
    return; /* nobody to tell on this thread; the owner sees completion errors */
  e->type = ev->event_type;
  if (is_qp_event(e->type)) {
    e->qp = ev->element.qp;
    e->qp_num = ev->element.qp->qp_num;
  } else if (is_port_event(e->type)) {
    e->port = ev->element.port_num;
  }
  rmx_list_push(&dev->async_inbox, &e->link);
  uv_async_send(&dev->async_wake);
}

static void async_route(vb_async_reader_t *r, const struct ibv_async_event *ev)
{
  enum ibv_event_type t = ev->event_type;
  rmx_list_t *n;
  pthread_mutex_lock(&g_async_lock);
  rmx_list_foreach(n, &r->subs) {
    vb_dev_t *dev = rmx_container_of(n, vb_dev_t, async_link);
    if (is_qp_event(t)) {
      /* by CQ, not PD: with RMX_KEY_SCOPE=pd each QP has its own PD */
      if (ev->element.qp->send_cq->cq_context == dev) {
        async_deliver(dev, ev);
        break;
      }
    } else if (t == IBV_EVENT_CQ_ERR) {
      if (ev->element.cq->cq_context == dev) {
        async_deliver(dev, ev);
        break;
      }
    } else if (t == IBV_EVENT_DEVICE_FATAL || is_port_event(t)) {
      async_deliver(dev, ev);
    } else if (t == IBV_EVENT_SRQ_LIMIT_REACHED || t == IBV_EVENT_SRQ_ERR) {
      if (ev->element.srq->srq_context == dev) {
        async_deliver(dev, ev);
        break;
      }
    }
    /* WQ events: we make none */
  }
  pthread_mutex_unlock(&g_async_lock);
}

static void *async_thread(void *arg)
{
  vb_async_reader_t *r = arg;
  struct pollfd p[2] = {{.fd = r->verbs->async_fd, .events = POLLIN},
                        {.fd = r->stop_fd, .events = POLLIN}};
  struct ibv_async_event ev;
  for (;;) {
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ENOMEM)
        continue;
      break;
    }
    if (p[1].revents)
      break;
    if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL))
      p[0].fd = -1; /* the device is gone: wait for the stop only */
    /* the fd is non-blocking: take what is there */
    while ((p[0].revents & POLLIN) && ibv_get_async_event(r->verbs, &ev) == 0) {
      async_route(r, &ev);
      ibv_ack_async_event(&ev);
    }
  }
  return NULL;
}

/* Start a reader for v; g_async_life held. */
static vb_async_reader_t *reader_start(struct ibv_context *v)
{
  sigset_t all, old;
  vb_async_reader_t *r = calloc(1, sizeof(*r));
  if (!r)
    return NULL;
  r->verbs = v;
  rmx_list_init(&r->subs);
  /* non-blocking, or a stop could wait behind a read */
  if (vb_set_nonblock(v->async_fd) || (r->stop_fd = eventfd(0, EFD_CLOEXEC)) < 0) {
    free(r);
    return NULL;
  }
  /* Signals go to the application's threads, never to ours. */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&r->thread, NULL, async_thread, r);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc) {
    close(r->stop_fd);
    free(r);
    errno = rc;
    return NULL;
  }
  return r;
}

/* Owner thread: handle what the reader queued for this context. */
static void fail_dev_conns(vb_dev_t *dev, int port, int status)
{
  rmx_list_t *n, *next;
  for (n = dev->tp->conns.next; n != &dev->tp->conns; n = next) {
    next = n->next;
    struct rmx_tp_conn *tc = rmx_container_of(n, struct rmx_tp_conn, link);
    if (tc->dev == dev && (port == 0 || !tc->id || tc->id->port_num == port)) {
      if (!tc->dead && !tc->closing)
        RMX_TP_LOG(dev->tp->env, ERROR, "rdma: the connection to %s is lost with it",
                   tc->peer);
      rmx__vb_fail(tc, status);
    }
  }
}

/* The device's map holds every QP until it is destroyed; the pointer too
 * must match, so a number reused by a newer QP is not taken for it. */
static struct rmx_tp_conn *conn_by_qp(vb_dev_t *dev, const vb_async_ev_t *e)
{
  struct rmx_tp_conn *tc = rmx__vb_qpn_find(dev, e->qp_num);
  return tc && tc->qp == e->qp ? tc : NULL;
}

static void async_handle(vb_dev_t *dev, const vb_async_ev_t *e)
{
  const rmx_tp_env_t *env = dev->tp->env;
  struct rmx_tp_conn *tc;
  int st;
  switch (e->type) {
  case IBV_EVENT_QP_FATAL:
  case IBV_EVENT_QP_REQ_ERR:
  case IBV_EVENT_QP_ACCESS_ERR:
  case IBV_EVENT_PATH_MIG_ERR:
    if (!(tc = conn_by_qp(dev, e))) {
      RMX_TP_LOG(env, DEBUG, "rdma: %s for QP 0x%x, which is gone", ibv_event_type_str(e->type),
              e->qp_num);
      break;
    }
    /* Completions already polled-for go first, as for CM events (cm.c):
     * an error completion there is the more precise cause. */
    rmx__vb_cq_drain(dev);
    if (tc->dead || tc->closing || tc->held) /* held: the peer's DREQ decides (cq.c) */
      break;
    /* A request of the peer that this side refused: the status a flush on
     * a live connection gives too (cq.c), so either order says the same. */
    st = e->type == IBV_EVENT_QP_REQ_ERR || e->type == IBV_EVENT_QP_ACCESS_ERR ? RMX_EPROTO
                                                                             : RMX_EIO;
    /* The peer can repeat a refused request on new connections at will. */
    RMX_TP_LOG_LIMITED(env, &dev->tp->rl_refused, uv_now(dev->tp->loop), ERROR,
                       "rdma: QP 0x%x to %s: %s%s", e->qp_num, tc->peer,
                       ibv_event_type_str(e->type),
                       st == RMX_EPROTO ? " (this side refused a request of the peer)" : "");
    if (st == RMX_EPROTO)
      rmx__vb_refused(tc); /* counted once: the flush (cq.c) sees tc->dead */
    rmx__vb_fail(tc, st);
    break;
  case IBV_EVENT_SRQ_LIMIT_REACHED:
    rmx__vb_srq_limit(dev);
    break;
  case IBV_EVENT_SRQ_ERR:
    RMX_TP_LOG(env, ERROR, "rdma: the shared receive queue of %s failed", dev->name);
    fail_dev_conns(dev, 0, RMX_EIO);
    break;
  case IBV_EVENT_CQ_ERR:
    RMX_TP_LOG(env, ERROR, "rdma: the completion queue of %s overran", dev->name);
    fail_dev_conns(dev, 0, RMX_EIO);
    break;
  case IBV_EVENT_PORT_ERR:
    RMX_TP_LOG(env, ERROR, "rdma: port %d of %s went down", e->port, dev->name);
    fail_dev_conns(dev, e->port, RMX_ENETUNREACH);
    break;
  case IBV_EVENT_DEVICE_FATAL:
    RMX_TP_LOG(env, ERROR, "rdma: device %s failed", dev->name);
    fail_dev_conns(dev, 0, RMX_ENODEV);
    break;
  default:
    RMX_TP_LOG(env, DEBUG, "rdma: %s on %s", ibv_event_type_str(e->type), dev->name);
    break;
  }
}

static void async_wake_cb(uv_async_t *h)
{
  vb_dev_t *dev = h->data;
  rmx_list_t batch, *n;
  rmx_list_init(&batch);
  pthread_mutex_lock(&g_async_lock);
  rmx_list_splice(&batch, &dev->async_inbox);
  pthread_mutex_unlock(&g_async_lock);
  while ((n = rmx_list_pop(&batch)) != NULL) {
    vb_async_ev_t *e = rmx_container_of(n, vb_async_ev_t, link);
    if (!dev->tp->finishing)
      async_handle(dev, e);
    free(e);
  }
}

/* Join the device's reader (starting it if this is the first context). */
static int async_subscribe(vb_dev_t *dev)
{
  vb_async_reader_t *r = NULL;
  rmx_list_t *n;
  pthread_mutex_lock(&g_async_life);
  rmx_list_foreach(n, &g_readers) {
    vb_async_reader_t *x = rmx_container_of(n, vb_async_reader_t, link);
    if (x->verbs == dev->verbs)
      r = x;
  }
  int new_reader = !r;
  if (new_reader && !(r = reader_start(dev->verbs))) {
    pthread_mutex_unlock(&g_async_life);
    return -1;
  }
  pthread_mutex_lock(&g_async_lock);
  if (new_reader)
    rmx_list_push(&g_readers, &r->link);
  rmx_list_push(&r->subs, &dev->async_link);
  dev->reader = r;
  pthread_mutex_unlock(&g_async_lock);
  pthread_mutex_unlock(&g_async_life);
  return 0;
}

/* Leave the reader; the last one out stops and joins it. Events queued for
 * this context are dropped (they were acked when routed). */
static void async_unsubscribe(vb_dev_t *dev)
{
  vb_async_reader_t *r = dev->reader;
  rmx_list_t *n;
  int last;
  if (!r)
    return;
  pthread_mutex_lock(&g_async_life);
  pthread_mutex_lock(&g_async_lock);
  rmx_list_del(&dev->async_link);
  while ((n = rmx_list_pop(&dev->async_inbox)) != NULL)
    free(rmx_container_of(n, vb_async_ev_t, link));
  dev->reader = NULL;
  if ((last = rmx_list_empty(&r->subs)) != 0)
    rmx_list_del(&r->link);
  pthread_mutex_unlock(&g_async_lock);
  if (last) {
    uint64_t one = 1;
    while (write(r->stop_fd, &one, sizeof(one)) < 0 && errno == EINTR)
      ;
    pthread_join(r->thread, NULL);
    close(r->stop_fd);
    free(r);
  }
  pthread_mutex_unlock(&g_async_life);
}

/* The context's side: a wake-up on its loop, and a place among the
 * subscribers of the device's reader. */
void rmx__vb_async_open(vb_dev_t *dev)
{
  struct rmx_tp *tp = dev->tp;
  uv_async_init(tp->loop, &dev->async_wake, async_wake_cb);
  dev->async_wake.data = dev;
  dev->handles++;
  uv_unref((uv_handle_t *)&dev->async_wake);
  /* Without a reader the context still works; it learns of failures only
   * from completion errors and rdma_cm events. */
  if (async_subscribe(dev))
    RMX_TP_LOG(tp->env, ERROR, "rdma: cannot start the async event reader of %s (%s): port and "
            "device failures will not be seen", dev->name, strerror(errno));
}

void rmx__vb_async_close(vb_dev_t *dev, uv_close_cb closed)
{
  async_unsubscribe(dev); /* before the close: the reader wakes the handle */
  uv_close((uv_handle_t *)&dev->async_wake, closed);
}
