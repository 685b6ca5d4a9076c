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

/** Most rails a connection may open over its life (rmx_rail_add()). */
#define RMX_RAILS_MAX 7

/** Bytes a packed remote key may take: size buffers for rmx_mem_pack() and
 * rmx_mem_pack_for() (a key for a connection with rails holds one for each). */
#define RMX_RKEY_MAX (24 + 16 * (RMX_RAILS_MAX + 1))

/**
 * @brief Register @p len bytes at @p addr with the transports in use.
 * The memory must stay mapped until rmx_mem_dereg(). A peer reaches the
 * memory through a key packed for it, by rmx_mem_pack_for() (that one
 * connection's peer alone) or rmx_mem_pack() (a capability: any holder, on
 * any connection of the context); docs/security.md says which to pick.
 * Until then no key of it works. With a protection domain per RDMA
 * connection (@c key_scope, RMX_KEY_SCOPE=pd, or a device without type-2
 * memory windows) the memory is registered with the device lazily, in each
 * connection's domain the first time a transfer there uses it: an error
 * registering it (@ref RMX_EMEMLOCK...) is then the transfer's.
 *
 * The memory is registered with every transport the context has opened so
 * far (by rmx_listen() or rmx_connect() with its scheme); rmx_mem_pack()
 * registers it with any opened since.
 * @param ctx  the context; the registration is released before it is
 *        destroyed (rmx_ctx_destroy() refuses with @ref RMX_EBUSY until then)
 * @param addr  the first byte: the caller's memory, which rmx never frees
 * @param len  bytes, at least 1
 * @param access  a nonzero OR of @ref RMX_MEM_LOCAL, @ref RMX_MEM_REMOTE_READ,
 *        @ref RMX_MEM_REMOTE_WRITE, @ref RMX_MEM_REMOTE_ATOMIC
 * @param[out] m  the registration, on 0; release it with rmx_mem_dereg()
 * @return 0, @ref RMX_EINVAL (a NULL argument, @p len 0, @p access 0 or
 *         with unknown bits, or a range that wraps), @ref RMX_ENOMEM,
 *         @ref RMX_EMEMLOCK (the locked-memory limit is too low), or a
 *         transport's error (@ref RMX_EIO) when the device refuses it
 */
RMX_API int rmx_mem_reg(rmx_ctx_t *ctx, void *addr, size_t len, unsigned access,
                        rmx_mem_t **m);

/** @brief Release a registration, and every key packed of it. Before this
 *  returns, every key made of it stops working, on both transports: a peer
 *  holding one gets @ref RMX_EACCES from then on, and rmx never touches the
 *  memory again, so it may be freed at once. A peer's remote access in
 *  progress on it fails: over TCP a read not yet started or a write still
 *  arriving gets @ref RMX_EACCES; a read whose data is already queued on
 *  the socket, and any access on RDMA (the device's remote access error),
 *  ends that peer's connection. Local operations using it must have
 *  completed.
 *  @param m  the registration, or NULL (nothing is done); invalid
 *            afterwards, as are the blobs rmx_mem_pack() and
 *            rmx_mem_pack_for() made of it */
RMX_API void rmx_mem_dereg(rmx_mem_t *m);

