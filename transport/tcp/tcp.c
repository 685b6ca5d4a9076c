/*
 * The TCP transport: rmx frames over libuv streams, plus frames that carry
 * remote reads, writes and atomics, which the target serves from its
 * registered memory after checking the key, the scope, the bounds and the
 * rights.
 *
 * The target never sends memory it no longer owns. A read is answered in
 * chunks written straight from the registered memory (no copy), a few at a
 * time, each after checking the registration still stands. Deregistering
 * memory while a chunk of it is in the socket's queue shuts the socket's
 * write side at once (the kernel then never reads that memory again) and
 * ends the connection: a peer that sends the FIN of a rendezvous before it
 * has read the message, so that the sender frees the buffer, only cuts
 * itself off. A write streams into place only while its registration
 * lives. Requests a peer may have outstanding here are bounded
 * (rma_window); past that the peer is cut off.
 *
 * Stream framing: u32 body length, u8 kind, u8 flags, u16 reserved, body.
 * A peer that sends anything else is cut off; see docs/protocol.md.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <uv.h>

#include "../../src/base/bytes.h"
#include "../transport.h"
#include "frame.h"

#define TF_CHUNKS_OUT 4       /* read response frames queued at once per connection */
#define FREE_KEEP 256         /* request records kept for reuse */
#define RBUF_EXTRA (64u << 10)
#define MEM_BUCKETS 1024

typedef enum { W_SEND, W_CTRL, W_HELLO_ACK, W_REJECT, W_RESP } wkind_t;

typedef struct wreq {
  rmx_list_t link; /* first, as in rd_t and srv_t: see rec_get */
  uv_write_t req;
  rmx_tp_conn_t *tc;
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
  rmx_list_t link;    /* srvq until the final frame is written, then srv_sent */
  uint8_t kind;       /* the answer: TF_RD_RESP, TF_WR_RESP, TF_AT_RESP */
  uint8_t ready;      /* writes: the data has landed or been skipped */
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
  uint8_t kind; /* TF_RD_REQ, TF_WR_REQ, TF_AT_REQ */
  uint8_t *dst; /* reads: destination */
  size_t len;
  size_t got;   /* reads: bytes arrived so far */
  uint64_t *old; /* atomics: where the old value goes */
  void *op;
} rd_t;

/* A payload streaming from the socket straight to where it belongs: a read
 * response into its destination, a write request into registered memory,
 * or a refused write into nowhere. */
typedef struct sink {
  uint8_t *dst;   /* NULL: discard */
  size_t left;
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
  uint64_t scope;  /* the one connection (serial) that may use it; 0: any */
  uint32_t uses;   /* remote reads and writes in progress */
  uint8_t dead;    /* deregistered: freed when the last use ends */
};

struct rmx_tp {
  const rmx_tp_env_t *env;
  uv_loop_t *loop;
  rmx_list_t free_w, free_rd, free_srv;
  uint32_t nfree_w, nfree_rd, nfree_srv;
  rmx_list_t mem[MEM_BUCKETS];
  rmx_list_t conns; /* every rmx_tp_conn_t not yet freed */
  uint64_t next_serial;
  uint32_t live; /* listeners and connections not yet freed */
  int finishing, warn;
  rmx__ratelimit_t rl_refused, rl_handshakes;
};

struct rmx_tp_listener {
  uv_tcp_t h;
  rmx_tp_t *tp;
  void *owner;
  rmx_list_t pending; /* accepted sockets still before their HELLO */
  uint32_t npending;
};

struct rmx_tp_conn {
  uv_tcp_t h;
  uv_timer_t timer;
  uv_connect_t creq;
  rmx_tp_t *tp;
  void *owner;
  rmx_tp_listener_t *lst; /* passive, before HELLO */
  rmx_list_t lst_link;
  tc_state_t state;
  uint8_t passive, established, dead, closing;
  uint8_t open_handles;
  uint8_t hello[TF_HELLO_MAX];
  size_t hello_len;
  uint8_t *rbuf;
  size_t rcap, rlen, rpos;
  sink_t sink;
  int sinking;
  rmx_list_t rd_pending;
  uint64_t rd_seq;
  size_t max_frame;
  uint64_t serial;     /* names this connection in registration scopes */
  rmx_list_t srvq;     /* requests served, answers not yet fully written */
  rmx_list_t srv_sent; /* answers written, writes not yet complete */
  uint32_t nsrv;       /* both: counts against the window */
  uint32_t chunks_out;  /* read answer chunks handed to the socket */
  uint8_t ready;       /* the core accepted the peer: serve its requests */
  uint8_t cut;         /* write side shut: memory it wrote from was released */
  rmx_list_t tp_link;  /* in tp->conns */
};

static void tp_unlive(rmx_tp_t *tp);
static void srv_free(rmx_tp_conn_t *tc, srv_t *sv);
static void srv_pump(rmx_tp_conn_t *tc);
static void resp_done(rmx_tp_conn_t *tc, void *op, int data, int last);
static void mem_unuse(rmx_tp_mem_t *m);
static int remote_allowed(rmx_tp_conn_t *tc);

/* The event that answers a pending request of this kind. */
static rmx_tp_ev_type_t pend_ev(const rd_t *rd)
{
  return rd->kind == TF_RD_REQ   ? RMX_TP_EV_READ
         : rd->kind == TF_WR_REQ ? RMX_TP_EV_WRITE
                                 : RMX_TP_EV_ATOMIC;
}

/* ---- small helpers ---- */

static void raise_ev(rmx_tp_conn_t *tc, rmx_tp_ev_type_t t, int status, void *op,
                     const void *data, size_t len)
{
  rmx_tp_ev_t ev = {.type = t, .status = status, .op = op, .data = data, .len = len};
  tc->tp->env->event(tc->owner, &ev);
}

/* Records are reused, but only so many are kept: a burst a peer caused
 * does not stay allocated after it. */
static void *rec_get(rmx_list_t *pool, uint32_t *nfree, size_t size)
{
  rmx_list_t *n = rmx_list_pop(pool);
  if (!n)
    return malloc(size);
  (*nfree)--;
  return n;
}

static void rec_put(rmx_list_t *pool, uint32_t *nfree, rmx_list_t *link)
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

static wreq_t *wreq_get(rmx_tp_conn_t *tc, wkind_t kind, void *op)
{
  wreq_t *w = rec_get(&tc->tp->free_w, &tc->tp->nfree_w, sizeof(*w));
  if (!w)
    return NULL;
  w->tc = tc;
  w->op = op;
  w->kind = kind;
  w->data = w->last = 0;
  return w;
}

