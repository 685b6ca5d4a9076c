/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One copy between two processes: process_vm_readv / process_vm_writev
 * over gather lists of any shape, and the probe that tells at set-up
 * whether the kernel lets this process reach its peer (cma.h).
 */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/random.h>
#include <sys/uio.h>

#include <rmx/rmx.h>

#include "cma.h"

/* Elements per side in one call. The kernel takes up to IOV_MAX (1024);
 * a window of 256 keeps the two copies on the stack at 8 KiB, and a call
 * per 256 elements is little next to the bytes they hold. */
#define CMA_WIN 256

/* The most bytes one call moves: under the kernel's per-call limit
 * (MAX_RW_COUNT, 2 GiB less a page), which it would otherwise apply by
 * cutting the call short, and a bound on how long one call runs. */
#define CMA_CALL_MAX ((size_t)1 << 30)

/* Where a walk over one list stands: element i, off bytes into it. */
typedef struct cma_cur {
  const struct iovec *v;
  int n, i;
  size_t off;
} cma_cur_t;

/* The next elements from c into w (at most CMA_WIN) holding at most cap
 * bytes, the first cut to start at c->off and the last cut to fit; empty
 * elements are left out. Returns the bytes in w, its count in *nw. */
static size_t cur_window(const cma_cur_t *c, struct iovec *w, int *nw, size_t cap)
{
  size_t got = 0, off = c->off;
  int k = 0;
  for (int i = c->i; i < c->n && k < CMA_WIN && got < cap; i++, off = 0) {
    size_t len = c->v[i].iov_len - off;
    if (len == 0)
      continue;
    if (len > cap - got)
      len = cap - got;
    w[k].iov_base = (char *)c->v[i].iov_base + off;
    w[k].iov_len = len;
    got += len;
    k++;
  }
  *nw = k;
  return got;
}

/* Step c over k bytes the kernel moved. */
static void cur_advance(cma_cur_t *c, size_t k)
{
  while (c->i < c->n) {
    size_t left = c->v[c->i].iov_len - c->off;
    if (k < left) {
      c->off += k;
      return;
    }
    k -= left;
    c->i++;
    c->off = 0;
  }
}

/* The bytes in a list, or SIZE_MAX when the sum does not fit. */
static size_t list_total(const struct iovec *v, int n)
{
  size_t t = 0;
  for (int i = 0; i < n; i++) {
    if (v[i].iov_len > SIZE_MAX - 1 - t)
      return SIZE_MAX;
    t += v[i].iov_len;
  }
  return t;
}

/* The loop both public calls share: moves total bytes (both lists hold
 * exactly that many), *done counting them. Returns 0 or the errno of the
 * call that failed, so the probe can name it and the copy map it. */
static int cma_move(pid_t pid, int dir, const struct iovec *local, int nlocal,
                    const struct iovec *remote, int nremote, size_t total, size_t *done)
{
  cma_cur_t lc = {.v = local, .n = nlocal}, rc = {.v = remote, .n = nremote};
  struct iovec lw[CMA_WIN], rw[CMA_WIN];
  *done = 0;
  while (*done < total) {
    int nl, nr;
    size_t cap = total - *done < CMA_CALL_MAX ? total - *done : CMA_CALL_MAX;
    /* The kernel moves the smaller of the two windows' totals; the rest
     * goes in the next call, from where both cursors then stand. */
    cur_window(&lc, lw, &nl, cap);
    cur_window(&rc, rw, &nr, cap);
    ssize_t k;
    do
      k = dir == RMX_SHM_CMA_READ ? process_vm_readv(pid, lw, (unsigned long)nl, rw,
                                                     (unsigned long)nr, 0)
                                  : process_vm_writev(pid, lw, (unsigned long)nl, rw,
                                                      (unsigned long)nr, 0);
    while (k < 0 && errno == EINTR);
    if (k < 0)
      return errno;
    /* Both windows hold bytes, so 0 would be a kernel that moves nothing
     * and says no error: stop rather than loop for ever. */
    if (k == 0)
      return EIO;
    cur_advance(&lc, (size_t)k);
    cur_advance(&rc, (size_t)k);
    *done += (size_t)k;
  }
  return 0;
}

