/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file rmx_meta.h
 * @brief The metadata service: agent names to URIs, and memory published
 * by name, kept in etcd under a lease so that a dead agent's entries go.
 *
 * Included by <rmx/rmx.h>; include that, not this file. docs/metadata.md
 * explains the model and the keys with a complete program.
 *
 * An agent opens a handle on an etcd endpoint with rmx_meta_open(): that
 * grants a lease of @c ttl_s seconds, which the handle keeps alive from
 * the context's loop. What the agent writes (rmx_meta_set_uri(),
 * rmx_meta_publish()) is attached to that lease: it goes at
 * rmx_meta_close(), or when the process dies and the lease runs out (a
 * live agent whose lease ran out, cut off from etcd, gets a new one and
 * writes its entries again: docs/metadata.md). Any
 * handle reads any agent's entries (rmx_meta_resolve(), rmx_meta_find())
 * and watches them come and go (rmx_meta_watch()). Entries carry no key
 * material: a peer gets a key over a connection with rmx_mem_lookup().
 *
 * The handle speaks etcd's v3 JSON gateway over HTTP (libcurl). Without
 * the service nothing else changes: connections, messages and lookups
 * over a connection need none of it. A build without libcurl or json-c
 * answers rmx_meta_open() with @ref RMX_ENOTSUP.
 *
 * Every call that takes a callback follows rmx.h's contract: on 0 the
 * callback runs exactly once, later, from the context's loop, never from
 * inside the call; on an error it never runs.
 */
#ifndef RMX_RMX_META_H
#define RMX_RMX_META_H

#ifndef RMX_RMX_H
#error "include <rmx/rmx.h>, which includes this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/** @name Metadata service                                              */
/* ------------------------------------------------------------------ */
/**@{*/

typedef struct rmx_meta rmx_meta_t;             /**< A handle on the service. */
typedef struct rmx_meta_watch rmx_meta_watch_t; /**< A watch on entries. */

/** Longest agent name, terminating NUL included. */
#define RMX_META_AGENT_MAX 64

/** What a watch callback reports. */
typedef enum rmx_meta_event {
  RMX_META_READY = 0,  /**< the watch is in place: later changes are all reported */
  RMX_META_PUT = 1,    /**< an entry was written (new, or changed) */
  RMX_META_DELETE = 2, /**< an entry went: withdrawn, its agent closed, or its lease ran out */
  RMX_META_END = 3,    /**< the watch ended; the last call, with a status */
} rmx_meta_event_t;

/**
 * @brief A request on the service ended.
 * @param m  the handle
 * @param status  0, or the error (rmx_meta_open() lists them)
 * @param arg  the caller's
 */
typedef void (*rmx_meta_cb)(rmx_meta_t *m, int status, void *arg);

/**
 * @brief rmx_meta_resolve() ended.
 * @param m  the handle
 * @param status  0, @ref RMX_ENOENT (no such agent, or its lease ran out), or
 *        the error
 * @param uri  on 0 the agent's URI, valid during the callback; else NULL
 * @param arg  the caller's
 */
typedef void (*rmx_meta_resolve_cb)(rmx_meta_t *m, int status, const char *uri, void *arg);

/**
 * @brief rmx_meta_find() ended.
 * @param m  the handle
 * @param status  0, @ref RMX_ENOENT (not published, or its agent is gone),
 *        @ref RMX_EPROTO (the entry is not one rmx wrote), or the error
 * @param len  on 0 the registration's length in bytes
 * @param access  on 0 its rights, an OR of @c RMX_MEM_*
 * @param arg  the caller's
 */
typedef void (*rmx_meta_find_cb)(rmx_meta_t *m, int status, uint64_t len, unsigned access,
                                 void *arg);

/**
 * @brief Something happened on a watch (rmx_meta_watch()).
 * @param w  the watch
 * @param kind  a @ref rmx_meta_event_t
 * @param status  0, except at @ref RMX_META_END, which gets @ref RMX_ECANCELED after
 *        rmx_meta_unwatch() or rmx_meta_close(), else why the stream broke
 * @param agent  with @ref RMX_META_PUT and @ref RMX_META_DELETE, the agent
 *        the entry belongs to; else NULL; valid during the callback
 * @param name  with @ref RMX_META_PUT and @ref RMX_META_DELETE, the memory's
 *        name, or NULL where the entry is the agent's URI; valid during
 *        the callback
 * @param arg  the caller's
 */
