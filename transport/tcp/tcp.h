/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The TCP transport's own header: the objects its files share and the few
 * functions one of them calls in another. The same files carry shm://
 * (transport/shm/tp.c) with a shared-memory channel as the pipe in place
 * of the socket. The files, bottom up; each calls only files below it:
 *
 *   frame.c      the stream framing: header checks and body codecs (pure)
 *   sock.c       the socket pipe: a connection's bytes over its uv_tcp_t
 *   stream.c     the byte stream of a connection over its pipe: writes,
 *                the read buffer, frame reassembly, payloads streamed into
 *                place, and the connection's end (fail, close)
 *   initiator.c  remote reads, writes and atomics we ask of the peer
 *   target.c     the peer's requests, served from registered memory
 *   conn.c       connections: the handshake, states, timers, frames handed
 *                to the initiator and the target
 *   tcp.c        the instance: listeners, registrations, the ops table
 *
 * The stream reaches the files above it only through tp->up, which tcp.c
 * fills in.
 */
#ifndef RMX_TCP_H
#define RMX_TCP_H

#include <stddef.h>
#include <stdlib.h>
#include <uv.h>

#include "../transport.h"
#include "frame.h"

#define FREE_KEEP 256 /* request records kept for reuse */
#define TCP_BACKLOG 511 /* listen(2) backlog of listeners and group sockets (somaxconn caps it) */
#define MEM_BUCKETS 1024
#define TC_BATCH_BUFS 64 /* buffers one batch of sends writes (a frame takes 2 to 4) */
/* The read buffer: RBUF_SMALL bytes inside the connection until traffic
 * needs more (a frame that does not fit, or a read that fills it), then
 * TF_HDR + eager_size + RBUF_EXTRA from malloc, given back after
 * RBUF_QUIET reads in a row that each fit the small one and left nothing
 * buffered. An idle connection holds no read buffer of its own. */
#define RBUF_SMALL 512
#define RBUF_EXTRA (64u << 10)
#define RBUF_QUIET 32

typedef enum { W_SEND, W_CTRL, W_HELLO_ACK, W_REJECT, W_RESP } wkind_t;

typedef struct wreq {
  rmx_list_t link; /* first, as in rd_t and srv_t: see rec_get */
  uv_write_t req;
  struct wreq *next; /* W_SEND: the next of the same batch (rmx__tcp_flush), or of tc->ended */
  rmx_tp_conn_t *tc;
  int status;        /* in tc->ended: how it ended */
  void *op;         /* W_SEND: the core's op; W_RESP: the srv_t answered */
  wkind_t kind;
  uint8_t data;     /* W_RESP: carries data from registered memory */
  uint8_t last;     /* W_RESP: the answer's final frame */
  uint8_t hdr[TF_HDR + TF_ATREQ_LEN];
} wreq_t;

/* A peer's request we serve. Answers go out in request order, one frame
 * at a time for reads; the record counts against the window until its
 * final frame is written. */
typedef struct srv {
  rmx_list_t link;    /* srvq until the final frame is written, then srv_sent;
                         a direct read said yes to: srv_held until its done */
  uint8_t kind;       /* the answer: TF_RD_RESP, TF_WR_RESP, TF_AT_RESP */
  uint8_t ready;      /* writes: the data has landed or been skipped */
  uint8_t hold;       /* a direct read said yes to: the peer pulls from m */
  uint8_t pulled;     /* its done came (before its answer's write ended) */
  uint64_t id;
  int32_t status;
  rmx_tp_mem_t *m;    /* reads: the memory (a use is held) */
  uintptr_t addr;     /* reads: next byte to send */
  size_t left;        /* reads: bytes not yet sent */
  uint64_t old;       /* atomics */
  uint32_t inflight;  /* reads: chunks handed to the socket, not yet written */
} srv_t;

/* A remote operation we asked for, waiting for its response. The peer
 * answers in request order, so these form a FIFO. */
typedef struct rd {
  rmx_list_t link;
  uint64_t id;
  uint8_t kind; /* TF_RD_REQ, TF_WR_REQ, TF_AT_REQ (TF_RD_DIR, TF_WR_DIR go as these) */
  uint8_t direct; /* by one copy: a read's answer has no data, we pull it */
  uint8_t lost;   /* a pull the peer's end cut across: ends with the connection */
  uint8_t *dst; /* reads: destination */
  uint64_t raddr; /* direct reads: where the bytes are in the peer */
  size_t len;
  size_t got;   /* reads: bytes arrived so far */
  uint64_t *old; /* atomics: where the old value goes */
  void *op;
} rd_t;

