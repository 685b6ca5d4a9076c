/* SPDX-License-Identifier: BSD-3-Clause */
/* The unmap hooks' view of new mappings (memhooks.c), for regcache.c. */
#ifndef RMX_MEM_MEMHOOKS_H
#define RMX_MEM_MEMHOOKS_H

#include <stddef.h>

/* Once the hooks are installed, fn is called with every range that an
 * mmap, mmap64 or mremap through them mapped afresh (not MAP_FIXED or
 * MREMAP_FIXED): nothing that was there before remains. fn may run on any
 * thread, also inside another allocator's malloc: it must not allocate. */
void rmx__memhooks_on_map(void (*fn)(const void *addr, size_t len));

#endif
