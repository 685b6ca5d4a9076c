/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file rmx_xfer.h
 * @brief The bulk transfer engine: batched one-sided transfers with one
 * completion, notifications at the target, and memory found by name.
 *
 * Included by <rmx/rmx.h>; include that, not this file. docs/transfer.md
 * explains the model with a complete program.
 */
#ifndef RMX_RMX_XFER_H
#define RMX_RMX_XFER_H

#ifndef RMX_RMX_H
#error "include <rmx/rmx.h>, which includes this file"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/** @name Transfer requests                                             */
/* ------------------------------------------------------------------ */
/**@{*/

typedef struct rmx_xfer rmx_xfer_t; /**< A prepared transfer request. */

/** What a transfer request does: every entry the same way. */
typedef enum rmx_xfer_op {
  RMX_XFER_WRITE = 1, /**< local bytes to the peer's memory */
  RMX_XFER_READ = 2,  /**< the peer's memory to local bytes */
} rmx_xfer_op_t;

/** Most entries a request may hold. */
#define RMX_XFER_MAX_ENTRIES (1u << 20)

/** One block of a transfer request. */
typedef struct rmx_xfer_entry {
  void *addr;       /**< local bytes: the caller's while the request is posted */
  size_t len;       /**< bytes; 0 is allowed (the entry is skipped) */
  rmx_mem_t *mem;   /**< a registration covering [addr, addr + len), or NULL: the
                         registration cache provides one when the request is prepared */
  rmx_rkey_t *rkey; /**< the peer's region, unpacked on the request's connection
                         (or one of its transport); copied, may be released after */
  uint64_t offset;  /**< where in that region, from its start */
} rmx_xfer_entry_t;

/**
 * @brief A posted request ended: @p status 0 once every byte of every entry
 * is in place (at the peer for a write, and its notification handed to the
 * peer's transport; here for a read), or the first error. @p failed is then
 * the index of the first entry that failed, or @ref RMX_XFER_NO_ENTRY where
 * no entry is to blame (the connection was lost, the notification could not
 * be sent). Runs once per post, from the loop; the request may be posted
 * again or released from inside it.
 */
typedef void (*rmx_xfer_cb)(rmx_xfer_t *x, int status, size_t failed, void *arg);

/** @c failed when no entry is to blame. */
#define RMX_XFER_NO_ENTRY ((size_t)-1)

/**
 * @brief Prepare a request of @p n entries on connection @p c, to post once
 * or many times (rmx_xfer_post()). The entries are copied, checked (each
 * key's transport, its right to be read or written and the range), looked
 * up in the registration cache where @c mem is NULL (the cache entries stay
 * held until rmx_xfer_release(), so posting never registers), and entries
 * contiguous both here and at the peer are merged into one. Posting splits
 * what is longer than the transport takes at once and keeps the parts in
 * flight within the send queue and the peer's window.
 * @param c  an established connection
 * @param op  @ref RMX_XFER_WRITE or @ref RMX_XFER_READ
 * @param e  @p n entries; read during the call only
 * @param n  1 .. @ref RMX_XFER_MAX_ENTRIES
 * @param[out] x  the request, on 0; release it with rmx_xfer_release()
 * @return 0, @ref RMX_EINVAL (a NULL argument, @p n or @p op out of range,
 *         an entry with a NULL address and a length, a key of another
 *         transport, a @c mem that does not cover its entry),
 *         @ref RMX_EACCES (a key without the right, or an entry past its
 *         region's end: nothing is prepared; the log names the entry),
 *         @ref RMX_ENOTCONN, @ref RMX_ENOMEM, @ref RMX_EMEMLOCK
 */
RMX_API int rmx_xfer_prep(rmx_conn_t *c, rmx_xfer_op_t op, const rmx_xfer_entry_t *e, size_t n,
                          rmx_xfer_t **x);

/**
 * @brief Start a prepared request. With @p notify, a write request's peer
 * gets the bytes in its on_notify (or rmx_notify_take()) once every byte of
 * this post is in place there, in order with the connection's messages.
 * @param x  a prepared request, not posted or ended
 * @param notify  a notification for the peer (copied), or NULL; write
 *        requests only
 * @param notify_len  its length, at most the connection's eager size (the
 *        smaller side's eager_size - 8; always @ref RMX_EAGER_MSG_MIN)
 * @param cb  runs exactly once, from the loop, with the outcome; may be NULL
 *        (poll with rmx_xfer_status())
 * @param arg  passed to @p cb
 * @return 0, @ref RMX_EINVAL (@p x NULL, a notification on a read, or a
 *         NULL @p notify with a length), @ref RMX_EBUSY (posted and not
 *         ended yet), @ref RMX_EMSGSIZE (the notification is too long),
 *         @ref RMX_ENOTCONN (the connection is down or gone), @ref RMX_ENOMEM
 */
