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
 * after its close callback has run.
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

/** @brief The library's version, as @ref RMX_VERSION encodes it. */
RMX_API unsigned rmx_version(void);
/** @brief The library's version as text, "MAJOR.MINOR.PATCH". */
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
  RMX_EBUSY = -EBUSY,           /**< the object still has open children (listeners,
                                     connections, registrations) */
  RMX_EALREADY = -EALREADY,     /**< already done or in progress (a second close) */
  RMX_ECANCELED = -ECANCELED,   /**< canceled by a local close or destroy */
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
  RMX_EVERSION = -4001,         /**< the peer speaks another rmx protocol version */
  RMX_ENORESOLVE = -4002,       /**< the host name did not resolve */
  RMX_EMEMLOCK = -4003,         /**< memory could not be pinned: the locked-memory limit
                                     (ulimit -l) is too low */
  RMX_EUNKNOWN = -4004,         /**< an error rmx cannot name */
  RMX_ENOHANDLER = -4005,       /**< the peer has no RPC handler for that id */
} rmx_err_t;

/** @brief Human-readable message for an error code (never NULL). */
RMX_API const char *rmx_strerror(int err);
/** @brief Symbolic name of an error code, e.g. "RMX_ECONNRESET" (never NULL). */
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
 * was silent, or held back credits, for rmx_config_t::keepalive_timeout_ms).
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
 *  @return 0, or @ref RMX_EINVAL for a context on the caller's loop. */
RMX_API int rmx_ctx_run(rmx_ctx_t *ctx);

/** @brief Make rmx_ctx_run() return after the current loop iteration. */
RMX_API void rmx_ctx_stop(rmx_ctx_t *ctx);

/**
 * @name Driving a context from another event loop
 * For programs whose loop is not libuv (epoll, poll, Python's asyncio): a
 * context with a private loop (created with loop NULL) hands out one file
 * descriptor. Wait until it is readable, or until rmx_ctx_timeout() has
 * passed, then call rmx_ctx_progress(); repeat. All three belong to the
 * thread that created the context, like every rmx call but rmx_ctx_post().
 * @{
 */
/** @brief The descriptor to wait on for readability (libuv's backend fd).
 *  @return the fd, or @ref RMX_EINVAL for a context on the caller's loop. */
RMX_API int rmx_ctx_fd(rmx_ctx_t *ctx);
/** @brief How long to wait on rmx_ctx_fd() at most before calling
 *  rmx_ctx_progress() anyway, in ms: 0 means at once, -1 means only when
 *  the fd is readable (no timer is due). */
RMX_API int rmx_ctx_timeout(rmx_ctx_t *ctx);
/**
 * @brief Run every callback that is due, without blocking.
 * @return 0; 1 when a callback it ran called rmx_ctx_destroy(), which has
 *         then finished: the context is gone; @ref RMX_EINVAL for a
 *         context on the caller's loop, or when called from a callback or
 *         inside rmx_ctx_run().
 */
RMX_API int rmx_ctx_progress(rmx_ctx_t *ctx);
/** @} */

/**
 * @brief Destroy a context.
 *
 * Every listener, connection and registration (rmx_mem_reg) must have been
 * closed or released first. Closes still
 * in flight finish, each within the close timeout (RMX_CLOSE_TIMEOUT_MS),
 * and every callback still owed runs exactly once; RPC requests whose
 * handlers never answered end with the context (their rmx_rpc_req_t
 * handles become invalid). Destroy never runs the caller's loop:
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
 * @return 0, @ref RMX_EBUSY while a listener, connection or registration is open,
 *         @ref RMX_EALREADY when destruction already began.
 */
RMX_API int rmx_ctx_destroy(rmx_ctx_t *ctx);

/**
 * @brief Run @p fn(@p arg) on the context's thread. The only call that is
 *        safe from any thread.
 * @return 0, @ref RMX_ENOMEM, @ref RMX_ECANCELED once destruction began.
 */
RMX_API int rmx_ctx_post(rmx_ctx_t *ctx, rmx_post_fn fn, void *arg);

/** @brief The libuv loop the context runs in. */
RMX_API struct uv_loop_s *rmx_ctx_loop(rmx_ctx_t *ctx);
/**@}*/

/* ------------------------------------------------------------------ */
/** @name RDMA devices                                                  */
/* ------------------------------------------------------------------ */
/**@{*/

/** One port of an RDMA device. */
typedef struct rmx_port_info {
  uint8_t num;         /**< port number, from 1 */
  uint8_t active;      /**< 1 when the port is active: connections can use it */
  char state[16];      /**< "active", "down", "init", "armed", "active_defer" (else "other") */
  char link_layer[16]; /**< "ethernet" (RoCE) or "infiniband" */
  uint32_t mtu;        /**< the active MTU in bytes (0 when unknown) */
} rmx_port_info_t;

