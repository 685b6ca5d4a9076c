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
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

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
    RMX_LOG(tp->ctx, ERROR, "rdma: cannot register %zu bytes: the locked-memory limit is %llu "
            "KiB; raise it (ulimit -l unlimited, or memlock in /etc/security/limits.conf)",
            len, (unsigned long long)rl.rlim_cur / 1024);
    return RMX_EMEMLOCK;
  }
  RMX_LOG(tp->ctx, ERROR, "rdma: cannot register %zu bytes: %s", len, strerror(e));
  return vb_err_from_errno(e);
}

void vb_raise(struct rmx_tp_conn *tc, rmx_tp_ev_type_t t, int status, void *op,
              const void *data, size_t len)
{
  rmx_tp_ev_t ev = {.type = t, .status = status, .op = op, .data = data, .len = len};
  rmx__tp_event(tc->owner, &ev);
}

/* ---- devices ---- */

/*
 * A device's async events come on one fd that belongs to its ibv_context,
 * which librdmacm shares across the process. One reader per device: the
 * first context to open it. (Two would steal each other's events, and one
 * loop cannot poll an fd twice.) Other contexts see the same failures
 * through their own completion errors and rdma_cm events.
 */
static pthread_mutex_t g_async_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibv_context *g_async_watched[32];

static int async_claim(struct ibv_context *v)
{
  int got = 0, free_slot = -1;
  pthread_mutex_lock(&g_async_lock);
  for (int i = 0; i < 32; i++) {
    if (g_async_watched[i] == v)
      goto out;
    if (!g_async_watched[i] && free_slot < 0)
      free_slot = i;
  }
  if (free_slot >= 0) {
    g_async_watched[free_slot] = v;
    got = 1;
  }
out:
  pthread_mutex_unlock(&g_async_lock);
  return got;
}

static void async_release(struct ibv_context *v)
{
  pthread_mutex_lock(&g_async_lock);
  for (int i = 0; i < 32; i++)
    if (g_async_watched[i] == v)
      g_async_watched[i] = NULL;
  pthread_mutex_unlock(&g_async_lock);
}

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

static void async_cb(uv_poll_t *h, int status, int events)
{
  vb_dev_t *dev = h->data;
  struct ibv_async_event ev;
  while (ibv_get_async_event(dev->verbs, &ev) == 0) {
    enum ibv_event_type type = ev.event_type;
    struct rmx_tp_conn *tc = NULL;
    int port = 0;
    if (type == IBV_EVENT_QP_FATAL || type == IBV_EVENT_QP_REQ_ERR ||
        type == IBV_EVENT_QP_ACCESS_ERR || type == IBV_EVENT_PATH_MIG_ERR)
      tc = ev.element.qp->qp_context;
    if (type == IBV_EVENT_PORT_ERR)
      port = ev.element.port_num;
    ibv_ack_async_event(&ev);
    switch (type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR:
      if (tc && tc->qp)
        RMX_LOG(dev->tp->ctx, ERROR, "rdma: QP 0x%x: %s", tc->qp->qp_num, ibv_event_type_str(type));
      if (tc)
        vb_fail(tc, type == IBV_EVENT_QP_ACCESS_ERR ? RMX_EACCES : RMX_EIO);
      break;
    case IBV_EVENT_PORT_ERR:
      RMX_LOG(dev->tp->ctx, ERROR, "rdma: port %d of %s went down", port, dev->name);
      fail_dev_conns(dev, port, RMX_ENETUNREACH);
      break;
    case IBV_EVENT_DEVICE_FATAL:
      RMX_LOG(dev->tp->ctx, ERROR, "rdma: device %s failed", dev->name);
      fail_dev_conns(dev, 0, RMX_ENODEV);
      break;
    default:
      RMX_LOG(dev->tp->ctx, DEBUG, "rdma: %s on %s", ibv_event_type_str(type), dev->name);
      break;
    }
  }
}

static void dev_release(vb_dev_t *dev)
{
  if (dev->cq) {
    if (dev->unacked)
      ibv_ack_cq_events(dev->cq, dev->unacked);
    if (ibv_destroy_cq(dev->cq))
      RMX_LOG(dev->tp->ctx, WARN, "rdma: destroying the CQ of %s failed", dev->name);
  }
  if (dev->chan && ibv_destroy_comp_channel(dev->chan))
    RMX_LOG(dev->tp->ctx, WARN, "rdma: destroying the channel of %s failed", dev->name);
  if (dev->pd && ibv_dealloc_pd(dev->pd))
    RMX_LOG(dev->tp->ctx, WARN, "rdma: %s still has registered memory at exit", dev->name);
  free(dev);
}