/**
 * @brief Pack a capability key to the registration into @p blob: whoever
 * holds the bytes may use them, from any connection to this context, until
 * rmx_mem_dereg(). Pick rmx_mem_pack_for() for a key only one peer may
 * use; pick this form only for memory every peer of the context may reach
 * (docs/security.md: on RDMA a capability key is the device's 32-bit key,
 * of which SoftRoCE makes only 8 bits unpredictable). With a protection
 * domain per RDMA connection (@c key_scope RMX_KEY_SCOPE_PD, or
 * RMX_KEY_SCOPE_AUTO on a device without type-2 memory windows) there are
 * no capability keys: one key cannot span domains, and this refuses with
 * @ref RMX_ENOTSUP (logged); use rmx_mem_pack_for() there. A context on
 * several RDMA devices packs the key of the first one it opened: used by
 * the peer of a connection through another device (which has a protection
 * domain per connection), it is refused like a forged key
 * (docs/one-sided.md, "Several devices").
 *
 * The blob goes to the peer in any message (docs/protocol.md, "Remote
 * keys", gives its layout). What it needs: a registration with a remote
 * right, and a transport in use: the context must have called rmx_listen()
 * or rmx_connect() with the scheme of each transport the key is meant for
 * (the listener or connection need not be established, or still open). The
 * blob holds one key per transport in use at the time of the call (the
 * memory is registered with those it lacked); pack again after a new
 * transport comes into use for a blob that covers it too.
 * @param m  a registration with remote access (rmx_mem_reg())
 * @param[out] blob  where the key goes: plain bytes, the caller's to send,
 *        copy or drop; they stay usable by peers until rmx_mem_dereg()
 * @param[in,out] len  capacity of @p blob in (@ref RMX_RKEY_MAX is always
 *        enough: 24 bytes + 16 per transport), bytes used out
 * @return 0, @ref RMX_EINVAL (a NULL argument, @p len too small, or no
 *         remote right), @ref RMX_ENOTCONN (no transport in use yet),
 *         @ref RMX_ENOMEM or @ref RMX_EMEMLOCK (registering with a new
 *         transport failed), @ref RMX_ENOTSUP (RDMA with a protection
 *         domain per connection, above)
 */
RMX_API int rmx_mem_pack(rmx_mem_t *m, void *blob, size_t *len);

/**
 * @brief Pack a key to the registration that only the peer of connection
 * @p c can use, and only on @p c: the same bytes from any other connection
 * (a replay, or a guess) are refused. On RDMA the device enforces it: a
 * memory window bound to @p c's queue pair, or, with a protection domain
 * per connection (@c key_scope; a device without type-2 windows), a
 * registration in @p c's own domain, which costs a memory registration per
 * call that makes a key; on TCP the target does.
 *
 * Packing again for the same connection gives the same key. The key works
 * until rmx_mem_revoke() for @p c, rmx_mem_dereg(), the close of @p c or
 * its loss (a reconnect needs a new key), whichever comes first. A close
 * ends it once its BYE is out (on RDMA: acknowledged by the peer's device;
 * at the latest at the close deadline, @c close_timeout_ms), not at the
 * rmx_conn_close() call: reads and writes the peer has in flight until
 * then are served, so the peer hears the close, not a refusal it would
 * take for a bad key. rmx_mem_revoke() or rmx_mem_dereg() still ends it at
 * once, also during the close. Send the blob on
 * @p c itself: on RDMA the window is bound by a request queued on @p c
 * ahead of anything sent after this call, while a key carried by another
 * path may reach the peer before the device has bound it (its access then
 * fails and ends its connection). Likewise, a revoke within microseconds of
 * packing may find the bind not yet executed; the device then fails it,
 * which ends the connection.
 * @param m  a registration with remote access (rmx_mem_reg())
 * @param c  an established connection
 * @param[out] blob  where the key goes (one entry: @p c's transport)
 * @param[in,out] len  capacity of @p blob in (@ref RMX_RKEY_MAX is always
 *        enough), bytes used out
 * @return 0, @ref RMX_EINVAL (a NULL argument, @p len too small, no remote
 *         right, or @p c of another context), @ref RMX_ENOTCONN (@p c is
 *         not established), @ref RMX_ENOMEM, @ref RMX_EMEMLOCK,
 *         @ref RMX_EIO
 */
RMX_API int rmx_mem_pack_for(rmx_mem_t *m, rmx_conn_t *c, void *blob, size_t *len);

/**
 * @brief Withdraw the key rmx_mem_pack_for() made of @p m for @p c, before
 * returning: the peer's later accesses with it are refused, as after
 * rmx_mem_dereg() (an access in progress fails the same ways). The
 * registration and its other keys stay.
 * @param m  the registration
 * @param c  the connection the key was packed for
 * @return 0, @ref RMX_EINVAL (a NULL argument), @ref RMX_ENOENT (no key
 *         of @p m for @p c: never packed, already revoked, or @p c ended
 *         or finished its close, which revoked it)
 */
