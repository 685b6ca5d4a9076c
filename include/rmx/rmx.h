/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file rmx.h
 * @brief rmx: message passing over RDMA verbs, with a TCP transport that
 *        gives the same API where no RDMA device exists.
 *
 * The whole public API lives in this header.
 *
 * @section contract The callback contract
 * Every call returns 0 or a negative @c RMX_E* code. When a call that takes a
 * callback returns an error, that callback never runs. When it returns 0, the
 * callback runs exactly once, later, from the context's event loop, never
 * from inside the call, with a status: 0 on success, @ref RMX_ECANCELED when
 * the local side closed the connection first, @ref RMX_ECONNRESET (or the
 * reason the transport saw) when the connection died.
 *
 * @section threads Threads
 * A context belongs to the thread that runs its loop. The only call other
 * threads may make is rmx_ctx_post(). No locks are taken on the data path.
 *
 * @section objects Objects
 * Handles (context, listener, connection, buffer) are opaque. Every
 * connection the application receives (from rmx_connect() or an accept
 * callback) must be closed once with rmx_conn_close(); its memory is released
 * after its close callback has run. Every string rmx returns (versions,
 * error texts, transport names) is static: never NULL, valid for the life
 * of the process, never to be freed.
 */
#ifndef RMX_RMX_H
#define RMX_RMX_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Marks the functions librmx exports. */
#if defined(__GNUC__)
#define RMX_API __attribute__((visibility("default")))
#else
#define RMX_API
#endif

/** @name Version
 * The header's version. rmx_version() gives the library's, which may be
 * newer: a program built against 0.1 runs with any library of the same
 * @ref RMX_ABI_VERSION (the number in librmx.so's name).
 * @{ */
#define RMX_VERSION_MAJOR 0 /**< the header's major version */
#define RMX_VERSION_MINOR 1 /**< the header's minor version */
#define RMX_VERSION_PATCH 0 /**< the header's patch level */
/** Changes whenever a release breaks programs built against the last. */
#define RMX_ABI_VERSION 0
/** The version as one number: 0xMMmmpp. */
#define RMX_VERSION ((RMX_VERSION_MAJOR << 16) | (RMX_VERSION_MINOR << 8) | RMX_VERSION_PATCH)
/** @} */

/** @brief The library's version, as @ref RMX_VERSION encodes it.
 *  @return 0xMMmmpp of the librmx the program runs with (the header's is
 *          @ref RMX_VERSION). */
RMX_API unsigned rmx_version(void);
/** @brief The library's version as text.
 *  @return "MAJOR.MINOR.PATCH" (a static string). */
RMX_API const char *rmx_version_string(void);

/* ------------------------------------------------------------------ */
/** @name Errors                                                        */
/* ------------------------------------------------------------------ */
/**@{*/

/**
 * Error codes. Every call returns 0 or one of these, and every status a
 * callback receives is 0 or one of these. They are negative errno values,
 * plus a range of rmx's own below -4000; rmx_strerror() gives a sentence,
 * rmx_err_name() the name. docs/errors.md says what to do about each.
 */
