/* SPDX-License-Identifier: BSD-3-Clause */
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

#include "tool.h"

static const char *link_layer(const char *l)
{
  return strcmp(l, "ethernet") == 0 ? "Ethernet (RoCE)" : "InfiniBand";
}

/* Prints the devices; says whether any port is active. */
static int list_devices(void)
{
  rmx_device_info_t *list;
  int n = 0, usable = 0;
  int rc = rmx_device_list(&list, &n);
  if (rc == RMX_ENOTSUP) {
    printf("RDMA devices: not looked for (built without rdma-core)\n");
    return 0;
  }
  if (rc) {
    printf("RDMA devices: cannot list them: %s\n", rmx_strerror(rc));
    return 0;
  }
  if (n == 0) {
    printf("RDMA devices: none (no RDMA-capable NIC, or its kernel driver is not loaded;\n"
           "  SoftRoCE: 'rdma link add rxe0 type rxe netdev <if>')\n");
    return 0;
  }
  printf("RDMA devices:\n");
  for (int i = 0; i < n; i++) {
    const rmx_device_info_t *d = &list[i];
    printf("  [%d] %s  GUID %016" PRIx64 "\n", d->index, d->name, d->guid);
    if (!d->max_mr_size) {
      printf("      cannot open it\n");
      continue;
    }
    printf("      max MR size %" PRIu64 " B, max inline data %" PRIu32 " B, atomics %s\n",
           d->max_mr_size, d->max_inline, d->atomics ? "yes" : "no");
    for (int p = 0; p < d->nports; p++) {
      const rmx_port_info_t *pi = &d->ports[p];
      printf("      port %u: %s, %s, MTU %" PRIu32 "\n", pi->num, pi->state,
             link_layer(pi->link_layer), pi->mtu);
      usable |= pi->active;
    }
  }
  rmx_device_list_free(list);
  return usable;
}

static const char usage[] =
    "usage: rmx-info\n"
    "  the RDMA devices and their ports, the transports usable here and why\n"
    "  not, the locked-memory limit, and every RMX_* setting in effect\n";

int main(int argc, char **argv)
{
  if (tool_options(argc, argv, usage) != argc)
    tool_bad("takes no operands");
  rmx_config_t cfg;
  struct rlimit rl;

  printf("rmx %s (header %d.%d.%d)\n\n", rmx_version_string(), RMX_VERSION_MAJOR,
         RMX_VERSION_MINOR, RMX_VERSION_PATCH);
  const char *why = NULL;
  int usable = rmx_transport_available("rdma", &why) == 0 ? list_devices() : 0;
  printf("\nTransports:\n  tcp://   usable\n  rdma://  %s%s\n  auto://  %s\n",
         usable ? "usable" : "not usable here: ", usable ? "" : why ? why : "no active RDMA port",
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
         "  RMX_SPIN_US=%u\n  RMX_DEVICE=%s\n",
         cfg.eager_size, cfg.rx_depth, cfg.max_msg_size, cfg.rndv_depth, cfg.connect_timeout_ms,
         (const char *[]){"none", "error", "warn", "info", "debug", "trace"}[cfg.log_level],
         (const char *[]){"event", "poll", "adaptive"}[cfg.progress], cfg.spin_us,
         cfg.device[0] ? cfg.device : "(by route)");
  printf("  RMX_RPC_MAX=%u\n  RMX_RNR_RETRY=%u\n  RMX_REGCACHE=%u\n  RMX_CLOSE_TIMEOUT_MS=%u\n"
         "  RMX_MAX_CONNS=%u\n  RMX_MAX_HANDSHAKES=%u\n  RMX_RMA_WINDOW=%u\n"
         "  RMX_KEEPALIVE_MS=%u\n  RMX_KEEPALIVE_TIMEOUT_MS=%u\n  RMX_RC_TIMEOUT_MS=%u\n"
         "  RMX_RC_RETRY=%u\n",
         cfg.rpc_max_inflight, cfg.rnr_retry, cfg.regcache, cfg.close_timeout_ms, cfg.max_conns,
         cfg.max_handshakes, cfg.rma_window, cfg.keepalive_ms, cfg.keepalive_timeout_ms,
         cfg.rc_timeout_ms, cfg.rc_retry);
  /* Never the secret itself: whether one is set, and where it comes from. */
  const char *sf = getenv("RMX_AUTH_SECRET_FILE");
  printf("  RMX_AUTH_SECRET_FILE=%s%s\n", sf && *sf ? sf : "(unset)",
         cfg.auth_secret[0] ? " (peer authentication on)"
         : sf && *sf      ? " (not usable: see the error above)"
                          : " (no peer authentication)");
  memset(cfg.auth_secret, 0, sizeof(cfg.auth_secret));
  return rc ? 1 : 0;
}