typedef void (*rmx_meta_watch_cb)(rmx_meta_watch_t *w, int kind, int status, const char *agent,
                                  const char *name, void *arg);

/**
 * @brief Open a handle on the etcd at @p endpoint as agent @p agent: grant
 * a lease of @p ttl_s seconds and keep it alive every third of it, from
 * the context's loop. Entries of other agents may be read at once; this
 * agent's may be written once @p on_open reported 0.
 * @param ctx  the context whose loop runs the handle
 * @param endpoint  etcd's client URL, "http://HOST:PORT"; copied
 * @param prefix  where the entries live, e.g. "/rmx/" (NULL: "/rmx/");
 *        every agent that shares entries uses the same; copied
 * @param agent  this agent's name: 1 .. @ref RMX_META_AGENT_MAX - 1 bytes
 *        of printable ASCII without spaces or '/'; copied
 * @param ttl_s  the lease, 2 .. 3600 seconds: how long an agent's entries
 *        outlive it when it dies without rmx_meta_close()
 * @param on_open  runs exactly once, from the loop: 0 (the lease is
 *        granted), @ref RMX_ECONNREFUSED or @ref RMX_EHOSTUNREACH (etcd
 *        unreachable: the log names the endpoint), @ref RMX_ETIMEDOUT,
 *        @ref RMX_ENORESOLVE, @ref RMX_EPROTO (the answer was not etcd's),
 *        @ref RMX_EIO, @ref RMX_ECANCELED (closed first); may be NULL
 * @param arg  passed to @p on_open
 * @param[out] m  the handle, on 0; close it with rmx_meta_close() whatever
 *        the outcome, before rmx_ctx_destroy() (which refuses with
 *        @ref RMX_EBUSY until it has closed)
 * @return 0, @ref RMX_EINVAL (a NULL argument, a bad endpoint, prefix,
 *         agent or TTL), @ref RMX_ENOTSUP (rmx was built without libcurl
 *         or json-c), @ref RMX_ENOMEM
 */
RMX_API int rmx_meta_open(rmx_ctx_t *ctx, const char *endpoint, const char *prefix,
                          const char *agent, unsigned ttl_s, rmx_meta_cb on_open, void *arg,
                          rmx_meta_t **m);

/**
 * @brief Close a handle: every request in flight ends with
 * @ref RMX_ECANCELED and every watch with @ref RMX_META_END, then the lease
 * is revoked, so this agent's entries go at once, then @p on_closed runs.
 * @param m  a handle, not closed yet
 * @param on_closed  runs exactly once, from the loop, after every other
 *        callback of the handle: 0, or why the lease could not be revoked
 *        (its entries then stay until it runs out); the handle is invalid
 *        once it returns; may be NULL
 * @param arg  passed to @p on_closed
 * @return 0, @ref RMX_EINVAL (@p m NULL), @ref RMX_EALREADY (closing)
 */
RMX_API int rmx_meta_close(rmx_meta_t *m, rmx_meta_cb on_closed, void *arg);

/**
 * @brief Say where this agent is reached: a peer's rmx_meta_resolve() of
 * its name gives @p uri, until the lease ends.
 * @param m  an open handle
 * @param uri  what rmx_listener_uri() gave, for instance; copied
 * @param cb  runs exactly once, from the loop: 0 or the error; may be NULL
 * @param arg  passed to @p cb
 * @return 0, @ref RMX_EINVAL (a NULL argument), @ref RMX_ENOTCONN (the
 *         lease is not granted yet, or ran out and no new one is granted
 *         yet), @ref RMX_EALREADY (closing),
 *         @ref RMX_ENOMEM
 */
RMX_API int rmx_meta_set_uri(rmx_meta_t *m, const char *uri, rmx_meta_cb cb, void *arg);