typedef enum {
  RMX_EINVAL = -EINVAL,         /**< an argument, URI, setting or call order is wrong */
  RMX_ENOMEM = -ENOMEM,         /**< out of memory (or of a configured pool or limit) */
  RMX_EAGAIN = -EAGAIN,         /**< a limit is reached for now: try again after completions */
  RMX_EBUSY = -EBUSY,           /**< open children remain (listeners, connections, registrations) */
  RMX_EALREADY = -EALREADY,     /**< already done or in progress (a second close) */
  RMX_ECANCELED = -ECANCELED,   /**< canceled by a local close or destroy (or evicted:
                                     RMX_EVICT_IDLE) */
  RMX_ECONNRESET = -ECONNRESET, /**< the connection was lost (the peer went away) */
  RMX_ECONNREFUSED = -ECONNREFUSED, /**< the peer refused the connection (nobody
                                         listens, it is full, or it refused us) */
  RMX_ENOTCONN = -ENOTCONN,     /**< the connection is not established (yet, or any more) */
  RMX_EMSGSIZE = -EMSGSIZE,     /**< larger than max_msg_size, this side's or the peer's */
  RMX_ETIMEDOUT = -ETIMEDOUT,   /**< timed out: a connect, an RPC, or a silent peer */
  RMX_EPROTO = -EPROTO,         /**< the peer broke the protocol (malformed or forbidden frame) */
  RMX_EACCES = -EACCES,         /**< refused: authentication, or memory access the key
                                     does not allow */
  RMX_ENOTSUP = -ENOTSUP,       /**< not supported by this transport or this build */
  RMX_ENODEV = -ENODEV,         /**< no usable RDMA device (or not the one named) */
  RMX_EADDRINUSE = -EADDRINUSE, /**< the address to listen on is taken */
  RMX_EADDRNOTAVAIL = -EADDRNOTAVAIL, /**< the address is not this host's */
  RMX_EHOSTUNREACH = -EHOSTUNREACH,   /**< no route to the host */
  RMX_ENETUNREACH = -ENETUNREACH,     /**< the network (or the RDMA port) is unreachable */
  RMX_ENOENT = -ENOENT,         /**< no such entry (an unknown id) */
  RMX_EIO = -EIO,               /**< a transport or device error without a closer code */
  RMX_EMFILE = -EMFILE,         /**< out of file descriptors (RLIMIT_NOFILE, ulimit -n) */
  RMX_EINPROGRESS = -EINPROGRESS, /**< still under way (rmx_xfer_status()) */
  RMX_EVERSION = -4001,         /**< the peer speaks another rmx protocol version */
  RMX_ENORESOLVE = -4002,       /**< the host name did not resolve */
  RMX_EMEMLOCK = -4003,         /**< memory could not be pinned: the locked-memory limit
                                     (ulimit -l) is too low */
  RMX_EUNKNOWN = -4004,         /**< an error rmx cannot name */
  RMX_ENOHANDLER = -4005,       /**< the peer has no RPC handler for that id */
} rmx_err_t;

/** @brief Human-readable message for an error code.
 *  @param err  0 or a negative @c RMX_E* code (any other value is allowed)
 *  @return a sentence without a newline (a static string): "success" for 0,
 *          "unknown error" for a value that is no @c RMX_E* code. */
RMX_API const char *rmx_strerror(int err);
/** @brief Symbolic name of an error code.
 *  @param err  0 or a negative @c RMX_E* code (any other value is allowed)
 *  @return the name, e.g. "RMX_ECONNRESET" (a static string); "RMX_OK" for
 *          0, "RMX_EUNKNOWN" for a value that is no @c RMX_E* code. */
RMX_API const char *rmx_err_name(int err);
/**@}*/

/* ------------------------------------------------------------------ */
/** @name Handles and callbacks                                         */
/* ------------------------------------------------------------------ */
/**@{*/
typedef struct rmx_ctx rmx_ctx_t;           /**< A context: one per thread. */
typedef struct rmx_listener rmx_listener_t; /**< A listening endpoint. */
typedef struct rmx_conn rmx_conn_t;         /**< A connection. */
typedef struct rmx_buf rmx_buf_t;           /**< A registered pool buffer. */
struct uv_loop_s;

/** @brief An incoming connection is established. Set its callbacks here. */
typedef void (*rmx_accept_cb)(rmx_listener_t *l, rmx_conn_t *c, void *arg);
/** @brief rmx_connect() finished: status 0, or why it failed. */
typedef void (*rmx_connect_cb)(rmx_conn_t *c, int status, void *arg);
/** @brief A message arrived. @p data is valid only during the callback
 *  (copy what you keep; builds with RMX_SCRIBBLE overwrite it afterwards). */
typedef void (*rmx_recv_cb)(rmx_conn_t *c, const void *data, size_t len, void *arg);
/**
 * @brief The connection went down without a local rmx_conn_close():
 * status 0 when the peer closed it on purpose, else the reason (for example
 * @ref RMX_ECONNRESET, @ref RMX_EPROTO, or @ref RMX_ETIMEDOUT when the peer
 * was silent, or held back credits, for rmx_config_t::keepalive_timeout_ms;
 * @ref RMX_ECANCELED when a full listener evicted it, rmx_config_t::evict_idle).
 * Every operation outstanding on it has already completed with an error.
 * The application still calls rmx_conn_close(), unless the connection
 * reconnects (rmx_connect_opts_t). docs/reliability.md lists each fault.
 */