/* A payload streaming from the socket straight to where it belongs: a read
 * response into its destination, a write request into registered memory,
 * or a refused write into nowhere. Whoever starts it says what follows. */
typedef struct sink {
  uint8_t *dst;   /* NULL: discard */
  size_t left;
  void (*check)(rmx_tp_conn_t *tc); /* or NULL: before each socket read */
  void (*done)(rmx_tp_conn_t *tc);  /* the whole payload is in */
  rd_t *rd;       /* a read response */
  srv_t *srv;     /* a write request: its answer */
  rmx_tp_mem_t *m; /* a write request into memory: a use is held */
  int has_imm;
  uint32_t imm;
  size_t total;
} sink_t;

struct rmx_tp_mem {
  rmx_list_t link; /* in its key bucket while registered */
  rmx_tp_t *tp;
  uint64_t key;    /* 64 random bits */
  uintptr_t addr;
  size_t len;
  unsigned access;
  uint64_t scope;  /* the one connection (serial) that may use it; 0: see open */
  uint8_t open;    /* scope 0: any connection may use it (mem_open); else none */
  uint32_t uses;   /* remote reads and writes in progress */
  uint8_t dead;    /* deregistered: freed when the last use ends */
};

/*
 * The byte pipe under a connection: all the stream knows of the medium.
 * The socket's is sock.c; shm's is transport/shm/pipe.c. Reads come back
 * through rmx__tcp_rbuf (where to put them), rmx__tcp_got and
 * rmx__tcp_fail (the end: RMX_ECONNRESET for the peer's); a queued write's
 * end through rmx__tcp_write_end, from the loop; the pipe's close through
 * rmx__tcp_pipe_closed, from the loop.
 */
typedef struct tcp_pipe {
  /* Ready the pipe of a new connection (counts its handle in open_handles
   * once there is one to close). */
  void (*open)(rmx_tp_conn_t *tc);
  /* Take what fits of bufs now, never behind queued writes: the bytes taken
   * (0: none now), or an RMX_E* error. */
  ssize_t (*try_write)(rmx_tp_conn_t *tc, const uv_buf_t *bufs, unsigned n);
  /* Queue the chain that starts at w (bufs are copied): 0; 1 where it was
   * all written at once (the stream reports its end from the loop); or an
   * RMX_E* error and nothing queued. */
  int (*write)(rmx_tp_conn_t *tc, wreq_t *w, const uv_buf_t *bufs, unsigned n);
  int (*read_start)(rmx_tp_conn_t *tc);
  void (*read_stop)(rmx_tp_conn_t *tc);
  /* After the queued writes, end this side's direction (TC_FINISHING); a
   * pipe that cannot closes the connection. */
  void (*shutdown)(rmx_tp_conn_t *tc);
  void (*close)(rmx_tp_conn_t *tc);
  /* Memory a queued write reads from was released: read no more of it. */
  void (*cut)(rmx_tp_conn_t *tc);
  /* Busy-polling: read what is there now; 1 when some was read. */
  int (*read_now)(rmx_tp_conn_t *tc);
  /* The peer, for logs ("?" when unknown). */
  const char *(*peer)(rmx_tp_conn_t *tc, char *buf, size_t size);
  /* 1 when written bytes wait to reach the peer; *taken: a count of the
   * bytes it took, which only grows (rmx__tcp_stuck compares them). */
  int (*waiting)(rmx_tp_conn_t *tc, uint64_t *taken);
  /* One copy between the two processes (shm's process_vm_readv); both
   * NULL where the medium has none. direct: the smallest read or write
   * that goes by one copy on this connection, 0 while none does (not
   * agreed with the peer, or not yet); sync 1 (before a side relies on
   * the agreement) first takes what the peer sent to agree. pull: len
   * bytes from remote in the peer into local here. Bytes only ever move
   * towards the side that copies (a read's initiator, a write's target),
   * so a peer this side gave up on, still running, has nothing of ours
   * to write into. 0; RMX_EPROTO when the connection never agreed to it
   * (the peer broke the rule); RMX_ECONNRESET when the peer ended it;
   * another RMX_E* when the copy failed. */
  size_t (*direct)(rmx_tp_conn_t *tc, int sync);
  int (*pull)(rmx_tp_conn_t *tc, void *local, uint64_t remote, size_t len);
} tcp_pipe_t;

extern const tcp_pipe_t rmx__tcp_sock_pipe;

