/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file rmx_ops.h
 * @brief One-sided RDMA and RPC: the part of rmx's API past messages.
 *
 * Included by <rmx/rmx.h>; include that, not this file.
 */
#ifndef RMX_RMX_OPS_H
#define RMX_RMX_OPS_H

#ifndef RMX_RMX_H
#error "include <rmx/rmx.h>, which includes this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/** @name One-sided RDMA                                                */
/* ------------------------------------------------------------------ */
/**@{*/

typedef struct rmx_mem rmx_mem_t;   /**< A memory registration. */
typedef struct rmx_rkey rmx_rkey_t; /**< A peer's memory, unpacked on a connection. */

/** Access rights of a registration. Nothing is remotely accessible unless
 *  asked for. */
enum {
  RMX_MEM_LOCAL = 1,         /**< local source or destination of operations */
  RMX_MEM_REMOTE_READ = 2,   /**< peers may read it */
  RMX_MEM_REMOTE_WRITE = 4,  /**< peers may write it */
  RMX_MEM_REMOTE_ATOMIC = 8, /**< peers may run atomics on it */
};

/** Bytes a packed remote key may take: size buffers for rmx_mem_pack(). */
#define RMX_RKEY_MAX 64

/**
 * @brief Register @p len bytes at @p addr with the transports in use.
 * The memory must stay mapped until rmx_mem_dereg(). With remote rights,
 * any peer of the context holding the packed key may use it, on any
 * connection, until then (docs/security.md).
 * @return 0, @ref RMX_EINVAL, @ref RMX_ENOMEM, @ref RMX_EMEMLOCK (the
 *         locked-memory limit is too low), @ref RMX_ENODEV
 */
RMX_API int rmx_mem_reg(rmx_ctx_t *ctx, void *addr, size_t len, unsigned access,
                        rmx_mem_t **m);

/** @brief Release a registration. Peers holding its key get
 *  @ref RMX_EACCES from then on, and rmx never touches the memory again
 *  after this returns, so it may be freed at once. A peer's remote access
 *  in progress on it fails: over TCP a read not yet started or a write
 *  still arriving gets @ref RMX_EACCES; a read whose data is already queued
 *  on the socket, and any access on RDMA (the device's remote access
 *  error), ends that peer's connection. Local operations using it must
 *  have completed. */
RMX_API void rmx_mem_dereg(rmx_mem_t *m);

/**
 * @brief Pack the registration's remote key into @p blob, to send to a peer
 * in any message. Register and pack after a connection exists on each
 * transport the key is meant for.
 * @param m  a registration with remote access (rmx_mem_reg())
 * @param[out] blob  where the key goes; its bytes are the caller's to send
 * @param[in,out] len  capacity of @p blob in, bytes used out
 * @return 0, @ref RMX_EINVAL (@p len too small, or no remote access),
 *         @ref RMX_ENOTCONN (no transport in use yet)
 */
RMX_API int rmx_mem_pack(rmx_mem_t *m, void *blob, size_t *len);

/**
 * @brief Check a packed key and make it usable on connection @p c.
 * @return 0, or @ref RMX_EINVAL for a truncated, corrupt or foreign blob
 *         (one with no key for this connection's transport).
 */
RMX_API int rmx_rkey_unpack(rmx_conn_t *c, const void *blob, size_t len, rmx_rkey_t **rk);
/** @brief Bytes the remote region spans. */
RMX_API size_t rmx_rkey_size(const rmx_rkey_t *rk);
/** @brief Free an unpacked key. */
RMX_API void rmx_rkey_release(rmx_rkey_t *rk);

/** A local buffer of a scatter-gather list. @c mem may be NULL: the
 *  registration cache then provides one. */
typedef struct rmx_iov {
  void *addr;     /**< first byte; the caller's until the operation completes */
  size_t len;     /**< bytes */
  rmx_mem_t *mem; /**< a registration covering [addr, addr + len), or NULL */
} rmx_iov_t;

/** @brief A one-sided operation completed. */
typedef void (*rmx_op_cb)(rmx_conn_t *c, int status, void *arg);

/**
 * @brief Write the local buffers, back to back, at @p offset in the peer's
 * region. Any size: larger than the device allows is split.
 * @return 0, @ref RMX_EACCES (the key does not allow writing, or the range
 *         leaves the region), @ref RMX_EINVAL, @ref RMX_ENOTCONN,
 *         @ref RMX_ENOMEM
 * The callback gets 0 once the data is in place at the peer, or
 * @ref RMX_EACCES when the peer refused it (see docs/one-sided.md for what
 * that does to an RDMA connection).
 */
RMX_API int rmx_write(rmx_conn_t *c, const rmx_iov_t *iov, int iovcnt, rmx_rkey_t *rk,
                      uint64_t offset, rmx_op_cb cb, void *arg);

/** @brief Read from @p offset in the peer's region into the local buffers.
 *  Returns and completes as rmx_write(). */
RMX_API int rmx_read(rmx_conn_t *c, const rmx_iov_t *iov, int iovcnt, rmx_rkey_t *rk,
                     uint64_t offset, rmx_op_cb cb, void *arg);

/**
 * @brief rmx_write(), then the peer's on_imm(@p imm, length) runs once, in
 * order with its messages. Uses one of the peer's receive credits.
 */