typedef void (*rmx_disconnect_cb)(rmx_conn_t *c, int status, void *arg);
/** @brief A send completed: the data may be reused (0), or it failed. */
typedef void (*rmx_send_cb)(rmx_conn_t *c, int status, void *arg);
/** @brief The connection is closed; its handle is invalid after this returns. */
typedef void (*rmx_close_cb)(rmx_conn_t *c, void *arg);
/** @brief A function run on the context's thread by rmx_ctx_post(). */
typedef void (*rmx_post_fn)(void *arg);

/**
 * @brief A peer's rmx_write_imm() landed: @p len bytes are in place and
 * @p imm is its 32-bit value. In order with messages on the connection.
 */
typedef void (*rmx_imm_cb)(rmx_conn_t *c, uint32_t imm, size_t len, void *arg);

/** Per-connection event callbacks; see rmx_conn_set_cbs(). */
typedef struct rmx_conn_cbs {
  rmx_recv_cb on_recv;             /**< messages; NULL drops them (logged) */
  rmx_disconnect_cb on_disconnect; /**< peer loss; may be NULL */
  rmx_imm_cb on_imm;               /**< write-with-immediate; NULL drops them */
  rmx_recv_cb on_notify; /**< a transfer's notification (rmx_xfer_post()), once its
                              bytes are in place; NULL: kept for rmx_notify_take() */
} rmx_conn_cbs_t;
/**@}*/

/* ------------------------------------------------------------------ */
/** @name Configuration and context                                     */
/* ------------------------------------------------------------------ */
/**@{*/

#include <rmx/rmx_config.h> /* rmx_config_t, logging */

/**
 * @brief Create a context.
 * @param[out] ctx  the new context
 * @param loop      a libuv loop to live in, or NULL for a private one
 * @param cfg       configuration, or NULL for rmx_config_init()'s
 * @return 0, @ref RMX_EINVAL (bad configuration), @ref RMX_ENOMEM,
 *         @ref RMX_ENOTSUP (an auth_secret is set but rmx was built without
 *         libsodium: it never runs unauthenticated instead)
 */
RMX_API int rmx_ctx_create(rmx_ctx_t **ctx, struct uv_loop_s *loop, const rmx_config_t *cfg);

/** @brief Run the private loop until rmx_ctx_stop() or nothing is left to do.
 *  With RMX_PROGRESS=event it sleeps in the loop between events. With
 *  RMX_PROGRESS=poll it spins on the fast path of rmx_ctx_progress(),
 *  turning the loop (timers, connection events, posts) once every few
 *  hundred passes; adaptive spins the same way and sleeps in the loop once
 *  RMX_SPIN_US has passed without a completion.
 *  @param ctx  a context created with loop NULL
 *  @return 0 (if a callback called rmx_ctx_destroy(), the context is gone);
 *          @ref RMX_EINVAL if @p ctx is NULL, on the caller's loop, or running. */
RMX_API int rmx_ctx_run(rmx_ctx_t *ctx);
/** @brief Make rmx_ctx_run() (or uv_run() on the caller's loop) return
 *  after the current loop iteration or fast-path pass.
 *  @param ctx  the context; from its own thread */
RMX_API void rmx_ctx_stop(rmx_ctx_t *ctx);

/**
 * @name Polling, and driving a context from another event loop
 * rmx_ctx_progress() is the call an application spins on to poll (as UCX's
 * ucp_worker_progress): each call asks every transport for what is ready
 * (verbs polls its CQs, TCP reads the connection that last had input),
 * runs the callbacks, and hands what they and the application posted to
 * the device or socket (one doorbell or write per connection), with no
 * turn of libuv's loop. RMX_PROGRESS=poll is for it: the loop (timers,
 * connection set-up, rmx_ctx_post()) then turns inside the call once every
 * few hundred calls; in event and adaptive progress, on every call.
 *
 * For programs whose loop is not libuv (epoll, Python's asyncio): a context
 * with a private loop (loop NULL) hands out one file descriptor. Wait until
 * it is readable or rmx_ctx_timeout() has passed, call rmx_ctx_progress(),
 * repeat (or block in rmx_ctx_wait()). They belong to the thread that made
 * the context, as every call but rmx_ctx_post(). On the caller's libuv loop,
 * call rmx_ctx_progress() from its own code and keep turning that loop.
 * docs/tuning.md, "Spinning on rmx_ctx_progress", has the loop.
 * @{
 */
