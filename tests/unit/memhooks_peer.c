/* SPDX-License-Identifier: BSD-3-Clause */
/* A library test_memhooks loads after the hooks are in: its own munmap
 * call goes through its own relocation. */
#include <stddef.h>
#include <sys/mman.h>

int peer_unmap(void *p, size_t len);
int peer_unmap(void *p, size_t len) { return munmap(p, len); }
