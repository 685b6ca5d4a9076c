/*
 * The verbs transport's instance: devices (one PD and one CQ with a
 * completion channel each), the progress engine's verbs side, async events,
 * memory registration, and the ops table.
 *
 * Progress, event mode: uv_poll on the completion channel; on wake, take
 * every pending CQ event (acked in batches), re-arm, then drain the CQ. A
 * completion that lands after the re-arm raises a new event, one before it
 * is drained now: none is lost. Poll mode: the CQ is drained from an idle
 * handle every loop iteration.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "verbs.h"

static int set_nonblock(int fd)
{
  int fl = fcntl(fd, F_GETFL);
  return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int vb_err_from_errno(int e)
{
  switch (e) {
  case ENOMEM: return RMX_ENOMEM;
  case EADDRINUSE: return RMX_EADDRINUSE;
  case EADDRNOTAVAIL: return RMX_EADDRNOTAVAIL;
  case ENODEV: case ENXIO: return RMX_ENODEV;
  case ECONNREFUSED: return RMX_ECONNREFUSED;
  case ETIMEDOUT: return RMX_ETIMEDOUT;
  case EINVAL: return RMX_EINVAL;
  case EACCES: case EPERM: return RMX_EACCES;
  case ENETUNREACH: return RMX_ENETUNREACH;
  case EHOSTUNREACH: return RMX_EHOSTUNREACH;
  case EAGAIN: return RMX_EAGAIN;
  default: return RMX_EIO;
  }
}

/* ibv_reg_mr failed: say whether the locked-memory limit is why. */
int vb_reg_err(struct rmx_tp *tp, size_t len, int e)
{
  struct rlimit rl;
  if ((e == ENOMEM || e == EPERM || e == EAGAIN) && getrlimit(RLIMIT_MEMLOCK, &rl) == 0 &&
      rl.rlim_cur != RLIM_INFINITY) {
    RMX_TP_LOG(tp->env, ERROR, "rdma: cannot register %zu bytes: the locked-memory limit is %llu "
            "KiB; raise it (ulimit -l unlimited, or memlock in /etc/security/limits.conf)",
            len, (unsigned long long)rl.rlim_cur / 1024);
    return RMX_EMEMLOCK;
  }
  RMX_TP_LOG(tp->env, ERROR, "rdma: cannot register %zu bytes: %s", len, strerror(e));
  return vb_err_from_errno(e);
}

void vb_raise(struct rmx_tp_conn *tc, rmx_tp_ev_type_t t, int status, void *op,
              const void *data, size_t len)
{
  rmx_tp_ev_t ev = {.type = t, .status = status, .op = op, .data = data, .len = len};
  tc->tp->env->event(tc->owner, &ev);
}

/* ---- devices ---- */

static void guid_str(struct ibv_context *v, char *buf, size_t len)
{
  uint64_t g = be64toh(ibv_get_device_guid(v->device));
  snprintf(buf, len, "%016" PRIx64, g);
}

/* RMX_DEVICE names a device or gives its GUID (hex, colons optional). */
static int device_matches(const char *want, struct ibv_context *v)
{
  char guid[32], w[64];
  size_t j = 0;
  if (strcmp(want, ibv_get_device_name(v->device)) == 0)
    return 1;
  for (size_t i = 0; want[i] && j + 1 < sizeof(w); i++)
    if (want[i] != ':')
      w[j++] = want[i];
  w[j] = '\0';
  guid_str(v, guid, sizeof(guid));
  return strcasecmp(w, guid) == 0;
}

static void chan_cb(uv_poll_t *h, int status, int events)
{
  vb_dev_t *dev = h->data;
  struct ibv_cq *cq;
  void *cq_ctx;
  while (ibv_get_cq_event(dev->chan, &cq, &cq_ctx) == 0)
    dev->unacked++;
  if (dev->unacked >= VB_ACK_EVERY) {
    ibv_ack_cq_events(dev->cq, dev->unacked);
    dev->unacked = 0;
  }
  ibv_req_notify_cq(dev->cq, 0);
  vb_cq_drain(dev);
}

/* ---- async events ----
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
      if (ev->element.qp->pd == dev->pd) {
        async_deliver(dev, ev);
        break;
      }
    } else if (t == IBV_EVENT_CQ_ERR) {
      if (ev->element.cq == dev->cq) {
        async_deliver(dev, ev);
        break;
      }
    } else if (t == IBV_EVENT_DEVICE_FATAL || is_port_event(t)) {
      async_deliver(dev, ev);
    }
    /* SRQ and WQ events: we make neither */
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
  if (set_nonblock(v->async_fd) || (r->stop_fd = eventfd(0, EFD_CLOEXEC)) < 0) {
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
    if (tc->dev == dev && (port == 0 || !tc->id || tc->id->port_num == port))
      vb_fail(tc, status);
  }
}