RMX_API int rmx_xfer_post(rmx_xfer_t *x, const void *notify, size_t notify_len, rmx_xfer_cb cb,
                          void *arg);

/**
 * @brief Where the last post of @p x stands, for callers that poll.
 * @param x  a request
 * @param[out] failed  may be NULL; with an error, the index of the first
 *        entry that failed (or @ref RMX_XFER_NO_ENTRY)
 * @return @ref RMX_EINPROGRESS while posted, then its outcome (0 or the
 *         error its callback got); 0 for a request never posted;
 *         @ref RMX_EINVAL for NULL
 */
RMX_API int rmx_xfer_status(const rmx_xfer_t *x, size_t *failed);

/**
 * @brief Release a request and the cache entries it holds. Needs no
 * connection: call it before or after the connection closes, but before
 * rmx_ctx_destroy() (which refuses with @ref RMX_EBUSY until then).
 * @param x  a request not posted, or ended; NULL does nothing
 * @return 0, or @ref RMX_EBUSY (posted and not ended yet: nothing is done)
 */
RMX_API int rmx_xfer_release(rmx_xfer_t *x);

/** @brief The connection a request was prepared on.
 *  @param x  a request
 *  @return the connection, or NULL once it has been freed (after its
 *          on_closed); posting then returns @ref RMX_ENOTCONN */
RMX_API rmx_conn_t *rmx_xfer_conn(const rmx_xfer_t *x);

/**
 * @brief Take the oldest notification waiting on @p c: those that arrive
 * while @p c has no on_notify callback wait here, in order, each holding one
 * of this side's receive credits until it is taken (so a peer can queue at
 * most as many as this side has receive buffers).
 * @param c  a connection (any state: those that arrived before it went down
 *        may still be taken)
 * @param buf  where the bytes go
 * @param cap  room in @p buf
 * @param[out] len  the notification's length, on 0 and on @ref RMX_EMSGSIZE
 * @return 0, @ref RMX_EAGAIN (none waiting), @ref RMX_EMSGSIZE (@p cap is
 *         short: nothing is taken), @ref RMX_EINVAL (a NULL argument)
 */
RMX_API int rmx_notify_take(rmx_conn_t *c, void *buf, size_t cap, size_t *len);
/**@}*/

/* ------------------------------------------------------------------ */
/** @name Memory by name                                                */
/* ------------------------------------------------------------------ */
/**@{*/

/** Longest name, terminating NUL included. */
#define RMX_NAME_MAX 128

/**
 * @brief Publish registration @p m under @p name in its context: a peer
 * gets a key to it with rmx_mem_lookup() over any connection to this
 * context, made for that connection alone (as rmx_mem_pack_for()). A
 * registration has at most one name; names are unique in a context.
 * @param m  a registration with a remote right
 * @param name  1 .. @ref RMX_NAME_MAX - 1 bytes of printable ASCII
 * @return 0, @ref RMX_EINVAL (a NULL argument, no remote right, a bad name),
 *         @ref RMX_EALREADY (the name is taken, or @p m has a name),
 *         @ref RMX_ENOMEM
 */
RMX_API int rmx_mem_publish(rmx_mem_t *m, const char *name);

/**
 * @brief Withdraw @p m's name (rmx_mem_dereg() does it too): later lookups
 * are refused with @ref RMX_ENOENT, and every peer holding a key to @p m
 * is told to forget what it cached (a lookup it makes before that word
 * arrives is still answered from its cache). Keys already handed out stay
 * valid until rmx_mem_revoke() or rmx_mem_dereg(); rmx_mem_revoke() of a
 * published registration tells that one peer to forget it too.
 * @param m  a registration
 * @return 0, @ref RMX_EINVAL (NULL), @ref RMX_ENOENT (no name)
 */
RMX_API int rmx_mem_unpublish(rmx_mem_t *m);

/** @brief A lookup ended: status 0 with @p rk, a key the caller owns
 *  (rmx_rkey_release()), or the error, with @p rk NULL. */
typedef void (*rmx_lookup_cb)(rmx_conn_t *c, int status, rmx_rkey_t *rk, void *arg);

/**
 * @brief Get a key to the memory the peer of @p c published as @p name: one
 * round trip, then answered from a cache on @p c until the peer withdraws
 * the name.
 * @param c  an established connection
 * @param name  as rmx_mem_publish(); copied
 * @param timeout_ms  0: none
 * @param cb  runs exactly once, from the loop (never inside this call, an
 *        answer from the cache included): 0, @ref RMX_ENOENT (no such name
 *        at the peer), @ref RMX_ENOTSUP (the peer does not serve names),
 *        @ref RMX_ETIMEDOUT, @ref RMX_ECANCELED (@p c closed here), or why
 *        the connection went down
 * @param arg  passed to @p cb
 * @return 0, @ref RMX_EINVAL (a NULL argument, a bad name),
 *         @ref RMX_ENOTCONN, @ref RMX_EAGAIN (rpc_max_inflight calls
 *         outstanding), @ref RMX_ENOMEM
 */
