/*
 * rmx-info: what rmx can use on this host. RDMA devices and their ports,
 * which transports work here, and the configuration rmx would run with
 * (defaults plus RMX_* from the environment).
 */
#include <inttypes.h>
#include <rmx/rmx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#ifdef RMX_HAVE_VERBS
#include <endian.h>
#include <infiniband/verbs.h>
#endif

#ifdef RMX_HAVE_VERBS
static const char *port_state(enum ibv_port_state s)
{
  switch (s) {
  case IBV_PORT_ACTIVE: return "active";
  case IBV_PORT_DOWN: return "down";
  case IBV_PORT_INIT: return "init";
  case IBV_PORT_ARMED: return "armed";
  default: return "other";
  }
}

static const char *link_layer(uint8_t l)
{
  return l == IBV_LINK_LAYER_ETHERNET ? "Ethernet (RoCE)"
         : l == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand" : "unspecified";
}

static int mtu_bytes(enum ibv_mtu m) { return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128 << m : 0; }

/* Inline capacity is per queue pair: ask a test QP for less until one fits. */
static uint32_t max_inline(struct ibv_context *v, struct ibv_pd *pd)
{
  struct ibv_cq *cq = ibv_create_cq(v, 4, NULL, NULL, 0);
  uint32_t best = 0;
  if (!cq)
    return 0;
  for (uint32_t want = 1024; want >= 16 && !best; want /= 2) {
    struct ibv_qp_init_attr a = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                 .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
                                         .max_recv_sge = 1, .max_inline_data = want}};
    struct ibv_qp *qp = ibv_create_qp(pd, &a);
    if (qp) {
      best = a.cap.max_inline_data;
      ibv_destroy_qp(qp);
    }
  }
  ibv_destroy_cq(cq);
  return best;
}

static int list_devices(void)
{
  int n = 0, usable = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    printf("RDMA devices: none (no RDMA-capable NIC, or its kernel driver is not loaded;\n"
           "  SoftRoCE: 'rdma link add rxe0 type rxe netdev <if>')\n");
    if (list)
      ibv_free_device_list(list);
    return 0;
  }
  printf("RDMA devices:\n");
  for (int i = 0; i < n; i++) {
    struct ibv_context *v = ibv_open_device(list[i]);
    struct ibv_device_attr da;
    printf("  [%d] %s  GUID %016" PRIx64 "\n", i, ibv_get_device_name(list[i]),
           be64toh(ibv_get_device_guid(list[i])));
    if (!v || ibv_query_device(v, &da)) {
      printf("      cannot open it: %s\n", strerror(errno));
      if (v)
        ibv_close_device(v);
      continue;
    }
    struct ibv_pd *pd = ibv_alloc_pd(v);
    printf("      max MR size %" PRIu64 " B, max QP WRs %d, max CQEs %d, max inline data %u B, "
           "atomics %s\n",
           (uint64_t)da.max_mr_size, da.max_qp_wr, da.max_cqe, pd ? max_inline(v, pd) : 0,
           da.atomic_cap == IBV_ATOMIC_NONE ? "no" : "yes");
    for (uint8_t p = 1; p <= da.phys_port_cnt; p++) {
      struct ibv_port_attr pa;
      if (ibv_query_port(v, p, &pa))
        continue;
      printf("      port %u: %s, %s, MTU %d (max %d), max message %" PRIu32 " B\n", p,
             port_state(pa.state), link_layer(pa.link_layer), mtu_bytes(pa.active_mtu),
             mtu_bytes(pa.max_mtu), pa.max_msg_sz);
      usable |= pa.state == IBV_PORT_ACTIVE;
    }
    if (pd)
      ibv_dealloc_pd(pd);
    ibv_close_device(v);
  }
  ibv_free_device_list(list);
  return usable;
}
#endif

int main(void)
{
  rmx_config_t cfg;
  struct rlimit rl;
  int usable = 0;

  printf("rmx %d.%d\n\n", RMX_VERSION_MAJOR, RMX_VERSION_MINOR);
#ifdef RMX_HAVE_VERBS
  usable = list_devices();
#else
  printf("RDMA devices: not looked for (built without rdma-core)\n");
#endif
  printf("\nTransports:\n  tcp://   usable\n  rdma://  %s\n  auto://  %s\n",
         usable ? "usable" : "not usable here: no active RDMA port",
         usable ? "rdma where a device routes to the peer" : "tcp");
  if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
    if (rl.rlim_cur == RLIM_INFINITY)
      printf("  locked-memory limit: unlimited\n");
    else
      printf("  locked-memory limit: %llu KiB%s\n", (unsigned long long)rl.rlim_cur / 1024,
             rl.rlim_cur < (64u << 20) ? " (low for RDMA: raise with ulimit -l)" : "");
  }

  int rc = rmx_config_init(&cfg);
  printf("\nConfiguration%s:\n", rc ? " (an RMX_* variable did not parse; defaults shown)" : "");
  printf("  RMX_EAGER_SIZE=%u\n  RMX_RX_DEPTH=%u\n  RMX_MAX_MSG_SIZE=%" PRIu64 "\n"
         "  RMX_RNDV_DEPTH=%u\n  RMX_CONNECT_TIMEOUT_MS=%u\n  RMX_LOG=%s\n  RMX_PROGRESS=%s\n"
         "  RMX_DEVICE=%s\n",
         cfg.eager_size, cfg.rx_depth, cfg.max_msg_size, cfg.rndv_depth, cfg.connect_timeout_ms,
         (const char *[]){"none", "error", "warn", "info", "debug", "trace"}[cfg.log_level],
         cfg.progress == RMX_PROGRESS_POLL ? "poll" : "event",
         cfg.device[0] ? cfg.device : "(by route)");
  /* Never the secret itself: whether one is set, and where it comes from. */
  const char *sf = getenv("RMX_AUTH_SECRET_FILE");
  printf("  RMX_AUTH_SECRET_FILE=%s%s\n", sf && *sf ? sf : "(unset)",
         cfg.auth_secret[0] ? " (peer authentication on)"
         : sf && *sf      ? " (not usable: see the error above)"
                          : " (no peer authentication)");
  memset(cfg.auth_secret, 0, sizeof(cfg.auth_secret));
  return rc ? 1 : 0;
}