static struct rmx_tp_conn *conn_by_qp(vb_dev_t *dev, const vb_async_ev_t *e)
{
  rmx_list_t *n;
  rmx_list_foreach(n, &dev->tp->conns) {
    struct rmx_tp_conn *tc = rmx_container_of(n, struct rmx_tp_conn, link);
    if (tc->dev == dev && tc->qp == e->qp && tc->qp->qp_num == e->qp_num)
      return tc;
  }
  return NULL;
}

static void async_handle(vb_dev_t *dev, const vb_async_ev_t *e)
{
  const rmx_tp_env_t *env = dev->tp->env;
  struct rmx_tp_conn *tc;
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
    if (!tc->dead && !tc->closing)
      RMX_TP_LOG(env, ERROR, "rdma: QP 0x%x: %s", e->qp_num, ibv_event_type_str(e->type));
    vb_fail(tc, e->type == IBV_EVENT_QP_ACCESS_ERR ? RMX_EACCES : RMX_EIO);
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

static void dev_release(vb_dev_t *dev)
{
  if (dev->cq) {
    if (dev->unacked)
      ibv_ack_cq_events(dev->cq, dev->unacked);
    if (ibv_destroy_cq(dev->cq))
      RMX_TP_LOG(dev->tp->env, WARN, "rdma: destroying the CQ of %s failed", dev->name);
  }
  if (dev->chan && ibv_destroy_comp_channel(dev->chan))
    RMX_TP_LOG(dev->tp->env, WARN, "rdma: destroying the channel of %s failed", dev->name);
  if (dev->pd && ibv_dealloc_pd(dev->pd))
    RMX_TP_LOG(dev->tp->env, WARN, "rdma: %s still has registered memory at exit", dev->name);
  free(dev);
}

int vb_dev_get(struct rmx_tp *tp, struct ibv_context *verbs, vb_dev_t **out)
{
  const rmx_config_t *cfg = tp->env->cfg;
  if (!verbs)
    return RMX_ENODEV;
  if (tp->dev) {
    if (tp->dev->verbs == verbs) {
      *out = tp->dev;
      return 0;
    }
    RMX_TP_LOG(tp->env, ERROR, "rdma: a context uses one device (%s); this connection is on %s",
            tp->dev->name, ibv_get_device_name(verbs->device));
    return RMX_ENOTSUP;
  }
  if (cfg->device[0] && !device_matches(cfg->device, verbs)) {
    RMX_TP_LOG(tp->env, ERROR, "rdma: RMX_DEVICE=%s, but the route goes through %s", cfg->device,
            ibv_get_device_name(verbs->device));
    return RMX_ENODEV;
  }
  vb_dev_t *dev = calloc(1, sizeof(*dev));
  if (!dev)
    return RMX_ENOMEM;
  dev->tp = tp;
  dev->verbs = verbs;
  rmx_list_init(&dev->async_link);
  rmx_list_init(&dev->async_inbox);
  snprintf(dev->name, sizeof(dev->name), "%s", ibv_get_device_name(verbs->device));
  if (ibv_query_device(verbs, &dev->attr) || !(dev->pd = ibv_alloc_pd(verbs)) ||
      !(dev->chan = ibv_create_comp_channel(verbs)) || set_nonblock(dev->chan->fd) ||
      set_nonblock(verbs->async_fd))
    goto err;
  dev->cq_size = dev->attr.max_cqe < 4096 ? dev->attr.max_cqe : 4096;
  if (!(dev->cq = ibv_create_cq(verbs, dev->cq_size, dev, dev->chan, 0)) ||
      ibv_req_notify_cq(dev->cq, 0))
    goto err;
  dev->cq_size = dev->cq->cqe;
  uv_poll_init(tp->loop, &dev->chan_poll, dev->chan->fd);
  dev->chan_poll.data = dev;
  dev->handles = 1;
  if (!tp->polling)
    uv_poll_start(&dev->chan_poll, UV_READABLE, chan_cb);
  uv_unref((uv_handle_t *)&dev->chan_poll);
  uv_async_init(tp->loop, &dev->async_wake, async_wake_cb);
  dev->async_wake.data = dev;
  dev->handles++;
  uv_unref((uv_handle_t *)&dev->async_wake);
  /* Without a reader the context still works; it learns of failures only
   * from completion errors and rdma_cm events. */
  if (async_subscribe(dev))
    RMX_TP_LOG(tp->env, ERROR, "rdma: cannot start the async event reader of %s (%s): port and "
            "device failures will not be seen", dev->name, strerror(errno));
  tp->handles += dev->handles;
  rmx_list_push(&tp->devs, &dev->link);
  tp->dev = dev;
  *out = dev;
  RMX_TP_LOG(tp->env, INFO, "rdma: using %s (max inline asked %d, CQ %d)", dev->name,
          VB_INLINE_WANT, dev->cq_size);
  return 0;
err:
  RMX_TP_LOG(tp->env, ERROR, "rdma: cannot set up device %s: %s", dev->name, strerror(errno));
  dev_release(dev);
  return RMX_ENODEV;
}

/* ---- the idle handler: poll mode, deferred failures, reaping ---- */

static void idle_cb(uv_idle_t *h)
{
  struct rmx_tp *tp = h->data;
  rmx_list_t *n, *next;
  int busy = 0;

  /* Parked connections wait for a poll that finds the CQ empty. */
  if (tp->polling || !rmx_list_empty(&tp->parked))
    rmx_list_foreach(n, &tp->devs) vb_cq_drain(rmx_container_of(n, vb_dev_t, link));
  for (n = tp->conns.next; n != &tp->conns; n = next) {
    next = n->next;
    struct rmx_tp_conn *tc = rmx_container_of(n, struct rmx_tp_conn, link);
    if (tc->fail_status) {
      int st = tc->fail_status;
      tc->fail_status = 0;
      vb_fail(tc, st);
      next = n->next; /* vb_fail may have closed, not freed */
    }
    if (tc->state == VC_DONE)
      vb_conn_reap(tc);
    else if (tc->state == VC_DRAINING)
      busy = 1; /* in poll mode the drain completes through us */
  }
  vb_parked_sweep(tp, 0);
  if (!rmx_list_empty(&tp->parked))
    busy = 1;
  if (!tp->polling && !busy)
    uv_idle_stop(h);
}

void vb_kick(struct rmx_tp *tp)
{
  if (!tp->finishing)
    uv_idle_start(&tp->idle, idle_cb);
}

/* ---- memory ---- */

static int vb_mem_reg(rmx_tp_t *tp, void *addr, size_t len, unsigned access,
                      rmx_tp_conn_t *scope, rmx_tp_mem_t **out)
{
  int flags = 0;
  if (!tp->dev) {
    RMX_TP_LOG(tp->env, ERROR, "rdma: no device in use yet to register memory with");
    return RMX_ENODEV;
  }
  /* Local write only where needed: a read-only source can be sent. */
  if (access & (RMX_TP_ACC_LOCAL | RMX_TP_ACC_REMOTE_WRITE))
    flags |= IBV_ACCESS_LOCAL_WRITE;
  if (access & RMX_TP_ACC_REMOTE_READ)
    flags |= IBV_ACCESS_REMOTE_READ;
  if (access & RMX_TP_ACC_REMOTE_WRITE)
    flags |= IBV_ACCESS_REMOTE_WRITE;
  if (access & RMX_TP_ACC_REMOTE_ATOMIC)
    flags |= IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE;
  rmx_tp_mem_t *m = malloc(sizeof(*m));
  if (!m)
    return RMX_ENOMEM;
  m->tp = tp;
  m->mr = ibv_reg_mr(tp->dev->pd, addr, len ? len : 1, flags);
  if (!m->mr) {
    int rc = vb_reg_err(tp, len, errno);
    free(m);
    return rc;
  }
  *out = m;
  return 0;
}

static void vb_mem_dereg(rmx_tp_mem_t *m)
{
  if (ibv_dereg_mr(m->mr))
    RMX_TP_LOG(m->tp->env, WARN, "rdma: ibv_dereg_mr failed");
  free(m);
}

static uint64_t vb_mem_rkey(const rmx_tp_mem_t *m) { return m->mr->rkey; }

/* ---- the instance ---- */

static int vb_init(const rmx_tp_env_t *env, rmx_tp_t **out)
{
  const rmx_config_t *cfg = env->cfg;
  int n = 0, found = !cfg->device[0];
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    if (list)
      ibv_free_device_list(list);
    RMX_TP_LOG(env, INFO, "rdma: no RDMA device on this host");
    return RMX_ENODEV;
  }
  for (int i = 0; i < n && !found; i++) {
    char guid[32];
    snprintf(guid, sizeof(guid), "%016" PRIx64, be64toh(ibv_get_device_guid(list[i])));
    found = strcmp(cfg->device, ibv_get_device_name(list[i])) == 0 ||
            strcasecmp(cfg->device, guid) == 0;
  }
  ibv_free_device_list(list);
  if (!found) {
    RMX_TP_LOG(env, ERROR, "rdma: RMX_DEVICE=%s matches no device (rmx-info lists them)",
            cfg->device);
    return RMX_ENODEV;
  }

  struct rmx_tp *tp = calloc(1, sizeof(*tp));
  if (!tp)
    return RMX_ENOMEM;
  tp->env = env;
  tp->loop = env->loop;
  tp->polling = cfg->progress == RMX_PROGRESS_POLL;
  rmx_list_init(&tp->devs);
  rmx_list_init(&tp->conns);
  rmx_list_init(&tp->repost);
  rmx_list_init(&tp->parked);
  tp->ech = rdma_create_event_channel();
  if (!tp->ech || set_nonblock(tp->ech->fd)) {
    RMX_TP_LOG(env, ERROR, "rdma: cannot open the RDMA connection manager (%s): is the rdma_ucm "
            "module loaded?", strerror(errno));
    if (tp->ech)
      rdma_destroy_event_channel(tp->ech);
    free(tp);
    return RMX_ENODEV;
  }
  uv_poll_init(tp->loop, &tp->ech_poll, tp->ech->fd);
  tp->ech_poll.data = tp;
  uv_poll_start(&tp->ech_poll, UV_READABLE, vb_cm_events);
  uv_unref((uv_handle_t *)&tp->ech_poll); /* referenced while connections live */
  uv_idle_init(tp->loop, &tp->idle);
  tp->idle.data = tp;
  tp->handles = 2;
  if (tp->polling)
    uv_idle_start(&tp->idle, idle_cb);
  uv_unref((uv_handle_t *)&tp->idle);
  *out = tp;
  return 0;
}