/* The handshake is over: tell the owner (data/len: the peer's hello, on the
 * active side). */
static void establish(rmx_tp_conn_t *tc, const void *data, size_t len)
{
  tc->established = 1;
  uv_timer_stop(&tc->timer);
  raise_ev(tc, RMX_TP_EV_ESTABLISHED, 0, NULL, data, len);
}

/* The peer's first frame beat our HELLO_ACK's write callback: established
 * now. 0 when the owner closed the connection meanwhile. */
static int establish_early(rmx_tp_conn_t *tc)
{
  establish(tc, NULL, 0);
  return !tc->closing && !tc->dead;
}

/* ---- closing ---- */

static void tc_free(rmx_tp_conn_t *tc)
{
  rmx_tp_t *tp = tc->tp;
  rmx_list_t *n;
  /* Reads still owed an answer complete now, before CLOSED. */
  while ((n = rmx_list_pop(&tc->rd_pending)) != NULL) {
    rd_t *rd = rmx_container_of(n, rd_t, link);
    if (tc->owner)
      raise_ev(tc, pend_ev(rd), RMX_ECANCELED, rd->op, NULL, 0);
    RD_PUT(tp, rd);
  }
  /* Requests we were serving: their writes were cancelled with the handle. */
  while ((n = rmx_list_pop(&tc->srvq)) != NULL)
    srv_free(tc, rmx_container_of(n, srv_t, link));
  while ((n = rmx_list_pop(&tc->srv_sent)) != NULL)
    srv_free(tc, rmx_container_of(n, srv_t, link));
  if (tc->sink.m)
    mem_unuse(tc->sink.m);
  if (tc->owner)
    raise_ev(tc, RMX_TP_EV_CLOSED, 0, NULL, NULL, 0);
  rmx_list_del(&tc->tp_link);
  free(tc->rbuf);
  free(tc);
  tp_unlive(tp);
}

static void tc_handle_closed(uv_handle_t *h)
{
  rmx_tp_conn_t *tc = h->data;
  if (--tc->open_handles == 0)
    tc_free(tc);
}

static void tc_close(rmx_tp_conn_t *tc)
{
  if (tc->closing)
    return;
  tc->closing = 1;
  if (tc->lst) {
    rmx_list_del(&tc->lst_link);
    tc->lst->npending--;
    tc->lst = NULL;
  }
  uv_close((uv_handle_t *)&tc->timer, tc_handle_closed);
  uv_close((uv_handle_t *)&tc->h, tc_handle_closed);
}

/* I/O is over for this connection: tell the owner once, or just close. */
static void tc_fail(rmx_tp_conn_t *tc, int status)
{
  if (tc->dead || tc->closing)
    return;
  tc->dead = 1;
  uv_read_stop((uv_stream_t *)&tc->h);
  if (tc->owner)
    raise_ev(tc, RMX_TP_EV_DISCONNECTED, status, NULL, NULL, 0);
  else
    tc_close(tc);
}

static void tc_proto_fail(rmx_tp_conn_t *tc, const char *why)
{
  char peer[80] = "?";
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  if (uv_tcp_getpeername(&tc->h, (struct sockaddr *)&ss, &len) == 0)
    rmx__sa_str((struct sockaddr *)&ss, peer, sizeof(peer));
  RMX_TP_LOG(tc->tp->env, ERROR, "tcp: closing connection with %s: %s", peer, why);
  tc_fail(tc, RMX_EPROTO);
}

/* ---- writing ---- */

static void write_cb(uv_write_t *req, int status)
{
  wreq_t *w = rmx_container_of(req, wreq_t, req);
  rmx_tp_conn_t *tc = w->tc;
  wkind_t kind = w->kind;
  void *op = w->op;
  int rc = rmx__uv_err(status);

  uint8_t data = w->data, last = w->last;
  W_PUT(tc->tp, w);
  switch (kind) {
  case W_RESP:
    resp_done(tc, op, data, last);
    if (rc == 0)
      srv_pump(tc);
    break;
  case W_SEND:
    raise_ev(tc, RMX_TP_EV_SEND, rc, op, NULL, 0);
    break;
  case W_HELLO_ACK:
    if (rc == 0 && !tc->established && !tc->closing && !tc->dead)
      establish(tc, NULL, 0);
    break;
  case W_REJECT:
    tc_close(tc);
    break;
  case W_CTRL:
    break;
  }
  if (rc && rc != RMX_ECANCELED && kind != W_REJECT)
    tc_fail(tc, rc);
}

static int write_bufs(rmx_tp_conn_t *tc, wreq_t *w, uv_buf_t *bufs, unsigned n)
{
  int rc = uv_write(&w->req, (uv_stream_t *)&tc->h, bufs, n, write_cb);
  if (rc) {
    W_PUT(tc->tp, w);
    return rmx__uv_err(rc);
  }
  return 0;
}

/* A frame whose body is small and lives in the request itself. */
static int write_small(rmx_tp_conn_t *tc, wkind_t kind, uint8_t fkind, const void *body,
                       size_t blen)
{
  wreq_t *w = wreq_get(tc, kind, NULL);
  if (!w)
    return RMX_ENOMEM;
  uint8_t *b = blen <= TF_RDREQ_LEN ? w->hdr : NULL;
  tf_hdr(w->hdr, (uint32_t)blen, fkind);
  uv_buf_t bufs[2] = {uv_buf_init((char *)w->hdr, TF_HDR), uv_buf_init((char *)body, (unsigned)blen)};
  if (b) {
    memcpy(w->hdr + TF_HDR, body, blen);
    bufs[0].len += blen;
    return write_bufs(tc, w, bufs, 1);
  }
  /* Larger bodies (hellos) live in tc->hello, which outlives the write. */
  return write_bufs(tc, w, bufs, 2);
}

static int tcp_send(rmx_tp_conn_t *tc, const rmx_tp_sge_t *sge, int n, void *op)
{
  uv_buf_t bufs[1 + RMX_TP_MAX_SGE];
  size_t total = 0;

  if (tc->dead || tc->closing || tc->state != TC_UP)
    return RMX_ENOTCONN;
  if (n < 1 || n > RMX_TP_MAX_SGE)
    return RMX_EINVAL;
  for (int i = 0; i < n; i++) {
    bufs[1 + i] = uv_buf_init((char *)(uintptr_t)sge[i].addr, (unsigned)sge[i].len);
    total += sge[i].len;
  }
  if (total > tc->max_frame)
    return RMX_EMSGSIZE;
  wreq_t *w = wreq_get(tc, W_SEND, op);
  if (!w)
    return RMX_ENOMEM;
  tf_hdr(w->hdr, (uint32_t)total, TF_MSG);
  bufs[0] = uv_buf_init((char *)w->hdr, TF_HDR);
  return write_bufs(tc, w, bufs, (unsigned)n + 1);
}