/** @brief The descriptor to wait on for readability (libuv's backend fd).
 *  @param ctx  a context created with loop NULL
 *  @return the fd, the context's for its whole life (do not read or close
 *          it), or @ref RMX_EINVAL if @p ctx is NULL or on the caller's loop. */
RMX_API int rmx_ctx_fd(rmx_ctx_t *ctx);
/** @brief How long to wait on rmx_ctx_fd() at most before calling
 *  rmx_ctx_progress() anyway; ask before each wait (idle: -1 or rmx's next timer).
 *  @param ctx  a context created with loop NULL
 *  @return ms: 0 means at once, -1 only when the fd is readable (no timer
 *          is due); @ref RMX_EINVAL (-22): @p ctx NULL or on the caller's loop. */
RMX_API int rmx_ctx_timeout(rmx_ctx_t *ctx);
/** @brief Handle what is ready and run the callbacks that are due, without
 *        blocking: the polling fast path (see above).
 * @param ctx  the context (a private loop, or the caller's)
 * @return how many completions and frames it handled, or, if more, how many
 *         of rmx's callbacks it ran (a lookup answered from the cache, a timer,
 *         what the loop's turn found): nonzero whenever a callback of the
 *         application's ran (0: nothing was ready; after many zeros a caller
 *         may wait on rmx_ctx_fd() for rmx_ctx_timeout());
 *         @ref RMX_ECANCELED when a callback it ran called rmx_ctx_destroy():
 *         on a private loop the destroy has then finished and the context is
 *         gone, on the caller's loop it finishes as that loop runs;
 *         @ref RMX_EINVAL if @p ctx is NULL, in a callback or in rmx_ctx_run(). */
RMX_API int rmx_ctx_progress(rmx_ctx_t *ctx);
/** @brief Hand what was posted since the last progress to the socket or device now
 *  (a write or doorbell per connection; on_sent of the sends that ended runs),
 *  polling nothing and turning no loop: after sends, before sleeping on the fd.
 *  @param ctx  as for rmx_ctx_progress()  @return 0, or as rmx_ctx_progress(). */
RMX_API int rmx_ctx_flush(rmx_ctx_t *ctx);
/** @brief rmx_ctx_progress(), but when nothing is ready, first sleep in the private
 *  loop until something is or rmx's next timer is due (as rmx_ctx_run() waits):
 *  the blocking call for a caller with nothing else to wait for.
 *  @param ctx  a context created with loop NULL  @return as rmx_ctx_progress(). */
RMX_API int rmx_ctx_wait(rmx_ctx_t *ctx);
/** @} */

/**
 * @brief Destroy a context.
 *
 * Every listener, connection and registration (rmx_mem_reg) must have been
 * closed or released first. Closes still in flight finish, each within the
 * close timeout (RMX_CLOSE_TIMEOUT_MS), and every callback still owed runs
 * exactly once; RPC requests whose handlers never answered end with the
 * context (their rmx_rpc_req_t handles become invalid). Destroy never runs
 * the caller's loop:
 * - private loop, called outside rmx_ctx_run(): it runs that loop until
 *   everything is closed, then frees the context before returning;
 * - private loop, called from a callback: rmx_ctx_run() finishes the job
 *   and returns; if the application runs the private loop itself
 *   (uv_run on rmx_ctx_loop()), destroy from a callback is refused with
 *   @ref RMX_EBUSY; call it once uv_run has returned;
 * - the caller's loop: it returns at once; the remaining callbacks
 *   (on_closed) run as the caller keeps running the loop, and the context
 *   frees itself when its last handle closes (uv_run then returns if
 *   nothing else is active on the loop).
 * In every case the context must not be used after the call.
 * @param ctx  the context; NULL gives @ref RMX_EINVAL
 * @return 0, @ref RMX_EBUSY while a listener, connection, registration or
 *         metadata handle (until its on_closed) is open, @ref RMX_EALREADY
 *         when destruction already began.
 */