static void tp_free(struct rmx_tp *tp)
{
  rmx_list_t *n;
  vb_parked_sweep(tp, 1); /* nothing polls now; registrations go before the PD */
  while ((n = rmx_list_pop(&tp->devs)) != NULL)
    dev_release(rmx_container_of(n, vb_dev_t, link));
  rdma_destroy_event_channel(tp->ech);
  free(tp);
}

static void handle_closed(struct rmx_tp *tp)
{
  if (--tp->handles == 0 && tp->live == 0)
    tp_free(tp);
}

static void tp_handle_closed(uv_handle_t *h) { handle_closed(h->data); }
static void dev_handle_closed(uv_handle_t *h) { handle_closed(((vb_dev_t *)h->data)->tp); }

void vb_tp_unlive(struct rmx_tp *tp)
{
  if (--tp->live == 0) {
    if (!tp->finishing)
      uv_unref((uv_handle_t *)&tp->ech_poll);
    else if (tp->handles == 0)
      tp_free(tp);
  }
}

static void vb_fini(rmx_tp_t *tp)
{
  rmx_list_t *n, *next;
  /* Connections the core never owned (rejects under way) end now. */
  for (n = tp->conns.next; n != &tp->conns; n = next) {
    next = n->next;
    struct rmx_tp_conn *tc = rmx_container_of(n, struct rmx_tp_conn, link);
    tc->owner = NULL;
    vb_conn_reap(tc);
  }
  tp->finishing = 1;
  uv_close((uv_handle_t *)&tp->ech_poll, tp_handle_closed);
  uv_close((uv_handle_t *)&tp->idle, tp_handle_closed);
  rmx_list_foreach(n, &tp->devs) {
    vb_dev_t *dev = rmx_container_of(n, vb_dev_t, link);
    uv_close((uv_handle_t *)&dev->chan_poll, dev_handle_closed);
    async_unsubscribe(dev); /* before the close: the reader wakes the handle */
    uv_close((uv_handle_t *)&dev->async_wake, dev_handle_closed);
  }
}