/** Ports described per device at most. */
#define RMX_DEV_MAX_PORTS 4

/** One RDMA device of the host, as rmx_device_list() finds it. */
typedef struct rmx_device_info {
  char name[64];        /**< e.g. "mlx5_0", "rxe0"; @c RMX_DEVICE takes it */
  uint64_t guid;        /**< node GUID in host byte order; @c RMX_DEVICE takes it as 16 hex
                             digits (printf "%016" PRIx64) */
  int index;            /**< its position in the list */
  int nports;           /**< entries of @c ports filled: the first RMX_DEV_MAX_PORTS ports that
                             could be queried */
  rmx_port_info_t ports[RMX_DEV_MAX_PORTS]; /**< its ports, from port 1 */
  uint32_t max_inline;  /**< bytes a queue pair of rmx sends inline on it (small frames from
                             unregistered memory); 0 if unknown */
  uint64_t max_mr_size; /**< largest memory registration in bytes; 0 when the device could not
                             be opened (only name, guid and index are filled in then) */
  int atomics;          /**< 1 when the device has 8-byte atomics (rmx_atomic_fadd(),
                             rmx_atomic_cswap()) */
} rmx_device_info_t;

/**
 * @brief Whether a URI scheme ("tcp", "rdma") can be used in this process.
 * @param scheme  the scheme, without "://"
 * @param[out] why  when it cannot: a sentence saying why (rdma-core not
 *        installed, rmx built without it), valid for the process's life;
 *        may be NULL
 * @return 0, @ref RMX_ENOTSUP (known scheme, not available here), or
 *         @ref RMX_EINVAL (no transport has that scheme)
 */
RMX_API int rmx_transport_available(const char *scheme, const char **why);

/**
 * @brief List the host's RDMA devices with their ports. Needs no context;
 * may block briefly while it opens each device.
 * @param[out] out  a malloc'ed array of @p *n devices (NULL when there is
 *                  none): free it with rmx_device_list_free()
 * @param[out] n    how many
 * @return 0 (@p *n = 0 when the host has no RDMA device, or its kernel no
 *         RDMA support), @ref RMX_ENOTSUP (no transport in this build lists
 *         devices: rmx was built without rdma-core), @ref RMX_ENOMEM,
 *         @ref RMX_EINVAL (@p out or @p n is NULL)
 */
RMX_API int rmx_device_list(rmx_device_info_t **out, int *n);

/** @brief Free what rmx_device_list() returned; NULL is fine. */
RMX_API void rmx_device_list_free(rmx_device_info_t *list);
/**@}*/

/* ------------------------------------------------------------------ */
/** @name Connections                                                   */
/* ------------------------------------------------------------------ */
/**@{*/

/**
 * @brief Listen for connections.
 *
 * URIs: @c tcp://host:port, @c rdma://host:port, @c auto://host:port (RDMA
 * when a usable device serves the address, else TCP). IPv6 literals go in
 * brackets. Port 0 picks a free port: see rmx_listener_uri().
 * @code
 * rmx_listener_t *l;
 * int rc = rmx_listen(ctx, "tcp://0.0.0.0:7471", on_accept, NULL, &l);
 * @endcode
 * @return 0, @ref RMX_EINVAL (bad URI), @ref RMX_ENORESOLVE,
 *         @ref RMX_EADDRINUSE, @ref RMX_ENOTSUP (scheme unavailable here),
 *         @ref RMX_ENODEV, @ref RMX_ENOMEM
 */
RMX_API int rmx_listen(rmx_ctx_t *ctx, const char *uri, rmx_accept_cb on_accept,
                       void *arg, rmx_listener_t **l);

/** @brief The URI the listener is bound to, with the real port.
 *  @return 0, or @ref RMX_EINVAL when @p len is too small. */
RMX_API int rmx_listener_uri(rmx_listener_t *l, char *buf, size_t len);

/** @brief Stop accepting. Established connections stay open. The handle is
 *  invalid after the call. */
RMX_API void rmx_listener_close(rmx_listener_t *l);

