/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The host's RDMA devices, for rmx_device_list (the devices op): needs no
 * instance; opens each device briefly to read its limits and ports.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

static const char *port_state(enum ibv_port_state s)
{
  switch (s) {
  case IBV_PORT_ACTIVE: return "active";
  case IBV_PORT_DOWN: return "down";
  case IBV_PORT_INIT: return "init";
  case IBV_PORT_ARMED: return "armed";
  case IBV_PORT_ACTIVE_DEFER: return "active_defer";
  default: return "other";
  }
}

static uint32_t mtu_bytes(enum ibv_mtu m)
{
  return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128u << m : 0;
}

/* Inline capacity is per queue pair: ask a test QP for what rmx__vb_qp_create
 * asks, and for less until one fits, as it does. */
static uint32_t max_inline(struct ibv_context *v, struct ibv_pd *pd)
{
  static const uint32_t inl[] = VB_INLINE_TRY;
  struct ibv_cq *cq = ibv_create_cq(v, 4, NULL, NULL, 0);
  uint32_t got = 0;
  if (!cq)
    return 0;
  for (size_t i = 0; i < sizeof(inl) / sizeof(inl[0]); i++) {
    struct ibv_qp_init_attr a = {
      .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = RMX_TP_MAX_SGE,
              .max_recv_sge = 1, .max_inline_data = inl[i]},
    };
    struct ibv_qp *qp = ibv_create_qp(pd, &a);
    if (qp) {
      got = a.cap.max_inline_data;
      ibv_destroy_qp(qp);
      break;
    }
  }
  ibv_destroy_cq(cq);
  return got;
}

static void query_device(struct ibv_context *v, rmx_device_info_t *di)
{
  struct ibv_device_attr da;
  struct ibv_pd *pd;
  if (ibv_query_device(v, &da))
    return;
  di->max_mr_size = da.max_mr_size;
  di->atomics = da.atomic_cap != IBV_ATOMIC_NONE;
  di->key_scope = rmx__vb_has_windows(&da);
  if ((pd = ibv_alloc_pd(v)) != NULL) {
    di->max_inline = max_inline(v, pd);
    ibv_dealloc_pd(pd);
  }
  for (int p = 1; p <= da.phys_port_cnt && di->nports < RMX_DEV_MAX_PORTS; p++) {
    struct ibv_port_attr pa;
    if (ibv_query_port(v, (uint8_t)p, &pa))
      continue;
    rmx_port_info_t *pi = &di->ports[di->nports++];
    pi->num = (uint8_t)p;
    pi->active = pa.state == IBV_PORT_ACTIVE;
    snprintf(pi->state, sizeof(pi->state), "%s", port_state(pa.state));
    /* unspecified is InfiniBand, as ibv_devinfo has it */
    snprintf(pi->link_layer, sizeof(pi->link_layer), "%s",
             pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "ethernet" : "infiniband");
    pi->mtu = mtu_bytes(pa.active_mtu);
  }
}

int rmx__vb_devices(rmx_device_info_t **out, int *n)
{
  int count = 0;
  struct ibv_device **list = ibv_get_device_list(&count);
  *out = NULL;
  *n = 0;
  if (!list) /* no RDMA in this kernel (ENOSYS): no device */
    return errno == ENOMEM ? RMX_ENOMEM : 0;
  rmx_device_info_t *di = count ? calloc((size_t)count, sizeof(*di)) : NULL;
  if (count && !di) {
    ibv_free_device_list(list);
    return RMX_ENOMEM;
  }
  for (int i = 0; i < count; i++) {
    struct ibv_context *v = ibv_open_device(list[i]);
    snprintf(di[i].name, sizeof(di[i].name), "%s", ibv_get_device_name(list[i]));
    di[i].guid = be64toh(ibv_get_device_guid(list[i]));
    di[i].index = i;
    if (v) { /* else only its name and GUID: max_mr_size 0 says so */
      query_device(v, &di[i]);
      ibv_close_device(v);
    }
  }
  ibv_free_device_list(list);
  *out = di;
  *n = count;
  return 0;
}
