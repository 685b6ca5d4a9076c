/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx_device_list: the devices of every transport in this build that has
 * any, found through the registry. Needs no context.
 */
#include <stdlib.h>
#include <string.h>

#include "registry.h"

int rmx_device_list(rmx_device_info_t **out, int *n)
{
  rmx_device_info_t *all = NULL;
  int total = 0, rc = RMX_ENOTSUP;
  if (!out || !n)
    return RMX_EINVAL;
  for (int slot = 0; slot < RMX_TP_COUNT; slot++) {
    const rmx_tp_ops_t *ops = rmx__tp_ops(slot);
    rmx_device_info_t *l = NULL;
    int k = 0, r;
    if (!ops || (r = ops->devices(&l, &k)) == RMX_ENOTSUP)
      continue;
    if (r == 0 && k > 0) {
      rmx_device_info_t *grown = realloc(all, (size_t)(total + k) * sizeof(*all));
      if (grown) {
        memcpy(grown + total, l, (size_t)k * sizeof(*l));
        all = grown;
        total += k;
      } else {
        r = RMX_ENOMEM;
      }
    }
    free(l);
    if (r) {
      free(all);
      *out = NULL;
      *n = 0;
      return r;
    }
    rc = 0;
  }
  for (int i = 0; i < total; i++)
    all[i].index = i;
  *out = all;
  *n = total;
  return rc;
}

void rmx_device_list_free(rmx_device_info_t *list) { free(list); }