RMX_API int rmx_mem_revoke(rmx_mem_t *m, rmx_conn_t *c);

/**
 * @brief Check a packed key and make it usable on connection @p c.
 * @param c  the connection to the peer that packed it (any state)
 * @param blob  the bytes rmx_mem_pack() or rmx_mem_pack_for() gave the
 *        peer; read during the call only
 * @param len  their length, exactly
 * @param[out] rk  the key, on 0: the caller's, to release with
 *        rmx_rkey_release(). It is not tied to @p c: it may be released
 *        before or after @p c closes (a key never released leaks a few
 *        bytes, nothing more), and operations copy what they need from it,
 *        so it may be released while they are in flight. From
 *        rmx_mem_pack() it works on connections of @p c's transport, for as
 *        long as the peer keeps the registration (not after a reconnect to
 *        a new process); from rmx_mem_pack_for() only on the connection it
 *        was packed for (@p c, when the peer packed it for this side), until
 *        the peer revokes it or that connection ends
 * @return 0, @ref RMX_EINVAL for a NULL argument or a truncated, corrupt
 *         or foreign blob (one with no key for this connection's
 *         transport), @ref RMX_EVERSION (a layout version this library does
 *         not know), @ref RMX_ENOMEM.
 */
RMX_API int rmx_rkey_unpack(rmx_conn_t *c, const void *blob, size_t len, rmx_rkey_t **rk);
/** @brief Bytes the remote region spans.
 *  @param rk  an unpacked key
 *  @return the region's length at the peer (offsets run from 0 to it). */
RMX_API size_t rmx_rkey_size(const rmx_rkey_t *rk);
/** @brief Free an unpacked key. Needs no connection: call it before or
 *  after the key's connection closes, even after its @c on_closed.
 *  @param rk  the key from rmx_rkey_unpack(); invalid afterwards */
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
 *
 * The callback gets 0 once the data is in place at the peer, or
 * @ref RMX_EACCES when the peer refused it (see docs/one-sided.md for what
 * that does to an RDMA connection).
 * @param c  an established connection
 * @param iov  1 .. 16 local buffers; the array is copied, the memory each
 *        names is the caller's and must stay valid (and, for a write,
 *        unchanged) until @p cb runs
 * @param iovcnt  entries of @p iov, 1 .. 16
 * @param rk  a key unpacked on a connection of @p c's transport (one the
 *        peer packed for @p c alone, or a capability)
 * @param offset  where in the peer's region, from its start
 * @param cb  runs once, from the loop, with the outcome; may be NULL
 * @param arg  passed to @p cb
 * @return 0, @ref RMX_EACCES (the key does not allow writing, or the range
 *         leaves the region: nothing is sent), @ref RMX_EINVAL (a NULL
 *         argument, @p iovcnt out of range, a buffer with a NULL address and
 *         a length, a key of another transport, or an @c iov->mem that does
 *         not cover its buffer), @ref RMX_ENOTCONN, @ref RMX_ENOMEM,
 *         @ref RMX_EMEMLOCK (a local buffer could not be registered)
 */
RMX_API int rmx_write(rmx_conn_t *c, const rmx_iov_t *iov, int iovcnt, rmx_rkey_t *rk,
                      uint64_t offset, rmx_op_cb cb, void *arg);

/** @brief Read from @p offset in the peer's region into the local buffers.
 *  Returns and completes as rmx_write() (@ref RMX_EACCES when the key does
 *  not allow reading); the buffers hold the data when @p cb gets 0, and
 *  are undefined after an error.
 *  @param c  an established connection
 *  @param iov  1 .. 16 local buffers to fill, back to back; the array is
 *         copied, the memory must stay valid until @p cb runs
 *  @param iovcnt  entries of @p iov, 1 .. 16
 *  @param rk  a key unpacked on a connection of @p c's transport (one the
 *         peer packed for @p c alone, or a capability)
 *  @param offset  where in the peer's region, from its start
 *  @param cb  runs once, from the loop, with the outcome; may be NULL
 *  @param arg  passed to @p cb
 *  @return as rmx_write() */