RMX_API int rmx_write_imm(rmx_conn_t *c, const rmx_iov_t *iov, int iovcnt, rmx_rkey_t *rk,
                          uint64_t offset, uint32_t imm, rmx_op_cb cb, void *arg);

/**
 * @brief Atomically add @p add to the 8-byte word at @p offset (8-byte
 * aligned) in the peer's region; @p *old gets its previous value when the
 * callback reports 0. @p old must stay valid until then.
 * @return as rmx_write(), plus @ref RMX_ENOTSUP where the device has no
 *         atomics, @ref RMX_EINVAL when misaligned
 */
RMX_API int rmx_atomic_fadd(rmx_conn_t *c, rmx_rkey_t *rk, uint64_t offset, uint64_t add,
                            uint64_t *old, rmx_op_cb cb, void *arg);

/** @brief Atomically: if the word equals @p compare, store @p swap. @p *old
 *  gets the previous value either way. As rmx_atomic_fadd(). */
RMX_API int rmx_atomic_cswap(rmx_conn_t *c, rmx_rkey_t *rk, uint64_t offset, uint64_t compare,
                             uint64_t swap, uint64_t *old, rmx_op_cb cb, void *arg);

/**@}*/

/* ------------------------------------------------------------------ */
/** @name RPC                                                           */
/* ------------------------------------------------------------------ */
/**@{*/

typedef struct rmx_rpc_req rmx_rpc_req_t; /**< A request a handler must answer. */

/**
 * @brief A request arrived for this handler. @p data is valid during the
 * call. Answer exactly once, now or later, with rmx_rpc_reply(),
 * rmx_rpc_reply_buf() or rmx_rpc_reply_error(), even after the connection
 * died (the answer then just releases the request).
 */
typedef void (*rmx_rpc_handler)(rmx_rpc_req_t *req, const void *data, size_t len, void *arg);

/**
 * @brief A call ended: status 0 with the reply's bytes (valid during the
 * call), or: the handler's error, @ref RMX_ENOHANDLER (no such handler),
 * @ref RMX_EAGAIN (the server was at its limit), @ref RMX_ETIMEDOUT,
 * @ref RMX_ECANCELED (rmx_rpc_cancel, or the connection was closed
 * locally), @ref RMX_ECONNRESET (or why the connection died).
 */
typedef void (*rmx_rpc_reply_cb)(rmx_conn_t *c, int status, const void *data, size_t len,
                                 void *arg);

/**
 * @brief Serve RPC @p id in this context with @p handler.
 * @return 0, @ref RMX_EALREADY (id taken), @ref RMX_ENOMEM
 */
RMX_API int rmx_rpc_register(rmx_ctx_t *ctx, uint32_t id, rmx_rpc_handler handler, void *arg);

/**
 * @brief Call RPC @p id on the peer. Small requests are copied; large ones
 * go zero-copy: @p req must stay valid until @p on_reply runs.
 * @param c  an established connection
 * @param id  the handler's id at the peer (rmx_rpc_register())
 * @param req  the request's bytes, @p len of them (0 allowed)
 * @param len  the request's length, at most max_msg_size
 * @param timeout_ms 0: no timeout
 * @param on_reply  runs exactly once, from the loop, with the reply or the
 *        reason there is none; the reply's bytes are valid during the call
 * @param arg  passed to @p on_reply
 * @param[out] call  the call's id, for rmx_rpc_cancel(); may be NULL
 * @return 0, @ref RMX_EAGAIN (rpc_max_inflight calls outstanding),
 *         @ref RMX_EMSGSIZE, @ref RMX_ENOTCONN, @ref RMX_EINVAL, @ref RMX_ENOMEM,
 *         @ref RMX_EMEMLOCK (the request's pool slab could not be registered:
 *         this call fails, the connection stays)
 */
RMX_API int rmx_rpc_call(rmx_conn_t *c, uint32_t id, const void *req, size_t len,
                         uint32_t timeout_ms, rmx_rpc_reply_cb on_reply, void *arg,
                         uint64_t *call);

/** @brief End a call now: its on_reply gets @ref RMX_ECANCELED (later, from
 *  the loop); a reply that still comes is dropped.
 *  @return 0, or @ref RMX_ENOENT when the call already ended. */
RMX_API int rmx_rpc_cancel(rmx_conn_t *c, uint64_t call);

/** @brief Answer with @p len bytes (copied). Releases @p req.
 *  @return 0, @ref RMX_ENOTCONN (the caller is gone; still released),
 *          @ref RMX_EMSGSIZE (still released, the caller gets the error) */
RMX_API int rmx_rpc_reply(rmx_rpc_req_t *req, const void *data, size_t len);

/** @brief Answer with the first @p len bytes of a pool buffer, without a
 *  copy; the buffer belongs to rmx from then on. As rmx_rpc_reply(). */
RMX_API int rmx_rpc_reply_buf(rmx_rpc_req_t *req, rmx_buf_t *b, size_t len);

/** @brief Answer with an error: @p status is a negative RMX_E* code or an
 *  application's own negative value; the caller's on_reply gets it. */
RMX_API int rmx_rpc_reply_error(rmx_rpc_req_t *req, int status);

/** @brief The connection a request came on (for one-sided work, or to
 *  unpack keys it carries). */
RMX_API rmx_conn_t *rmx_rpc_req_conn(const rmx_rpc_req_t *req);
/**@}*/

#ifdef __cplusplus
}
#endif
#endif /* RMX_RMX_OPS_H */
