/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file rmx_config.h
 * @brief Configuration (rmx_config_t, its environment variables) and
 * logging.
 *
 * Included by <rmx/rmx.h>; include that, not this file.
 */
#ifndef RMX_RMX_CONFIG_H
#define RMX_RMX_CONFIG_H

#ifndef RMX_RMX_H
#error "include <rmx/rmx.h>, which includes this file"
#endif

#include <stdio.h> /* FILE, for rmx_config_print() */

#ifdef __cplusplus
extern "C" {
#endif

/** Log levels for @c RMX_LOG. */
typedef enum {
  RMX_LOG_NONE = 0, RMX_LOG_ERROR, RMX_LOG_WARN, RMX_LOG_INFO, RMX_LOG_DEBUG, RMX_LOG_TRACE
} rmx_log_level_t;

/**
 * Where rmx's log lines go (see rmx_log_set_handler()): @p line is one
 * line without its newline, valid during the call only: the message
 * alone, without the time, process and thread ids that stderr's lines
 * start with (the handler can take them: it runs on the logging thread).
 * A line about a connection names the peer's address. It runs on the
 * thread that logs (a context's loop thread, or the thread calling an
 * rmx function), possibly on several threads at once, and must not call
 * into rmx.
 */
typedef void (*rmx_log_fn)(rmx_log_level_t level, const char *line, void *arg);

/**
 * @brief Send rmx's log lines to @p fn instead of stderr, for the whole
 * process (NULL: back to stderr, as "2026-11-26T01:54:08.123Z rmx[PID/TID]
 * LEVEL: line", the time in UTC). Each context still
 * filters by its own @c log_level. Set it before creating contexts; a
 * line being logged while it changes goes to either place.
 * @param fn  the handler, or NULL for stderr; it must stay callable until
 *        it is replaced (or for the rest of the process)
 * @param arg  passed to @p fn with every line; rmx does not look at it
 */
RMX_API void rmx_log_set_handler(rmx_log_fn fn, void *arg);

/** How completions are found. */
typedef enum {
  RMX_PROGRESS_EVENT = 0,   /**< sleep on completion channels and sockets (default) */
  RMX_PROGRESS_POLL = 1,    /**< busy-poll: rmx_ctx_run spins on rmx_ctx_progress(),
                                 turning the loop every 1024 passes */
  RMX_PROGRESS_ADAPTIVE = 2 /**< poll for @c spin_us after the last completion,
                                 message or post, then sleep */
} rmx_progress_t;

/** How a peer's keys are confined to its own connection on an RDMA device
 *  (docs/security.md; @c key_scope). TCP ignores it. It sets the mode of
 *  the first device a context opens: any later one has a protection domain
 *  per connection (docs/one-sided.md, "Several devices"). */
typedef enum {
  RMX_KEY_SCOPE_AUTO = 0,    /**< memory windows where the device binds type-2 windows, else a
                                  protection domain per connection (default) */
  RMX_KEY_SCOPE_WINDOWS = 1, /**< memory windows; a device without type-2 windows is refused
                                  at its first connection or listener (@ref RMX_ENOTSUP) */
  RMX_KEY_SCOPE_PD = 2       /**< a protection domain per connection on any device */
} rmx_key_scope_t;

/** Where a verbs connection's receive buffers come from (@c srq). TCP ignores it. */
typedef enum rmx_srq_mode {
  RMX_SRQ_OFF = 0,  /**< each queue pair posts its own (rx_depth + 2 buffers) */
  RMX_SRQ_ON = 1,   /**< one shared receive queue per device (srq_depth buffers) */
  RMX_SRQ_AUTO = 2  /**< its own for a device's first RMX_SRQ_AUTO_OWN connections, shared after */
} rmx_srq_mode_t;

/** Under RMX_SRQ=auto, the connections of a device that keep their own
 *  receive queue ((rx_depth + 2) * eager_size bytes each, 528 KiB by
 *  default) before new ones take the shared queue: few, so that a client
 *  with a handful of connections pins no shared queue, and a server's
 *  first peers do not pin megabytes each (docs/scaling.md). */
#define RMX_SRQ_AUTO_OWN 4

/**
 * Context configuration. Fill it with rmx_config_init(), then change fields.
 * New fields are only ever appended (see @c size).
 */
typedef struct rmx_config {
  /**
   * sizeof(rmx_config_t) as the caller was compiled, set by
   * rmx_config_init(). Fields are only ever appended: a newer library
   * gives the fields a caller's older header lacks their defaults, and
   * refuses (@ref RMX_EINVAL) a size it cannot know. Always start from
   * rmx_config_init(), never from a zeroed struct.
   */
  uint32_t size;
  uint32_t eager_size;     /**< bytes per eager receive buffer, header included (RMX_EAGER_SIZE, 8192) */
  uint32_t rx_depth;       /**< receive buffers per connection = initial credits (RMX_RX_DEPTH, 64) */
  uint64_t max_msg_size;   /**< largest message accepted or sent (RMX_MAX_MSG_SIZE, 64 MiB) */
  uint32_t rndv_depth;     /**< large messages fetched at once per connection (RMX_RNDV_DEPTH, 4) */
  uint32_t connect_timeout_ms; /**< connect and handshake limit (RMX_CONNECT_TIMEOUT_MS, 10000) */
  uint32_t rpc_max_inflight;   /**< RPCs outstanding per connection, each way (RMX_RPC_MAX, 1024) */
  uint32_t rnr_retry;          /**< RDMA receiver-not-ready retries, 0..7, 7 = forever (RMX_RNR_RETRY, 7).
                                    Flow control makes them unnecessary: 0 turns any into an error. */
  rmx_log_level_t log_level;   /**< RMX_LOG=none|error|warn|info|debug|trace (warn) */
  rmx_progress_t progress;     /**< RMX_PROGRESS=event|poll|adaptive (event) */
  char device[64];             /**< RDMA device name or GUID, empty: by route (RMX_DEVICE; a
                                    longer value is refused, never truncated) */
  uint32_t close_timeout_ms;   /**< how long an orderly close may wait for the peer before the
                                    connection is cut and what is outstanding fails
                                    (RMX_CLOSE_TIMEOUT_MS, 5000) */
  uint32_t max_conns;          /**< connections a listener keeps at once; more are refused with
                                    @ref RMX_ECONNREFUSED (RMX_MAX_CONNS, 1024) */
  uint32_t max_handshakes;     /**< connections a listener has in their handshake at once;
                                    over TCP more wait in the kernel's listen backlog, over
                                    RDMA they are refused (RMX_MAX_HANDSHAKES, 128) */
  uint32_t rma_window;         /**< remote read, write and atomic requests a peer may have
                                    outstanding here at once (TCP; RMX_RMA_WINDOW, 64) */
  /**
   * Shared secret for peer authentication, a NUL-terminated string of 1 to
   * 127 bytes; empty (the default): no authentication. rmx_config_init()
   * fills it from the file named by @c RMX_AUTH_SECRET_FILE: the whole file
   * is the secret, 1 to 63 raw bytes of any value, written here as lowercase
   * hex (docs/security.md). With a secret, every connection of
   * the context, both ways, proves in its handshake that the peer holds the
   * same secret (docs/protocol.md); the secret itself never goes on the
   * wire. A peer that fails, or that does not authenticate, is refused with
   * @ref RMX_EACCES before any message or memory key is exchanged: the
   * connecting side's @c on_connected reports it, an accepting side logs it
   * and never calls @c on_accept. Use a random secret (32 bytes or more): a
   * recorded handshake lets an eavesdropper test guesses offline.
   * rmx_ctx_create() keeps only a key derived from it; the caller may wipe
   * this field afterwards.
   */
  char auth_secret[128];
  /**
   * Liveness: on a connection that has sent nothing for this long, a
   * keepalive frame goes out, and the peer's silence and credit stalls are
   * checked this often (RMX_KEEPALIVE_MS, 1000). 0 turns this side's
   * checks off: the peer is never declared lost for silence (this side
   * still sends the keepalives a peer's own limit asks for).
   */
  uint32_t keepalive_ms;
  /**
   * A peer from which nothing has arrived for this long is declared lost:
   * @c on_disconnect gets @ref RMX_ETIMEDOUT and everything outstanding
   * fails. The same limit ends a connection whose messages have waited
   * this long for credits the peer does not return (RMX_KEEPALIVE_TIMEOUT_MS,
   * 10000; at least 100 and at least @c keepalive_ms). A loss is detected
   * within this limit plus one @c keepalive_ms. See docs/reliability.md.
   */
  uint32_t keepalive_timeout_ms;
  /**
   * RDMA reliable-connection local ACK timeout in ms (RMX_RC_TIMEOUT_MS, 500):
   * how long a queue pair waits for the peer's acknowledgement before it
   * sends again. Devices take 4.096 us * 2^t; rmx uses the smallest t in
   * 1..31 that is at least this long (500 ms gives t = 17, 537 ms). While
   * anything is outstanding, a lost peer, link or host is detected within
   * about that rounded timeout * (rc_retry + 1): 537 ms * 6 = 3.2 s by
   * default, as @ref RMX_ETIMEDOUT (keepalives cover idle connections).
   * Each side sets its own queue pair's timeout.
   */
  uint32_t rc_timeout_ms;
  /**
   * Times a queue pair resends an unacknowledged request before the
   * connection fails with @ref RMX_ETIMEDOUT, 0..6 (RMX_RC_RETRY, 5). The
   * device's 7 means "forever", which would never detect a lost host, so it
   * is refused. The connecting side's value is the connection's: the RDMA
   * connection manager carries it in the request and the accepting side's
   * queue pair takes it from there.
   */
  uint32_t rc_retry;
  /**
   * The registration cache (RMX_REGCACHE=0|1, 1): transfers from memory
   * rmx registered before reuse that registration. 0: each transfer
   * registers and deregisters (docs/one-sided.md says what the cache
   * needs from the process). Builds without RMX_MEMHOOKS have no cache.
   */
  uint32_t regcache;
  /**
   * Adaptive progress (@ref RMX_PROGRESS_ADAPTIVE): how long, in
   * microseconds, the loop keeps polling the completion queues (TCP: its
   * sockets) after the last completion or message it found or the last
   * request it posted, before it sleeps (RMX_SPIN_US, 100; 1..1000000). A
   * reply that comes within it costs no wake-up; each quiet spell costs
   * this much CPU time. The other modes ignore it.
   */
  uint32_t spin_us;
  /**
   * The guard: refused remote accesses (a read, write or atomic with a bad
   * key, out of bounds or without the rights) from one peer IP address
   * within @c guard_window_ms that get its new incoming connections
   * refused (RMX_GUARD_STRIKES, 16; 0..1000000, 0 turns the guard off).
   * Connections that stand are not touched. Over TCP a key counts once per
   * connection, and a stale key (one this side gave that connection and
   * withdrew since) not at all. The guard remembers 256 addresses; a ban
   * reaches every process behind the address; docs/security.md says what
   * it stops and what it does not.
   */
  uint32_t guard_strikes;
  /**
   * The window in which @c guard_strikes refusals ban an address, in ms
   * (RMX_GUARD_WINDOW_MS, 10000; 1..86400000).
   */
  uint32_t guard_window_ms;
  /**
   * How long a banned address's new connections are refused (with
   * @ref RMX_ECONNREFUSED at the peer), in ms (RMX_GUARD_BAN_MS, 30000;
   * 1..86400000).
   */
  uint32_t guard_ban_ms;
  /**
   * How an RDMA device confines what a peer may reach to its own
   * connection (RMX_KEY_SCOPE=auto|windows|pd, auto). windows: a key is a
   * type-2 memory window bound to the connection's queue pair; it costs an
   * allocation, a bind and a deallocation per rendezvous message. pd: each
   * connection has its own protection domain, and memory exposed to its
   * peer is registered there; every registration used locally (pool,
   * cache, the caller's) is registered again in each connection's domain
   * that uses it, and capability keys (rmx_mem_pack()) are unavailable
   * (@ref RMX_ENOTSUP). auto: windows where the device has them, else pd.
   * docs/security.md compares them.
   */
  rmx_key_scope_t key_scope;
  /**
   * How long an incoming connection may take over its handshake before it
   * is dropped, in ms (RMX_HANDSHAKE_TIMEOUT_MS, 3000): a peer that
   * connects and says nothing holds one of the listener's
   * @c max_handshakes slots no longer than this. Outgoing connects keep
   * @c connect_timeout_ms.
   */
  uint32_t handshake_timeout_ms;
  /**
   * Where a verbs connection's receive buffers come from (RMX_SRQ=0|1|auto,
   * auto): its own receive queue, or a shared receive queue of
   * @c srq_depth buffers per device, which idle connections cost nothing
   * of (docs/scaling.md). A device without shared receive queues, or with
   * a protection domain per connection (@c key_scope pd, or a context's
   * second device), keeps them per connection (with 1: a connection is
   * refused, @ref RMX_ENOTSUP).
   */
  rmx_srq_mode_t srq;
  /** Receive buffers of a shared receive queue (RMX_SRQ_DEPTH, 1024), each
   *  @c eager_size bytes; capped by the device. */
  uint32_t srq_depth;
  /**
   * Close an established connection that has carried no message for this
   * long, in ms (RMX_IDLE_TIMEOUT_MS, 0 = never, the default). Messages
   * and RPCs either way, writes with immediate and this side's one-sided
   * completions count; keepalives and credit returns do not, so a peer
   * that only keeps the connection alive loses it, and so does one that
   * only reads or writes this side's memory (the target sees no message).
   * The peer is sent BYE; this side's @c on_disconnect gets
   * @ref RMX_ETIMEDOUT. Checked at least every
   * @c keepalive_ms, so a connection goes within the limit plus that.
   */
  uint32_t idle_timeout_ms;
  /**
   * What a listener at @c max_conns does with a new peer (RMX_EVICT_IDLE,
   * 0 or 1, 0 by default). 0: refuses it (@ref RMX_ECONNREFUSED at the
   * peer). 1: closes the listener's established connection that has
   * carried no message for the longest (as @c idle_timeout_ms counts
   * messages) and lets the new peer in: the evicted peer is sent BYE, and
   * this side's @c on_disconnect gets @ref RMX_ECANCELED. Connections in
   * their handshake or already closing are never evicted; with none
   * established the new peer is refused. The evicted connection counts
   * against @c max_conns until it is freed, so for that while the
   * listener holds one more (at most twice @c max_conns: with that many
   * evicted connections still closing, a new peer is refused). With a
   * secret set (@c auth_secret) the
   * eviction comes before the new peer proves it.
   */
  uint32_t evict_idle;
  /**
   * Send queue entries of an RDMA connection (RMX_SQ_DEPTH): the sends,
   * reads, writes and atomics it has posted at once; more wait in rmx.
   * 0 (the default) picks 2 x @c rx_depth + 2 x @c rndv_depth + 8 with a
   * receive queue per connection, and 6 on the shared receive queue,
   * where connections are many and each costs its queue's memory
   * (docs/scaling.md); never fewer than 3 (reads and writes go in parts
   * of half the queue's worth). A deeper queue helps a connection that streams
   * many large transfers at once; a shallower one only makes posts wait
   * in rmx sooner. TCP queues without a limit.
   */
  uint32_t sq_depth;
  /**
   * Which transports auto:// tries for each connection, best first, and
   * which listeners a listener adds (RMX_TRANSPORTS; empty, the default:
   * "shm,rdma,tcp"). Comma-separated schemes; one alone with a "!" after
   * it ("rdma!") is required: auto:// then fails rather than fall back.
   * A connect tries shm when the peer's address is this host's and its
   * listener answers there, rdma where this side has a device, then tcp;
   * each that fails during set-up gives way to the next with a warning.
   * A listener at tcp://, rdma:// or auto:// also answers over shm when
   * shm is listed (docs/architecture.md, "auto:// per peer").
   */
  char transports[32];
  /**
   * Shared memory (shm://): whether large remote reads and writes, and
   * the rendezvous reads of large messages, may move with one copy
   * straight between the two processes (process_vm_readv/writev) instead
   * of through the segment (RMX_SHM_COPY; 1, the default). Used only where
   * each side may read and write the other's memory anyway (the kernel's
   * ptrace rule: the same user, Yama, no seccomp filter refusing it), which
   * each side probes when the connection is set up; 0 keeps every byte in
   * the segment. docs/security.md, "Shared memory".
   */
  uint32_t shm_copy;
} rmx_config_t;

/**
 * @brief Fill @p cfg with defaults, then apply @c RMX_* environment overrides.
 *
 * Numbers are decimal: a leading 0 does not make one octal ("010" is ten),
 * and hexadecimal ("0x10") is refused. Byte sizes (@c RMX_EAGER_SIZE,
 * @c RMX_MAX_MSG_SIZE) may end in K, M, G or T (powers of 1024). A value
 * past 64 bits, or whose suffix would carry it past them, is out of range,
 * never wrapped. @c RMX_DEVICE longer than 63 bytes is refused. The rules
 * between settings are checked too (@c RMX_KEEPALIVE_TIMEOUT_MS at least
 * @c RMX_KEEPALIVE_MS, unless that is 0). Each refusal logs one error line
 * naming the variable(s), the value and what is accepted, for example
 * "RMX_EAGER_SIZE=100 is out of range: 256 .. 1048576".
 *
 * An @c RMX_ variable that names no setting is logged as a warning (once
 * per process), with the setting it most resembles; variables under
 * @c RMX_TEST_ belong to rmx's test programs and are left alone. Nothing
 * is logged below the level @c RMX_LOG asks for (none: nothing at all).
 * rmx_ctx_create() checks a configuration passed in code by the same
 * rules, logging a line that names the field(s) before it returns
 * @ref RMX_EINVAL.
 *
 * @param[out] cfg  the configuration to fill (every field, @c size
 *        included); the caller's, read by rmx_ctx_create() during that call
 *        only
 * @return 0, or @ref RMX_EINVAL when @p cfg is NULL, an environment value
 *         does not parse, is out of range or breaks a rule between
 *         settings (the other fields still hold their values), or the
 *         file named by @c RMX_AUTH_SECRET_FILE cannot be read, is empty
 *         or is longer than 63 bytes (the message names the variable).
 */
RMX_API int rmx_config_init(rmx_config_t *cfg);

/** Flags of rmx_config_print(). */
enum {
  RMX_CONFIG_PRINT_JSON = 1u << 0, /**< one JSON object: {"settings": [{"name", "field",
                                        "value", "default", "source", "description", and
                                        "min"/"max", "values" or "max_length"}, ...]} */
  RMX_CONFIG_PRINT_BRIEF = 1u << 1 /**< text, one line per setting, without descriptions */
};

/**
 * @brief Print every setting: its variable, value, default, where the
 * value came from, what it accepts and what it means (what
 * <tt>rmx-info -c</tt> shows).
 *
 * Text, by default: per setting a line <tt>RMX_NAME=value  (source)</tt>,
 * then, unless @ref RMX_CONFIG_PRINT_BRIEF, an indented line with the
 * field's name, its meaning and what it accepts. The source is
 * "default"; "environment" where the @c RMX_ variable is set and gives the
 * value; "code" where the value differs from what the defaults and the
 * environment give (the program set it); or "refused" where the variable
 * is set but did not parse (the default is in effect). The authentication
 * secret is never printed: its value is the path named by
 * @c RMX_AUTH_SECRET_FILE, "(set in code)", or empty.
 *
 * @param cfg the configuration to print, filled by rmx_config_init() and
 *        perhaps changed; only read, the caller keeps it. NULL prints the
 *        configuration rmx_config_init() would give now, logging nothing.
 * @param out an open stream; written, neither flushed nor closed.
 * @param flags 0 (text), or @ref RMX_CONFIG_PRINT_JSON or
 *        @ref RMX_CONFIG_PRINT_BRIEF.
 * @return 0; @ref RMX_EINVAL when @p out is NULL, @p flags has an unknown
 *         bit, or @p cfg's @c size is one this library cannot know
 *         (logged); @ref RMX_EIO when the stream reports a write error.
 */
RMX_API int rmx_config_print(const rmx_config_t *cfg, FILE *out, unsigned flags);

#ifdef __cplusplus
}
#endif
#endif /* RMX_RMX_CONFIG_H */
