/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file rmx_stats.h
 * @brief Context statistics: counters, connections and memory.
 *
 * Included by <rmx/rmx.h>; include that, not this file.
 */
#ifndef RMX_RMX_STATS_H
#define RMX_RMX_STATS_H

#ifndef RMX_RMX_H
#error "include <rmx/rmx.h>, which includes this file"
#endif

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/** @name Context statistics                                            */
/* ------------------------------------------------------------------ */
/**@{*/

/**
 * Context counters. Fields are only ever added at the end: rmx_ctx_stats_get()
 * takes the size of the caller's structure and fills what it has room for,
 * so a program built against an older rmx.h keeps working with a newer
 * library. The memory a context holds is @c pool_bytes + @c reg_cache_bytes
 * + what the application registered (@c mem_reg_bytes) + per connection
 * state (over TCP, about 5.6 KiB of heap per idle connection;
 * docs/architecture.md, "TCP transport").
 */
typedef struct rmx_ctx_stats {
  uint64_t reg_cache_hits;      /**< transfers that reused a cached registration */
  uint64_t reg_cache_misses;    /**< transfers that registered memory */
  uint64_t reg_cache_evictions; /**< registrations dropped: unmapped, deregistered, or over the limit */
  uint64_t reg_cache_bytes;     /**< bytes registered in the cache now */
  uint64_t pool_bytes;          /**< bytes the buffer pool holds now, in use or kept for reuse
                                     (eager buffers, rendezvous destinations) */
  /* -- rmx_ctx_stats() fills the fields above; rmx_ctx_stats_get() all -- */
  uint64_t conns;         /**< connections of the context now, any state (connecting,
                               established, closing) until freed, accepted ones included */
  uint64_t mem_reg_bytes; /**< bytes the application has registered now (rmx_mem_reg(),
                               each registration counted once whatever the transports) */
  uint64_t mem_regs;      /**< registrations the application holds now */
  uint64_t tp_reg_bytes;  /**< bytes the transports registered for themselves now: over
                               RDMA the connections' receive buffers and send slot areas,
                               and the shared receive queue (RMX_SRQ); 0 over TCP */
  uint64_t tp_refused;    /**< connections the transports refused so far for lack of a
                               device or host resource: over RDMA room in the device's
                               completion queues or queue pairs (connects and accepts),
                               over TCP a file descriptor for a connect (RMX_EMFILE);
                               each also logs an error line */
  uint64_t tp_direct_bytes; /**< bytes this context took with one copy straight from a
                                 peer process on this host (shm://, process_vm_readv), so
                                 far: its own remote reads (rendezvous messages' too) and
                                 the remote writes peers made into its memory; 0
                                 where the connections use the segment for everything
                                 (docs/architecture.md, "Shared memory: one copy") */
} rmx_ctx_stats_t;

/** The size of the first rmx_ctx_stats_t (up to @c pool_bytes), which
 *  rmx_ctx_stats() fills. */
#define RMX_CTX_STATS_SIZE_V0 (5 * sizeof(uint64_t))

/** @brief Copy the context's first counters (up to @c pool_bytes: the
 *  structure before @c conns was added) into @p st; the fields after them
 *  are not written. New code calls rmx_ctx_stats_get().
 *  @param ctx  the context
 *  @param[out] st  where the counters go */
RMX_API void rmx_ctx_stats(const rmx_ctx_t *ctx, rmx_ctx_stats_t *st);

/**
 * @brief Copy the context's counters into @p st, as many whole fields as
 * @p size bytes hold: pass @c sizeof(*st). A caller built against an older
 * rmx.h gets the fields it knows; one built against a newer one than the
 * library gets the library's fields and zeros after them.
 * @param ctx  the context
 * @param[out] st  where the counters go
 * @param size  the size of the caller's structure, @c sizeof(rmx_ctx_stats_t)
 * @return 0, or @ref RMX_EINVAL when @p ctx or @p st is NULL or @p size is
 *         smaller than @ref RMX_CTX_STATS_SIZE_V0.
 */
RMX_API int rmx_ctx_stats_get(const rmx_ctx_t *ctx, rmx_ctx_stats_t *st, size_t size);
/**@}*/

#ifdef __cplusplus
}
#endif
#endif /* RMX_RMX_STATS_H */