/* ---- remote operations: the initiator ---- */

static rmx_tp_mem_t *mem_find(rmx_tp_t *tp, uint64_t key)
{
  rmx_list_t *head = &tp->mem[key % MEM_BUCKETS], *n;
  rmx_list_foreach(n, head) {
    rmx_tp_mem_t *m = rmx_container_of(n, rmx_tp_mem_t, link);
    if (m->key == key)
      return m;
  }
  return NULL;
}

static rd_t *pend_new(rmx_tp_conn_t *tc, uint8_t kind, void *op)
{
  rd_t *rd = rec_get(&tc->tp->free_rd, &tc->tp->nfree_rd, sizeof(*rd));
  if (!rd)
    return NULL;
  memset(rd, 0, sizeof(*rd));
  rd->id = ++tc->rd_seq;
  rd->kind = kind;
  rd->op = op;
  return rd;
}

/* A request that will be answered: its pending entry and its write. */
static int pend_begin(rmx_tp_conn_t *tc, uint8_t kind, void *op, rd_t **rd, wreq_t **w)
{
  if (tc->dead || tc->closing || tc->state != TC_UP)
    return RMX_ENOTCONN;
  *rd = pend_new(tc, kind, op);
  *w = *rd ? wreq_get(tc, W_CTRL, NULL) : NULL;
  if (!*w) {
    if (*rd)
      RD_PUT(tc->tp, *rd);
    return RMX_ENOMEM;
  }
  return 0;
}

static int pend_post(rmx_tp_conn_t *tc, rd_t *rd, wreq_t *w, uv_buf_t *bufs, unsigned n)
{
  int rc = write_bufs(tc, w, bufs, n);
  if (rc) {
    RD_PUT(tc->tp, rd);
    return rc;
  }
  rmx_list_push(&tc->rd_pending, &rd->link);
  return 0;
}

static int tcp_read(rmx_tp_conn_t *tc, void *dst, size_t len, rmx_tp_mem_t *dst_mem,
                    uint64_t raddr, uint64_t rkey, void *op)
{
  rd_t *rd;
  wreq_t *w;
  int rc;
  (void)dst_mem; /* reads of any length: the answer comes in chunks */
  if ((rc = pend_begin(tc, TF_RD_REQ, op, &rd, &w)) != 0)
    return rc;
  rd->dst = dst;
  rd->len = len;
  tf_hdr(w->hdr, TF_RDREQ_LEN, TF_RD_REQ);
  uint8_t *b = w->hdr + TF_HDR;
  rmx_put64(b, rd->id);
  rmx_put64(b + 8, raddr);
  rmx_put64(b + 16, len);
  rmx_put64(b + 24, rkey);
  uv_buf_t bufs[1] = {uv_buf_init((char *)w->hdr, TF_HDR + TF_RDREQ_LEN)};
  return pend_post(tc, rd, w, bufs, 1);
}

static int tcp_write(rmx_tp_conn_t *tc, const void *src, size_t len, rmx_tp_mem_t *src_mem,
                     uint64_t raddr, uint64_t rkey, const uint32_t *imm, void *op)
{
  rd_t *rd;
  wreq_t *w;
  int rc;
  (void)src_mem;
  if (len > TF_MAX_IO)
    return RMX_EMSGSIZE;
  if ((rc = pend_begin(tc, TF_WR_REQ, op, &rd, &w)) != 0)
    return rc;
  tf_hdr(w->hdr, (uint32_t)(TF_WRREQ_SUB + len), TF_WR_REQ);
  uint8_t *b = w->hdr + TF_HDR;
  rmx_put64(b, rd->id);
  rmx_put64(b + 8, raddr);
  rmx_put64(b + 16, len);
  rmx_put64(b + 24, rkey);
  rmx_put32(b + 32, imm ? 1 : 0);
  rmx_put32(b + 36, imm ? *imm : 0);
  uv_buf_t bufs[2] = {uv_buf_init((char *)w->hdr, TF_HDR + TF_WRREQ_SUB),
                      uv_buf_init((char *)(uintptr_t)src, (unsigned)len)};
  return pend_post(tc, rd, w, bufs, len ? 2 : 1);
}

static int tcp_atomic(rmx_tp_conn_t *tc, rmx_tp_atomic_t kind, uint64_t raddr, uint64_t rkey,
                      uint64_t cmp_add, uint64_t swap, uint64_t *old, void *op)
{
  rd_t *rd;
  wreq_t *w;
  int rc;
  if ((rc = pend_begin(tc, TF_AT_REQ, op, &rd, &w)) != 0)
    return rc;
  rd->old = old;
  tf_hdr(w->hdr, TF_ATREQ_LEN, TF_AT_REQ);
  uint8_t *b = w->hdr + TF_HDR;
  rmx_put64(b, rd->id);
  rmx_put64(b + 8, raddr);
  rmx_put64(b + 16, rkey);
  rmx_put32(b + 24, (uint32_t)kind);
  rmx_put32(b + 28, 0);
  rmx_put64(b + 32, cmp_add);
  rmx_put64(b + 40, swap);
  uv_buf_t bufs[1] = {uv_buf_init((char *)w->hdr, TF_HDR + TF_ATREQ_LEN)};
  return pend_post(tc, rd, w, bufs, 1);
}

/* Every TCP connection can do atomics: the target runs them. */
static unsigned tcp_caps(rmx_tp_conn_t *tc) { return RMX_TP_CAP_ATOMIC; }

static void pend_done(rmx_tp_conn_t *tc, rd_t *rd, int status)
{
  rmx_tp_ev_type_t t = pend_ev(rd);
  void *op = rd->op;
  rmx_list_del(&rd->link);
  RD_PUT(tc->tp, rd);
  raise_ev(tc, t, status, op, NULL, 0);
}

/* The oldest outstanding request, if it is of this kind. */
static rd_t *pend_head(rmx_tp_conn_t *tc, uint8_t kind, uint64_t id)
{
  if (rmx_list_empty(&tc->rd_pending))
    return NULL;
  rd_t *rd = rmx_container_of(tc->rd_pending.next, rd_t, link);
  return rd->kind == kind && rd->id == id ? rd : NULL;
}

static int32_t wire_status(uint32_t v) { return rmx_wire_status((int32_t)v); }

