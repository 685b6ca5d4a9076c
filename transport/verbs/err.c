/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Errors at the verbs transport's edge: errno values from libibverbs and
 * librdmacm, and work completion statuses, become RMX_E* codes here and
 * nowhere else.
 */
#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "verbs.h"

int rmx__vb_err_from_errno(int e)
{
  switch (e) {
  case ENOMEM: return RMX_ENOMEM;
  case EADDRINUSE: return RMX_EADDRINUSE;
  case EADDRNOTAVAIL: return RMX_EADDRNOTAVAIL;
  case ENODEV: case ENXIO: return RMX_ENODEV;
  case ECONNREFUSED: return RMX_ECONNREFUSED;
  case ETIMEDOUT: return RMX_ETIMEDOUT;
  case EINVAL: return RMX_EINVAL;
  case EACCES: case EPERM: return RMX_EACCES;
  case ENETUNREACH: return RMX_ENETUNREACH;
  case EHOSTUNREACH: return RMX_EHOSTUNREACH;
  case EAGAIN: return RMX_EAGAIN;
  default: return RMX_EIO;
  }
}

/* The RC local ACK timeout is 4.096 us * 2^t: the smallest t (1..31) at
 * least ms long, so the configured bound is never undercut. */
uint8_t rmx__vb_ack_timeout_exp(uint32_t ms)
{
  uint64_t want_ns = (uint64_t)ms * 1000000u;
  for (uint8_t t = 1; t < 31; t++)
    if ((4096ull << t) >= want_ns)
      return t;
  return 31;
}

/* ibv_reg_mr failed: say whether the locked-memory limit is why. */
int rmx__vb_reg_err(struct rmx_tp *tp, size_t len, int e)
{
  struct rlimit rl;
  if ((e == ENOMEM || e == EPERM || e == EAGAIN) && getrlimit(RLIMIT_MEMLOCK, &rl) == 0 &&
      rl.rlim_cur != RLIM_INFINITY) {
    RMX_TP_LOG(tp->env, ERROR, "rdma: cannot register %zu bytes: the locked-memory limit is %llu "
            "KiB; raise it (ulimit -l unlimited, or memlock in /etc/security/limits.conf)",
            len, (unsigned long long)rl.rlim_cur / 1024);
    return RMX_EMEMLOCK;
  }
  RMX_TP_LOG(tp->env, ERROR, "rdma: cannot register %zu bytes: %s", len, strerror(e));
  return rmx__vb_err_from_errno(e);
}

int rmx__vb_wc_status(enum ibv_wc_status s)
{
  switch (s) {
  case IBV_WC_SUCCESS: return 0;
  case IBV_WC_WR_FLUSH_ERR: return RMX_ECANCELED;
  case IBV_WC_REM_ACCESS_ERR:
  case IBV_WC_LOC_ACCESS_ERR:
  case IBV_WC_LOC_PROT_ERR: return RMX_EACCES;
  /* Resent rc_retry times at rc_timeout_ms with no answer: the peer, its
   * host or the path to it is gone. */
  case IBV_WC_RETRY_EXC_ERR: return RMX_ETIMEDOUT;
  case IBV_WC_RNR_RETRY_EXC_ERR: return RMX_ECONNRESET;
  case IBV_WC_LOC_LEN_ERR:
  case IBV_WC_REM_INV_REQ_ERR:
  case IBV_WC_REM_OP_ERR: return RMX_EPROTO;
  default: return RMX_EIO;
  }
}
