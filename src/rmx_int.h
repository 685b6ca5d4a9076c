/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal definitions of the transport-independent core. */
#ifndef RMX_INT_H
#define RMX_INT_H

#include <rmx/rmx.h>
#include <stdatomic.h>
#include <uv.h>

#include "base/error.h"
#include "base/list.h"
#include "base/log.h"
#include "base/uri.h"
#include "registry.h"
#include "msg/wire.h"
#include "conn/guard.h"

#define RMX_HIDDEN __attribute__((visibility("hidden")))

/* Log at the context's level. */
#define RMX_LOG(ctx, lvl, ...) RMX_LOG_AT((ctx)->cfg.log_level, lvl, __VA_ARGS__)
/* Log a refusal a peer can repeat at will: one line per second at most
 * per limiter rl, with the count of those held back (base/log.h). */
#define RMX_LOG_LIMITED(ctx, rl, lvl, ...) \
  RMX_LOG_LIMITED_AT(rmx__log, (ctx)->cfg.log_level, rl, uv_now((ctx)->loop), lvl, __VA_ARGS__)
#define RMX_CALL_BUCKETS 64
#define RMX_ALIVE_QS 4 /* liveness periods kept apart; more share the shortest */

/* Limits on both sides of the handshake: this side's configuration and a
 * peer's hello (docs/protocol.md). */
#define RMX_EAGER_MIN 256u
#define RMX_EAGER_MAX (1u << 20)
#define RMX_DEPTH_MIN 4u
#define RMX_DEPTH_MAX 16384u
#define RMX_RMA_WINDOW_MAX 4096u
#define RMX_SILENCE_MIN 100u /* shortest silence limit, ms (keepalive) */
#define RMX_HANDLER_BUCKETS 64
_Static_assert(RMX_EAGER_MSG_MIN == RMX_EAGER_MIN - RMX_WIRE_HDR_LEN,
               "rmx_send copies what fits the smallest receive buffer a peer may offer");

/* ---- deferred work: runs from the loop, never inside an API call ---- */
typedef struct rmx__deferred {
  rmx_list_t link;
  void (*fn)(struct rmx__deferred *d);
} rmx__deferred_t;

void rmx__defer(rmx_ctx_t *ctx, rmx__deferred_t *d);
/* Queue d unless it is queued already; d->link must start initialised. */
static inline void rmx__defer_once(rmx_ctx_t *ctx, rmx__deferred_t *d)
{
  if (rmx_list_empty(&d->link))
    rmx__defer(ctx, d);
}

/* ---- buffer pool ---- */
#define RMX_BUF_HEADROOM 64 /* room for a frame header before the payload */
/* An op holds its own frame in frame[]: control frames, RTS, and eager messages
 * so small that they need no pool buffer (any transport takes them unregistered). */
#define RMX_OP_FRAME_MAX RMX_TP_SMALL_FRAME
_Static_assert(RMX_WIRE_CTRL_MAX <= RMX_OP_FRAME_MAX, "control frames fit in an op");
/* Where a DATA frame starts in a pool buffer: its header, then ext bytes
 * (the RPC extension, if any), then the payload at rmx_buf_data(). */
#define RMX_BUF_FRAME(b, ext) ((b)->base + RMX_BUF_HEADROOM - RMX_WIRE_HDR_LEN - (ext))
#define RMX_POOL_MIN_SHIFT 8
#define RMX_POOL_CLASSES 13 /* 256 B .. 1 MiB, doubling */

typedef struct rmx__slab rmx__slab_t;

struct rmx_buf {
  rmx_list_t link;
  rmx__slab_t *slab;
  uint8_t *base;   /* headroom, then the user's bytes */
  uint32_t cap;    /* user bytes */
  int8_t cls;      /* size class, or -1 for a dedicated allocation */
};

typedef struct rmx__pool {
  rmx_list_t free[RMX_POOL_CLASSES];
  rmx_list_t slabs;
  size_t bytes; /* allocated, for stats and limits */
  rmx__slab_t *spare; uint64_t spare_at; /* large buffers given back (pool.c), the last when */
} rmx__pool_t;