/* ---- remote operations: the target checks everything first ---- */

static void mem_use(rmx_tp_mem_t *m) { m->uses++; }

static void mem_unuse(rmx_tp_mem_t *m)
{
  if (--m->uses == 0 && m->dead)
    free(m);
}

static void refused(rmx_tp_conn_t *tc, const char *what, uint64_t len, uint64_t addr, int status)
{
  uint32_t held;
  if (tc->tp->env->cfg->log_level >= RMX_LOG_WARN &&
      rmx__ratelimit(&tc->tp->rl_refused, uv_now(tc->tp->loop), &held))
    rmx__log(RMX_LOG_WARN,
             "tcp: refused a remote %s of %llu bytes at 0x%llx: %s (%u more refusals not logged)",
             what, (unsigned long long)len, (unsigned long long)addr, rmx_strerror(status), held);
}

/* The registration a request may use, or NULL with *status set. */
static rmx_tp_mem_t *check_access(rmx_tp_conn_t *tc, uint64_t key, uint64_t addr, uint64_t len,
                                  unsigned need, const char *what, int32_t *status)
{
  rmx_tp_mem_t *m = mem_find(tc->tp, key);
  *status = 0;
  if (!m || (m->scope && m->scope != tc->serial) || !(m->access & need) || addr < m->addr ||
      len > m->len || addr - m->addr > m->len - len)
    *status = RMX_EACCES;
  if (*status) {
    refused(tc, what, len, addr, *status);
    return NULL;
  }
  return m;
}

/* A new request to serve, if the peer keeps to the window. */
static srv_t *srv_new(rmx_tp_conn_t *tc, uint8_t kind, uint64_t id)
{
  if (tc->nsrv >= tc->tp->env->cfg->rma_window) {
    tc_proto_fail(tc, "more remote requests outstanding than the window allows");
    return NULL;
  }
  srv_t *sv = rec_get(&tc->tp->free_srv, &tc->tp->nfree_srv, sizeof(*sv));
  if (!sv) {
    tc_fail(tc, RMX_ENOMEM);
    return NULL;
  }
  memset(sv, 0, sizeof(*sv));
  sv->kind = kind;
  sv->id = id;
  sv->ready = 1;
  rmx_list_push(&tc->srvq, &sv->link);
  tc->nsrv++;
  return sv;
}

static void srv_free(rmx_tp_conn_t *tc, srv_t *sv)
{
  if (sv->m)
    mem_unuse(sv->m);
  tc->nsrv--;
  rec_put(&tc->tp->free_srv, &tc->tp->nfree_srv, &sv->link);
}

/* A response frame is in the socket: its chunk no longer reads the memory,
 * and with its last frame the request leaves the window. */
static void resp_done(rmx_tp_conn_t *tc, void *op, int data, int last)
{
  srv_t *sv = op;
  if (data) {
    tc->chunks_out--;
    sv->inflight--;
  }
  if (last) {
    rmx_list_del(&sv->link);
    srv_free(tc, sv);
  }
}

/*
 * Hand a response frame to the socket. Written at once (the usual case),
 * it is done here and now, not a loop turn later when libuv would call
 * back: the peer counts a request until the response arrives, so the
 * target must not count it longer, or a peer that keeps the window could
 * be cut off. What the socket cannot take goes through uv_write and is
 * done in write_cb.
 */
static int resp_write(rmx_tp_conn_t *tc, wreq_t *w, uv_buf_t *bufs, unsigned n)
{
  size_t total = 0, skip;
  unsigned i = 0;
  for (unsigned k = 0; k < n; k++)
    total += bufs[k].len;
  int r = uv_try_write((uv_stream_t *)&tc->h, bufs, n); /* EAGAIN while writes queue */
  if (r == UV_EAGAIN)
    r = 0;
  if (r < 0) {
    W_PUT(tc->tp, w);
    return rmx__uv_err(r);
  }
  if ((size_t)r == total) {
    resp_done(tc, w->op, w->data, w->last);
    W_PUT(tc->tp, w);
    return 0;
  }
  for (skip = (size_t)r; skip >= bufs[i].len; i++)
    skip -= bufs[i].len;
  bufs[i].base += skip;
  bufs[i].len -= skip;
  return write_bufs(tc, w, bufs + i, n - i);
}

/*
 * Write answers in request order. A read's data goes a chunk at a time,
 * straight from the registered memory, after checking the registration
 * still stands; deregistered before a chunk went, the rest of the read is
 * refused with RMX_EACCES (see tcp_mem_dereg for chunks already queued).
 */
static void srv_pump(rmx_tp_conn_t *tc)
{
  rmx_list_t *n;
  while (tc->chunks_out < TF_CHUNKS_OUT && !tc->dead && !tc->closing && !tc->cut &&
         (n = tc->srvq.next) != &tc->srvq) {
    srv_t *sv = rmx_container_of(n, srv_t, link);
    size_t chunk = 0;
    if (!sv->ready)
      return; /* a write whose data is still arriving */
    if (sv->kind == TF_RD_RESP && sv->status == 0 && sv->m->dead) {
      sv->status = RMX_EACCES;
      refused(tc, "read (deregistered while read)", sv->left, sv->addr, sv->status);
    }
    if (sv->kind == TF_RD_RESP && sv->status == 0)
      chunk = sv->left < TF_CHUNK ? sv->left : TF_CHUNK;
    wreq_t *w = wreq_get(tc, W_RESP, sv);
    if (!w) {
      tc_fail(tc, RMX_ENOMEM);
      return;
    }
    size_t sub = sv->kind == TF_AT_RESP ? TF_ATRESP_LEN : TF_RESP_SUB;
    tf_hdr(w->hdr, (uint32_t)(sub + chunk), sv->kind);
    rmx_put64(w->hdr + TF_HDR, sv->id);
    rmx_put32(w->hdr + TF_HDR + 8, (uint32_t)sv->status);
    if (sv->kind == TF_AT_RESP) {
      rmx_put32(w->hdr + TF_HDR + 12, 0);
      rmx_put64(w->hdr + TF_HDR + 16, sv->old);
    }
    uv_buf_t bufs[2] = {uv_buf_init((char *)w->hdr, (unsigned)(TF_HDR + sub)),
                        uv_buf_init((char *)sv->addr, (unsigned)chunk)};
    if (chunk) {
      sv->addr += chunk;
      sv->left -= chunk;
      sv->inflight++;
      tc->chunks_out++;
      w->data = 1;
    }
    w->last = sv->kind != TF_RD_RESP || sv->status || sv->left == 0;
    if (w->last) { /* counted until this write completes */
      rmx_list_del(&sv->link);
      rmx_list_push(&tc->srv_sent, &sv->link);
    }
    int rc = resp_write(tc, w, bufs, chunk ? 2 : 1);
    if (rc) {
      if (chunk) {
        sv->inflight--;
        tc->chunks_out--;
      }
      tc_fail(tc, rc);
      return;
    }
  }
}

