/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The transport registry. TCP is always built in. The verbs transport is
 * either built in (the static library: RMX_VERBS_BUILTIN), or a module the
 * shared library loads the first time a context or rmx_device_list needs
 * it (RMX_VERBS_MODULE): librmx-verbs.so.ABI from librmx's own directory,
 * else from the loader's search path. So a program that only uses tcp://
 * starts and runs where rdma-core is not installed; rdma:// then says why
 * it cannot be used (RMX_ENOTSUP, and rmx_transport_available()).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#ifdef RMX_VERBS_MODULE
#include <dlfcn.h>
#include <libgen.h>
#include <unistd.h>
#endif

#include "registry.h"

extern const rmx_tp_ops_t rmx__tcp_ops;
extern const rmx_tp_ops_t rmx__shm_ops;
#ifdef RMX_VERBS_BUILTIN
extern const rmx_tp_ops_t rmx__verbs_ops;
#endif

enum { SLOT_TCP, SLOT_RDMA, SLOT_SHM };

static struct {
  const char *scheme;
  const rmx_tp_ops_t *ops; /* NULL: not available (absent says why) */
  const char *absent;
} registry[RMX_TP_COUNT] = {
  [SLOT_TCP] = {"tcp", &rmx__tcp_ops, NULL},
#ifdef RMX_VERBS_BUILTIN
  [SLOT_RDMA] = {"rdma", &rmx__verbs_ops, NULL},
#else
  [SLOT_RDMA] = {"rdma", NULL, "rmx was built without rdma-core"},
#endif
  [SLOT_SHM] = {"shm", &rmx__shm_ops, NULL},
};

/* RMX_TRANSPORTS when empty. */
static const int default_order[] = {SLOT_SHM, SLOT_RDMA, SLOT_TCP};

#ifdef RMX_VERBS_MODULE
#define MODULE_NAME "librmx-verbs.so." RMX_ABI_VERSION_STR
static char load_error[512];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* The module beside librmx (a build tree, or a prefix moved as a whole);
 * only when there is none there, the loader's search path. */
static void *open_module(void)
{
  Dl_info self;
  char path[4096], beside[4200];
  if (dladdr((void *)rmx__tp_ops, &self) && self.dli_fname &&
      snprintf(path, sizeof(path), "%s", self.dli_fname) < (int)sizeof(path)) {
    snprintf(beside, sizeof(beside), "%s/%s", dirname(path), MODULE_NAME);
    if (access(beside, F_OK) == 0)
      return dlopen(beside, RTLD_NOW | RTLD_LOCAL);
  }
  return dlopen(MODULE_NAME, RTLD_NOW | RTLD_LOCAL);
}

static void load_verbs(void)
{
  void *h = open_module();
  const rmx_tp_ops_t *ops = h ? dlsym(h, "rmx__verbs_ops") : NULL;
  if (ops) {
    registry[SLOT_RDMA].ops = ops; /* the module stays loaded for good */
    registry[SLOT_RDMA].absent = NULL;
    return;
  }
  /* dlerror names the library that is missing (libibverbs.so.1, say). */
  const char *err = dlerror();
  snprintf(load_error, sizeof(load_error), "the RDMA transport could not be loaded: %s",
           err ? err : MODULE_NAME " has no rmx__verbs_ops");
  registry[SLOT_RDMA].absent = load_error;
  if (h)
    dlclose(h);
}
#endif

static void load(void)
{
#ifdef RMX_VERBS_MODULE
  pthread_once(&load_once, load_verbs);
#endif
}

int rmx__tp_lookup(const char *scheme, int *slot, const char **why)
{
  load();
  for (int i = 0; i < RMX_TP_COUNT; i++) {
    if (strcmp(registry[i].scheme, scheme) != 0)
      continue;
    if (!registry[i].ops) {
      *why = registry[i].absent;
      return RMX_ENOTSUP;
    }
    *slot = i;
    return 0;
  }
  return RMX_EINVAL;
}

int rmx__tp_order(const char *spec, int slots[RMX_TP_COUNT], int *required, const char **why)
{
  int mine[RMX_TP_COUNT], n = 0, req = 0;
  slots = slots ? slots : mine;
  if (!spec || !*spec) {
    for (size_t k = 0; k < sizeof(default_order) / sizeof(default_order[0]); k++)
      slots[n++] = default_order[k];
  }
  for (const char *p = spec ? spec : ""; *p;) {
    size_t len = strcspn(p, ",!");
    int slot = -1;
    for (int i = 0; i < RMX_TP_COUNT; i++)
      if (strlen(registry[i].scheme) == len && strncmp(registry[i].scheme, p, len) == 0)
        slot = i;
    if (slot < 0) {
      *why = "names a transport rmx does not have (tcp, rdma, shm)";
      return RMX_EINVAL;
    }
    for (int k = 0; k < n; k++)
      if (slots[k] == slot) {
        *why = "names a transport twice";
        return RMX_EINVAL;
      }
    slots[n++] = slot;
    p += len;
    if (*p == '!') {
      req = 1;
      p++;
    }
    if (*p == ',' && *++p == '\0') {
      *why = "ends with a comma";
      return RMX_EINVAL;
    }
  }
  if (req && n != 1) {
    *why = "a required transport (\"rdma!\") is the only one listed";
    return RMX_EINVAL;
  }
  if (required)
    *required = req;
  return n;
}

const rmx_tp_ops_t *rmx__tp_ops(int slot)
{
  load();
  return registry[slot].ops;
}

int rmx_transport_available(const char *scheme, const char **why)
{
  int slot;
  const char *reason = NULL;
  if (!scheme)
    return RMX_EINVAL;
  int rc = rmx__tp_lookup(scheme, &slot, &reason);
  if (why)
    *why = rc == RMX_ENOTSUP ? reason : rc ? "no transport has that scheme" : NULL;
  return rc;
}