/**
 * @brief Open a connection. The host name resolves asynchronously.
 * @param ctx  the context it belongs to
 * @param uri  "tcp://HOST:PORT", "rdma://HOST:PORT" or "auto://HOST:PORT"
 *        (RDMA where a device serves the route, else TCP); IPv6 in brackets
 * @param arg  passed to @p on_connected (rmx_conn_set_cbs() sets the
 *        argument of the other callbacks)
 * @param on_connected  runs once, from the loop, never inside this call: 0, or @ref RMX_ECONNREFUSED,
 *        @ref RMX_ETIMEDOUT, @ref RMX_ENORESOLVE, @ref RMX_EVERSION,
 *        @ref RMX_EPROTO, @ref RMX_EACCES (peer authentication failed:
 *        another secret, or only one side has one; see
 *        rmx_config_t::auth_secret), @ref RMX_ECANCELED (closed first), ...
 * @param[out] c  the connection; close it with rmx_conn_close() whatever the
 *        outcome.
 * @return 0, @ref RMX_EINVAL (bad URI), @ref RMX_ENOTSUP, @ref RMX_ENOMEM
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

/** @brief rmx_connect() with options (@p opts may be NULL: none). */
RMX_API int rmx_connect_opts(rmx_ctx_t *ctx, const char *uri, const rmx_connect_opts_t *opts,
                             rmx_connect_cb on_connected, void *arg, rmx_conn_t **c);

/** @brief Set the event callbacks and their argument. */
RMX_API void rmx_conn_set_cbs(rmx_conn_t *c, const rmx_conn_cbs_t *cbs, void *arg);

/**
 * @brief Close a connection. Operations still pending complete with
 * @ref RMX_ECANCELED; messages already handed to the transport are delivered
 * before the peer sees the close. If the peer does not let the close finish
 * (it stops reading), the connection is cut after RMX_CLOSE_TIMEOUT_MS and
 * what is outstanding fails. @p on_closed runs after every other callback
 * of this connection, and only once every RPC request its handlers received
 * has been answered (rmx_rpc_reply() after the close returns
 * @ref RMX_ENOTCONN and releases the request) or the context is destroyed.
 * @return 0, or @ref RMX_EALREADY when already closing.
 */
RMX_API int rmx_conn_close(rmx_conn_t *c, rmx_close_cb on_closed, void *arg);

/** @brief Name of the transport carrying the connection: "tcp" or "rdma". */
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

/** @brief Copy the connection's counters into @p st. */
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
 * (above the eager size) go zero-copy by rendezvous: the peer reads them
 * from @p data, which must stay valid and unchanged until @p on_sent runs.
 * @return 0, @ref RMX_EMSGSIZE, @ref RMX_ENOTCONN, @ref RMX_EINVAL,
 *         @ref RMX_ENOMEM, @ref RMX_EMEMLOCK (a new pool slab could not be
 *         registered: the message is refused, the connection stays)
 */
RMX_API int rmx_send(rmx_conn_t *c, const void *data, size_t len, rmx_send_cb on_sent,
                     void *arg);

/**
 * @brief Take a registered buffer of at least @p size bytes from the pool,
 * to build a message in place and send it with rmx_send_buf() (no copy).
 * @return 0, @ref RMX_EMSGSIZE (over max_msg_size), @ref RMX_ENOMEM,
 *         @ref RMX_EMEMLOCK (its slab could not be registered)
 */
RMX_API int rmx_buf_get(rmx_ctx_t *ctx, size_t size, rmx_buf_t **b);
/** @brief Where to write the message. */
RMX_API void *rmx_buf_data(rmx_buf_t *b);
/** @brief How many bytes rmx_buf_data() holds. */
RMX_API size_t rmx_buf_size(const rmx_buf_t *b);
/** @brief Return a buffer that will not be sent. */
RMX_API void rmx_buf_put(rmx_buf_t *b);

/**
 * @brief Send the first @p len bytes of a pool buffer, without copying.
 * On 0 the buffer belongs to rmx and returns to the pool after @p on_sent;
 * on error it still belongs to the caller.
 * @return as rmx_send(), plus @ref RMX_EINVAL when @p len exceeds the buffer.
 */
RMX_API int rmx_send_buf(rmx_conn_t *c, rmx_buf_t *b, size_t len, rmx_send_cb on_sent,
                         void *arg);
/**@}*/

#include <rmx/rmx_ops.h> /* one-sided RDMA and RPC */

/* ------------------------------------------------------------------ */
/** @name Context statistics                                            */
/* ------------------------------------------------------------------ */
/**@{*/

/** Context counters. */
typedef struct rmx_ctx_stats {
  uint64_t reg_cache_hits;      /**< transfers that reused a cached registration */
  uint64_t reg_cache_misses;    /**< transfers that registered memory */
  uint64_t reg_cache_evictions; /**< registrations dropped: unmapped, deregistered, or over the limit */
  uint64_t reg_cache_bytes;     /**< bytes registered in the cache now */
  uint64_t pool_bytes;          /**< bytes the buffer pool holds now, in use or kept for reuse
                                     (eager buffers, rendezvous destinations) */
} rmx_ctx_stats_t;

/** @brief Copy the context's counters into @p st. */
RMX_API void rmx_ctx_stats(const rmx_ctx_t *ctx, rmx_ctx_stats_t *st);
/**@}*/

#ifdef __cplusplus
}
#endif
#endif /* RMX_RMX_H */
