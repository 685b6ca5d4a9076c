#include <string.h>

#include "registry.h"

extern const rmx_tp_ops_t rmx_tcp_ops;
#ifdef RMX_HAVE_VERBS
extern const rmx_tp_ops_t rmx_verbs_ops;
#endif

static const struct {
  const char *scheme;
  const rmx_tp_ops_t *ops; /* NULL: not in this build */
  const char *absent;      /* why, when not */
  int auto_rank;           /* auto:// tries lower ranks first */
} registry[RMX_TP_COUNT] = {
  {"tcp", &rmx_tcp_ops, NULL, 1},
#ifdef RMX_HAVE_VERBS
  {"rdma", &rmx_verbs_ops, NULL, 0},
#else
  {"rdma", NULL, "rmx was built without rdma-core", 0},
#endif
};

int rmx__tp_lookup(const char *scheme, int *slot, const char **why)
{
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

int rmx__tp_auto(int slots[RMX_TP_COUNT])
{
  int n = 0;
  for (int rank = 0; rank < RMX_TP_COUNT; rank++)
    for (int i = 0; i < RMX_TP_COUNT; i++)
      if (registry[i].ops && registry[i].auto_rank == rank)
        slots[n++] = i;
  return n;
}

const rmx_tp_ops_t *rmx__tp_ops(int slot) { return registry[slot].ops; }
