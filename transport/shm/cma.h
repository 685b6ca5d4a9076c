/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One copy between two processes on one host: process_vm_readv and
 * process_vm_writev (Linux "cross-memory attach", CMA) move bytes from a
 * gather list here straight to a list in the peer, or back, with one copy
 * done by the kernel in the caller's context. The shared-memory transport
 * uses it for large messages and one-sided reads and writes where the
 * kernel allows it, and the segment (seg.h) otherwise.
 *
 * The kernel allows it when the caller may ptrace the peer (mm_access with
 * PTRACE_MODE_ATTACH_REALCREDS): same real uid and gid, the peer dumpable,
 * and Yama's ptrace_scope 0, or 1 with the caller an ancestor; or the
 * caller has CAP_SYS_PTRACE. A seccomp filter may refuse the calls anyway.
 * Each direction is decided apart (the rule is not symmetric), so each side
 * probes its peer at set-up: a side advertises the address of 16 or more
 * random bytes (rmx__shm_cma_probe_init) and its pid, the peer reads them
 * with rmx__shm_cma_probe and compares. Random bytes, not a constant, so
 * that a pid reused by another process (even another copy of the same
 * program, with the bytes at the same address) or a pid that names another
 * process here than in the peer's pid namespace reads as "no".
 *
 * Nothing here widens who may read this process's memory: rmx never calls
 * prctl(PR_SET_PTRACER) or PR_SET_DUMPABLE. docs/architecture.md,
 * "Shared memory: one copy (CMA)"; docs/security.md.
 */
#ifndef RMX_SHM_CMA_H
#define RMX_SHM_CMA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Which way rmx__shm_cma_copy moves the bytes. */
#define RMX_SHM_CMA_READ 0  /* from the peer's list into ours */
#define RMX_SHM_CMA_WRITE 1 /* from our list into the peer's */

#define RMX_SHM_CMA_PROBE_LEN 32 /* the bytes rmx__shm_cma_probe_init makes */
#define RMX_SHM_CMA_PROBE_MIN 16 /* the fewest a probe may check */
#define RMX_SHM_CMA_PROBE_MAX 64 /* the most a probe reads */

/* Move every byte between local[0..nlocal) here and remote[0..nremote) in
 * process pid (remote's iov_base are addresses there), the way dir says.
 * The two lists must hold the same number of bytes; their elements may
 * have any boundaries, any count (past IOV_MAX too), and lengths of 0.
 * It loops over the kernel's partial results until all is moved or a call
 * fails, and sets *done (when not NULL) to the bytes moved, every one of
 * them in order from the start of both lists. Returns:
 *   0               all moved;
 *   RMX_EACCES      the kernel refused: EPERM (another user, the peer not
 *                   dumpable, Yama), EACCES, or ENOSYS (no CMA in this
 *                   kernel, or a seccomp filter): use the segment instead;
 *   RMX_EINVAL      bad arguments (dir, a count below 0, a NULL list with
 *                   elements, totals that differ or overflow, pid <= 0),
 *                   nothing moved; or an address not mapped (EFAULT), here
 *                   or in the peer, after *done bytes;
 *   RMX_ECONNRESET  the process is gone (ESRCH: no such pid, or a zombie);
 *   RMX_ENOMEM      the kernel had no memory for the call;
 *   RMX_EIO         anything else.
 * Bytes the peer changes while they move arrive as the kernel saw them. */
int rmx__shm_cma_copy(pid_t pid, int dir, const struct iovec *local, int nlocal,
                      const struct iovec *remote, int nremote, size_t *done);

/* This side's probe: bytes the peer reads to know it reaches us. */
typedef struct rmx_shm_cma_probe {
  uint8_t bytes[RMX_SHM_CMA_PROBE_LEN];
} rmx_shm_cma_probe_t;

/* Fill p with random bytes (getrandom). p must stay where it is, and
 * unchanged, while a peer may probe it: advertise its address
 * (rmx__shm_cma_probe_addr), its bytes and getpid(). 0, or RMX_EIO when
 * the kernel gives no random bytes. */
int rmx__shm_cma_probe_init(rmx_shm_cma_probe_t *p);
uint64_t rmx__shm_cma_probe_addr(const rmx_shm_cma_probe_t *p);

/* Whether one copy reaches the peer: reads len bytes (from
 * RMX_SHM_CMA_PROBE_MIN to _MAX) at addr in process pid with
 * process_vm_readv and compares them with expect, then writes the same
 * bytes back with process_vm_writev (a filter may refuse writes alone; the
 * peer's bytes do not change). 1 when both work and the bytes match; else
 * 0, with *why (when not NULL) a static sentence for the log line, such as
 * "process_vm_readv refused: Operation not permitted" or "probe bytes
 * differ: not the peer". *why is NULL on a match. A refusal that comes
 * later anyway is RMX_EACCES from rmx__shm_cma_copy. */
int rmx__shm_cma_probe(pid_t pid, uint64_t addr, size_t len, const void *expect,
                       const char **why);

#endif