RMX_API int rmx_ctx_destroy(rmx_ctx_t *ctx);
/**
 * @brief Run @p fn(@p arg) on the context's thread; the only call safe from any thread.
 *
 * Posts run in order, from the loop, never inside this call. From the start
 * of rmx_ctx_destroy() it returns RMX_ECANCELED, and a poster stops there for
 * good; posts accepted before run exactly once. The context stays valid until
 * freed: as rmx_ctx_destroy() returns (private loop), as rmx_ctx_run() or
 * rmx_ctx_progress() returns (destroyed from a callback), at its last handle's
 * close (caller's loop); a thread that may call after that must be joined first.
 * @param ctx  the context; it must still exist (not freed) at the call
 * @param fn   what to run; not NULL
 * @param arg  passed to @p fn
 * @return 0 (@p fn runs once), @ref RMX_EINVAL, @ref RMX_ENOMEM, @ref RMX_ECANCELED.
 */
RMX_API int rmx_ctx_post(rmx_ctx_t *ctx, rmx_post_fn fn, void *arg);
/** @brief The libuv loop the context runs in.
 *  @param ctx  the context
 *  @return the loop given to rmx_ctx_create(), or the context's own. */
RMX_API struct uv_loop_s *rmx_ctx_loop(rmx_ctx_t *ctx);
/**@}*/

#include <rmx/rmx_devices.h> /* RDMA devices, transports available here */

/* ------------------------------------------------------------------ */
/** @name Connections                                                   */
/* ------------------------------------------------------------------ */
/**@{*/

/**
 * @brief Listen for connections.
 *
 * URIs: @c tcp://host[:port], @c rdma://host[:port], @c auto://host[:port]
 * (RDMA when a usable device serves the address, else TCP). IPv6 literals
 * go in brackets. Without a port, the port is 7471, rmx's default; port 0
 * picks a free port: see rmx_listener_uri(). The host resolves in the call
 * (a name listens on its first address), and the address is bound in the
 * call: where another socket or listener holds the port, it fails with
 * @ref RMX_EADDRINUSE and the log says so, and on any error no listener is
 * left. A TCP listener on @c [::] takes IPv4 peers too; a port whose last
 * connections are closing (TIME_WAIT) can be listened on again at once.
 * @code
 * rmx_listener_t *l;
 * int rc = rmx_listen(ctx, "tcp://0.0.0.0:7471", on_accept, NULL, &l);
 * @endcode
 * @param ctx  the context the listener and its connections belong to
 * @param uri  where to listen, as above; read during the call only
 * @param on_accept  runs from the loop for each connection established
 *        (handshake and authentication done); not NULL. The connection is
 *        the application's then: set its callbacks, close it once.
 * @param arg  passed to @p on_accept
 * @param[out] l  the listener, on 0; rmx_listener_close() it before
 *        rmx_ctx_destroy()
 * @return 0, @ref RMX_EINVAL (a NULL argument, or a bad URI: the log says
 *         which part), @ref RMX_ENORESOLVE, @ref RMX_EADDRINUSE (the port
 *         is taken), @ref RMX_EADDRNOTAVAIL, @ref RMX_ENOTSUP (scheme unavailable
 *         here), @ref RMX_ENODEV (no usable RDMA device), @ref RMX_ENOMEM
 */
RMX_API int rmx_listen(rmx_ctx_t *ctx, const char *uri, rmx_accept_cb on_accept,
                       void *arg, rmx_listener_t **l);

/** @brief The URI the listener is bound to, with the real port, e.g.
 *  "tcp://127.0.0.1:40123" (scheme "tcp" or "rdma", also on auto://).
 *  @param l  an open listener
 *  @param[out] buf  where the NUL-terminated URI goes
 *  @param len  bytes at @p buf (128 is always enough)
 *  @return 0, @ref RMX_EINVAL when @p len is too small (@p buf holds a
 *          truncated string), or the transport's error reading the address. */
RMX_API int rmx_listener_uri(rmx_listener_t *l, char *buf, size_t len);
/** @brief Stop accepting. Established connections stay open; those still in
 *  their handshake are refused. The handle is invalid after the call.
 *  @param l  the listener; NULL, or one already closed, is ignored */
RMX_API void rmx_listener_close(rmx_listener_t *l);