RMX_API int rmx_read(rmx_conn_t *c, const rmx_iov_t *iov, int iovcnt, rmx_rkey_t *rk,
                     uint64_t offset, rmx_op_cb cb, void *arg);

/**
 * @brief rmx_write(), then the peer's on_imm(@p imm, length) runs once, in
 * order with its messages. Uses one of the peer's receive credits.
 * @param c  an established connection
 * @param iov  as rmx_write()
 * @param iovcnt  as rmx_write()
 * @param rk  as rmx_write()
 * @param offset  as rmx_write()
 * @param imm  the 32-bit value the peer's on_imm gets
 * @param cb  runs once, from the loop, once the data is in place; may be
 *        NULL
 * @param arg  passed to @p cb
 * @return as rmx_write()
 */
RMX_API int rmx_write_imm(rmx_conn_t *c, const rmx_iov_t *iov, int iovcnt, rmx_rkey_t *rk,
                          uint64_t offset, uint32_t imm, rmx_op_cb cb, void *arg);

/**
 * @brief Atomically add @p add to the 8-byte word at @p offset (8-byte
 * aligned) in the peer's region; @p *old gets its previous value when the
 * callback reports 0. @p old must stay valid until then.
 * @param c  an established connection
 * @param rk  a key with @ref RMX_MEM_REMOTE_ATOMIC, unpacked on a
 *        connection of @p c's transport
 * @param offset  the word's offset in the peer's region (the word's
 *        address must be 8-byte aligned)
 * @param add  what to add (wrapping modulo 2^64)
 * @param[out] old  the word's previous value, written before @p cb gets 0;
 *        the caller's memory, valid until @p cb runs
 * @param cb  runs once, from the loop, with the outcome; may be NULL
 * @param arg  passed to @p cb
 * @return as rmx_write() (@ref RMX_EACCES when there is no atomic right or
 *         the word leaves the region), plus @ref RMX_ENOTSUP where the
 *         device has no atomics, @ref RMX_EINVAL when misaligned or @p old
 *         is NULL
 */
RMX_API int rmx_atomic_fadd(rmx_conn_t *c, rmx_rkey_t *rk, uint64_t offset, uint64_t add,
                            uint64_t *old, rmx_op_cb cb, void *arg);

/** @brief Atomically: if the word equals @p compare, store @p swap. @p *old
 *  gets the previous value either way. As rmx_atomic_fadd().
 *  @param c  as rmx_atomic_fadd()
 *  @param rk  as rmx_atomic_fadd()
 *  @param offset  as rmx_atomic_fadd()
 *  @param compare  the value the word must hold
 *  @param swap  what to store when it does
 *  @param[out] old  as rmx_atomic_fadd(): the swap happened when
 *         @p *old == @p compare
 *  @param cb  as rmx_atomic_fadd()
 *  @param arg  passed to @p cb
 *  @return as rmx_atomic_fadd() */
RMX_API int rmx_atomic_cswap(rmx_conn_t *c, rmx_rkey_t *rk, uint64_t offset, uint64_t compare,
                             uint64_t swap, uint64_t *old, rmx_op_cb cb, void *arg);

/**@}*/

/* ------------------------------------------------------------------ */
/** @name RPC                                                           */
/* ------------------------------------------------------------------ */
/**@{*/

typedef struct rmx_rpc_req rmx_rpc_req_t; /**< A request a handler must answer. */

/** The first of the RPC ids rmx keeps for itself (through 0xFFFFFFFF):
 *  rmx_rpc_register() refuses them; rmx serves memory by name on them
 *  (docs/protocol.md). */
#define RMX_RPC_ID_RESERVED 0xFFFFFF00u

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
 * @ref RMX_ETIMEDOUT, @ref RMX_ECANCELED (rmx_rpc_cancel, or the connection
 * was closed locally), @ref RMX_ECONNRESET (or why the connection died).
 * A server at its limit holds requests back rather than refusing them, so
 * rmx itself never ends a call with @ref RMX_EAGAIN (rmx_rpc_call() returns
 * it when this side has rpc_max_inflight calls outstanding).
 */