/*
 * The QP serves remote reads, writes and atomics from the moment it is
 * connected: opening its access only now would refuse a legitimate peer's
 * first read, which the device may serve before this CPU has seen the
 * handshake end. docs/security.md says what that leaves exposed.
 */
static void vb_ready(rmx_tp_conn_t *tc) {}

const rmx_tp_ops_t rmx_verbs_ops = {
  .name = "rdma",
  .flags = RMX_TP_F_LOCAL_REG,
  .wire_id = 2,
  .max_io = SIZE_MAX, /* split at the device's limit inside */
  .hello_max = 56,    /* rdma_cm connect private data (an accept carries up to 196) */
  .init = vb_init,
  .fini = vb_fini,
  .listen = vb_listen,
  .listen_addr = vb_listen_addr,
  .listen_close = vb_listen_close,
  .connect = vb_connect,
  .accept = vb_accept,
  .reject = vb_reject,
  .close = vb_close,
  .send = vb_send,
  .read = vb_read,
  .write = vb_write,
  .atomic = vb_atomic,
  .caps = vb_caps,
  .flush = vb_flush,
  .ready = vb_ready,
  .mem_reg = vb_mem_reg,
  .mem_dereg = vb_mem_dereg,
  .mem_rkey = vb_mem_rkey,
};