void rmx__pool_init(rmx__pool_t *p);
void rmx__pool_fini(rmx_ctx_t *ctx, rmx__pool_t *p);
void rmx__pool_trim(rmx_ctx_t *ctx, uint64_t now); /* spares go RMX_POOL_SPARE_MS after */
int rmx__buf_alloc(rmx_ctx_t *ctx, size_t size, rmx_buf_t **out);
void rmx__buf_free(rmx_ctx_t *ctx, rmx_buf_t *b);
/* The buffer's registration with transport tpi, made on first use. */
int rmx__buf_mem(rmx_ctx_t *ctx, rmx_buf_t *b, int tpi, rmx_tp_mem_t **out);
int rmx__pool_class(size_t size); /* class index, or -1 when too large */

/* ---- operations: sends, control frames, inbound messages ---- */
typedef enum {
  RMX_OP_EAGER,  /* a user message in one DATA frame */
  RMX_OP_RNDV,   /* a user message by rendezvous: RTS now, FIN later */
  RMX_OP_CTRL,   /* an internal frame: CREDIT, FIN, BYE */
  RMX_OP_RX,     /* an inbound message waiting for in-order delivery */
  RMX_OP_RMA,    /* a user one-sided operation (read, write, atomic) */
  RMX_OP_RMA_IMM, /* a user write-with-immediate: spends a credit, in sendq */
  RMX_OP_XFER,   /* a posted transfer request (src/xfer/): op->arg is the rmx_xfer_t */
} rmx__op_kind_t;

/* ---- registrations ---- */
struct rmx_mem {
  rmx_ctx_t *ctx;
  uint8_t *addr;
  size_t len;
  unsigned access;           /* RMX_MEM_* */
  rmx_tp_mem_t *reg[RMX_TP_COUNT];
  rmx_list_t grants;         /* rmx__grant_t: its keys packed for one connection */
  struct rmx__name *name;    /* published under it (src/names.c), or NULL */
  uint8_t cap;               /* packed as a capability (rmx_mem_pack) */
};

/* A key to a registration that one connection's peer alone may use
 * (rmx_mem_pack_for), until revoked, deregistered or the connection ends. */
typedef struct rmx__grant {
  rmx_list_t mem_link;  /* in m->grants */
  rmx_list_t conn_link; /* in c->grants */
  rmx_mem_t *m;
  rmx_conn_t *c;
  rmx_tp_mem_t *tm;     /* the transport's scoped key */
} rmx__grant_t;

/* Lanes of a connection: its own queue pair (0) and its rails (src/rails.c). */
#define RMX__LANES (RMX_RAILS_MAX + 1)

struct rmx_rkey {
  int tpi;
  unsigned access;
  uint64_t base, len, key;
  uint8_t lanes;                  /* bit l: lane_key[l] holds the key for rail l */
  uint64_t lane_key[RMX__LANES];  /* [0] = key */
};

#include "mem/regcache.h" /* the registration cache, the unmap hooks */

/* A one-sided operation's state: kept apart from rmx__op_t, from a freelist. */
#define RMX_RMA_MAX_IOV 16
typedef struct rmx__rma {
  rmx_list_t link;      /* freelist */
  uint8_t kind;         /* RMX_TP_EV_READ / WRITE / ATOMIC */
  int iovcnt;
  rmx_iov_t iov[RMX_RMA_MAX_IOV];
  rmx_tp_mem_t *lmem[RMX_RMA_MAX_IOV];
  rmx__rc_entry_t *cached[RMX_RMA_MAX_IOV];
  uint64_t raddr, rkey;
  uint32_t imm;
  rmx_tp_atomic_t akind;
  uint64_t cmp_add, swap;
  uint64_t *old;
  int next_iov;         /* posting position */
  size_t next_off;
  uint32_t posted, done;
  uint8_t all_posted;
} rmx__rma_t;

typedef struct rmx__op {
  rmx_list_t link;
  rmx_conn_t *conn;
  uint8_t kind;
  uint8_t ctrl;       /* frame type for CTRL ops */
  uint8_t sent;       /* RNDV: the RTS send completed */
  uint8_t ready;      /* RX: data complete */
  uint16_t reading;   /* RX: reads in flight (parts of at most the connection's io_max) */
  uint8_t user_buf;   /* buf belongs to the user's rmx_send_buf() */
  int status;
  rmx_send_cb cb;
  void *arg;
  rmx_buf_t *buf;     /* EAGER: frame; RX: held eager copy */
  const void *data;   /* RNDV: the message; RX: where it is */
  size_t len, read_off; /* RX: read_off bytes of len asked for so far */
  rmx_tp_mem_t *mem;  /* RNDV source / RX destination registration */
  void *heap;         /* RX: rendezvous destination */
  uint64_t id;
  rmx_wire_rts_t rts; /* RX: where to read from */
  rmx__rma_t *rma;    /* RMA ops */
  uint32_t imm;       /* RX: a held write-with-immediate */
  uint8_t is_imm;
  uint8_t rpc_flag;   /* RMX_FF_RPC_REQ / _REP: the frame carries rpcx */
  rmx_wire_rpc_t rpcx;
  uint32_t frame_len; /* CTRL/RNDV/small EAGER: bytes in frame[] */
  uint8_t frame[RMX_OP_FRAME_MAX];
} rmx__op_t;