/**
 * @brief Open a connection. The host name resolves asynchronously.
 * @param ctx  the context it belongs to
 * @param uri  "tcp://HOST[:PORT]", "rdma://HOST[:PORT]" or "auto://HOST[:PORT]"
 *        (RDMA where a device serves the route, else TCP); IPv6 in brackets;
 *        without a port, 7471 (rmx's default)
 * @param arg  passed to @p on_connected only (rmx_conn_set_cbs() sets the rest's)
 * @param on_connected  runs once, from the loop, never inside this call: 0, or
 *        @ref RMX_ECONNREFUSED, @ref RMX_ETIMEDOUT, @ref RMX_ENORESOLVE,
 *        @ref RMX_EVERSION, @ref RMX_EPROTO, @ref RMX_EACCES (peer
 *        authentication failed: another secret, or only one side has one;
 *        see rmx_config_t::auth_secret), @ref RMX_ECANCELED (closed first), ...
 * @param[out] c  the connection, on 0 (not yet established); close it with
 *        rmx_conn_close() whatever the outcome
 * @return 0, @ref RMX_EINVAL (a NULL argument, or a bad URI: the log says
 *         which part), @ref RMX_ENOTSUP, @ref RMX_ENODEV, @ref RMX_ENOMEM
 */
RMX_API int rmx_connect(rmx_ctx_t *ctx, const char *uri, rmx_connect_cb on_connected,
                        void *arg, rmx_conn_t **c);

/**
 * @brief A reconnect attempt ended (see rmx_connect_opts_t): @p status 0,
 * the connection carries traffic again; otherwise attempt @p attempt (1, 2,
 * ...) failed and the next follows after the backoff, unless @p attempt was
 * the last allowed: then the connection stays down until rmx_conn_close().
 */
typedef void (*rmx_reconnect_cb)(rmx_conn_t *c, unsigned attempt, int status, void *arg);

/**
 * Options of rmx_connect_opts(). Zero-fill, then set @c size to
 * sizeof(rmx_connect_opts_t) (fields are only ever appended).
 *
 * Reconnect: after an established connection is lost (on_disconnect with
 * status != 0, or 0 when the peer closed on purpose), the same handle
 * connects again to the same URI after a delay that doubles from
 * @c reconnect_min_ms up to @c reconnect_max_ms (each delay drawn between
 * half and all of it, so many clients do not retry in step). Everything
 * outstanding at the loss has failed first with the loss's status: such an
 * operation may or may not have reached the peer, and rmx never sends it
 * again. Until @c on_reconnect reports 0, sends and calls return
 * @ref RMX_ENOTCONN. The peer may be a new process: remote keys it packed
 * before are void, and it knows none of ours; exchange keys again after
 * the reconnect (docs/reliability.md). rmx_conn_close() stops retrying.
 * A first connect that fails is reported by on_connected and not retried.
 */
typedef struct rmx_connect_opts {
  uint32_t size;              /**< sizeof(rmx_connect_opts_t) */
  uint32_t reconnect_min_ms;  /**< first delay; 0: never reconnect */
  uint32_t reconnect_max_ms;  /**< largest delay (at least reconnect_min_ms) */
  uint32_t reconnect_tries;   /**< attempts per loss; 0: no limit */
  rmx_reconnect_cb on_reconnect; /**< each attempt's end; may be NULL */
} rmx_connect_opts_t;

/**
 * @brief rmx_connect() with options.
 * @param ctx  as rmx_connect()
 * @param uri  as rmx_connect()
 * @param opts  read during the call; NULL: none (exactly rmx_connect())
 * @param on_connected  the first connect's outcome only (as rmx_connect())
 * @param arg  passed to @p on_connected and @c on_reconnect
 * @param[out] c  as rmx_connect()
 * @return as rmx_connect(); @ref RMX_EINVAL also for an @c opts->size too
 *         small or @c reconnect_max_ms below a nonzero @c reconnect_min_ms
 */
RMX_API int rmx_connect_opts(rmx_ctx_t *ctx, const char *uri, const rmx_connect_opts_t *opts,
                             rmx_connect_cb on_connected, void *arg, rmx_conn_t **c);

/** @brief Set the event callbacks and their argument (in @c on_accept or
 *  @c on_connected at the latest; again at any time, for the next event).
 *  @param c  the connection
 *  @param cbs  the callbacks; copied
 *  @param arg  passed to each of them (not to @c on_connected) */