/* What the stream asks of the files above it. */
typedef struct tcp_up {
  /* A frame arrived, its body buffered as far as rmx__tf_buffered says and
   * already consumed from the read buffer. TF_FRAME: body is the whole rmx
   * frame, its header rebuilt in front of its body. */
  void (*frame)(rmx_tp_conn_t *tc, uint8_t kind, const uint8_t *body, uint32_t blen);
  /* Our HELLO_ACK was written, or failed. */
  void (*acked)(rmx_tp_conn_t *tc, int status);
  /* A response frame uv_write took was written, or failed. */
  void (*resp_written)(rmx_tp_conn_t *tc, void *op, int data, int last, int status);
  /* Both handles of the connection are closed. */
  void (*closed)(rmx_tp_conn_t *tc);
  /* One of l's handshake slots is free (a hello came, or a socket before
   * its hello closed): the listener may take the next peer waiting. */
  void (*slot_free)(rmx_tp_listener_t *l);
} tcp_up_t;

struct rmx_tp {
  const rmx_tp_env_t *env; /* = &env_copy */
  rmx_tp_env_t env_copy;    /* its cfg points at cfg_copy */
  rmx_config_t cfg_copy;
  uv_loop_t *loop;
  const tcp_up_t *up;
  const tcp_pipe_t *pipe;
  const char *name; /* "tcp" or "shm", for logs */
  rmx_list_t free_w, free_rd, free_srv;
  uint32_t nfree_w, nfree_rd, nfree_srv;
  rmx_list_t mem[MEM_BUCKETS];
  rmx_list_t conns; /* every rmx_tp_conn_t not yet freed */
  rmx_list_t listeners; /* every listener not yet closing */
  uint32_t nconns;  /* how many */
  uint64_t refused; /* connects without a file descriptor (rmx_ctx_stats_t tp_refused) */
  uint64_t direct_bytes; /* pulled by the pipe's copy (tp_direct_bytes) */
  rmx_tp_conn_t *hot; /* the last connection that read something (busy-polling) */
  rmx_tp_conn_t **by_fd; /* connections the fast path found by socket */
  size_t by_fd_len;
  uv_idle_t later;    /* reports what ended outside libuv's callbacks... */
  rmx_list_t laterq;  /* ...for these connections (tc->later_link) */
  uint64_t next_serial;
  uint32_t live; /* listeners and connections not yet freed */
  int finishing;
  /* Log limiters (base/log.h), one per kind of line a peer can repeat:
   * refused remote accesses, full handshake slots, bad hellos, protocol
   * errors, failed accepts (a connection flood running us out of file
   * descriptors), writes cut under a released registration, connects out
   * of descriptors. */
  rmx__ratelimit_t rl_refused, rl_handshakes, rl_hello, rl_proto, rl_accept, rl_cut, rl_nofd;
};

struct rmx_shm_listener;
struct rmx_shm_chan;

struct rmx_tp_listener {
  uv_tcp_t h;       /* the listening socket, bound; libuv never watches it... */
  struct rmx_shm_listener *shl; /* shm://: its Unix socket instead (no h, poll, retry) */
  void (*kick)(rmx_tp_listener_t *l); /* shm://: takes peers exactly while it may */
  uv_poll_t poll;   /* ...this does, while the listener may take a peer */
  uv_timer_t retry; /* out of descriptors: when to try accept again */
  rmx_tp_t *tp;
  void *owner;
  rmx_list_t pending; /* accepted sockets still before their HELLO */
  rmx_list_t tp_link; /* in tp->listeners */
  uint32_t npending;
  uint8_t paused;   /* the core asked: take no new peer */
  uint8_t polling;  /* poll is started */
  uint8_t starved;  /* accept ran out of descriptors: retry is started */
  uint8_t handles;  /* open handles of h, poll and retry */
  uint8_t member;   /* a group member's: no socket; peers come from feed */
  rmx_list_t fed;   /* tcp_raw_t handed to a member, not taken yet */
  uint32_t nfed;
};

/* A peer a group's gate accepted (gate.c): its socket, not yet opened in
 * any loop. */
typedef struct tcp_raw {
  rmx_tp_raw_t raw;
  int fd;
} tcp_raw_t;

#define TCP_FED_MAX 1024 /* peers waiting in a member's listener; more are dropped */

/* gate.c: a listening socket bound to sa, or -errno and the call that
 * failed (a static string) in *step */
