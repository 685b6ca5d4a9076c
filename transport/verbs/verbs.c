/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The verbs transport's instance: init and fini, the idle handler (poll
 * mode, deferred failures, reaping) and the ops table. The objects below it are listed in verbs.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

/* ---- the idle handler: poll mode, deferred failures, reaping ---- */

static void idle_cb(uv_idle_t *h)
{
  struct rmx_tp *tp = h->data;
  rmx_list_t *n, *next;
  int busy = 0;

  /* Parked connections wait for a poll that finds the CQ empty. */
  rmx_list_foreach(n, &tp->devs) {
    vb_dev_t *dev = rmx_container_of(n, vb_dev_t, link);
    if (tp->polling || dev->spinning || !rmx_list_empty(&tp->parked)) {
      /* Polling: a few more looks at an empty CQ before going back to the
       * loop, whose turn (an epoll_wait among it) costs far more than one. */
      int found = rmx__vb_cq_drain(dev);
      for (int i = 0; !found && i < VB_POLL_SPIN && (tp->polling || dev->spinning); i++)
        found = rmx__vb_cq_drain(dev);
      if (dev->spinning)
        rmx__vb_spin_poll(dev, found);
      busy |= dev->spinning;
    }
  }
  for (n = tp->conns.next; n != &tp->conns; n = next) {
    next = n->next;
    struct rmx_tp_conn *tc = rmx_container_of(n, struct rmx_tp_conn, link);
    if (tc->fail_status) {
      int st = tc->fail_status;
      tc->fail_status = 0;
      rmx__vb_fail(tc, st);
      next = n->next; /* rmx__vb_fail may have closed, not freed */
    }
    if (tc->state == VC_DONE)
      rmx__vb_conn_reap(tc);
    else if (tc->state == VC_DRAINING)
      busy = 1; /* in poll mode the drain completes through us */
  }
  rmx__vb_parked_sweep(tp, 0);
  if (!rmx_list_empty(&tp->parked))
    busy = 1;
  if (!tp->polling && !busy)
    uv_idle_stop(h);
}

/* The polling fast path: every CQ once, no loop turn. */
static int vb_poll(rmx_tp_t *tp, int *turn)
{
  (void)turn; /* connection events wait for the loop's turn */
  rmx_list_t *n;
  int found = 0;
  rmx_list_foreach(n, &tp->devs) {
    found += rmx__vb_cq_drain(rmx_container_of(n, vb_dev_t, link));
    if (tp->finishing)
      break; /* a callback destroyed the context */
  }
  return found;
}

/* ---- the instance ---- */

static void tp_free(struct rmx_tp *tp)
{
  rmx_list_t *n;
  rmx__vb_parked_sweep(tp, 1); /* nothing polls now; registrations go before the PD */
  while ((n = rmx_list_pop(&tp->devs)) != NULL)
    rmx__vb_dev_release(rmx_container_of(n, vb_dev_t, link));
  rdma_destroy_event_channel(tp->ech);
  free(tp);
}

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
  for (int i = 0; i < n && !found; i++)
    found = rmx__vb_device_named(cfg->device, list[i]);
  ibv_free_device_list(list);
  if (!found) {
    RMX_TP_LOG(env, ERROR, "rdma: RMX_DEVICE=%s matches no device (rmx-info lists them)",
            cfg->device);
    return RMX_ENODEV;
  }

  struct rmx_tp *tp = calloc(1, sizeof(*tp));
  if (!tp)
    return RMX_ENOMEM;
  tp->cfg_copy = *env->cfg; /* the instance may outlive the context */
  tp->env_copy = *env;
  tp->env_copy.cfg = &tp->cfg_copy;
  tp->env = &tp->env_copy;
  tp->loop = env->loop;
  tp->polling = cfg->progress == RMX_PROGRESS_POLL;
  tp->spin_ns = cfg->progress == RMX_PROGRESS_ADAPTIVE ? (uint64_t)cfg->spin_us * 1000 : 0;
  tp->idle_cb = idle_cb;
  tp->free_cb = tp_free;
  rmx_list_init(&tp->devs);
  rmx_list_init(&tp->conns);
  rmx_list_init(&tp->lingering);
  rmx_list_init(&tp->repost);
  rmx_list_init(&tp->unflushed);
  rmx_list_init(&tp->parked);
  tp->ech = rdma_create_event_channel();
  if (!tp->ech || vb_set_nonblock(tp->ech->fd)) {
    RMX_TP_LOG(env, ERROR, "rdma: cannot open the RDMA connection manager (%s): is the rdma_ucm "
            "module loaded?", strerror(errno));
    if (tp->ech)
      rdma_destroy_event_channel(tp->ech);
    free(tp);
    return RMX_ENODEV;
  }
  uv_poll_init(tp->loop, &tp->ech_poll, tp->ech->fd);
  tp->ech_poll.data = tp;
  uv_poll_start(&tp->ech_poll, UV_READABLE, rmx__vb_cm_events);
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

