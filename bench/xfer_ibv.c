/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-xfer reg --verbs: ibv_reg_mr and ibv_dereg_mr of the same memory as
 * rmx_mem_reg, in a protection domain of the first device, for comparison.
 * The one file of bench/ that speaks verbs (tests/unit/check_layers.py
 * allows it); built with rdma-core where the verbs transport is.
 */
#include "perf_clock.h"
#include "xfer.h"
#if defined(RMX_XFER_VERBS)
#include <infiniband/verbs.h>

static struct ibv_context *vctx;
static struct ibv_pd *vpd;

int xfer_ibv_open(void)
{
  int n = 0;
  struct ibv_device **l = ibv_get_device_list(&n);
  if (l && n > 0 && (vctx = ibv_open_device(l[0])) != NULL)
    vpd = ibv_alloc_pd(vctx);
  if (l)
    ibv_free_device_list(l);
  return vpd ? 0 : -1;
}

void xfer_ibv_cost(void *p, size_t len, double ns_per_tick, double *reg, double *dereg)
{
  uint64_t t0 = perf_ticks();
  struct ibv_mr *mr = ibv_reg_mr(vpd, p, len, IBV_ACCESS_LOCAL_WRITE |
                                 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
  *reg = (double)(perf_ticks() - t0) * ns_per_tick / 1e6;
  if (!mr) {
    *reg = *dereg = -1;
    return;
  }
  t0 = perf_ticks();
  ibv_dereg_mr(mr);
  *dereg = (double)(perf_ticks() - t0) * ns_per_tick / 1e6;
}

void xfer_ibv_close(void)
{
  if (vpd)
    ibv_dealloc_pd(vpd);
  if (vctx)
    ibv_close_device(vctx);
  vpd = NULL;
  vctx = NULL;
}
#else
int xfer_ibv_open(void) { return -1; }

void xfer_ibv_cost(void *p, size_t len, double ns_per_tick, double *reg, double *dereg)
{
  *reg = *dereg = -1;
}

void xfer_ibv_close(void) {}
#endif
