/* SPDX-License-Identifier: BSD-3-Clause */
/* The registration cache and the unmap hooks (src/mem/); included by rmx_int.h. */
#ifndef RMX_MEM_REGCACHE_H
#define RMX_MEM_REGCACHE_H

/* The registration cache: one per context, for transports whose local
 * buffers must be registered. Entries cover whole pages. */
typedef struct rmx__rc_entry {
  rmx_list_t link; /* LRU order, most recent first */
  uintptr_t start, end;
  int tpi;
  unsigned access; /* RMX_TP_ACC_* */
  uint32_t refs;
  uint8_t dead;    /* invalidated while in use: freed on the last release */
  rmx_tp_mem_t *mem;
} rmx__rc_entry_t;

typedef struct rmx__regcache {
  rmx_list_t lru;
  size_t bytes, max_bytes;
  uint32_t entries, max_entries; /* lookups scan the list: keep it short */
  int enabled;
  struct rmx__rc_pending *pending; /* invalidations from other threads */
  int registered;                  /* in the process-wide list */
  rmx_list_t global_link;
  unsigned long hooks_gen;         /* rmx__memhooks_sync when last synced */
} rmx__regcache_t;

/* The unmap hooks (mem/memhooks.c): installed once, on first use; note is
 * called with every range unmapped. 0, or RMX_ENOTSUP / RMX_EIO. */
int rmx__memhooks_install(void (*note)(const void *addr, size_t len));
/* Hook objects loaded since; a number that changes when there were any. */
unsigned long rmx__memhooks_sync(void);
/* Some object's slot could not be rewritten: its unmaps go unseen. */
int rmx__memhooks_failed(void);

int rmx__regcache_init(rmx_ctx_t *ctx);
void rmx__regcache_fini(rmx_ctx_t *ctx);
int rmx__regcache_get(rmx_ctx_t *ctx, int tpi, const void *addr, size_t len, unsigned access,
                      rmx__rc_entry_t **out);
void rmx__regcache_put(rmx_ctx_t *ctx, rmx__rc_entry_t *e);

#endif
