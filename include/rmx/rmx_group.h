/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file rmx_group.h
 * @brief Listener groups: one listening address served by several
 * contexts, one per thread.
 *
 * Included by <rmx/rmx.h>; include that, not this file.
 *
 * A server on every core runs one context per thread. rmx_group_open()
 * binds the address once; each thread then joins with its own context
 * (rmx_listen_group()). Every new peer is handed to exactly one member,
 * in turn, and its connection belongs to that context and thread from
 * then on, as with rmx_listen(). A member leaves with
 * rmx_listener_close(): peers handed to it that it had not taken yet go
 * to the other members (or wait for one to join), so a context can leave
 * and be destroyed while the group goes on listening without losing a
 * peer. See examples/percore.c and docs/scaling.md.
 * @code
 * rmx_group_t *g;
 * rmx_group_open("tcp://0.0.0.0:7471", &g);   // main thread
 * // on each worker thread, with its own context:
 * rmx_listen_group(ctx, g, on_accept, NULL, &l);
 * @endcode
 */
#ifndef RMX_RMX_GROUP_H
#define RMX_RMX_GROUP_H

#ifndef RMX_RMX_H
#error "include <rmx/rmx.h>, which includes this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/** @name Listener groups                                               */
/* ------------------------------------------------------------------ */
/**@{*/

typedef struct rmx_group rmx_group_t; /**< One listening address for several contexts. */

/**
 * @brief Bind and listen on @p uri for a group of contexts.
 *
 * Peers wait in the system's backlog until a member joins. Thread-safe:
 * the group may be used from any thread. As with rmx_listen(), the
 * address is bound in the call: a port another socket or listener holds
 * fails with @ref RMX_EADDRINUSE (logged unless RMX_LOG=none).
 * @param uri  @c tcp://host[:port], @c rdma://host[:port] or @c shm://PATH,
 *        @c shm://\@NAME (not auto://); port 0 picks a free port
 *        (rmx_group_uri())
 * @param[out] g  the group, on 0
 * @return 0, @ref RMX_EINVAL (a NULL argument or a bad URI),
 *         @ref RMX_ENORESOLVE, @ref RMX_EADDRINUSE, @ref RMX_EADDRNOTAVAIL,
 *         @ref RMX_ENOTSUP (the scheme is unavailable here, or auto://),
 *         @ref RMX_ENODEV, @ref RMX_ENOMEM
 */
RMX_API int rmx_group_open(const char *uri, rmx_group_t **g);

/** @brief The URI the group is bound to, with the real port.
 *  @param g  the group
 *  @param[out] buf  where the NUL-terminated URI goes
 *  @param len  bytes at @p buf (128 is always enough)
 *  @return 0, or @ref RMX_EINVAL when @p len is too small */
RMX_API int rmx_group_uri(rmx_group_t *g, char *buf, size_t len);

/**
 * @brief Join the group: @p ctx serves its share of the group's peers.
 *
 * Call on the thread that runs @p ctx. The listener behaves as one of
 * rmx_listen() (its limits are @p ctx's), except that rmx_listener_uri()
 * gives the group's address. rmx_listener_close() leaves the group.
 * @param ctx  the member context (one listener per group at most)
 * @param g  an open group, of a transport @p ctx can use
 * @param on_accept  as for rmx_listen()
 * @param arg  passed to @p on_accept
 * @param[out] l  the member's listener, on 0
 * @return 0, @ref RMX_EINVAL, @ref RMX_EALREADY (@p ctx is already a
 *         member), @ref RMX_ENOTSUP, @ref RMX_ENODEV, @ref RMX_ENOMEM
 */
RMX_API int rmx_listen_group(rmx_ctx_t *ctx, rmx_group_t *g, rmx_accept_cb on_accept,
                             void *arg, rmx_listener_t **l);

/** @brief Release the application's handle. The address stays open while
 *  any member listens, and closes with the last; peers no member took are
 *  then refused. Any thread.
 *  @param g  the group; NULL is ignored */
RMX_API void rmx_group_close(rmx_group_t *g);
/**@}*/

#ifdef __cplusplus
}
#endif
#endif /* RMX_RMX_GROUP_H */
