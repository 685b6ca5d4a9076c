/*
 * The transport interface (internal). A transport moves opaque frames
 * between two connected endpoints, reads remote memory, and registers local
 * memory. It knows nothing of credits, rendezvous or RPC: that is the core's.
 *
 * Rules every transport keeps:
 * - No op calls back into the core from inside itself; events are raised
 *   from the event loop (libuv callbacks), never synchronously. Exception:
 *   close() may be called from inside an event handler and must cope.
 * - Every send/read posted with success is reported exactly once through
 *   rmx__tp_event() (RMX_TP_EV_SEND / RMX_TP_EV_READ), with an error status
 *   when the connection is closed or dies, and before RMX_TP_EV_CLOSED.
 * - Ops a transport lacks are stubs returning RMX_ENOTSUP, never NULL.
 * - Errors are converted to RMX_E* at the transport edge.
 */
#ifndef RMX_TRANSPORT_H
#define RMX_TRANSPORT_H

#include <rmx/rmx.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct uv_loop_s;
typedef struct rmx_tp rmx_tp_t;                   /* per-context transport instance */
typedef struct rmx_tp_conn rmx_tp_conn_t;         /* one connection */
typedef struct rmx_tp_listener rmx_tp_listener_t; /* one listening endpoint */
typedef struct rmx_tp_mem rmx_tp_mem_t;           /* one registration */

/* Access rights for mem_reg. */
enum {
  RMX_TP_ACC_LOCAL = 1,       /* local read and write (send from, read into) */
  RMX_TP_ACC_REMOTE_READ = 2,
  RMX_TP_ACC_REMOTE_WRITE = 4,
  RMX_TP_ACC_REMOTE_ATOMIC = 8,
};

typedef enum { RMX_TP_FADD, RMX_TP_CSWAP } rmx_tp_atomic_t;

/* One gather element of a send. mem is NULL for memory the transport may
 * copy (it then copies or sends inline). */
typedef struct rmx_tp_sge {
  const void *addr;
  size_t len;
  rmx_tp_mem_t *mem;
} rmx_tp_sge_t;

#define RMX_TP_MAX_SGE 3