#include "msg/credit.h" /* credits: pure bookkeeping, no I/O */

/* ---- op classes: how the scheduler and the event dispatch treat an op,
 * installed per kind by the layer that owns the kind ---- */
typedef struct rmx__op_class {
  /* The transport reported the op (SEND, READ, WRITE, ATOMIC). */
  void (*done)(rmx_conn_t *c, rmx__op_t *op, int status);
  /* The op ends unreported: the connection went down before it was posted,
   * or the transport has reported every posted part. */
  void (*fail)(rmx__op_t *op, int status);
  /* Post from the send queue (kinds that wait for credits there besides
   * messages); 0, RMX_EAGAIN (later), or an error that ends the connection. */
  int (*post)(rmx_conn_t *c, rmx__op_t *op);
} rmx__op_class_t;
#define RMX_OP_KINDS 7

/*
 * Upcalls: what lower core layers call in the layers above them. Installed
 * by rmx_ctx_create (ctx.c), so no file calls up by name: the connection
 * object knows nothing of messages, the message layer nothing of RPC,
 * one-sided operations or authentication.
 */
typedef struct rmx__upcalls {
  /* conn.c, once the transport has closed: each layer fails what it holds,
   * in this order (request sends first, so their calls then end). */
  void (*msg_fail)(rmx_conn_t *c, int status);  /* recv.c */
  void (*rpc_fail)(rmx_conn_t *c, int status);  /* rpc.c */
  void (*auth_end)(rmx_conn_t *c);              /* auth.c */
  /* conn.c, down and reported, not closed by the application. */
  void (*conn_retry)(rmx_conn_t *c);            /* reconnect.c */
  /* conn.c, a first connect failed: 1 when auto:// tries the next transport */
  int (*conn_fallback)(rmx_conn_t *c, int status); /* choose.c */
  /* conn.c, destroying: RPC requests never answered end with the context. */
  void (*rpc_drop)(rmx_conn_t *c);              /* rpc.c */
  /* conn.c: a connection was freed while the context is dying. */
  void (*conn_freed)(rmx_ctx_t *ctx);           /* ctx.c */
  /* sched.c: the one-sided queue may go on (a slot or a window place freed). */
  void (*rma_progress)(rmx_conn_t *c);          /* rma.c */
  /* sched.c: rendezvous reads held back for room may start. */
  void (*reads_resume)(rmx_conn_t *c);          /* recv.c */
  /* recv.c: an inbound message with an RPC extension, delivered in order;
   * 1 when the RPC layer holds it and returns its credit later. */
  int (*rpc_deliver)(rmx_conn_t *c, uint8_t flag, const rmx_wire_rpc_t *x, const void *data,
                     size_t len);                /* rpc.c */
  /* The fast path: end the RPC deadlines that are due (ctx->deadlines not
   * empty; reads the clock). */
  void (*rpc_due)(rmx_ctx_t *ctx);               /* rpc.c */
  /* recv.c: a notification (DATA with RMX_FF_NOTIFY), in order; 1 when it
   * is kept and its credit returned later. */
  int (*notify_deliver)(rmx_conn_t *c, const void *data, size_t len); /* xfer/notify.c */
  /* conn.c, freeing c after its on_closed: what points at it lets go. */
  void (*conn_gone)(rmx_conn_t *c);              /* xfer/xfer.c */
  /* reg.c: m's name goes (c NULL: deregistering), or c's key to m does. */
  void (*name_forget)(rmx_mem_t *m, rmx_conn_t *c); /* names.c */
  /* connect.c: whether a rail's token is on offer here; a rail accepted
   * (established) joins the connection it serves instead of on_accept. */
  int (*rail_offered)(rmx_ctx_t *ctx, uint64_t token); /* rails.c */
  void (*rail_attach)(rmx_conn_t *c);                    /* rails.c */
  /* conn.c, once the transport has closed: a connection's rails go. */
  void (*rails_down)(rmx_conn_t *c);                     /* rails.c */
} rmx__upcalls_t;