static int cma_err(int e)
{
  switch (e) {
  /* seccomp filters commonly answer EPERM or ENOSYS; a kernel built
   * without CONFIG_CROSS_MEMORY_ATTACH answers ENOSYS */
  case EPERM: case EACCES: case ENOSYS: return RMX_EACCES;
  case EFAULT: case EINVAL: return RMX_EINVAL;
  case ESRCH: return RMX_ECONNRESET;
  case ENOMEM: return RMX_ENOMEM;
  default: return RMX_EIO;
  }
}

int rmx__shm_cma_copy(pid_t pid, int dir, const struct iovec *local, int nlocal,
                      const struct iovec *remote, int nremote, size_t *done)
{
  size_t moved = 0;
  if (done)
    *done = 0;
  if (pid <= 0 || (dir != RMX_SHM_CMA_READ && dir != RMX_SHM_CMA_WRITE) || nlocal < 0 ||
      nremote < 0 || (nlocal > 0 && !local) || (nremote > 0 && !remote))
    return RMX_EINVAL;
  size_t total = list_total(local, nlocal);
  if (total == SIZE_MAX || total != list_total(remote, nremote))
    return RMX_EINVAL;
  int e = cma_move(pid, dir, local, nlocal, remote, nremote, total, &moved);
  if (done)
    *done = moved;
  return e ? cma_err(e) : 0;
}

int rmx__shm_cma_probe_init(rmx_shm_cma_probe_t *p)
{
  size_t got = 0;
  while (got < sizeof(p->bytes)) {
    /* Blocks only before the kernel's pool is first seeded (early boot). */
    ssize_t k = getrandom(p->bytes + got, sizeof(p->bytes) - got, 0);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return RMX_EIO;
    got += (size_t)k;
  }
  return 0;
}

uint64_t rmx__shm_cma_probe_addr(const rmx_shm_cma_probe_t *p)
{
  return (uint64_t)(uintptr_t)p->bytes;
}

/* The log line's reason for a probe that failed with errno e (wr: in the
 * write back). */
static const char *probe_why(int e, int wr)
{
  switch (e) {
  case EPERM: return wr ? "process_vm_writev refused: Operation not permitted"
                        : "process_vm_readv refused: Operation not permitted";
  case EACCES: return wr ? "process_vm_writev refused: Permission denied"
                         : "process_vm_readv refused: Permission denied";
  case ENOSYS: return wr ? "process_vm_writev refused: Function not implemented"
                         : "process_vm_readv refused: Function not implemented";
  case ESRCH: return "no such process: the peer is gone, or its pid is another namespace's";
  case EFAULT: return "probe address not mapped there: not the peer";
  case ENOMEM: return "process_vm_readv: out of memory";
  default: return "process_vm_readv failed";
  }
}

int rmx__shm_cma_probe(pid_t pid, uint64_t addr, size_t len, const void *expect,
                       const char **why)
{
  uint8_t got[RMX_SHM_CMA_PROBE_MAX];
  const char *w = NULL;
  size_t done = 0;
  if (why)
    *why = NULL;
  if (len < RMX_SHM_CMA_PROBE_MIN || len > RMX_SHM_CMA_PROBE_MAX || !expect)
    w = "probe length out of range";
  else if (pid <= 0)
    w = "no pid to probe";
#if UINTPTR_MAX < UINT64_MAX
  else if (addr > UINTPTR_MAX)
    w = "probe address out of this process's range";
#endif
  if (!w) {
    struct iovec l = {.iov_base = got, .iov_len = len};
    struct iovec r = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
    int e = cma_move(pid, RMX_SHM_CMA_READ, &l, 1, &r, 1, len, &done);
    if (e)
      w = probe_why(e, 0);
    else if (memcmp(got, expect, len) != 0)
      w = "probe bytes differ: not the peer";
    /* Then the same bytes back where they are: a filter may refuse
     * writes alone, and the peer's bytes do not change. */
    if (!w && (e = cma_move(pid, RMX_SHM_CMA_WRITE, &l, 1, &r, 1, len, &done)) != 0)
      w = probe_why(e, 1);
  }
  if (w && why)
    *why = w;
  return w == NULL;
}