typedef void (*rmx_rpc_reply_cb)(rmx_conn_t *c, int status, const void *data, size_t len,
                                 void *arg);

/**
 * @brief Serve RPC @p id in this context with @p handler.
 *
 * Every connection of the context, accepted or connected, serves it from
 * then on; there is no unregister (handlers live as long as the context).
 * @param ctx  the context
 * @param id  a 32-bit number the callers use, below @ref RMX_RPC_ID_RESERVED
 * @param handler  runs from the loop for each request; not NULL
 * @param arg  passed to @p handler
 * @return 0, @ref RMX_EINVAL (@p ctx or @p handler NULL, or @p id one of
 *         rmx's own), @ref RMX_EALREADY (id taken), @ref RMX_ENOMEM
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
 *  the loop); a reply that still comes is dropped. The request may have
 *  reached the peer's handler, which still answers it.
 *  @param c  the connection the call was made on
 *  @param call  the id rmx_rpc_call() gave
 *  @return 0, or @ref RMX_ENOENT when the call already ended (or @p c is
 *          NULL, or no such call was made on it). */
RMX_API int rmx_rpc_cancel(rmx_conn_t *c, uint64_t call);

/** @brief Answer with @p len bytes (copied). Releases @p req.
 *  @param req  a request the handler got and has not answered; invalid
 *         after this call, whatever it returns (but for @ref RMX_EINVAL)
 *  @param data  the reply; may be NULL when @p len is 0; copied before the
 *         call returns
 *  @param len  bytes, at most the caller's (and this side's) max_msg_size
 *  @return 0, @ref RMX_EINVAL (@p req NULL, or @p data NULL with a length:
 *          @p req is not released), @ref RMX_ENOTCONN (the caller is gone;
 *          still released), @ref RMX_EMSGSIZE (still released, the caller
 *          gets the error), @ref RMX_ENOMEM or @ref RMX_EMEMLOCK (no buffer
 *          for the copy; still released, the caller gets no reply and
 *          waits for its timeout) */
RMX_API int rmx_rpc_reply(rmx_rpc_req_t *req, const void *data, size_t len);

/** @brief Answer with the first @p len bytes of a pool buffer, without a
 *  copy; the buffer belongs to rmx from then on. As rmx_rpc_reply().
 *  @param req  as rmx_rpc_reply()
 *  @param b  a buffer from rmx_buf_get() that is still the caller's; rmx's
 *         after the call whatever it returns, but for @ref RMX_EINVAL
 *  @param len  bytes of it to send, at most rmx_buf_size()
 *  @return as rmx_rpc_reply(); @ref RMX_EINVAL also when @p b is NULL or
 *          @p len exceeds it (nothing is released then) */
RMX_API int rmx_rpc_reply_buf(rmx_rpc_req_t *req, rmx_buf_t *b, size_t len);

/** @brief Answer with an error: @p status is a negative RMX_E* code or an
 *  application's own negative value; the caller's on_reply gets it.
 *  @param req  as rmx_rpc_reply()
 *  @param status  below 0
 *  @return 0, @ref RMX_EINVAL (@p req NULL or @p status >= 0: @p req is not
 *          released), @ref RMX_ENOTCONN (the caller is gone; still
 *          released), @ref RMX_ENOMEM (still released; the caller gets no
 *          reply and waits for its timeout) */
RMX_API int rmx_rpc_reply_error(rmx_rpc_req_t *req, int status);

/** @brief The connection a request came on (for one-sided work, or to
 *  unpack keys it carries).
 *  @param req  a request not answered yet
 *  @return the connection; it stays valid at least until @p req is answered
 *          (a request holds its connection's close back), though it may be
 *          down by then (calls on it return @ref RMX_ENOTCONN). */
RMX_API rmx_conn_t *rmx_rpc_req_conn(const rmx_rpc_req_t *req);
/**@}*/

#ifdef __cplusplus
}
#endif
#endif /* RMX_RMX_OPS_H */