/* ---- objects ---- */
typedef enum {
  RMX_CS_RESOLVING,   /* active: looking up the host */
  RMX_CS_CONNECTING,  /* active: transport handshake */
  RMX_CS_ACCEPTING,   /* passive: accepted, waiting for ESTABLISHED */
  RMX_CS_AUTH,        /* transport up, authentication frames in flight (src/conn/auth.c) */
  RMX_CS_ESTABLISHED,
  RMX_CS_DOWN,        /* disconnected or closing: no new I/O */
} rmx__conn_state_t;

/* FINISHING: the transport's orderly end (ops->finish) is under way;
 * close() may still cut it short. */
typedef enum {
  RMX_TPS_NONE,
  RMX_TPS_OPEN,
  RMX_TPS_FINISHING,
  RMX_TPS_CLOSING,
  RMX_TPS_CLOSED
} rmx__tp_state_t;

struct rmx_listener {
  rmx_ctx_t *ctx;
  rmx_list_t link;
  int tpi;
  rmx_tp_listener_t *tl;
  /* the same listener over other transports (src/conn/choose.c); an alias's parent */
  struct rmx_listener *alias[RMX_TP_COUNT - 1], *parent;
  rmx_accept_cb on_accept;
  void *arg;
  int closed;
  struct rmx__member *member; /* a listener group's member (src/conn/group.h), or NULL */
  uint32_t refs;       /* 1 for the user + 1 per connection it made (+ 1 as a member) */
  uint32_t nconns;     /* connections it made, not yet freed */
  uint32_t naccepting; /* of those, still in their handshake */
  uint8_t paused;      /* the transport's listener is paused: naccepting is at the limit */
  rmx__ratelimit_t rl_full; /* full: refusals, and evictions (RMX_EVICT_IDLE) */
  rmx_list_t evict;    /* RMX_EVICT_IDLE: established ones (ka.evict_link), idlest first */
  uint32_t nevicted;   /* of nconns, evicted and not yet freed (src/msg/alive.c) */
};

/* Peer authentication of one connection (src/conn/auth.c): the transcript both
 * proofs cover, and the deadline while its AUTH / AUTH_OK is awaited. */
typedef struct rmx__auth_conn {
  uint8_t on;        /* this connection authenticates */
  uint8_t waiting;   /* in ctx->authing */
  uint8_t chello[RMX_WIRE_HELLO_AUTH_CONNECT_LEN]; /* connecting side's hello + nonce */
  uint8_t shello[RMX_WIRE_HELLO_AUTH_CONNECT_LEN]; /* accepting side's hello + nonce */
  uint8_t ranged;    /* both sides sent a range: the transcript covers both */
  uint8_t crange[RMX_WIRE_RANGE_LEN]; /* connecting side's range, as sent */
  uint8_t srange[RMX_WIRE_RANGE_LEN]; /* accepting side's range, as sent */
  rmx_list_t link;   /* in ctx->authing while AUTH / AUTH_OK is awaited */
  uint64_t deadline;
} rmx__auth_conn_t;

/* Liveness of one connection (src/msg/alive.c). Times are uv_now(). */
typedef struct rmx__alive {
  uint64_t last_rx;    /* something came from the peer */
  uint64_t last_tx;    /* a frame went to the peer */
  uint64_t credit_at;  /* credits came back enough for a message */
  uint64_t blocked_at, stuck_at; /* messages wait for credits; bytes not taken; 0: not */
  uint32_t peer_limit; /* the peer's silence limit (its hello); 0: none */
  uint32_t send_ms, every; /* send a frame after send_ms without one (0: never); look every */
  uint8_t due, idle, evicted; /* a keepalive is queued, nothing gone since; closed: idle, evicted */
  rmx_list_t link;     /* in its period's queue (ctx->alive_q) while watched */
  uint64_t check_at, last_msg; /* when it is looked at next; a message came or went */
  rmx_list_t evict_link; /* in from->evict while established (RMX_EVICT_IDLE) */
} rmx__alive_t;