/* Does tc have data of m queued in its socket? */
static int sends_from(rmx_tp_conn_t *tc, const rmx_tp_mem_t *m)
{
  rmx_list_t *lists[2] = {&tc->srvq, &tc->srv_sent}, *n;
  for (int i = 0; i < 2; i++)
    rmx_list_foreach(n, lists[i]) {
      srv_t *sv = rmx_container_of(n, srv_t, link);
      if (sv->m == m && sv->inflight)
        return 1;
    }
  return 0;
}

static void cut_cb(uv_timer_t *t) { tc_fail(t->data, RMX_EACCES); }

/* Memory whose data tc's socket still has queued is going away: shut the
 * write side now, so no write reads it again (they fail with EPIPE, which
 * the library's SIGPIPE setting makes harmless), and end the connection
 * from the loop (not from inside mem_dereg). */
static void cut_writes(rmx_tp_conn_t *tc)
{
  uv_os_fd_t fd;
  if (tc->cut || tc->closing)
    return;
  tc->cut = 1;
  if (uv_fileno((uv_handle_t *)&tc->h, &fd) == 0)
    shutdown(fd, SHUT_WR);
  char peer[80] = "?";
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  if (uv_tcp_getpeername(&tc->h, (struct sockaddr *)&ss, &len) == 0)
    rmx__sa_str((struct sockaddr *)&ss, peer, sizeof(peer));
  RMX_TP_LOG(tc->tp->env, WARN, "tcp: memory %s was reading was released while its data was being "
          "sent (a rendezvous FIN before the data arrived?): closing the connection", peer);
  uv_timer_start(&tc->timer, cut_cb, 0, 0);
}

static void serve_read(rmx_tp_conn_t *tc, const uint8_t *b)
{
  uint64_t addr = rmx_get64(b + 8), len = rmx_get64(b + 16);
  srv_t *sv = srv_new(tc, TF_RD_RESP, rmx_get64(b));
  if (!sv)
    return;
  rmx_tp_mem_t *m = check_access(tc, rmx_get64(b + 24), addr, len, RMX_TP_ACC_REMOTE_READ,
                                 "read", &sv->status);
  if (m) {
    mem_use(m);
    sv->m = m;
    sv->addr = (uintptr_t)addr;
    sv->left = len;
  }
  srv_pump(tc);
}

static void serve_atomic(rmx_tp_conn_t *tc, const uint8_t *b)
{
  uint64_t addr = rmx_get64(b + 8), old = 0;
  uint32_t kind = rmx_get32(b + 24);
  if (rmx_get32(b + 28) != 0) {
    tc_proto_fail(tc, "malformed atomic request");
    return;
  }
  srv_t *sv = srv_new(tc, TF_AT_RESP, rmx_get64(b));
  if (!sv)
    return;
  rmx_tp_mem_t *m = check_access(tc, rmx_get64(b + 16), addr, 8, RMX_TP_ACC_REMOTE_ATOMIC,
                                 "atomic", &sv->status);
  if (m && (addr % 8 || kind > RMX_TP_CSWAP))
    sv->status = RMX_EINVAL;
  if (m && sv->status == 0) {
    uint64_t *word = (uint64_t *)(uintptr_t)addr;
    if (kind == RMX_TP_FADD) {
      old = __atomic_fetch_add(word, rmx_get64(b + 32), __ATOMIC_SEQ_CST);
    } else {
      old = rmx_get64(b + 32);
      __atomic_compare_exchange_n(word, &old, rmx_get64(b + 40), 0, __ATOMIC_SEQ_CST,
                                  __ATOMIC_SEQ_CST); /* old: the value found either way */
    }
  }
  sv->old = old;
  srv_pump(tc);
}

/* A write landed (or was refused and skipped): answer, then tell the core. */
static void write_landed(rmx_tp_conn_t *tc)
{
  sink_t *k = &tc->sink;
  srv_t *sv = k->srv;
  if (k->m) {
    mem_unuse(k->m);
    k->m = NULL;
  }
  int32_t status = sv->status; /* the pump may answer and free sv */
  sv->ready = 1;
  srv_pump(tc);
  if (k->has_imm && tc->owner && !tc->dead && !tc->closing) {
    /* refused too: the writer spent one of our receive credits on it */
    rmx_tp_ev_t ev = {.type = RMX_TP_EV_IMM, .status = status, .imm = k->imm,
                      .len = k->total};
    tc->tp->env->event(tc->owner, &ev);
  }
}

static void sink_done(rmx_tp_conn_t *tc)
{
  rd_t *rd = tc->sink.rd;
  tc->sinking = 0;
  if (!rd)
    write_landed(tc);
  else if (rd->got == rd->len)
    pend_done(tc, rd, 0);
}

/* A write into memory deregistered meanwhile: the rest goes nowhere and
 * the writer is told. */
static void sink_check(rmx_tp_conn_t *tc)
{
  sink_t *k = &tc->sink;
  if (k->m && k->m->dead && k->dst) {
    k->dst = NULL;
    k->srv->status = RMX_EACCES;
    refused(tc, "write (deregistered while written)", k->left, 0, RMX_EACCES);
  }
}

/* Take what the read buffer already holds, then stream the rest. 0 when the
 * payload was complete, 1 when it continues on the socket. */
static int sink_start(rmx_tp_conn_t *tc)
{
  sink_t *k = &tc->sink;
  size_t have = tc->rlen - tc->rpos;
  if (have > k->left)
    have = k->left;
  if (k->dst) {
    memcpy(k->dst, tc->rbuf + tc->rpos, have);
    k->dst += have;
  }
  tc->rpos += have;
  k->left -= have;
  tc->sinking = 1;
  if (k->left == 0) {
    sink_done(tc);
    return 0;
  }
  tc->rpos = tc->rlen = 0; /* everything buffered was consumed */
  return 1;
}

