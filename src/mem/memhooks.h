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

/* Take (hold) and let go (release) the lock the hooks' installation and
 * rmx__memhooks_sync take, around fork (regcache.c's atfork handlers);
 * in the child, release_child starts it afresh. */
void rmx__memhooks_hold(void);
void rmx__memhooks_release(void);
void rmx__memhooks_release_child(void);

#endif