typedef enum {
  RMX_TP_EV_ESTABLISHED,  /* handshake done; data/len: the peer's hello (active side) */
  RMX_TP_EV_DISCONNECTED, /* status: why (connect failures too); I/O stopped */
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

/* Transport traits. */
enum {
  RMX_TP_F_LOCAL_REG = 1, /* local buffers must be registered (verbs) */
};

/* What one connection can do. */
enum {
  RMX_TP_CAP_ATOMIC = 1,
};

typedef struct rmx_tp_ops {
  const char *name; /* "tcp", "rdma" */
  unsigned flags;   /* RMX_TP_F_* */
  uint8_t wire_id;  /* names the transport inside packed remote keys */
  size_t max_io;    /* largest read or write the transport takes at once */

  /* Create the per-context instance. May fail with RMX_ENODEV. */
  int (*init)(rmx_ctx_t *ctx, rmx_tp_t **tp);
  /* Release it; every listener and connection is already closed. */
  void (*fini)(rmx_tp_t *tp);

  /* Bind and listen. Incoming handshakes go to rmx__tp_incoming(). */
  int (*listen)(rmx_tp_t *tp, const struct sockaddr *sa, rmx_listener_t *owner,
                rmx_tp_listener_t **out);
  int (*listen_addr)(rmx_tp_listener_t *l, struct sockaddr_storage *ss);
  /* Stop listening and free; no further incoming calls. */
  void (*listen_close)(rmx_tp_listener_t *l);

  /* Start connecting; hello is copied. ESTABLISHED or DISCONNECTED follows. */
  int (*connect)(rmx_tp_t *tp, const struct sockaddr *sa, const void *hello, size_t len,
                 rmx_conn_t *owner, rmx_tp_conn_t **out);
  /* Answer an incoming request with our hello; ESTABLISHED follows. */
  int (*accept)(rmx_tp_conn_t *tc, rmx_conn_t *owner, const void *hello, size_t len);
  /* Refuse an incoming request with a status the peer's connect reports;
   * the transport frees tc, and raises no event for it. */
  void (*reject)(rmx_tp_conn_t *tc, int status);
  /* Abort I/O; posted ops complete with RMX_ECANCELED; CLOSED follows. */
  void (*close)(rmx_tp_conn_t *tc);

  /* Send one frame gathered from sge[0..n). The memory stays valid until the
   * SEND event. RMX_EAGAIN: the send queue is full; try again after a
   * completion. A transport may hold posted work until flush(). */
  int (*send)(rmx_tp_conn_t *tc, const rmx_tp_sge_t *sge, int n, void *op);
  /* Read len bytes at the peer's raddr (key rkey) into dst. RMX_EAGAIN as
   * for send. */
  int (*read)(rmx_tp_conn_t *tc, void *dst, size_t len, rmx_tp_mem_t *dst_mem,
              uint64_t raddr, uint64_t rkey, void *op);
  /* Write len bytes from src at the peer's raddr. With imm non-NULL the peer
   * gets an IMM event after the data, and one of its receive buffers is
   * used. RMX_EAGAIN as for send. */
  int (*write)(rmx_tp_conn_t *tc, const void *src, size_t len, rmx_tp_mem_t *src_mem,
               uint64_t raddr, uint64_t rkey, const uint32_t *imm, void *op);
  /* An 8-byte atomic at raddr; *old is written before the ATOMIC event.
   * RMX_ENOTSUP where the device has none. */
  int (*atomic)(rmx_tp_conn_t *tc, rmx_tp_atomic_t kind, uint64_t raddr, uint64_t rkey,
                uint64_t cmp_add, uint64_t swap, uint64_t *old, void *op);
  /* RMX_TP_CAP_* of an established connection. */
  unsigned (*caps)(rmx_tp_conn_t *tc);
  /* Start everything queued since the last flush (one doorbell). */
  void (*flush)(rmx_tp_conn_t *tc);
  /* The core has accepted the peer (authenticated, when configured): its
   * remote reads, writes and atomics may be served from now on. Called
   * once, after ESTABLISHED; never calls back. */
  void (*ready)(rmx_tp_conn_t *tc);

  /* Register [addr, addr+len) with RMX_TP_ACC_* rights. scope non-NULL: only
   * that connection's peer may reach the memory remotely (where the
   * transport can enforce it: TCP does; verbs cannot, see docs/security.md);
   * NULL: any peer of this instance that holds the key. May block (verbs
   * pins pages). Keys are unguessable where the transport makes them. */
  int (*mem_reg)(rmx_tp_t *tp, void *addr, size_t len, unsigned access, rmx_tp_conn_t *scope,
                 rmx_tp_mem_t **out);
  /* Release a registration. After it returns the transport never touches
   * the memory again and no new remote access starts; a remote operation
   * in progress on it fails at its initiator (TCP: RMX_EACCES, the
   * connection stays; verbs: a remote access error, which ends that
   * connection). Never blocks on a peer. */
  void (*mem_dereg)(rmx_tp_mem_t *m);
  /* The key a peer names this registration by. */
  uint64_t (*mem_rkey)(const rmx_tp_mem_t *m);
} rmx_tp_ops_t;

/* ---- what the core offers transports ---- */

/* Deliver an event for a connection the core owns. */
void rmx__tp_event(rmx_conn_t *c, const rmx_tp_ev_t *ev);
/* An incoming connection presented its hello. The core answers with accept()
 * or reject() before returning. */
void rmx__tp_incoming(rmx_listener_t *l, rmx_tp_conn_t *tc, const void *hello, size_t len);

struct uv_loop_s *rmx__ctx_uv(rmx_ctx_t *ctx);
const rmx_config_t *rmx__ctx_cfg(rmx_ctx_t *ctx);
void rmx__log(rmx_ctx_t *ctx, rmx_log_level_t lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Numeric "host:port" for logs; buf of at least 64 bytes. */
const char *rmx__sa_str(const struct sockaddr *sa, char *buf, size_t len);

#define RMX_LOG(ctx, lvl, ...)                                      \
  do {                                                              \
    if ((int)rmx__ctx_cfg(ctx)->log_level >= (int)RMX_LOG_##lvl)    \
      rmx__log((ctx), RMX_LOG_##lvl, __VA_ARGS__);                  \
  } while (0)

/* One log line per second at most for a condition a peer can repeat at
 * will (refused requests, limits hit): rmx__ratelimit() says whether to log
 * now and how many lines were held back since the last. */
typedef struct rmx__ratelimit {
  uint64_t next_ms;
  uint32_t held;
} rmx__ratelimit_t;
int rmx__ratelimit(rmx_ctx_t *ctx, rmx__ratelimit_t *rl, uint32_t *held);

/* libuv status -> RMX_E* (the transport edge). */
int rmx__uv_err(int uv_status);

extern const rmx_tp_ops_t rmx_tcp_ops;
#ifdef RMX_HAVE_VERBS
extern const rmx_tp_ops_t rmx_verbs_ops;
#endif

#endif