RMX_API int rmx_mem_lookup(rmx_conn_t *c, const char *name, uint32_t timeout_ms, rmx_lookup_cb cb,
                           void *arg);
/**@}*/

/* ------------------------------------------------------------------ */
/** @name Rails: one connection over several queue pairs and devices     */
/* ------------------------------------------------------------------ */
/**@{*/

/**
 * @brief rmx_rail_add() ended: @p status 0 and @p rail the new rail's
 * number (1 .. @ref RMX_RAILS_MAX), or why not (@p rail 0). Runs exactly
 * once, from the loop, before @p c's on_closed.
 */
typedef void (*rmx_rail_cb)(rmx_conn_t *c, int status, unsigned rail, void *arg);

/**
 * @brief Open a rail for @p c: another connection of @p c's transport to
 * the same peer at @p uri (its address on another device, or the same
 * address for another queue pair), which carries parts of @p c's transfer
 * requests.
 *
 * The peer must listen at @p uri in the context that accepted @p c; its
 * on_accept does not run for the rail. A request whose bytes reach
 * @ref RMX_RAIL_MIN_BYTES is striped over @p c and every rail up when it
 * is posted that all its keys cover: a key packed for @p c (rmx_mem_pack_for(),
 * or found by name) after a rail is up holds one for that rail, which no
 * other connection may use. Messages, RPC, notifications and single
 * one-sided operations stay on @p c.
 *
 * A rail lost leaves @p c up: the parts it had not completed are posted
 * again over @p c and the other rails, so a request still completes with
 * every byte (writes and reads may be repeated; a request never ends short).
 * Closing or losing @p c closes its rails. docs/transfer.md explains more.
 *
 * @param c  a connection this side opened (rmx_connect()), established
 * @param uri  as for rmx_connect(), of @p c's transport
 * @param cb  runs exactly once: 0, @ref RMX_ENOMEM (also: @ref RMX_RAILS_MAX
 *        given already), @ref RMX_ENOTSUP (the peer has no rails), a
 *        connect error (also: the rail lost before the peer attached it),
 *        @ref RMX_ETIMEDOUT (established, but the peer did not say it
 *        attached it within RMX_HANDSHAKE_TIMEOUT_MS), @ref RMX_ECANCELED
 *        (@p c closed first)
 * @param arg  passed to @p cb
 * @return 0, @ref RMX_EINVAL (a NULL argument, @p c accepted here or a
 *         rail, @p uri of another transport or malformed),
 *         @ref RMX_ENOTCONN, @ref RMX_EAGAIN, @ref RMX_ENOMEM
 */
RMX_API int rmx_rail_add(rmx_conn_t *c, const char *uri, rmx_rail_cb cb, void *arg);

/**
 * @brief Rails of @p c up now.
 * @param c  a connection (NULL: 0)
 * @return the rails that carry parts now: 0 for a connection without rails
 */
RMX_API unsigned rmx_conn_rails(const rmx_conn_t *c);

/** What one lane of a connection has carried (rmx_rail_info()). */
typedef struct rmx_rail_info {
  int up;         /**< 1 while it carries parts */
  uint64_t parts; /**< transfer parts it completed here (counted once it has rails) */
  uint64_t bytes; /**< their bytes */
} rmx_rail_info_t;

/**
 * @brief What rail @p rail of @p c (0: @p c itself) has carried, also
 * after it went.
 * @param c  a connection this side opened
 * @param rail  0 .. @ref RMX_RAILS_MAX
 * @param[out] out  its state and counters
 * @return 0, @ref RMX_EINVAL, @ref RMX_ENOENT (no such rail was opened)
 */
RMX_API int rmx_rail_info(const rmx_conn_t *c, unsigned rail, rmx_rail_info_t *out);

/**
 * @brief Close rail @p rail of @p c (orderly): its parts in flight complete,
 * the rest go over the other lanes; @p c carries on.
 * @param c  a connection this side opened
 * @param rail  1 .. @ref RMX_RAILS_MAX, as rmx_rail_add() gave it
 * @return 0, @ref RMX_EINVAL, @ref RMX_ENOENT (not open)
 */
RMX_API int rmx_rail_close(rmx_conn_t *c, unsigned rail);

/** A request moves at least this many bytes before it is striped over rails. */
#define RMX_RAIL_MIN_BYTES (1u << 20)
/**@}*/

#ifdef __cplusplus
}
#endif
#endif /* RMX_RMX_XFER_H */