int rmx__tcp_listen_fd(const struct sockaddr *sa, int *fd, const char **step);
/* gate.c: a group's listening socket */
int rmx__tcp_gate_open(const struct sockaddr *sa, rmx_tp_gate_t **g, int *fd);
int rmx__tcp_gate_addr(rmx_tp_gate_t *g, struct sockaddr_storage *ss);
int rmx__tcp_gate_take(rmx_tp_gate_t *g, rmx_tp_raw_t **raw);
int rmx__tcp_gate_give(rmx_tp_gate_t *g, rmx_tp_raw_t *raw, rmx_tp_t *tp);
void rmx__tcp_gate_drop(rmx_tp_raw_t *raw);
void rmx__tcp_gate_close(rmx_tp_gate_t *g);
/* tcp.c: a group member's listener takes a peer of the gate (tcp_raw_t,
 * shm:// too), and gives back one it did not take. */
void rmx__tcp_feed(rmx_tp_listener_t *l, rmx_tp_raw_t *raw);
rmx_tp_raw_t *rmx__tcp_unfeed(rmx_tp_listener_t *l);

struct rmx_tp_conn {
  uv_tcp_t h;           /* the socket pipe's */
  struct rmx_shm_chan *ch; /* the shm pipe's */
  uv_timer_t timer;
  uv_connect_t creq;
  uv_shutdown_t sreq; /* TC_FINISHING */
  rmx_tp_t *tp;
  void *owner;
  rmx_tp_listener_t *lst; /* passive, before HELLO */
  rmx_list_t lst_link;
  tc_state_t state;
  uint8_t passive, established, dead, closing;
  uint8_t open_handles;
  uint8_t hello[TF_HELLO_MAX];
  size_t hello_len;
  uint8_t *rbuf;         /* rsmall, or a large buffer while traffic needs one */
  size_t rcap, rlen, rpos;
  size_t rneed;          /* a frame's head that does not fit rcap: grow to this */
  uint8_t rfull;         /* the last read filled the small buffer: grow */
  uint8_t rquiet;        /* reads in a row that the small buffer would have held */
  sink_t sink;
  int sinking;
  rmx_list_t rd_pending;
  uint64_t rd_seq;
  size_t max_frame;
  uint64_t serial;     /* names this connection in registration scopes */
  rmx_list_t srvq;     /* requests served, answers not yet fully written */
  rmx_list_t srv_sent; /* answers written, writes not yet complete */
  rmx_list_t srv_held; /* direct reads answered yes: the peer pulls, then says done */
  uint32_t nsrv;       /* all three: count against the window */
  uint32_t chunks_out;  /* read answer chunks handed to the socket */
  uint8_t ready;       /* the core accepted the peer: serve its requests */
  uint8_t cut;         /* write side shut: memory it wrote from was released */
  /* Sends posted since the last flush, written then together: a chain of
   * requests (the first's uv_write_t carries the batch if libuv must) and
   * their buffers. Requests that ended without a libuv callback wait in
   * ended for the instance's later handle to report them. */
  wreq_t *bq_first, *bq_last, *ended, *ended_last;
  int fail_later;      /* rmx__tcp_fail_later's status, until it is reported */
  int spin_err;        /* an error a write or busy-poll recv took off the socket */
  unsigned wr_busy;    /* uv_write requests whose callback has not run */
  rmx_list_t later_link; /* in tp->laterq while ended or fail_later waits */
  int by_fd;             /* its index in tp->by_fd, or -1 */
  uint64_t taken;        /* the pipe's count of bytes the peer took, at the last stuck() */
  uint64_t got, got_seen; /* bytes that came from the peer; their count at the last heard() */
  unsigned bq_n;
  uv_buf_t bq_bufs[TC_BATCH_BUFS];
  rmx_list_t tp_link;  /* in tp->conns */
  uint8_t rsmall[RBUF_SMALL];
};

static inline void tc_ev(rmx_tp_conn_t *tc, rmx_tp_ev_type_t t, int status, void *op,
                         const void *data, size_t len)
{
  rmx_tp_ev_t ev = {.type = t, .status = status, .op = op, .data = data, .len = len};
  tc->tp->env->event(tc->owner, &ev);
}

/* Records are reused, but only so many are kept: a burst a peer caused
 * does not stay allocated after it. */
static inline void *rec_get(rmx_list_t *pool, uint32_t *nfree, size_t size)
{
  rmx_list_t *n = rmx_list_pop(pool);
  if (!n)
    return malloc(size);
  (*nfree)--;
  return n;
}