static void handle_closed(struct rmx_tp *tp)
{
  if (--tp->handles == 0 && tp->live == 0)
    tp_free(tp);
}

static void tp_handle_closed(uv_handle_t *h) { handle_closed(h->data); }
static void dev_handle_closed(uv_handle_t *h) { handle_closed(((vb_dev_t *)h->data)->tp); }

static void vb_fini(rmx_tp_t *tp)
{
  rmx_list_t *n, *next;
  /* Connections the core never owned (rejects under way) end now. */
  for (n = tp->conns.next; n != &tp->conns; n = next) {
    next = n->next;
    struct rmx_tp_conn *tc = rmx_container_of(n, struct rmx_tp_conn, link);
    tc->owner = NULL;
    rmx__vb_conn_reap(tc);
  }
  rmx__vb_linger_end_all(tp);
  tp->finishing = 1;
  uv_close((uv_handle_t *)&tp->ech_poll, tp_handle_closed);
  uv_close((uv_handle_t *)&tp->idle, tp_handle_closed);
  rmx_list_foreach(n, &tp->devs) {
    vb_dev_t *dev = rmx_container_of(n, vb_dev_t, link);
    uv_close((uv_handle_t *)&dev->chan_poll, dev_handle_closed);
    rmx__vb_async_close(dev, dev_handle_closed);
  }
}

/*
 * The QP serves remote reads, writes and atomics from the moment it is
 * connected: opening its access only now would refuse a legitimate peer's
 * first read, which the device may serve before this CPU has seen the
 * handshake end. docs/security.md says what that leaves exposed.
 */
static void vb_ready(rmx_tp_conn_t *tc) {}

static void vb_stats(rmx_tp_t *tp, rmx_tp_stats_t *st)
{
  st->reg_bytes += tp->reg_bytes;
  st->refused += tp->refused;
}

RMX_TP_EXPORT const rmx_tp_ops_t rmx__verbs_ops = {
  .name = "rdma",
  .flags = RMX_TP_F_LOCAL_REG | RMX_TP_F_SEND_COPY,
  .wire_id = 2,
  .max_io = SIZE_MAX, /* split at the device's limit inside */
  .hello_max = 56,    /* rdma_cm connect private data (an accept carries up to 196) */
  .init = vb_init,
  .fini = vb_fini,
  .devices = rmx__vb_devices,
  .listen = rmx__vb_listen,
  .listen_addr = rmx__vb_listen_addr,
  .peer_addr = rmx__vb_peer_addr,
  .local_addr = rmx__vb_local_addr,
  .conn_label = rmx__vb_conn_label,
  .listen_close = rmx__vb_listen_close,
  .listen_pause = rmx__vb_listen_pause,
  .gate_open = rmx__vb_gate_open,
  .gate_addr = rmx__vb_gate_addr,
  .gate_take = rmx__vb_gate_take,
  .gate_give = rmx__vb_gate_give,
  .gate_drop = rmx__vb_gate_drop,
  .gate_close = rmx__vb_gate_close,
  .feed = rmx__vb_feed,
  .unfeed = rmx__vb_unfeed,
  .stats = vb_stats,
  .connect = rmx__vb_connect,
  .accept = rmx__vb_accept,
  .reject = rmx__vb_reject,
  .close = rmx__vb_close,
  .send = rmx__vb_send,
  .read = rmx__vb_read,
  .write = rmx__vb_write,
  .atomic = rmx__vb_atomic,
  .caps = rmx__vb_caps,
  .io_max = rmx__vb_io_max,
  .flush = rmx__vb_flush,
  .ready = vb_ready,
  .mem_reg = rmx__vb_mem_reg,
  .mem_dereg = rmx__vb_mem_dereg,
  .mem_rkey = rmx__vb_mem_rkey,
  .mem_open = rmx__vb_mem_open,
  .mem_grant = rmx__vb_mem_grant,
  .poll = vb_poll,
};