/* Reconnect of a client connection (src/conn/reconnect.c). */
typedef struct rmx__recon {
  uint32_t min_ms, max_ms, tries; /* rmx_connect_opts_t; min_ms 0: off */
  rmx_reconnect_cb cb;
  unsigned attempt;  /* the attempt waiting or under way; 0 while connected */
  uint64_t due;      /* when it starts (uv_now) */
  rmx_list_t link;   /* in ctx->reconnecting while it waits */
} rmx__recon_t;

struct rmx_conn {
  rmx_ctx_t *ctx;
  rmx_list_t link;
  int tpi;
  const rmx_tp_ops_t *ops;
  /* auto://: the transports to try, and which; by_name: shm://NAME (src/conn/choose.c) */
  uint8_t auto_slot[RMX_TP_COUNT], auto_n, auto_i, by_name;
  rmx_tp_conn_t *tc;
  rmx__conn_state_t state;
  rmx__tp_state_t tp_state;
  uint8_t passive, user_closed, reported, was_established, finished;
  uint8_t credit_queued, stalled, freeing, flush_queued; /* flush_queued: in ctx->flushq */
  uint8_t bye_wait; uint32_t close_sends; /* closing: messages to send before BYE (sched.c) */
  rmx_list_t flush_link;
  int err;              /* why the connection went down */
  rmx_listener_t *listener; /* passive, while accepting */
  rmx_listener_t *from;     /* passive: the listener that made it (counted there) */
  rmx_list_t close_link;    /* in ctx->closing while an orderly close may wait */
  uint64_t close_deadline;
  rmx_connect_cb on_connected;
  void *connect_arg;
  rmx_conn_cbs_t cbs;
  void *cbs_arg;
  rmx_close_cb on_closed;
  void *close_arg;
  uv_getaddrinfo_t gai;
  int gai_active;
  char host[256], port[8];
  char peer[272];       /* the peer's address, for logs: "host:port" */
  uint16_t wire_version; /* the protocol version both sides agreed on (src/conn/connect.c) */
  uint32_t features;     /* RMX_FEAT_* both sides have */
  /* Both ends' addresses, taken when the connection became established
   * (rmx_conn_peer_addr, rmx_conn_local_addr): addrs_taken is 1 from then
   * on; has_peer_ss and has_local_ss say which of the two the transport
   * could tell (a peer already gone has no peer address left to read). */
  struct sockaddr_storage peer_ss, local_ss;
  uint8_t addrs_taken, has_peer_ss, has_local_ss;

  rmx__credit_t cr;     /* flow control */
  uint32_t eager_max;   /* largest payload in one DATA frame */
  uint64_t max_msg;
  uint32_t rndv_reads;  /* reads in flight */
  uint32_t rma_window;  /* the peer serves this many remote requests at once */
  uint32_t rma_out;     /* remote reads, writes, atomics in flight (rendezvous too) */
  uint8_t reads_blocked; /* a rendezvous read waits for room */
  uint64_t next_id;

  rmx_list_t ctrlq;     /* control frames waiting (before sendq) */
  rmx_list_t sendq;     /* user messages waiting for credits */
  rmx_list_t rndv_wait; /* sent RTS, waiting for FIN */
  rmx_list_t rxq;       /* inbound messages held for in-order delivery */
  rmx_list_t rmaq;      /* one-sided operations waiting for send-queue room */
  rmx_list_t reqq;      /* RPC requests waiting for a handler slot */
  rmx_list_t reqs_out;  /* RPC requests with their handlers, not yet answered */
  rmx_list_t grants;    /* rmx__grant_t: keys packed for this peer alone */
  rmx__guard_conn_t guard; /* its keys withdrawn since, and refused lately (src/conn/guard.c) */
  rmx_list_t xfers;     /* rmx_xfer_t prepared on it (src/xfer/xfer.c) */
  rmx_list_t notifq;    /* notifications kept for rmx_notify_take (src/xfer/notify.c) */
  struct rmx__names_conn *names; /* names looked up on it (src/names.c), or NULL */
  rmx_list_t calls[RMX_CALL_BUCKETS]; /* our RPC calls by id */
  uint32_t rpc_out, rpc_in;
  uint64_t rpc_held_bytes; /* requests waiting for a handler slot, copied */
  uint64_t next_call;
  uint32_t ops_out;     /* ops that still point at this connection */
  rmx_conn_stats_t st;
  rmx__deferred_t defer_finish; /* tear down after a failure outside any transport */
  rmx__deferred_t defer_free;   /* on_closed, then free: the one way a conn is freed */
  rmx__deferred_t defer_connect; /* a socket name's connect (RMX_TP_F_LOCAL_NAME) */
  rmx__auth_conn_t auth;
  rmx__alive_t ka;
  rmx__recon_t recon;
  uint32_t epoch;       /* transport connections so far, less one (reconnect) */
  struct rmx__rails *rails; /* the lanes it is one of (src/rails.c), or NULL */
  uint8_t lane;             /* its place there: 0 the connection itself, else a rail */
  uint64_t rail_token;      /* a rail until attached: the token its hello carries */
};