static inline void rec_put(rmx_list_t *pool, uint32_t *nfree, rmx_list_t *link)
{
  if (*nfree >= FREE_KEEP) {
    free(link);
    return;
  }
  rmx_list_push(pool, link);
  (*nfree)++;
}

/* link is the first member of wreq_t, rd_t and srv_t: the record itself. */
_Static_assert(offsetof(wreq_t, link) == 0 && offsetof(rd_t, link) == 0 &&
               offsetof(srv_t, link) == 0, "records start with their link");
#define W_PUT(tp, w) rec_put(&(tp)->free_w, &(tp)->nfree_w, &(w)->link)
#define RD_PUT(tp, r) rec_put(&(tp)->free_rd, &(tp)->nfree_rd, &(r)->link)

/* stream.c */
void rmx__tcp_conn_close(rmx_tp_conn_t *tc);
/* For the pipes (tcp_pipe_t says when). */
void rmx__tcp_pipe_closed(rmx_tp_conn_t *tc);
void rmx__tcp_write_end(wreq_t *w, int rc);
void rmx__tcp_rbuf(rmx_tp_conn_t *tc, uv_buf_t *buf);
void rmx__tcp_got(rmx_tp_conn_t *tc, size_t nread);
int rmx__tcp_spin(rmx_tp_t *tp);
int rmx__tcp_poll(rmx_tp_t *tp, int *turn);
int rmx__tcp_reap(rmx_tp_t *tp);
/* sock.c: read what tc's pipe holds now, as its read callback would (1
 * when it read some). stream.c: report what ended, as the idle handle does. */
int rmx__tcp_read_now(rmx_tp_conn_t *tc);
void rmx__tcp_later_run(rmx_tp_t *tp);
void rmx__tcp_conn_finish(rmx_tp_conn_t *tc);
void rmx__tcp_fail(rmx_tp_conn_t *tc, int status);
void rmx__tcp_fail_later(rmx_tp_conn_t *tc, int status);
/* No Nagle; kernel keepalive and user timeout from the keepalive settings. */
void rmx__tcp_sock_opts(rmx_tp_conn_t *tc);
void rmx__tcp_proto_fail(rmx_tp_conn_t *tc, const char *why);
const char *rmx__tcp_peer(rmx_tp_conn_t *tc, char *buf, size_t size);
wreq_t *rmx__tcp_wreq_get(rmx_tp_conn_t *tc, wkind_t kind, void *op);
int rmx__tcp_write_bufs(rmx_tp_conn_t *tc, wreq_t *w, uv_buf_t *bufs, unsigned n);
int rmx__tcp_write_now(rmx_tp_conn_t *tc, wreq_t *w, uv_buf_t *bufs, unsigned n);
int rmx__tcp_write_small(rmx_tp_conn_t *tc, wkind_t kind, uint8_t fkind, const void *body,
                         size_t blen);
int rmx__tcp_read_start(rmx_tp_conn_t *tc); /* sock.c */
void rmx__tcp_sink_start(rmx_tp_conn_t *tc);
int rmx__tcp_send(rmx_tp_conn_t *tc, const rmx_tp_sge_t *sge, int n, void *op);
void rmx__tcp_flush(rmx_tp_conn_t *tc);
int rmx__tcp_stuck(rmx_tp_conn_t *tc);
int rmx__tcp_heard(rmx_tp_conn_t *tc);
void rmx__tcp_batch_add(rmx_tp_conn_t *tc, wreq_t *w, const uv_buf_t *bufs, unsigned n);

/* initiator.c */
int rmx__tcp_read(rmx_tp_conn_t *tc, void *dst, size_t len, rmx_tp_mem_t *dst_mem, uint64_t raddr,
                  uint64_t rkey, void *op);
int rmx__tcp_write(rmx_tp_conn_t *tc, const void *src, size_t len, rmx_tp_mem_t *src_mem,
                   uint64_t raddr, uint64_t rkey, const uint32_t *imm, void *op);
int rmx__tcp_atomic(rmx_tp_conn_t *tc, rmx_tp_atomic_t kind, uint64_t raddr, uint64_t rkey,
                    uint64_t cmp_add, uint64_t swap, uint64_t *old, void *op);
void rmx__tcp_on_resp(rmx_tp_conn_t *tc, uint8_t kind, const uint8_t *body, uint32_t blen);
void rmx__tcp_pend_cancel(rmx_tp_conn_t *tc);