/* ---- reading ---- */

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  rmx_tp_conn_t *tc = h->data;
  (void)suggested;
  if (tc->sinking) {
    size_t left = tc->sink.left;
    sink_check(tc);
    if (tc->sink.dst) {
      buf->base = (char *)tc->sink.dst;
      buf->len = left > TF_MAX_IO ? TF_MAX_IO : left;
    } else { /* discarding: the read buffer is empty and free to scribble on */
      buf->base = (char *)tc->rbuf;
      buf->len = left < tc->rcap ? left : tc->rcap;
    }
    return;
  }
  if (tc->rpos) { /* keep the partial frame at the front */
    memmove(tc->rbuf, tc->rbuf + tc->rpos, tc->rlen - tc->rpos);
    tc->rlen -= tc->rpos;
    tc->rpos = 0;
  }
  buf->base = (char *)tc->rbuf + tc->rlen;
  buf->len = tc->rcap - tc->rlen;
}

static void on_hello(rmx_tp_conn_t *tc, const uint8_t *body, size_t blen)
{
  rmx_tp_listener_t *l = tc->lst;
  rmx_list_del(&tc->lst_link);
  l->npending--;
  tc->lst = NULL;
  l->tp->env->incoming(l->owner, tc, body, blen); /* answers with accept or reject */
}

static void on_frame(rmx_tp_conn_t *tc, uint8_t kind, const uint8_t *body, size_t blen)
{
  int rc = 0;
  rd_t *rd;
  switch (kind) {
  case TF_HELLO:
    on_hello(tc, body, blen);
    break;
  case TF_HELLO_ACK:
    tc->state = TC_UP;
    establish(tc, body, blen);
    break;
  case TF_REJECT: {
    int32_t st = (int32_t)rmx_get32(body);
    tc_fail(tc, st < 0 ? rmx_wire_status(st) : RMX_ECONNREFUSED);
    break;
  }
  case TF_MSG:
    if (!tc->established && !establish_early(tc))
      return;
    raise_ev(tc, RMX_TP_EV_RECV, 0, NULL, body, blen);
    break;
  case TF_RD_REQ:
    if (remote_allowed(tc))
      serve_read(tc, body);
    break;
  case TF_AT_REQ:
    if (remote_allowed(tc))
      serve_atomic(tc, body);
    break;
  case TF_WR_RESP:
    if (!(rd = pend_head(tc, TF_WR_REQ, rmx_get64(body)))) {
      tc_proto_fail(tc, "write response for no outstanding write");
      return;
    }
    pend_done(tc, rd, wire_status(rmx_get32(body + 8)));
    break;
  case TF_AT_RESP: {
    if (!(rd = pend_head(tc, TF_AT_REQ, rmx_get64(body)))) {
      tc_proto_fail(tc, "atomic response for no outstanding atomic");
      return;
    }
    int32_t st = wire_status(rmx_get32(body + 8));
    if (st == 0)
      *rd->old = rmx_get64(body + 16);
    pend_done(tc, rd, st);
    break;
  }
  }
  if (rc)
    tc_fail(tc, rc);
}

/*
 * May the peer's remote requests be served? Only once the core has
 * accepted the peer: with authentication, not before its proof. A request
 * that beats our HELLO_ACK's write callback establishes the connection
 * first, as a message does.
 */
static int remote_allowed(rmx_tp_conn_t *tc)
{
  if (!tc->ready && !tc->established && !establish_early(tc))
    return 0;
  if (!tc->ready) {
    tc_proto_fail(tc, "remote request before the peer was accepted (authenticated)");
    return 0;
  }
  return 1;
}

/* A read response: match it to the oldest read, then stream its data. A
 * read is answered by one frame or more (chunks, in order); an error ends
 * it at any point. */
static int on_rd_resp(rmx_tp_conn_t *tc, const uint8_t *p, uint32_t blen)
{
  int32_t status = (int32_t)rmx_get32(p + TF_HDR + 8);
  size_t dlen = blen - TF_RESP_SUB;
  rd_t *rd = pend_head(tc, TF_RD_REQ, rmx_get64(p + TF_HDR));

  if (!rd) {
    tc_proto_fail(tc, "read response for no outstanding read");
    return -1;
  }
  if (status ? (dlen != 0 || status > 0) : (dlen > rd->len - rd->got || (!dlen && rd->len))) {
    tc_proto_fail(tc, "read response of the wrong length");
    return -1;
  }
  tc->rpos += TF_HDR + TF_RESP_SUB;
  if (status) {
    pend_done(tc, rd, rmx_wire_status(status));
    return 0;
  }
  tc->sink = (sink_t){.dst = rd->dst + rd->got, .left = dlen, .rd = rd};
  rd->got += dlen;
  return sink_start(tc);
}

/* A write request: check, then stream its data into place, or nowhere. */
static int on_wr_req(rmx_tp_conn_t *tc, const uint8_t *p, uint32_t blen)
{
  const uint8_t *b = p + TF_HDR;
  uint64_t addr = rmx_get64(b + 8), len = rmx_get64(b + 16);
  uint32_t flags = rmx_get32(b + 32);
  if (len != blen - TF_WRREQ_SUB || (flags & ~1u)) {
    tc_proto_fail(tc, "malformed write request");
    return -1;
  }
  srv_t *sv = srv_new(tc, TF_WR_RESP, rmx_get64(b));
  if (!sv)
    return -1;
  sv->ready = 0;
  rmx_tp_mem_t *m = check_access(tc, rmx_get64(b + 24), addr, len, RMX_TP_ACC_REMOTE_WRITE,
                                 "write", &sv->status);
  if (m)
    mem_use(m);
  tc->sink = (sink_t){.dst = m ? (uint8_t *)(uintptr_t)addr : NULL, .left = len, .srv = sv,
                      .m = m, .has_imm = flags & 1, .imm = rmx_get32(b + 36), .total = len};
  tc->rpos += TF_HDR + TF_WRREQ_SUB;
  return sink_start(tc);
}