struct rmx_ctx {
  uv_loop_t *loop;
  uv_loop_t own_loop;
  int owns_loop;
  rmx_config_t cfg;
  uv_idle_t idle;
  rmx_list_t deferred;
  rmx_list_t flushq;       /* connections with posts not yet handed over */
  rmx_list_t early;        /* sends done at their post, on_sent not yet run */
  uv_idle_t flush_idle;
  uv_prepare_t flush_prepare;
  uv_check_t flush_check;
  uv_idle_t spin_idle;     /* busy-polls the loop (RMX_TP_F_LOOP_SPIN transports) */
  uint8_t spin_mode;       /* 0: event progress; else poll or adaptive */
  uint8_t spin_on, spin_active;
  uint64_t spin_ns;        /* adaptive: spin_us in ns; poll: 0, never stops */
  uint64_t spin_quiet;     /* uv_hrtime when quiet was first seen; 0: not yet */
  uv_async_t async;
  uv_mutex_t post_lock;
  rmx_list_t posted;
  int destroying;  /* no more posts (under post_lock): set as destroy begins */
  _Atomic int posters; /* rmx_ctx_post calls inside the function (any thread) */
  _Atomic int post_due; /* a post waits: a spinning pass turns the loop now */
  int dying;       /* rmx_ctx_destroy was called: finishing, then freed */
  int running;     /* inside rmx_ctx_run */
  int stop;        /* rmx_ctx_stop was called (the spinning rmx_ctx_run) */
  unsigned passes, busy; /* fast-path passes since the loop last turned; of them, with work */
  uint64_t turned_at;      /* uv_hrtime of the last turn while spinning */
  int turn_due;    /* a transport saw input only the loop's turn reads */
  int in_cb;       /* inside one of rmx's loop callbacks (user callbacks run there) */
  unsigned ran;    /* such callbacks entered, and deferred items run (rmx_ctx_progress) */
  int torn_down;
  uint32_t nmems;  /* user registrations not yet released */
  uint64_t mem_reg_bytes; /* their bytes */
  uint32_t nxfers; /* transfer requests not yet released */
  struct rmx__names *names; /* published registrations (src/names.c) */
  uint64_t nconns; /* on ctx->conns (rmx_ctx_stats) */
  int handles; /* internal uv handles not yet closed */
  rmx_list_t closing;   /* orderly closes with a deadline, oldest first */
  uint32_t nmetas;      /* metadata handles not yet closed (src/meta) */
  uv_timer_t close_timer;
  rmx__upcalls_t up;
  const rmx__op_class_t *opc[RMX_OP_KINDS];
  rmx_tp_env_t tp_env;  /* what the transports know of this context */
  rmx_tp_t *tp[RMX_TP_COUNT];
  const rmx_tp_ops_t *tp_ops[RMX_TP_COUNT];
  int tp_refused[RMX_TP_COUNT]; /* auto://: why one could not open, not tried again */
  rmx_list_t conns;
  rmx_list_t listeners;
  rmx__pool_t pool;
  rmx_list_t free_ops;  /* at most RMX__OPS_KEEP (rt.c): a burst's ops go back to malloc */
  rmx_list_t free_rma;
  uint64_t ops_allocated;
  uint32_t nfree_ops;
  rmx__regcache_t rc;
  rmx_ctx_stats_t st;
  rmx_list_t handlers[RMX_HANDLER_BUCKETS];
  rmx_list_t deadlines; /* RPC calls with a timeout, soonest first */
  uv_timer_t rpc_timer;
  rmx_list_t free_calls, free_reqs;
  /* peer authentication (src/conn/auth.c) */
  int auth_on;             /* a secret is configured: every connection authenticates */
  uint8_t auth_key[32];    /* derived from the secret; wiped at destroy */
  rmx_list_t authing;      /* connections in RMX_CS_AUTH, oldest first */
  uv_timer_t auth_timer;
  rmx__ratelimit_t rl_refused; /* refused hellos and failed authentications */
  rmx__ratelimit_t rl_proto;   /* connections closed for a peer's protocol error */
  rmx__ratelimit_t rl_xfer;    /* transfer entries refused at rmx_xfer_prep */
  rmx__guard_t guard;          /* peers whose refused remote accesses got them banned */
  uv_timer_t alive_timer;  /* liveness deadlines (src/msg/alive.c) */
  struct {
    uint32_t period;       /* 0: unused */
    rmx_list_t q;          /* connections (ka.link), soonest check_at first */
  } alive_q[RMX_ALIVE_QS];
  rmx_list_t reconnecting; /* connections waiting to reconnect, soonest first */
  uv_timer_t recon_timer;
  uint32_t recon_seed;     /* jitter */
};