/* target.c */
rmx_tp_mem_t *rmx__tcp_mem_find(rmx_tp_t *tp, uint64_t key);
void rmx__tcp_serve(rmx_tp_conn_t *tc, uint8_t kind, const uint8_t *body, uint32_t blen);
/* The peer pulled the direct read id (TF_RD_DONE): its memory is free. */
void rmx__tcp_pulled(rmx_tp_conn_t *tc, uint64_t id);
void rmx__tcp_resp_written(rmx_tp_conn_t *tc, void *op, int data, int last, int status);
int rmx__tcp_sends_from(rmx_tp_conn_t *tc, const rmx_tp_mem_t *m);
void rmx__tcp_cut_writes(rmx_tp_conn_t *tc);
void rmx__tcp_target_drop(rmx_tp_conn_t *tc);

/* tcp.c: the instance, its memory and its life; shm:// shares them. */
int rmx__tcp_init_as(const rmx_tp_env_t *env, const tcp_pipe_t *pipe, const char *name,
                     rmx_tp_t **out);
void rmx__tcp_fini(rmx_tp_t *tp);
void rmx__tcp_unlive(rmx_tp_t *tp); /* a listener or connection of tp is freed */
int rmx__tcp_devices(rmx_device_info_t **out, int *n);
void rmx__tcp_stats(rmx_tp_t *tp, rmx_tp_stats_t *st);
int rmx__tcp_mem_reg(rmx_tp_t *tp, void *addr, size_t len, unsigned access,
                     rmx_tp_conn_t *scope, rmx_tp_mem_t **out);
void rmx__tcp_mem_dereg(rmx_tp_mem_t *m);
uint64_t rmx__tcp_mem_rkey(const rmx_tp_mem_t *m);
int rmx__tcp_mem_open(rmx_tp_mem_t *m);
int rmx__tcp_mem_grant(rmx_tp_mem_t *m, rmx_tp_conn_t *tc, rmx_tp_mem_t **out);

/* The ops every transport on the stream engine shares (tcp://, shm://):
 * the connection's life after set-up, its frames, remote operations and
 * registrations. */
#define RMX_TCP_STREAM_OPS                                                                  \
  .max_io = TF_MAX_IO, .hello_max = TF_HELLO_MAX, .fini = rmx__tcp_fini,                   \
  .devices = rmx__tcp_devices, .accept = rmx__tcp_accept, .reject = rmx__tcp_reject,       \
  .close = rmx__tcp_conn_close, .finish = rmx__tcp_conn_finish, .send = rmx__tcp_send,     \
  .read = rmx__tcp_read, .write = rmx__tcp_write, .atomic = rmx__tcp_atomic,               \
  .caps = rmx__tcp_caps, .flush = rmx__tcp_flush, .ready = rmx__tcp_ready,                 \
  .stuck = rmx__tcp_stuck, .heard = rmx__tcp_heard,                                        \
  .mem_reg = rmx__tcp_mem_reg, .mem_dereg = rmx__tcp_mem_dereg,                            \
  .mem_rkey = rmx__tcp_mem_rkey, .mem_open = rmx__tcp_mem_open,                            \
  .mem_grant = rmx__tcp_mem_grant, .reap = rmx__tcp_reap, .stats = rmx__tcp_stats

/* conn.c */
/* passive: accepted by a listener (its handshake has RMX_HANDSHAKE_TIMEOUT_MS,
 * a connect's RMX_CONNECT_TIMEOUT_MS). */
rmx_tp_conn_t *rmx__tcp_conn_new(rmx_tp_t *tp, int passive);

void rmx__tcp_conn_free(rmx_tp_conn_t *tc);
void rmx__tcp_conn_frame(rmx_tp_conn_t *tc, uint8_t kind, const uint8_t *body, uint32_t blen);
/* The pipe of our connect is open (status 0) or could not be: the HELLO next. */
void rmx__tcp_connected(rmx_tp_conn_t *tc, int status);
void rmx__tcp_conn_acked(rmx_tp_conn_t *tc, int status);
int rmx__tcp_connect(rmx_tp_t *tp, const struct sockaddr *sa, const void *hello, size_t len,
                     void *owner, rmx_tp_conn_t **out);
int rmx__tcp_accept(rmx_tp_conn_t *tc, void *owner, const void *hello, size_t len);
void rmx__tcp_reject(rmx_tp_conn_t *tc, int status);
void rmx__tcp_ready(rmx_tp_conn_t *tc);
unsigned rmx__tcp_caps(rmx_tp_conn_t *tc);

#endif