/**
 * @brief Look up the URI agent @p agent set.
 * @param m  a handle (its lease need not be granted yet)
 * @param agent  an agent name; copied
 * @param cb  runs exactly once, from the loop; not NULL
 * @param arg  passed to @p cb
 * @return 0, @ref RMX_EINVAL (a NULL argument, a bad agent name),
 *         @ref RMX_EALREADY (closing), @ref RMX_ENOMEM
 */
RMX_API int rmx_meta_resolve(rmx_meta_t *m, const char *agent, rmx_meta_resolve_cb cb,
                             void *arg);

/**
 * @brief Advertise registration @p mem as @p name of this agent: its length
 * and rights, no key. Publish it in the context as well (rmx_mem_publish())
 * for peers to get a key over a connection. A second publish of a name
 * replaces the first.
 * @param m  an open handle
 * @param name  as rmx_mem_publish(): 1 .. @ref RMX_NAME_MAX - 1 bytes of
 *        printable ASCII ('/' allowed); copied
 * @param mem  a registration of @p m's context
 * @param cb  runs exactly once, from the loop: 0 or the error; may be NULL
 * @param arg  passed to @p cb
 * @return 0, @ref RMX_EINVAL (a NULL argument, a bad name, a registration
 *         of another context), @ref RMX_ENOTCONN (no lease),
 *         @ref RMX_EALREADY (closing), @ref RMX_ENOMEM
 */
RMX_API int rmx_meta_publish(rmx_meta_t *m, const char *name, rmx_mem_t *mem, rmx_meta_cb cb,
                             void *arg);

/**
 * @brief Withdraw this agent's name @p name: watches see
 * @ref RMX_META_DELETE.
 * @param m  an open handle
 * @param name  as rmx_meta_publish(); copied
 * @param cb  runs exactly once, from the loop: 0, @ref RMX_ENOENT (not
 *        published), or the error; may be NULL
 * @param arg  passed to @p cb
 * @return as rmx_meta_publish()
 */
RMX_API int rmx_meta_withdraw(rmx_meta_t *m, const char *name, rmx_meta_cb cb, void *arg);

/**
 * @brief Look up what agent @p agent published as @p name.
 * @param m  a handle (its lease need not be granted yet)
 * @param agent  an agent name; copied
 * @param name  a name; copied
 * @param cb  runs exactly once, from the loop; not NULL
 * @param arg  passed to @p cb
 * @return 0, @ref RMX_EINVAL (a NULL argument, a bad agent or name),
 *         @ref RMX_EALREADY (closing), @ref RMX_ENOMEM
 */
RMX_API int rmx_meta_find(rmx_meta_t *m, const char *agent, const char *name,
                          rmx_meta_find_cb cb, void *arg);

/**
 * @brief Watch the entries of agent @p agent, or of every agent: the URIs
 * set and the memory published, withdrawn, or gone with its lease.
 * @p cb runs with @ref RMX_META_READY once the watch is in place, then
 * with @ref RMX_META_PUT or @ref RMX_META_DELETE for each change after
 * that, in etcd's order, and last, exactly once, with @ref RMX_META_END.
 * @param m  a handle
 * @param agent  an agent name, or NULL for all; copied
 * @param cb  runs from the loop, as above; not NULL
 * @param arg  passed to @p cb
 * @param[out] w  the watch, on 0; valid until its @ref RMX_META_END call
 *        returns
 * @return 0, @ref RMX_EINVAL (a NULL argument, a bad agent name),
 *         @ref RMX_EALREADY (closing), @ref RMX_ENOMEM
 */
RMX_API int rmx_meta_watch(rmx_meta_t *m, const char *agent, rmx_meta_watch_cb cb, void *arg,
                           rmx_meta_watch_t **w);

/**
 * @brief End a watch: its callback runs once more, from the loop, with
 * @ref RMX_META_END and @ref RMX_ECANCELED, unless its end is already due.
 * @param w  a watch whose @ref RMX_META_END call has not run
 * @return 0, @ref RMX_EINVAL (NULL), @ref RMX_EALREADY (ending already)
 */
RMX_API int rmx_meta_unwatch(rmx_meta_watch_t *w);
/**@}*/

#ifdef __cplusplus
}
#endif
#endif /* RMX_RMX_META_H */