static void parse(rmx_tp_conn_t *tc)
{
  while (!tc->closing && !tc->dead && !tc->sinking) {
    size_t avail = tc->rlen - tc->rpos;
    if (avail < TF_HDR)
      break;
    const uint8_t *p = tc->rbuf + tc->rpos;
    uint32_t blen;
    uint8_t kind;
    const char *why = tf_check(p, tc->state, tc->max_frame, &kind, &blen);
    if (why) {
      tc_proto_fail(tc, why);
      return;
    }
    if (kind == TF_RD_RESP || kind == TF_WR_REQ) { /* payloads that stream */
      size_t sub = kind == TF_RD_RESP ? TF_RESP_SUB : TF_WRREQ_SUB;
      if (avail < TF_HDR + sub)
        break;
      if (kind == TF_WR_REQ && !remote_allowed(tc))
        break;
      if ((kind == TF_RD_RESP ? on_rd_resp(tc, p, blen) : on_wr_req(tc, p, blen)) != 0)
        break;
      continue;
    }
    if (avail < TF_HDR + (size_t)blen)
      break;
    tc->rpos += TF_HDR + blen;
    on_frame(tc, kind, p + TF_HDR, blen);
  }
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
  rmx_tp_conn_t *tc = s->data;
  (void)buf;
  if (nread < 0) {
    tc_fail(tc, nread == UV_EOF ? RMX_ECONNRESET : rmx__uv_err((int)nread));
    return;
  }
  if (tc->sinking) {
    if (tc->sink.dst)
      tc->sink.dst += nread;
    tc->sink.left -= (size_t)nread;
    if (tc->sink.left == 0) {
      sink_done(tc);
      parse(tc); /* nothing is buffered, but keep the shape */
    }
    return;
  }
  tc->rlen += (size_t)nread;
  parse(tc);
}

/* ---- connections ---- */

static void timer_cb(uv_timer_t *t)
{
  rmx_tp_conn_t *tc = t->data;
  RMX_TP_LOG(tc->tp->env, WARN, "tcp: handshake not finished within %u ms",
          tc->tp->env->cfg->connect_timeout_ms);
  tc_fail(tc, RMX_ETIMEDOUT);
}

static rmx_tp_conn_t *tc_new(rmx_tp_t *tp)
{
  const rmx_config_t *cfg = tp->env->cfg;
  rmx_tp_conn_t *tc = calloc(1, sizeof(*tc));
  if (!tc)
    return NULL;
  tc->tp = tp;
  tc->max_frame = cfg->eager_size;
  tc->rcap = TF_HDR + cfg->eager_size + RBUF_EXTRA;
  tc->rbuf = malloc(tc->rcap);
  if (!tc->rbuf) {
    free(tc);
    return NULL;
  }
  rmx_list_init(&tc->rd_pending);
  rmx_list_init(&tc->lst_link);
  rmx_list_init(&tc->srvq);
  rmx_list_init(&tc->srv_sent);
  rmx_list_push(&tp->conns, &tc->tp_link);
  tc->serial = ++tp->next_serial;
  uv_tcp_init(tp->loop, &tc->h);
  uv_timer_init(tp->loop, &tc->timer);
  tc->h.data = tc->timer.data = tc;
  tc->open_handles = 2;
  tp->live++;
  uv_timer_start(&tc->timer, timer_cb, cfg->connect_timeout_ms, 0);
  return tc;
}

static void connect_cb(uv_connect_t *req, int status)
{
  rmx_tp_conn_t *tc = req->data;
  int rc;
  if (status == UV_ECANCELED || tc->closing)
    return;
  if (status) {
    tc_fail(tc, rmx__uv_err(status));
    return;
  }
  uv_tcp_nodelay(&tc->h, 1);
  if ((rc = write_small(tc, W_CTRL, TF_HELLO, tc->hello, tc->hello_len)) != 0 ||
      (rc = rmx__uv_err(uv_read_start((uv_stream_t *)&tc->h, alloc_cb, read_cb))) != 0) {
    tc_fail(tc, rc);
    return;
  }
  tc->state = TC_HELLO_SENT;
}

static int tcp_connect(rmx_tp_t *tp, const struct sockaddr *sa, const void *hello, size_t len,
                       void *owner, rmx_tp_conn_t **out)
{
  if (len > TF_HELLO_MAX)
    return RMX_EINVAL;
  rmx_tp_conn_t *tc = tc_new(tp);
  if (!tc)
    return RMX_ENOMEM;
  memcpy(tc->hello, hello, len);
  tc->hello_len = len;
  tc->state = TC_CONNECTING;
  tc->creq.data = tc;
  int rc = uv_tcp_connect(&tc->creq, &tc->h, sa, connect_cb);
  if (rc) {
    tc_close(tc);
    return rmx__uv_err(rc);
  }
  tc->owner = owner;
  *out = tc;
  return 0;
}

static int tcp_accept(rmx_tp_conn_t *tc, void *owner, const void *hello, size_t len)
{
  if (len > TF_HELLO_MAX)
    return RMX_EINVAL;
  memcpy(tc->hello, hello, len);
  tc->hello_len = len;
  tc->owner = owner;
  tc->state = TC_UP;
  int rc = write_small(tc, W_HELLO_ACK, TF_HELLO_ACK, tc->hello, len);
  if (rc)
    tc->owner = NULL;
  return rc;
}

static void tcp_reject(rmx_tp_conn_t *tc, int status)
{
  uint8_t body[4];
  tc->owner = NULL;
  tc->state = TC_REJECTING;
  rmx_put32(body, (uint32_t)status);
  uv_read_stop((uv_stream_t *)&tc->h);
  if (write_small(tc, W_REJECT, TF_REJECT, body, sizeof(body)) != 0)
    tc_close(tc);
}

static void tcp_close(rmx_tp_conn_t *tc) { tc_close(tc); }

static void tcp_ready(rmx_tp_conn_t *tc) { tc->ready = 1; }

/* libuv writes at once; nothing is held back. */
static void tcp_flush(rmx_tp_conn_t *tc) {}

/* ---- listening ---- */

static void listener_closed(uv_handle_t *h)
{
  rmx_tp_listener_t *l = h->data;
  rmx_tp_t *tp = l->tp;
  free(l);
  tp_unlive(tp);
}

static void on_connection(uv_stream_t *server, int status)
{
  rmx_tp_listener_t *l = server->data;
  if (status) {
    RMX_TP_LOG(l->tp->env, WARN, "tcp: accept failed: %s", uv_strerror(status));
    return;
  }
  rmx_tp_conn_t *tc = tc_new(l->tp);
  if (!tc)
    return;
  tc->passive = 1;
  tc->state = TC_WAIT_HELLO;
  if (uv_accept(server, (uv_stream_t *)&tc->h) != 0) {
    tc_close(tc);
    return;
  }
  const rmx_config_t *cfg = l->tp->env->cfg;
  if (l->npending >= cfg->max_handshakes) {
    uint32_t held;
    if (cfg->log_level >= RMX_LOG_WARN && rmx__ratelimit(&l->tp->rl_handshakes, uv_now(l->tp->loop), &held))
      rmx__log(RMX_LOG_WARN,
               "tcp: %u handshakes in progress on a listener (RMX_MAX_HANDSHAKES): dropping a "
               "new connection (%u more not logged)", l->npending, held);
    tc_close(tc);
    return;
  }
  uv_tcp_nodelay(&tc->h, 1);
  tc->lst = l;
  l->npending++;
  rmx_list_push(&l->pending, &tc->lst_link);
  if (uv_read_start((uv_stream_t *)&tc->h, alloc_cb, read_cb) != 0)
    tc_close(tc);
}