/* Entering one of rmx's loop callbacks, from which user callbacks run:
 * rmx_ctx_progress() says it handled something when one ran. */
static inline void rmx__cb_enter(rmx_ctx_t *ctx)
{
  ctx->in_cb++;
  ctx->ran++;
}

#include "rt/rt.h" /* the runtime and the polling fast path */

/* ---- the connection object (src/rt/conn.c): states, the one way down, free ---- */
rmx_conn_t *rmx__conn_new(rmx_ctx_t *ctx, int tpi);
/* The connection stops carrying traffic: status 0 for an orderly close by
 * the peer. Safe to call more than once; the first cause wins. */
void rmx__conn_down(rmx_conn_t *c, int status);
void rmx__conn_tp_close(rmx_conn_t *c);      /* close the transport (once) */
void rmx__conn_tp_finish(rmx_conn_t *c);     /* its orderly end, after BYE */
void rmx__conn_closed(rmx_conn_t *c);        /* the transport's CLOSED */
void rmx__conn_close_watch(rmx_conn_t *c);   /* an orderly close with a deadline */
void rmx__listener_unref(rmx_listener_t *l);
void rmx__listener_slots(rmx_listener_t *l); /* pause or resume its transport listener */
/* ---- connection set-up (src/conn/connect.c) ---- */
void rmx__conn_established(rmx_conn_t *c, const rmx_tp_ev_t *ev);
/* Parse uri and open its transport (logs why not): 0, or the error for the caller. */
int rmx__uri_open(rmx_ctx_t *ctx, const char *uri, rmx__uri_t *u, int *tpi);
int rmx__conn_resolve(rmx_conn_t *c); /* resolve, then connect */
void rmx__conn_ready(rmx_conn_t *c);
/* The callbacks the transports are handed (rmx_tp_env_t). */
void rmx__tp_event(void *conn, const rmx_tp_ev_t *ev);  /* src/conn/event.c */
void rmx__tp_recv(void *conn, const void *data, size_t len);
void rmx__tp_incoming(void *listener, rmx_tp_conn_t *tc, const void *hello, size_t len);
int rmx__tp_strike(void *conn, const uint64_t *key);   /* src/conn/guard.c */

#include "msg/alive.h" /* liveness, idle closes, RMX_EVICT_IDLE */

/* ---- reconnect (src/conn/reconnect.c) ---- */
void rmx__reconnect_ctx_init(rmx_ctx_t *ctx);
int rmx__reconnect_opts(rmx_conn_t *c, const rmx_connect_opts_t *o);
void rmx__reconnect_lost(rmx_conn_t *c); /* the conn_retry upcall */
void rmx__reconnect_cancel(rmx_conn_t *c);

/* ---- the send scheduler (src/msg/sched.c): queues, posting, control frames ---- */
void rmx__msg_init(rmx_conn_t *c, const rmx_wire_hello_t *peer);
/* Send what credits allow: control frames, one-sided ops, messages. Most
 * calls (after every completion and message) find nothing waiting. */
