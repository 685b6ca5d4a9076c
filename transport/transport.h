/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The transport interface (internal). A transport moves opaque frames
 * between two connected endpoints, reads and writes remote memory, and
 * registers local memory. It knows nothing of credits, rendezvous or RPC:
 * that is the core's.
 *
 * Layers: a transport includes this header, src/base/ and its own folder,
 * nothing else of rmx. It reaches the core only through the rmx_tp_env_t
 * it was handed at init; the core reaches it only through its ops table,
 * found in the registry (src/registry.c).
 *
 * Rules every transport keeps:
 * - No op blocks on a peer or on the network. Some block briefly on the
 *   local kernel: mem_reg and mem_dereg (verbs pins and unpins pages),
 *   listen (verbs opens the device), accept (verbs creates the QP and
 *   registers its receive buffers), connect (verbs starts address
 *   resolution), fini (verbs may join its async event thread). Everything
 *   else returns at once.
 * - No op calls back into the core from inside itself; events are raised
 *   from the event loop (libuv callbacks), never synchronously. Exception:
 *   close() may be called from inside an event handler and must cope.
 * - Every send/read/write/atomic posted with success is reported exactly
 *   once through env->event (RMX_TP_EV_SEND / READ / WRITE / ATOMIC), and
 *   before RMX_TP_EV_CLOSED. A connection's reads and writes are reported in
 *   the order they were posted (a transfer request names its failed entry by
 *   that order: src/xfer/xfer.c; TCP answers them in order, verbs completes
 *   its send queue in order). After DISCONNECTED, what is still posted may
 *   complete either way until close(): sends already queued on a TCP socket
 *   can still succeed, and at close() the rest fail with RMX_ECANCELED (the
 *   core reports the connection's error for them). On verbs the QP may
 *   stay connected until close(): posted ops may still complete with 0 and
 *   the peer's remote accesses may still be served, so the core closes a
 *   connection as soon as it is reported down. At close() each posted op
 *   reports how it really ended (0, its error, or RMX_ECANCELED when it
 *   was flushed). An op that returns an error was not posted and is never
 *   reported.
 * - Every loss the transport learns of (its peer's disconnect, a silent
 *   peer, a port, address or device going away, an error completion, the
 *   device refusing a request of the peer) becomes one DISCONNECTED per
 *   connection, whose status says what happened: RMX_ETIMEDOUT (the peer,
 *   its host or the path stopped answering: verbs' retries exhausted after
 *   cfg->rc_timeout_ms * (rc_retry + 1), rounded up to the device's steps),
 *   RMX_ENETUNREACH (our port or address went down), RMX_ENODEV (the
 *   device went away), RMX_EACCES (the peer refused our access), RMX_EPROTO
 *   (we refused a request of the peer, or it broke the protocol),
 *   RMX_ECONNRESET (the peer or its transport dropped the connection),
 *   RMX_EIO (anything else). A silent peer of an idle connection shows only
 *   when something is next sent to it.
 * - close() ends, with CLOSED, in bounded time whatever was lost: a verbs
 *   drain the device never flushes is given up after cfg->close_timeout_ms.
 * - Ops a transport lacks are stubs returning RMX_ENOTSUP, never NULL.
 * - Errors are converted to RMX_E* at the transport edge.
 * - Memory named by an op (sge, dst, src, old) belongs to the caller and
 *   must stay valid until that op's event; hello bytes are copied.
 *
 * Limits the core must respect, per transport (ops table fields):
 * - hello_max: longest hello connect() carries (verbs: rdma_cm private
 *   data, 56 bytes, 196 in an accept; TCP: 256 both ways).
 * - max_io: longest single read or write; the core splits longer ones.
 * - keys: TCP keys are 64 random bits; verbs keys are the 32-bit rkey.
 * - RMX_TP_F_LOCAL_REG: local buffers of read/write/send must be
 *   registered (verbs), except small frames the transport sends inline or
 *   copies (up to 64 bytes) and writes up to its inline size.
 */
#ifndef RMX_TRANSPORT_H
#define RMX_TRANSPORT_H

#include <rmx/rmx.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../src/base/error.h"
#include "../src/base/list.h"
#include "../src/base/log.h"

struct uv_loop_s;
typedef struct rmx_tp rmx_tp_t;                   /* per-context transport instance */
typedef struct rmx_tp_conn rmx_tp_conn_t;         /* one connection */
typedef struct rmx_tp_listener rmx_tp_listener_t; /* one listening endpoint */
typedef struct rmx_tp_mem rmx_tp_mem_t;           /* one registration */
typedef struct rmx_tp_gate rmx_tp_gate_t;         /* a listening endpoint of a group */

/* A peer a gate took that no context has yet (TCP: its accepted socket;
 * verbs: its connection request). The transport's own object starts with
 * this; the core only links it into its lists. */
typedef struct rmx_tp_raw {
  rmx_list_t link;
} rmx_tp_raw_t;

/* Access rights for mem_reg. */
enum {
  RMX_TP_ACC_LOCAL = 1,       /* local read and write (send from, read into) */
  RMX_TP_ACC_REMOTE_READ = 2,
  RMX_TP_ACC_REMOTE_WRITE = 4,
  RMX_TP_ACC_REMOTE_ATOMIC = 8,
};

typedef enum { RMX_TP_FADD, RMX_TP_CSWAP } rmx_tp_atomic_t;

/* One gather element of a send. mem is NULL for memory the transport may
 * copy (it then copies or sends inline): every transport takes a frame of
 * up to RMX_TP_SMALL_FRAME bytes that way. */
typedef struct rmx_tp_sge {
  const void *addr;
  size_t len;
  rmx_tp_mem_t *mem;
} rmx_tp_sge_t;

#define RMX_TP_MAX_SGE 3
#define RMX_TP_SMALL_FRAME 128

typedef enum {
  RMX_TP_EV_ESTABLISHED,  /* handshake done; data/len: the peer's hello (active side) */
  RMX_TP_EV_DISCONNECTED, /* status: why (connect failures too); I/O stopped.
                           * Raised at most once per connection, for any loss
                           * (see the losses contract above the ops) */
  RMX_TP_EV_CLOSED,       /* after close(): every op reported; tp_conn freed */
  RMX_TP_EV_SEND,         /* op, status */
  RMX_TP_EV_RECV,         /* data/len: one whole frame, valid during the call */
  RMX_TP_EV_READ,         /* op, status */
  RMX_TP_EV_WRITE,        /* op, status: the data is in place at the peer */
  RMX_TP_EV_ATOMIC,       /* op, status: *old is filled in */
  RMX_TP_EV_IMM,          /* imm, len: a peer's write-with-immediate landed; status
                           * nonzero: refused (the peer's credit is still spent) */
} rmx_tp_ev_type_t;

typedef struct rmx_tp_ev {
  rmx_tp_ev_type_t type;
  int status;
  uint32_t imm;
  void *op;
  const void *data;
  size_t len;
} rmx_tp_ev_t;

/*
 * What the core hands a transport at init: all the transport knows of it.
 * The pointers are valid until fini() returns; a transport keeps its own
 * copy of env and of *cfg, so an instance that outlives fini (sockets or
 * QPs still closing) may still read its configuration and log, and raises
 * no event. Owners are the core's objects, opaque here: the transport only
 * passes them back.
 */
typedef struct rmx_tp_env {
  struct uv_loop_s *loop;   /* the context's loop: every event comes from it */
  const rmx_config_t *cfg;  /* read only: timeouts, limits (copy it) */
  rmx_log_level_t log_level; /* the context's, for RMX_TP_LOG */
  /* The core's logger: a transport built as a module has no other way to
   * the application's log handler. */
  void (*log)(rmx_log_level_t lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
  /* An event for the connection whose owner was given to connect/accept. */
  void (*event)(void *conn_owner, const rmx_tp_ev_t *ev);
  /* What event() does with an RMX_TP_EV_RECV of data/len, one step
   * shorter: for a transport's receive loop. */
  void (*recv)(void *conn_owner, const void *data, size_t len);
  /* A peer asks to connect to the listener of listener_owner and presented
   * its hello (valid during the call). The core answers with accept() or
   * reject() before returning. */
  void (*incoming)(void *listener_owner, rmx_tp_conn_t *tc, const void *hello, size_t len);
  /* This side refused a remote access (read, write or atomic) the peer of
   * the connection of conn_owner asked for: bad key, bounds or rights. The
   * core counts it against the peer's address (the guard), unless key (the
   * transport key the request named, NULL where the transport cannot tell)
   * is one the peer held on that connection and saw withdrawn, or one it
   * was struck for lately. Called from the event loop, at most once per
   * refused request; it returns at once and calls nothing of the transport
   * but peer_addr. Returns 1 when the refusal is the peer's doing (counted
   * or not), 0 when this side had closed the connection already (its keys
   * were ending: what the peer had in flight was refused for that). */
  int (*strike)(void *conn_owner, const uint64_t *key);
} rmx_tp_env_t;

/* Log through the core's logger at the context's level. */
#define RMX_TP_LOG(env, lvl, ...)                    \
  do {                                               \
    if ((int)(env)->log_level >= (int)RMX_LOG_##lvl) \
      (env)->log(RMX_LOG_##lvl, __VA_ARGS__);        \
  } while (0)

/* A refusal a peer can repeat at will, through the limiter rl (one line per
 * second at most, with the count held back; base/log.h). */
#define RMX_TP_LOG_LIMITED(env, rl, now_ms, lvl, ...) \
  RMX_LOG_LIMITED_AT((env)->log, (env)->log_level, rl, now_ms, lvl, __VA_ARGS__)

/* The ops table a transport module exports (dlsym finds it by name). */
#define RMX_TP_EXPORT __attribute__((visibility("default")))

/* Transport traits. */
enum {
  RMX_TP_F_LOCAL_REG = 1, /* local buffers must be registered (verbs) */
  RMX_TP_F_LOOP_SPIN = 2, /* its fds wake the loop (TCP): in poll and adaptive
                           * progress the core busy-polls them by keeping the
                           * loop from sleeping around their traffic */
  RMX_TP_F_LOCAL_NAME = 8, /* its addresses are Unix-domain socket names
                            * (AF_UNIX; shm://PATH, shm://@NAME), not
                            * resolved: the core builds them from the URI */
  RMX_TP_F_SEND_COPY = 4, /* send() takes op NULL for a small frame (every
                           * element mem NULL, RMX_TP_SMALL_FRAME bytes at
                           * most): copied at the call, never reported but
                           * by a SEND event with op NULL that only says the
                           * send queue has room again (verbs) */
};

/* What one connection can do. */
enum {
  RMX_TP_CAP_ATOMIC = 1,
};

/* A transport instance's numbers (ops->stats adds its own to these). */
typedef struct rmx_tp_stats {
  uint64_t reg_bytes; /* registered for itself now (verbs: receive buffers, the
                         shared receive queue, send slots' areas) */
  uint64_t refused;   /* connections refused so far for lack of a resource of the
                         device or host (verbs: completion queue room, queue
                         pairs; TCP: file descriptors for a connect) */
  uint64_t direct_bytes; /* pulled by one copy from peer processes so far (shm) */
} rmx_tp_stats_t;

typedef struct rmx_tp_ops {
  const char *name; /* the URI scheme: "tcp", "rdma" */
  unsigned flags;   /* RMX_TP_F_* */
  uint8_t wire_id;  /* names the transport inside packed remote keys */
  size_t max_io;    /* largest read or write the transport takes at once */
  size_t hello_max; /* longest hello connect() carries */

  /* Create the per-context instance. Errors: RMX_ENODEV (no device here),
   * RMX_ENOMEM, RMX_ENOTSUP. */
  int (*init)(const rmx_tp_env_t *env, rmx_tp_t **tp);
  /* Release it; every listener and connection is already closed. */
  void (*fini)(rmx_tp_t *tp);
  /* List the devices this transport can use (rmx_device_list): a malloc'ed
   * array in *out, *n entries (0 and NULL when the host has none). Needs no
   * instance; may block briefly on the local kernel (opens each device).
   * Errors: RMX_ENOTSUP (a transport without devices), RMX_ENOMEM. */
  int (*devices)(rmx_device_info_t **out, int *n);

  /* Bind and listen on sa. Incoming peers go to env->incoming(owner, ...).
   * With sa NULL (transports with gate_open): a group member's listener,
   * whose peers come from feed; listen_addr is not called on it.
   * Errors: RMX_EADDRINUSE, RMX_EADDRNOTAVAIL, RMX_EACCES, RMX_EINVAL,
   * RMX_ENODEV (verbs: no device on that address), RMX_ENOTSUP (verbs: the
   * address's device is not the one this context uses), RMX_ENOMEM,
   * RMX_EIO. */
  int (*listen)(rmx_tp_t *tp, const struct sockaddr *sa, void *owner, rmx_tp_listener_t **out);
  /* The bound address (the port chosen when sa asked for port 0). */
  int (*listen_addr)(rmx_tp_listener_t *l, struct sockaddr_storage *ss);
  /* The peer's address of a connection that is open (for logs: the core
   * names connections by it). 0, or an error when the transport has none. */
  int (*peer_addr)(rmx_tp_conn_t *tc, struct sockaddr_storage *ss);
  /* Optional (NULL: none): this side's address of a connection that is
   * open (rmx_conn_local_addr). 0, or an error when the transport has none
   * yet (verbs: before the route is resolved). */
  int (*local_addr)(rmx_tp_conn_t *tc, struct sockaddr_storage *ss);
  /* Optional (NULL: none): a short name the transport knows an open
   * connection by, for the core's logs after the peer's address (verbs:
   * "QP 0x15"). 0, or an error when there is none yet. */
  int (*conn_label)(rmx_tp_conn_t *tc, char *buf, size_t len);
  /* Stop listening and free; no further incoming calls. Peers whose
   * request is not answered yet are dropped (TCP: their connect reports
   * RMX_ECONNRESET; verbs: a reject). */
  void (*listen_close)(rmx_tp_listener_t *l);
  /* Optional (NULL: the core refuses instead): pause (1) or resume (0)
   * taking new peers, which wait meanwhile where the system holds them
   * (TCP: the kernel's listen backlog; verbs: requests held unanswered,
   * refused after cfg->connect_timeout_ms). TCP also pauses on its
   * own while cfg->max_handshakes peers are before their hello, and drops
   * a peer whose hello has not come within cfg->handshake_timeout_ms.
   * Never calls back. */
  void (*listen_pause)(rmx_tp_listener_t *l, int pause);

  /*
   * Listener groups (src/conn/group.c). Optional: gate_open NULL means the
   * transport has none, and then every gate op is NULL. A gate is a
   * listening endpoint no context owns. Every member context's loop
   * watches *fd; the one that sees it readable takes the waiting peers
   * under the group's lock and hands each to one member: gate_give moves
   * it to that member's transport instance, whose listener (made by
   * listen with sa NULL: it has no address of its own) gets it from
   * feed. Gate ops are called from any thread, one at a time under the
   * group's lock; they neither log nor call back.
   */
  /* Bind and listen on sa. Errors as for listen. */
  int (*gate_open)(const struct sockaddr *sa, rmx_tp_gate_t **g, int *fd);
  int (*gate_addr)(rmx_tp_gate_t *g, struct sockaddr_storage *ss);
  /* The next waiting peer in *raw: 0, RMX_EAGAIN (none now), or an error
   * meaning no peer can be taken now (RMX_EMFILE: out of descriptors). */
  int (*gate_take)(rmx_tp_gate_t *g, rmx_tp_raw_t **raw);
  /* raw goes to tp's listener (verbs: its request moves to tp's event
   * channel), or back to the gate with tp NULL, to wait there for a
   * member. On error raw is unchanged and the core drops it. */
  int (*gate_give)(rmx_tp_gate_t *g, rmx_tp_raw_t *raw, rmx_tp_t *tp);
  /* Refuse a peer no member will take (its connect fails) and free raw. */
  void (*gate_drop)(rmx_tp_raw_t *raw);
  void (*gate_close)(rmx_tp_gate_t *g);
  /* On a member's listener, from its loop: take raw, which waits like a
   * peer in a listen backlog (paused, or past the handshake limit) and
   * comes to env->incoming from the loop, never inside this call. */
  void (*feed)(rmx_tp_listener_t *l, rmx_tp_raw_t *raw);
  /* A fed peer the listener has not taken yet, oldest first, for another
   * member when this one leaves; NULL when none is left. */
  rmx_tp_raw_t *(*unfeed)(rmx_tp_listener_t *l);

  /* Start connecting to sa; hello (at most hello_max bytes) is copied.
   * ESTABLISHED (with the peer's hello) or DISCONNECTED follows, from the
   * loop. May block briefly on the local kernel (verbs resolves a route).
   * Errors (nothing follows): RMX_EINVAL (hello too long, bad address),
   * RMX_ENOMEM, RMX_ENODEV, RMX_ENETUNREACH, RMX_EHOSTUNREACH,
   * RMX_EADDRNOTAVAIL, RMX_EACCES, RMX_EAGAIN, RMX_EIO. */
  int (*connect)(rmx_tp_t *tp, const struct sockaddr *sa, const void *hello, size_t len,
                 void *owner, rmx_tp_conn_t **out);
  /* Answer an incoming request (inside env->incoming) with our hello;
   * ESTABLISHED or DISCONNECTED follows. On error the core calls reject().
   * Errors: RMX_EINVAL (hello too long), RMX_ENOMEM, RMX_EMEMLOCK and
   * RMX_EACCES (verbs: registering the receive buffers), RMX_ENODEV,
   * RMX_EIO. */
  int (*accept)(rmx_tp_conn_t *tc, void *owner, const void *hello, size_t len);
  /* Refuse an incoming request with a status the peer's connect reports;
   * the transport frees tc, and raises no event for it. */
  void (*reject)(rmx_tp_conn_t *tc, int status);
  /* Abort I/O; posted ops complete with RMX_ECANCELED; CLOSED follows, and
   * tc is freed after it. Called once per connection. */
  void (*close)(rmx_tp_conn_t *tc);
  /* Optional: the orderly end, called instead of close() once the last
   * frame (BYE) has its SEND event. Everything sent reaches the peer
   * before CLOSED follows; the peer's end decides when (TCP: our FIN, then
   * the peer's). close() may still follow, and cuts it short: the core's
   * close deadline. NULL where a SEND event already means delivered
   * (verbs: the RC acknowledgement): the core calls close(). */
  void (*finish)(rmx_tp_conn_t *tc);

  /* Send one frame gathered from sge[0..n) (n <= RMX_TP_MAX_SGE): the
   * core's frame, whose 8-byte header (docs/protocol.md, "Frames") lies
   * whole in sge[0] (TCP carries its fields in the stream frame's header).
   * The memory stays the caller's until the SEND event. A transport may hold
   * posted work until flush(), and may start it sooner: verbs posts what
   * its own completion callbacks posted at the end of that batch of
   * completions, the core's flush then finding nothing. Errors (not
   * posted): RMX_EAGAIN (verbs: the send queue is full: try again after a
   * completion; TCP queues without
   * bound), RMX_ENOTCONN (not established or going down), RMX_EMSGSIZE
   * (longer than a receive buffer: TCP checks this side's eager size, verbs
   * the negotiated one), RMX_EINVAL (n outside 1..RMX_TP_MAX_SGE, or an
   * unregistered element where the transport needs registration),
   * RMX_ENOMEM. With RMX_TP_F_SEND_COPY, op may be NULL (see there). */
  int (*send)(rmx_tp_conn_t *tc, const rmx_tp_sge_t *sge, int n, void *op);
  /* Read len (<= max_io) bytes at the peer's raddr (key rkey) into dst;
   * dst_mem is its registration (required with RMX_TP_F_LOCAL_REG). The
   * READ event's status says whether the peer allowed it (RMX_EACCES);
   * RMX_ECANCELED when the target cut the connection because the memory
   * was released under the answer. Errors as for send. TCP takes reads of
   * any length (the answer comes in chunks); verbs splits at the device's
   * largest message. */
  int (*read)(rmx_tp_conn_t *tc, void *dst, size_t len, rmx_tp_mem_t *dst_mem,
              uint64_t raddr, uint64_t rkey, void *op);
  /* Write len (<= max_io) bytes from src at the peer's raddr. With imm
   * non-NULL the peer gets an IMM event after the data, and one of its
   * receive buffers is used. Errors as for send, and RMX_EMSGSIZE for
   * len > max_io (verbs: more chunks of the port's largest message than its
   * send ring holds, see io_max; it answers RMX_EAGAIN until the ring has
   * room for all of an operation's chunks). */
  int (*write)(rmx_tp_conn_t *tc, const void *src, size_t len, rmx_tp_mem_t *src_mem,
               uint64_t raddr, uint64_t rkey, const uint32_t *imm, void *op);
  /* An 8-byte atomic at raddr (8-byte aligned); *old is written before an
   * ATOMIC event of status 0. Errors as for send, and RMX_ENOTSUP where the
   * device has no atomics; a misaligned raddr is refused by the target
   * (RMX_EINVAL in the event on TCP, a remote error on verbs). */
  int (*atomic)(rmx_tp_conn_t *tc, rmx_tp_atomic_t kind, uint64_t raddr, uint64_t rkey,
                uint64_t cmp_add, uint64_t swap, uint64_t *old, void *op);
  /* RMX_TP_CAP_* of an established connection. */
  unsigned (*caps)(rmx_tp_conn_t *tc);
  /* Optional (NULL: max_io): the longest read or write an established
   * connection takes at once, where less than max_io (verbs: the chunks
   * of the port's largest message that half its send ring holds). */
  size_t (*io_max)(rmx_tp_conn_t *tc);
  /* Start everything queued since the last flush (one doorbell). */
  void (*flush)(rmx_tp_conn_t *tc);
  /* Optional (NULL: the transport's own retries find it, as verbs' RC
   * does): 1 when bytes for the peer wait and it has taken none of them
   * since the previous call. The core's keepalive asks every period and
   * ends a connection stuck for RMX_KEEPALIVE_TIMEOUT_MS: a peer that
   * talks but never reads (TCP's user timeout spares a connection whose
   * peer's host keeps acknowledging, and sends, with its window shut). */
  int (*stuck)(rmx_tp_conn_t *tc);
  /* Optional (NULL: the device answers reads without the peer's process,
   * and the read's own failure finds a lost peer, as verbs' RC retries
   * do): 1 when bytes came from the peer since the previous call. The
   * core's keepalive asks while it reads from the peer, whose answer
   * brings no frame of the core's until it is whole: where the peer's
   * process answers (TCP, shm), only bytes coming show it is there, and a
   * peer stopped mid-answer is lost after RMX_KEEPALIVE_TIMEOUT_MS. */
  int (*heard)(rmx_tp_conn_t *tc);
  /* The core has accepted the peer (authenticated, when configured): its
   * remote reads, writes and atomics may be served from now on (TCP; verbs
   * cannot hold them back and serves them from connection time, see
   * docs/security.md). Called once, after ESTABLISHED; never calls back. */
  void (*ready)(rmx_tp_conn_t *tc);

  /* Register [addr, addr+len) with RMX_TP_ACC_* rights. With remote
   * rights and scope non-NULL: only that connection's peer may reach the
   * memory, with the key mem_rkey gives (verbs: a type-2 memory window
   * bound to scope's QP, its bind queued on that QP ahead of any later
   * send; TCP: the target checks the connection). With scope NULL the
   * registration is reachable by no peer until mem_open (a capability) or
   * mem_grant (a connection's key). May block (verbs pins pages). Keys are
   * unguessable where the transport makes them.
   * Errors: RMX_ENOMEM, RMX_EMEMLOCK (the locked-memory limit; verbs
   * reports any pinning failure so while the limit is finite), RMX_EACCES,
   * RMX_EINVAL, RMX_EAGAIN, RMX_EIO, RMX_ENODEV (verbs: no device opened
   * yet), RMX_ENOTCONN (scope is going down), RMX_ENOTSUP (verbs: remote
   * rights with a scope on a device without type-2 windows). */
  int (*mem_reg)(rmx_tp_t *tp, void *addr, size_t len, unsigned access, rmx_tp_conn_t *scope,
                 rmx_tp_mem_t **out);
  /* Make m (registered with scope NULL) reachable by any peer of this
   * instance holding mem_rkey(m): a capability key. Idempotent. Errors as
   * for mem_reg (verbs registers the memory again, with remote access). */
  int (*mem_open)(rmx_tp_mem_t *m);
  /* A key to m's memory, with m's rights, that only tc's peer may use:
   * mem_reg with scope tc, made from m without registering again (verbs: a
   * window over m's region). Released with mem_dereg, before m is. Errors
   * as for mem_reg. */
  int (*mem_grant)(rmx_tp_mem_t *m, rmx_tp_conn_t *tc, rmx_tp_mem_t **out);
  /* Release a registration. After it returns the transport never touches
   * the memory again and no new remote access starts. Local ops posted
   * with it must have completed (the core keeps that). A remote operation
   * in progress on it fails at its initiator (TCP: RMX_EACCES, the
   * connection stays; a TCP read answer still queued on a socket cuts that
   * connection: the initiator's READ fails with RMX_ECANCELED and it sees
   * RMX_ECONNRESET; verbs: a remote access error, which ends that
   * connection). Never blocks on a peer. Should the device refuse to
   * deregister (verbs), that is logged and the key stays valid: a known
   * gap, not a promise. */
  void (*mem_dereg)(rmx_tp_mem_t *m);
  /* The key a peer names this registration by (valid until mem_dereg; of
   * a registration made with scope NULL, after mem_open). */
  uint64_t (*mem_rkey)(const rmx_tp_mem_t *m);

  /* RMX_TP_F_LOOP_SPIN transports, optional: called once per loop turn
   * while the core busy-polls. Look for input without waiting and handle
   * what is there as the loop would (callbacks may run). Returns 1 when it
   * found some. */
  int (*spin)(rmx_tp_t *tp);
  /* The polling fast path (rmx_ctx_progress): handle what is ready now,
   * without waiting and without the loop: verbs drains its CQs (giving
   * receive buffers back and posting what the callbacks built, one
   * doorbell per connection); TCP reports the sends that ended and reads
   * the connection that last had input. The one exception to "events come
   * from the loop": events are raised from inside this call, which the
   * core makes only from its progress call, outside every other callback.
   * What needs the loop (connection events, timers, deferred failures)
   * waits for its next turn; *turn is set nonzero when the transport knows
   * of input only a turn reads now (TCP: another socket is readable).
   * Returns how many completions or frames it handled. */
  int (*poll)(rmx_tp_t *tp, int *turn);
  /* Optional (NULL: nothing of the kind): poll's first half alone, the
   * sends that ended (TCP: written at once) reported now, no input read
   * (rmx_ctx_flush). Same rules as poll; returns how many it reported. */
  int (*reap)(rmx_tp_t *tp);
  /* Optional (NULL: none): the instance's numbers for rmx_ctx_stats_get,
   * added to *st (rmx_tp_stats_t). */
  void (*stats)(rmx_tp_t *tp, rmx_tp_stats_t *st);
} rmx_tp_ops_t;

#endif