RMX_API void rmx_conn_set_cbs(rmx_conn_t *c, const rmx_conn_cbs_t *cbs, void *arg);
/**
 * @brief Close a connection. Messages sent before the close that the
 * credits cover are delivered before the peer sees the close; messages
 * still waiting for credits, and other operations still pending, complete
 * with @ref RMX_ECANCELED. If the peer does not let the close finish
 * (it stops reading), the connection is cut after RMX_CLOSE_TIMEOUT_MS and
 * what is outstanding fails. @p on_closed runs after every other callback
 * of this connection, and only once every RPC request its handlers received
 * has been answered (rmx_rpc_reply() after the close returns
 * @ref RMX_ENOTCONN and releases the request) or the context is destroyed.
 * Keys unpacked on it may be released (rmx_rkey_release()) before or after.
 * @param c  the connection (also one that failed or went down)
 * @param on_closed  runs once, from the loop, when the connection is gone;
 *        may be NULL. @p c is invalid after it (when NULL: after this call).
 * @param arg  passed to @p on_closed
 * @return 0, @ref RMX_EINVAL (@p c NULL), @ref RMX_EALREADY (already closing).
 */
RMX_API int rmx_conn_close(rmx_conn_t *c, rmx_close_cb on_closed, void *arg);

/** @brief Name of the transport carrying the connection.
 *  @param c  the connection, until its @c on_closed has run
 *  @return "tcp" or "rdma" (for auto://, the one chosen): a static string,
 *          still valid after the connection is gone. */
RMX_API const char *rmx_conn_transport(const rmx_conn_t *c);

struct sockaddr_storage; /* <sys/socket.h> */

/**
 * @brief The peer's address of a connection: IP address and port, as the
 * transport sees them (TCP: the socket's peer; RDMA: rdma_cm's destination).
 *
 * Valid from the moment the connection is handed over (@c on_connected
 * with 0, or @c on_accept) until the handle is freed (after @c on_closed):
 * still readable in @c on_disconnect and after the loss, so it can name
 * the peer in a log. A reconnect (rmx_connect_opts()) updates it when it
 * succeeds.
 * @param c    the connection
 * @param[out] out  filled with a @c sockaddr_in or @c sockaddr_in6 (look
 *        at @c ss_family); untouched on error. The caller's memory.
 * @return 0; @ref RMX_ENOTCONN when the connection never became
 *         established (still connecting, or the connect failed);
 *         @ref RMX_EINVAL when @p c or @p out is NULL.
 */
RMX_API int rmx_conn_peer_addr(const rmx_conn_t *c, struct sockaddr_storage *out);

/**
 * @brief This side's address of a connection: the local IP address and
 * port it uses (TCP: the socket's name; an accepted connection shows the
 * listener's port; RDMA: rdma_cm's source address).
 *
 * Valid over the same span as rmx_conn_peer_addr().
 * @param c    the connection
 * @param[out] out  filled with a @c sockaddr_in or @c sockaddr_in6;
 *        untouched on error. The caller's memory.
 * @return 0; @ref RMX_ENOTCONN when the connection never became
 *         established; @ref RMX_ENOTSUP when its transport cannot tell;
 *         @ref RMX_EINVAL when @p c or @p out is NULL.
 */
RMX_API int rmx_conn_local_addr(const rmx_conn_t *c, struct sockaddr_storage *out);

/** Per-connection counters. */
typedef struct rmx_conn_stats {
  uint64_t msgs_sent;      /**< messages whose send completed successfully */
  uint64_t bytes_sent;     /**< their payload bytes */
  uint64_t msgs_recv;      /**< messages delivered to on_recv */
  uint64_t bytes_recv;     /**< their payload bytes */
  uint64_t eager_sent;     /**< messages sent in one frame */
  uint64_t rndv_sent;      /**< messages sent by rendezvous (remote read) */
  uint64_t credit_stalls;  /**< times a send waited for credits */
  uint64_t credit_frames;  /**< explicit credit-return frames sent */
  uint64_t errors;         /**< operations completed with an error */
} rmx_conn_stats_t;

/** @brief Copy the connection's counters into @p st.
 *  @param c  the connection, until its @c on_closed has run
 *  @param[out] st  where the counters go */
RMX_API void rmx_conn_stats(const rmx_conn_t *c, rmx_conn_stats_t *st);
/**@}*/

/* ------------------------------------------------------------------ */
/** @name Messages                                                      */
/* ------------------------------------------------------------------ */
/**@{*/

