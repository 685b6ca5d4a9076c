/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-info: what rmx can use on this host. RDMA devices and their ports,
 * which transports work here, and the configuration rmx would run with
 * (defaults plus RMX_* from the environment). -c prints every setting with
 * its default, source and meaning (rmx_config_print), --json as JSON.
 */
#include <getopt.h>
#include <inttypes.h>
#include <rmx/rmx.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

static const char usage[] =
    "usage: rmx-info [-c [--json]]\n"
    "  without options: the RDMA devices and their ports, the transports usable\n"
    "  here and why not, the locked-memory limit, and every RMX_* setting in effect\n"
    "  -c, --config  every setting: its value, default, where the value came from\n"
    "                (default, environment) and what it means\n"
    "      --json    with -c: the same as one JSON object\n"
    "      --version print rmx-info's version and exit\n"
    "  -h, --help    print this and exit\n"
    "Exit status: 0; 1 when an RMX_* setting was refused (the reason is on stderr);\n"
    "2 for a bad command line.\n";

/* A usage error: one line saying what is wrong, exit 2. */
__attribute__((noreturn, format(printf, 1, 2))) static void bad_usage(const char *fmt, ...)
{
  va_list ap;
  fputs("rmx-info: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs(" (try 'rmx-info --help')\n", stderr);
  exit(2);
}

static const char *link_layer(const char *l)
{
  return strcmp(l, "ethernet") == 0 ? "Ethernet (RoCE)" : "InfiniBand";
}

/* Whether RMX_DEVICE's @p want names @p d: its name, or its GUID in hex
 * (colons optional), as the RDMA transport reads it. */
static int names_device(const char *want, const rmx_device_info_t *d)
{
  char w[64], guid[17];
  size_t j = 0;
  if (strcmp(want, d->name) == 0)
    return 1;
  for (size_t i = 0; want[i] && j + 1 < sizeof(w); i++)
    if (want[i] != ':')
      w[j++] = want[i];
  w[j] = '\0';
  snprintf(guid, sizeof(guid), "%016" PRIx64, d->guid);
  return strcasecmp(w, guid) == 0;
}

/* Prints the devices; says whether any port is active. @p want: RMX_DEVICE. */
static int list_devices(const char *want)
{
  rmx_device_info_t *list;
  int n = 0, usable = 0, named = 0;
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
  } else {
    printf("RDMA devices:\n");
  }
  for (int i = 0; i < n; i++) {
    const rmx_device_info_t *d = &list[i];
    named |= *want && names_device(want, d);
    printf("  [%d] %s  GUID %016" PRIx64 "\n", d->index, d->name, d->guid);
    if (!d->max_mr_size) {
      printf("      cannot open it\n");
      continue;
    }
    printf("      max MR size %" PRIu64 " B, max inline data %" PRIu32 " B, atomics %s\n",
           d->max_mr_size, d->max_inline, d->atomics ? "yes" : "no");
    printf("      keys scoped to a connection by: %s\n",
           d->key_scope ? "type-2 memory windows"
                        : "a protection domain each (no type-2 memory windows; no "
                          "rmx_mem_pack capability keys)");
    for (int p = 0; p < d->nports; p++) {
      const rmx_port_info_t *pi = &d->ports[p];
      printf("      port %u: %s, %s, MTU %" PRIu32 "\n", pi->num, pi->state,
             link_layer(pi->link_layer), pi->mtu);
      usable |= pi->active;
    }
  }
  if (*want && !named)
    printf("  RMX_DEVICE=%s names none of %s: rdma:// will fail with RMX_ENODEV\n", want,
           n ? "these devices (give a name or a GUID listed here)" : "them");
  rmx_device_list_free(list);
  return usable;
}

int main(int argc, char **argv)
{
  static const struct option opts[] = {{"config", no_argument, NULL, 'c'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"version", no_argument, NULL, 'V'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  int ch, config_only = 0, json = 0;
  opterr = 0;
  while ((ch = getopt_long(argc, argv, "+ch", opts, NULL)) != -1) {
    if (ch == 'c') {
      config_only = 1;
    } else if (ch == 'j') {
      json = 1;
    } else if (ch == 'V') {
      printf("rmx-info %s\n", rmx_version_string());
      return 0;
    } else if (ch == 'h') {
      fputs(usage, stdout);
      return 0;
    } else if (optopt && optopt != 'c' && optopt != 'h') {
      bad_usage("unknown option '-%c'", optopt);
    } else {
      bad_usage("unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind < argc)
    bad_usage("takes no operands, not '%s'", argv[optind]);
  if (json && !config_only)
    bad_usage("--json goes with -c");

  rmx_config_t cfg;
  int rc = rmx_config_init(&cfg); /* a refused setting is logged on stderr */
  if (config_only) {
    int prc = rmx_config_print(&cfg, stdout, json ? RMX_CONFIG_PRINT_JSON : 0);
    memset(cfg.auth_secret, 0, sizeof(cfg.auth_secret));
    return rc || prc ? 1 : 0;
  }

  printf("rmx %s (header %d.%d.%d)\n\n", rmx_version_string(), RMX_VERSION_MAJOR,
         RMX_VERSION_MINOR, RMX_VERSION_PATCH);
  const char *why = NULL;
  int usable = 0;
  if (rmx_transport_available("rdma", &why) == 0) {
    usable = list_devices(cfg.device);
    why = "no active RDMA port";
  } else {
    if (!why || !*why) /* the library always says why; never print an empty reason */
      why = "the RDMA transport is missing from this build";
    printf("RDMA devices: not looked for: %s\n", why);
    if (cfg.device[0])
      printf("  RMX_DEVICE=%s names no device here: rdma:// cannot be used\n", cfg.device);
  }
  const char *shm_why = NULL;
  int shm = rmx_transport_available("shm", &shm_why) == 0;
  printf("\nTransports:\n  tcp://   usable\n  rdma://  %s%s\n  shm://   %s%s\n",
         usable ? "usable" : "not usable here: ", usable ? "" : why,
         shm ? "usable (peers on this host)" : "not usable: ", shm ? "" : shm_why);
  /* auto:// per peer, in RMX_TRANSPORTS' order */
  printf("  auto://  per peer, in the order %s: %s%stcp otherwise\n",
         cfg.transports[0] ? cfg.transports : "shm,rdma,tcp (RMX_TRANSPORTS)",
         shm ? "shm for a peer on this host, " : "",
         usable ? "rdma where a device routes to the peer, " : "");
  struct rlimit rl;
  if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
    if (rl.rlim_cur == RLIM_INFINITY)
      printf("  locked-memory limit: unlimited\n");
    else
      printf("  locked-memory limit: %llu KiB%s\n", (unsigned long long)rl.rlim_cur / 1024,
             rl.rlim_cur < (64u << 20) ? " (low for RDMA: raise with ulimit -l)" : "");
  }

  printf("\nConfiguration%s (rmx-info -c says what each means):\n",
         rc ? " (a setting was refused, see above; its default is shown)" : "");
  rmx_config_print(&cfg, stdout, RMX_CONFIG_PRINT_BRIEF);
  memset(cfg.auth_secret, 0, sizeof(cfg.auth_secret));
  return rc ? 1 : 0;
}
