/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * For tests of one copy (transport/shm/cma.c): a seccomp filter that makes
 * process_vm_readv and process_vm_writev fail with EPERM, as a container
 * runtime's may; a call of another arch (or the x32 ABI) kills. Installed
 * in the calling process (and what it forks) for good. CMA_FILTER is
 * defined where the filter can be built.
 */
#ifndef RMX_TEST_CMA_FILTER_H
#define RMX_TEST_CMA_FILTER_H

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define CMA_FILTER AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define CMA_FILTER AUDIT_ARCH_AARCH64
#endif

/* 0, or -1 (no filter here, or the kernel refused it). */
static inline int cma_filter_refuse(void)
{
#ifdef CMA_FILTER
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, CMA_FILTER, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_writev, 2, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
  };
  struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return -1;
  return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
#else
  return -1;
#endif
}

#endif
