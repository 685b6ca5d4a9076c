/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Devices: each one a context uses, opened on the first connection or
 * listener whose route goes through it: a PD, and CQs on one completion
 * channel shared by the device's QPs (cq.c adds CQs as connections need
 * room). Their async events are async.c's.
 *
 * The first device opened (tp->dev) is where registrations made without a
 * connection get their MR (pool slabs, the registration cache, rmx_mem_reg)
 * and where capability keys live (rmx_mem_pack). A connection on any later
 * device cannot use those MRs, windows or keys, so such a device always
 * has a protection domain per connection (pd.c), whatever RMX_KEY_SCOPE
 * says: its connections register local buffers in their own PD when first
 * used there, and what is exposed to their peers is an MR in that PD. A
 * capability key of the first device is refused there like a forged one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "verbs.h"

int rmx__vb_has_windows(const struct ibv_device_attr *a)
{
  return a->max_mw > 0 && (a->device_cap_flags & (IBV_DEVICE_MEM_WINDOW_TYPE_2A |
                                                  IBV_DEVICE_MEM_WINDOW_TYPE_2B)) != 0;
}

/* RMX_DEVICE names a device or gives its GUID (hex, colons optional). */
int rmx__vb_device_named(const char *want, struct ibv_device *d)
{
  char guid[32], w[64];
  size_t j = 0;
  if (strcmp(want, ibv_get_device_name(d)) == 0)
    return 1;
  for (size_t i = 0; want[i] && j + 1 < sizeof(w); i++)
    if (want[i] != ':')
      w[j++] = want[i];
  w[j] = '\0';
  snprintf(guid, sizeof(guid), "%016" PRIx64, be64toh(ibv_get_device_guid(d)));
  return strcasecmp(w, guid) == 0;
}

void rmx__vb_dev_release(vb_dev_t *dev)
{
  rmx__vb_srq_free(dev); /* before the CQs: the device's QPs are gone */
  free(dev->qpn_map);
  for (int i = 0; i < dev->ncq; i++) {
    vb_cq_t *c = &dev->cqs[i];
    if (c->unacked)
      ibv_ack_cq_events(c->cq, c->unacked);
    if (ibv_destroy_cq(c->cq))
      RMX_TP_LOG(dev->tp->env, WARN, "rdma: destroying a CQ of %s failed", dev->name);
  }
  if (dev->chan && ibv_destroy_comp_channel(dev->chan))
    RMX_TP_LOG(dev->tp->env, WARN, "rdma: destroying the channel of %s failed", dev->name);
  if (dev->pd && ibv_dealloc_pd(dev->pd))
    RMX_TP_LOG(dev->tp->env, WARN, "rdma: %s still has registered memory at exit", dev->name);
  free(dev);
}

static vb_dev_t *dev_find(struct rmx_tp *tp, const struct ibv_context *verbs)
{
  rmx_list_t *n;
  rmx_list_foreach(n, &tp->devs) {
    vb_dev_t *d = rmx_container_of(n, vb_dev_t, link);
    if (d->verbs == verbs)
      return d;
  }
  return NULL;
}

/* How keys are scoped on dev; ENOTSUP where RMX_KEY_SCOPE=windows cannot be
 * had on the first device. */
static int dev_key_mode(struct rmx_tp *tp, vb_dev_t *dev)
{
  const rmx_config_t *cfg = tp->env->cfg;
  int has = rmx__vb_has_windows(&dev->attr), first = !tp->dev;
  const char *how;
  if (first && !has && cfg->key_scope == RMX_KEY_SCOPE_WINDOWS) {
    RMX_TP_LOG(tp->env, ERROR, "rdma: RMX_KEY_SCOPE=windows, but %s has no type-2 memory "
               "windows (rmx-info); RMX_KEY_SCOPE=pd or auto gives each connection its own "
               "protection domain instead", dev->name);
    return RMX_ENOTSUP;
  }
  dev->pd_per_conn = !first || !has || cfg->key_scope == RMX_KEY_SCOPE_PD;
  dev->windows = has && !dev->pd_per_conn;
  how = dev->windows ? "keys scoped by memory windows"
        : !first     ? "not the context's first device: keys scoped by a protection domain per "
                       "connection, no capability keys (rmx_mem_pack) here"
        : has        ? "keys scoped by a protection domain per connection (RMX_KEY_SCOPE=pd)"
                     : "no type-2 memory windows: keys scoped by a protection domain per "
                       "connection";
  RMX_TP_LOG(tp->env, INFO, "rdma: using %s (max inline asked %d, CQ %d, %s)", dev->name,
             VB_INLINE_WANT, dev->cqs[0].size, how);
  return 0;
}

int rmx__vb_dev_get(struct rmx_tp *tp, struct ibv_context *verbs, vb_dev_t **out)
{
  const rmx_config_t *cfg = tp->env->cfg;
  if (!verbs)
    return RMX_ENODEV;
  if ((*out = dev_find(tp, verbs)) != NULL)
    return 0;
  if (cfg->device[0] && !rmx__vb_device_named(cfg->device, verbs->device)) {
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
      !(dev->chan = ibv_create_comp_channel(verbs)) || vb_set_nonblock(dev->chan->fd) ||
      vb_set_nonblock(verbs->async_fd))
    goto err;
  if (rmx__vb_cq_open(dev, dev->attr.max_cqe < VB_CQ_FIRST ? dev->attr.max_cqe : VB_CQ_FIRST))
    goto err;
  int rc = dev_key_mode(tp, dev);
  if (rc) {
    rmx__vb_dev_release(dev);
    return rc;
  }
  uv_poll_init(tp->loop, &dev->chan_poll, dev->chan->fd);
  dev->chan_poll.data = dev;
  dev->handles = 1;
  if (!tp->polling)
    uv_poll_start(&dev->chan_poll, UV_READABLE, rmx__vb_cq_event);
  uv_unref((uv_handle_t *)&dev->chan_poll);
  rmx__vb_async_open(dev);
  tp->handles += dev->handles;
  rmx_list_push(&tp->devs, &dev->link);
  if (!tp->dev)
    tp->dev = dev;
  *out = dev;
  return 0;
err:
  RMX_TP_LOG(tp->env, ERROR, "rdma: cannot set up device %s: %s", dev->name, strerror(errno));
  rmx__vb_dev_release(dev);
  return RMX_ENODEV;
}