static int tcp_listen(rmx_tp_t *tp, const struct sockaddr *sa, void *owner,
                      rmx_tp_listener_t **out)
{
  char addr[80];
  rmx_tp_listener_t *l = calloc(1, sizeof(*l));
  if (!l)
    return RMX_ENOMEM;
  l->tp = tp;
  l->owner = owner;
  rmx_list_init(&l->pending);
  uv_tcp_init(tp->loop, &l->h);
  l->h.data = l;
  tp->live++;
  int rc = uv_tcp_bind(&l->h, sa, 0);
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&l->h, 511, on_connection);
  if (rc) {
    RMX_TP_LOG(tp->env, ERROR, "tcp: cannot listen on %s: %s", rmx__sa_str(sa, addr, sizeof(addr)),
            uv_strerror(rc));
    uv_close((uv_handle_t *)&l->h, listener_closed);
    return rmx__uv_err(rc);
  }
  *out = l;
  return 0;
}

static int tcp_listen_addr(rmx_tp_listener_t *l, struct sockaddr_storage *ss)
{
  int len = sizeof(*ss);
  return rmx__uv_err(uv_tcp_getsockname(&l->h, (struct sockaddr *)ss, &len));
}

static void tcp_listen_close(rmx_tp_listener_t *l)
{
  rmx_list_t *n;
  while ((n = l->pending.next) != &l->pending)
    tc_close(rmx_container_of(n, rmx_tp_conn_t, lst_link));
  uv_close((uv_handle_t *)&l->h, listener_closed);
}

/* ---- memory ---- */

static int tcp_mem_reg(rmx_tp_t *tp, void *addr, size_t len, unsigned access,
                       rmx_tp_conn_t *scope, rmx_tp_mem_t **out)
{
  rmx_tp_mem_t *m = calloc(1, sizeof(*m));
  if (!m)
    return RMX_ENOMEM;
  /* 64 bits from the kernel's random source for every registration: a
   * key tells nothing about any other, and guessing one is hopeless. */
  do {
    if (getrandom(&m->key, sizeof(m->key), 0) != sizeof(m->key)) {
      RMX_TP_LOG(tp->env, ERROR, "tcp: no randomness for a memory key");
      free(m);
      return RMX_EIO;
    }
  } while (m->key == 0 || mem_find(tp, m->key));
  m->tp = tp;
  m->addr = (uintptr_t)addr;
  m->len = len;
  m->access = access;
  m->scope = scope ? scope->serial : 0;
  rmx_list_push(&tp->mem[m->key % MEM_BUCKETS], &m->link);
  *out = m;
  return 0;
}

/* Unreachable at once; freed now or when the last read or write using it
 * stops (they check m->dead and go no further). */
static void tcp_mem_dereg(rmx_tp_mem_t *m)
{
  rmx_list_t *n;
  rmx_list_del(&m->link);
  m->dead = 1;
  if (m->uses == 0) {
    free(m);
    return;
  }
  rmx_list_foreach(n, &m->tp->conns) {
    rmx_tp_conn_t *tc = rmx_container_of(n, rmx_tp_conn_t, tp_link);
    if (sends_from(tc, m))
      cut_writes(tc);
  }
}

static uint64_t tcp_mem_rkey(const rmx_tp_mem_t *m) { return m->key; }

/* ---- instance ---- */

static int tcp_init(const rmx_tp_env_t *env, rmx_tp_t **out)
{
  rmx_tp_t *tp = calloc(1, sizeof(*tp));
  if (!tp)
    return RMX_ENOMEM;
  tp->env = env;
  tp->loop = env->loop;
  rmx_list_init(&tp->free_w);
  rmx_list_init(&tp->free_rd);
  rmx_list_init(&tp->free_srv);
  rmx_list_init(&tp->conns);
  for (int i = 0; i < MEM_BUCKETS; i++)
    rmx_list_init(&tp->mem[i]);
  *out = tp;
  return 0;
}

static void tp_free(rmx_tp_t *tp)
{
  rmx_list_t *n;
  while ((n = rmx_list_pop(&tp->free_w)) != NULL)
    free(rmx_container_of(n, wreq_t, link));
  while ((n = rmx_list_pop(&tp->free_rd)) != NULL)
    free(rmx_container_of(n, rd_t, link));
  while ((n = rmx_list_pop(&tp->free_srv)) != NULL)
    free(rmx_container_of(n, srv_t, link));
  for (int i = 0; i < MEM_BUCKETS; i++)
    while ((n = rmx_list_pop(&tp->mem[i])) != NULL) {
      if (tp->warn) /* tp->env may be gone: the instance can outlive it */
        rmx__log(RMX_LOG_WARN, "tcp: a registration was never released");
      free(rmx_container_of(n, rmx_tp_mem_t, link));
    }
  free(tp);
}

static void tp_unlive(rmx_tp_t *tp)
{
  if (--tp->live == 0 && tp->finishing)
    tp_free(tp);
}

/* Sockets still closing (rejected peers) finish on the loop; the instance
 * goes with the last of them. */
static void tcp_fini(rmx_tp_t *tp)
{
  tp->finishing = 1;
  tp->warn = tp->env->cfg->log_level >= RMX_LOG_WARN;
  if (tp->live == 0)
    tp_free(tp);
}

static int tcp_devices(rmx_device_info_t **out, int *n) { return RMX_ENOTSUP; }

const rmx_tp_ops_t rmx_tcp_ops = {
  .name = "tcp",
  .flags = 0,
  .wire_id = 1,
  .max_io = TF_MAX_IO,
  .hello_max = TF_HELLO_MAX,
  .init = tcp_init,
  .fini = tcp_fini,
  .devices = tcp_devices,
  .listen = tcp_listen,
  .listen_addr = tcp_listen_addr,
  .listen_close = tcp_listen_close,
  .connect = tcp_connect,
  .accept = tcp_accept,
  .reject = tcp_reject,
  .close = tcp_close,
  .send = tcp_send,
  .read = tcp_read,
  .write = tcp_write,
  .atomic = tcp_atomic,
  .caps = tcp_caps,
  .flush = tcp_flush,
  .ready = tcp_ready,
  .mem_reg = tcp_mem_reg,
  .mem_dereg = tcp_mem_dereg,
  .mem_rkey = tcp_mem_rkey,
};