int vb_dev_get(struct rmx_tp *tp, struct ibv_context *verbs, vb_dev_t **out)
{
  const rmx_config_t *cfg = rmx__ctx_cfg(tp->ctx);
  if (!verbs)
    return RMX_ENODEV;
  if (tp->dev) {
    if (tp->dev->verbs == verbs) {
      *out = tp->dev;
      return 0;
    }
    RMX_LOG(tp->ctx, ERROR, "rdma: a context uses one device (%s); this connection is on %s",
            tp->dev->name, ibv_get_device_name(verbs->device));
    return RMX_ENOTSUP;
  }
  if (cfg->device[0] && !device_matches(cfg->device, verbs)) {
    RMX_LOG(tp->ctx, ERROR, "rdma: RMX_DEVICE=%s, but the route goes through %s", cfg->device,
            ibv_get_device_name(verbs->device));
    return RMX_ENODEV;
  }
  vb_dev_t *dev = calloc(1, sizeof(*dev));
  if (!dev)
    return RMX_ENOMEM;
  dev->tp = tp;
  dev->verbs = verbs;
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
  if ((dev->watch_async = async_claim(verbs)) != 0) {
    uv_poll_init(tp->loop, &dev->async_poll, verbs->async_fd);
    dev->async_poll.data = dev;
    dev->handles++;
    uv_poll_start(&dev->async_poll, UV_READABLE, async_cb);
    uv_unref((uv_handle_t *)&dev->async_poll);
  }
  tp->handles += dev->handles;
  rmx_list_push(&tp->devs, &dev->link);
  tp->dev = dev;
  *out = dev;
  RMX_LOG(tp->ctx, INFO, "rdma: using %s (max inline asked %d, CQ %d)", dev->name,
          VB_INLINE_WANT, dev->cq_size);
  return 0;
err:
  RMX_LOG(tp->ctx, ERROR, "rdma: cannot set up device %s: %s", dev->name, strerror(errno));
  dev_release(dev);
  return RMX_ENODEV;
}

/* ---- the idle handler: poll mode, deferred failures, reaping ---- */

static void idle_cb(uv_idle_t *h)
{
  struct rmx_tp *tp = h->data;
  rmx_list_t *n, *next;
  int busy = 0;

  if (tp->polling)
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
    RMX_LOG(tp->ctx, ERROR, "rdma: no device in use yet to register memory with");
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
    RMX_LOG(m->tp->ctx, WARN, "rdma: ibv_dereg_mr failed");
  free(m);
}

static uint64_t vb_mem_rkey(const rmx_tp_mem_t *m) { return m->mr->rkey; }

/* ---- the instance ---- */

static int vb_init(rmx_ctx_t *ctx, rmx_tp_t **out)
{
  const rmx_config_t *cfg = rmx__ctx_cfg(ctx);
  int n = 0, found = !cfg->device[0];
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    if (list)
      ibv_free_device_list(list);
    RMX_LOG(ctx, INFO, "rdma: no RDMA device on this host");
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
    RMX_LOG(ctx, ERROR, "rdma: RMX_DEVICE=%s matches no device (rmx-info lists them)",
            cfg->device);
    return RMX_ENODEV;
  }

  struct rmx_tp *tp = calloc(1, sizeof(*tp));
  if (!tp)
    return RMX_ENOMEM;
  tp->ctx = ctx;
  tp->loop = rmx__ctx_uv(ctx);
  tp->polling = cfg->progress == RMX_PROGRESS_POLL;
  rmx_list_init(&tp->devs);
  rmx_list_init(&tp->conns);
  rmx_list_init(&tp->repost);
  tp->ech = rdma_create_event_channel();
  if (!tp->ech || set_nonblock(tp->ech->fd)) {
    RMX_LOG(ctx, ERROR, "rdma: cannot open the RDMA connection manager (%s): is the rdma_ucm "
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
    if (dev->watch_async) {
      uv_close((uv_handle_t *)&dev->async_poll, dev_handle_closed);
      async_release(dev->verbs);
    }
  }
}

const rmx_tp_ops_t rmx_verbs_ops = {
  .name = "rdma",
  .flags = RMX_TP_F_LOCAL_REG,
  .wire_id = 2,
  .max_io = SIZE_MAX, /* split at the device's limit inside */
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
  .mem_reg = vb_mem_reg,
  .mem_dereg = vb_mem_dereg,
  .mem_rkey = vb_mem_rkey,
};