/**
 * @brief The eager limit every connection has at least: a message of up to
 * this many bytes is always copied before rmx_send() returns, whatever
 * either side's eager size (every peer offers receive buffers of at least
 * 256 bytes, 8 of them for the frame header).
 */
#define RMX_EAGER_MSG_MIN 248

/**
 * @brief Send a message of 0 .. max_msg_size bytes. Order is kept per
 * connection.
 *
 * Small messages are copied into a registered buffer before the call
 * returns (always those of up to @ref RMX_EAGER_MSG_MIN bytes). Large ones
 * (above the eager size: the smaller side's @c eager_size - 8) go zero-copy
 * by rendezvous: the peer reads them from @p data, which must stay valid and
 * unchanged until @p on_sent runs.
 * @param c  an established connection
 * @param data  the message (NULL when @p len is 0); the caller's memory
 * @param len  bytes, at most the smaller of the two sides' max_msg_size
 * @param on_sent  runs once, from the loop: 0 when @p data may be reused (not
 *        that the peer has it), or why the send failed; may be NULL
 * @param arg  passed to @p on_sent
 * @return 0, @ref RMX_EMSGSIZE, @ref RMX_ENOTCONN (not established, or
 *         closing), @ref RMX_EINVAL (@p c NULL, or @p data NULL with a
 *         length), @ref RMX_ENOMEM, @ref RMX_EMEMLOCK (a pool slab or the
 *         rendezvous source could not be registered: the connection stays)
 */
RMX_API int rmx_send(rmx_conn_t *c, const void *data, size_t len, rmx_send_cb on_sent,
                     void *arg);

/**
 * @brief Take a registered buffer of at least @p size bytes from the pool,
 * to build a message in place and send it with rmx_send_buf() (no copy).
 * @param ctx  the context whose pool gives it (for its connections only)
 * @param size  bytes wanted (0 allowed), at most max_msg_size
 * @param[out] b  the buffer, on 0: the caller's until rmx_send_buf(),
 *        rmx_rpc_reply_buf() or rmx_buf_put(); invalid once the context is
 *        destroyed
 * @return 0, @ref RMX_EINVAL (@p ctx or @p b NULL), @ref RMX_EMSGSIZE (over
 *         max_msg_size), @ref RMX_ENOMEM, @ref RMX_EMEMLOCK (its slab could
 *         not be registered)
 */
RMX_API int rmx_buf_get(rmx_ctx_t *ctx, size_t size, rmx_buf_t **b);
/** @brief Where to write the message.
 *  @param b  a buffer from rmx_buf_get(), still the caller's
 *  @return its first byte (rmx_buf_size() bytes, until sent or put back). */
RMX_API void *rmx_buf_data(rmx_buf_t *b);
/** @brief How many bytes rmx_buf_data() holds.
 *  @param b  a buffer from rmx_buf_get()
 *  @return its capacity: at least the size asked for, often more. */
RMX_API size_t rmx_buf_size(const rmx_buf_t *b);
/** @brief Return a buffer that will not be sent.
 *  @param b  a buffer still the caller's (invalid afterwards), or NULL */
RMX_API void rmx_buf_put(rmx_buf_t *b);

/** @brief Send the first @p len bytes of a pool buffer, without copying. On 0 the
 *  buffer is rmx's and goes back to the pool after @p on_sent; on error, still the caller's.
 * @param c  an established connection of the buffer's context
 * @param b  a buffer from rmx_buf_get(), still the caller's
 * @param len  bytes of it to send, at most rmx_buf_size()
 * @param on_sent  as rmx_send()  @param arg  passed to @p on_sent
 * @return as rmx_send(); @ref RMX_EINVAL also when @p b is NULL or too small. */
RMX_API int rmx_send_buf(rmx_conn_t *c, rmx_buf_t *b, size_t len, rmx_send_cb on_sent,
                         void *arg);
/**@}*/

#include <rmx/rmx_ops.h>   /* one-sided RDMA and RPC */
#include <rmx/rmx_xfer.h>  /* transfer requests, notifications, memory by name */
#include <rmx/rmx_stats.h> /* rmx_ctx_stats */
#include <rmx/rmx_group.h> /* one address, several contexts */
#include <rmx/rmx_meta.h>  /* the metadata service (etcd) */

#ifdef __cplusplus
}
#endif
#endif /* RMX_RMX_H */