void rmx__msg_progress_queued(rmx_conn_t *c);
static inline void rmx__msg_progress(rmx_conn_t *c)
{
  if (!rmx_list_empty(&c->ctrlq) || !rmx_list_empty(&c->rmaq) || !rmx_list_empty(&c->sendq) ||
      c->reads_blocked)
    rmx__msg_progress_queued(c);
}
/* A new message or write-with-immediate (op): posted now, or queued. */
void rmx__msg_submit(rmx_conn_t *c, rmx__op_t *op);
int rmx__msg_queue_fin(rmx_conn_t *c, uint64_t id, int32_t status);
int rmx__msg_queue_auth(rmx_conn_t *c, uint8_t type, const uint8_t *body, size_t len);
int rmx__msg_queue_bye(rmx_conn_t *c);
void rmx__msg_maybe_return_credits(rmx_conn_t *c);
/* A keepalive: a CREDIT frame that goes even when no credit is owed. */
int rmx__msg_queue_keepalive(rmx_conn_t *c);
/* One of our receive buffers is free again. */
void rmx__msg_credit_back(rmx_conn_t *c);
/* After a send completed (any kind): fail on error, let held work go. */
void rmx__msg_sent(rmx_conn_t *c, int status);
/* The status a user's operation reports for what the transport said. */
int rmx__op_status(rmx_conn_t *c, int status);
extern const rmx__op_class_t rmx__ctrl_class;

/* ---- sending messages (src/msg/send.c): eager and rendezvous ---- */
int rmx__msg_send(rmx_conn_t *c, const void *data, size_t len, rmx_buf_t *ubuf, uint8_t rpc_flag,
                  const rmx_wire_rpc_t *rpc, rmx_send_cb cb, void *arg, int *rndv);
/* The peer's FIN for one of our rendezvous messages: 0, or RMX_EPROTO. */
int rmx__msg_fin(rmx_conn_t *c, const rmx_wire_fin_t *fin);
/* Register a rendezvous source or destination for op; release it. */
int rmx__op_reg(rmx_conn_t *c, rmx__op_t *op, const void *addr, size_t len, unsigned access);
void rmx__op_unreg(rmx_conn_t *c, rmx__op_t *op);
extern const rmx__op_class_t rmx__send_class;

/* ---- receiving messages (src/msg/recv.c): in order, rendezvous reads ---- */
void rmx__msg_recv(rmx_conn_t *c, const void *frame, size_t len);
void rmx__msg_imm(rmx_conn_t *c, uint32_t imm, size_t len, int refused);
void rmx__msg_fail_all(rmx_conn_t *c, int status);
void rmx__msg_reads_resume(rmx_conn_t *c);
extern const rmx__op_class_t rmx__rx_class;

/* ---- clients of the message layer ---- */
void rmx__rpc_due(rmx_ctx_t *ctx);
int rmx__rpc_deliver(rmx_conn_t *c, uint8_t flag, const rmx_wire_rpc_t *x, const void *data,
                     size_t len);
void rmx__rpc_fail_all(rmx_conn_t *c, int status);
/* The context is being destroyed: requests never answered end with it. */
void rmx__rpc_drop_unanswered(rmx_conn_t *c);
void rmx__rpc_ctx_init(rmx_ctx_t *ctx);
int rmx__rpc_serve(rmx_ctx_t *ctx, uint32_t id, rmx_rpc_handler fn, void *arg); /* any id */
int rmx__rpc_notify(rmx_conn_t *c, uint32_t id, const void *data, size_t len); /* one-way */
void rmx__rpc_ctx_fini(rmx_ctx_t *ctx);
void rmx__rma_progress(rmx_conn_t *c);
extern const rmx__op_class_t rmx__rma_class;
/* The longest one-sided part c's transport takes at once: max_io, or less. */
static inline size_t rmx__io_most(const rmx_conn_t *c)
{
  size_t most = c->ops->max_io, io = c->ops->io_max ? c->ops->io_max(c->tc) : most;
  return io < most ? io : most;
}

/* ---- memory (src/mem/) ---- */
/* Decode a packed remote key (docs/protocol.md) and pick the entry of the
 * transport wire_id: 0, RMX_EINVAL (malformed or damaged), RMX_EVERSION,
 * RMX_ENOENT (no entry for that transport). tpi is left to the caller. */
int rmx__rkey_decode(const void *blob, size_t len, uint8_t wire_id, rmx_rkey_t *out);
/* The connection stops being served: every key packed for its peer alone
 * is revoked (before the transport closes it). */
void rmx__mem_conn_gone(rmx_conn_t *c);
int rmx__mem_local(rmx_conn_t *c, void *addr, size_t len, unsigned access, rmx_mem_t *given,
                   rmx_tp_mem_t **mem, rmx__rc_entry_t **cached);
#include "conn/auth.h" /* peer authentication */
#include "xfer/xfer.h" /* transfer requests, notifications */

#endif
