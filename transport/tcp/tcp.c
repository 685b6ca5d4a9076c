/*
 * The TCP transport: rmx frames over libuv streams, plus frames that carry
 * remote reads, which the target serves from its registered memory after
 * checking the key, the bounds and the access rights.
 *
 * Stream framing: u32 body length, u8 kind, u8 flags, u16 reserved, body.
 * A peer that sends anything else is cut off; see docs/protocol.md.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <uv.h>

#include "../../src/list.h"
#include "../../src/wire.h"
#include "../transport.h"

#define TF_HDR 8
#define TF_RDREQ_LEN 32
#define TF_RDRESP_SUB 12
#define TF_HELLO_MAX 256
#define TF_MAX_IO (1u << 30) /* largest single remote read */
#define RBUF_EXTRA (64u << 10)
#define MEM_BUCKETS 1024

enum { TF_HELLO = 1, TF_HELLO_ACK, TF_REJECT, TF_MSG, TF_RD_REQ, TF_RD_RESP };

typedef enum {
  TC_CONNECTING,  /* active: TCP connect in flight */
  TC_HELLO_SENT,  /* active: waiting for HELLO_ACK */
  TC_WAIT_HELLO,  /* passive: waiting for the peer's HELLO */
  TC_UP,          /* handshake done (passive: accepted) */
  TC_REJECTING,   /* passive: REJECT being written, then close */
} tc_state_t;

typedef enum { W_SEND, W_CTRL, W_HELLO_ACK, W_REJECT } wkind_t;

typedef struct wreq {
  uv_write_t req;
  rmx_list_t link;
  rmx_tp_conn_t *tc;
  void *op;
  wkind_t kind;
  uint8_t hdr[TF_HDR + TF_RDREQ_LEN];
} wreq_t;

typedef struct rd {
  rmx_list_t link;
  uint64_t id;
  uint8_t *dst;
  size_t len;
  void *op;
} rd_t;

struct rmx_tp_mem {
  rmx_list_t link;
  rmx_tp_t *tp;
  uint64_t key;
  uintptr_t addr;
  size_t len;
  unsigned access;
};

struct rmx_tp {
  rmx_ctx_t *ctx;
  uv_loop_t *loop;
  rmx_list_t free_w;
  rmx_list_t free_rd;
  rmx_list_t mem[MEM_BUCKETS];
  uint32_t key_seq;
  uint32_t key_salt;
  uint32_t live; /* listeners and connections not yet freed */
  int finishing;
};

struct rmx_tp_listener {
  uv_tcp_t h;
  rmx_tp_t *tp;
  rmx_listener_t *owner;
  rmx_list_t pending; /* accepted sockets still before their HELLO */
};

struct rmx_tp_conn {
  uv_tcp_t h;
  uv_timer_t timer;
  uv_connect_t creq;
  rmx_tp_t *tp;
  rmx_conn_t *owner;
  rmx_tp_listener_t *lst; /* passive, before HELLO */
  rmx_list_t lst_link;
  tc_state_t state;
  uint8_t passive, established, dead, closing;
  uint8_t open_handles;
  uint8_t hello[TF_HELLO_MAX];
  size_t hello_len;
  uint8_t *rbuf;
  size_t rcap, rlen, rpos;
  rd_t *cur; /* a read response streaming straight into its destination */
  size_t cur_got;
  rmx_list_t rd_pending;
  uint64_t rd_seq;
  size_t max_frame;
};

static void tp_unlive(rmx_tp_t *tp);

/* ---- small helpers ---- */

static void raise_ev(rmx_tp_conn_t *tc, rmx_tp_ev_type_t t, int status, void *op,
                     const void *data, size_t len)
{
  rmx_tp_ev_t ev = {.type = t, .status = status, .op = op, .data = data, .len = len};
  rmx__tp_event(tc->owner, &ev);
}

static wreq_t *wreq_get(rmx_tp_conn_t *tc, wkind_t kind, void *op)
{
  rmx_list_t *n = rmx_list_pop(&tc->tp->free_w);
  wreq_t *w = n ? rmx_container_of(n, wreq_t, link) : malloc(sizeof(*w));
  if (!w)
    return NULL;
  w->tc = tc;
  w->op = op;
  w->kind = kind;
  return w;
}

static void tf_hdr(uint8_t *p, uint32_t blen, uint8_t kind)
{
  rmx_put32(p, blen);
  p[4] = kind;
  p[5] = 0;
  rmx_put16(p + 6, 0);
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
      raise_ev(tc, RMX_TP_EV_READ, RMX_ECANCELED, rd->op, NULL, 0);
    rmx_list_push(&tp->free_rd, &rd->link);
  }
  if (tc->owner)
    raise_ev(tc, RMX_TP_EV_CLOSED, 0, NULL, NULL, 0);
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
  RMX_LOG(tc->tp->ctx, ERROR, "tcp: closing connection with %s: %s", peer, why);
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

  rmx_list_push(&tc->tp->free_w, &w->link);
  switch (kind) {
  case W_SEND:
    raise_ev(tc, RMX_TP_EV_SEND, rc, op, NULL, 0);
    break;
  case W_HELLO_ACK:
    if (rc == 0 && !tc->established && !tc->closing && !tc->dead) {
      tc->established = 1;
      uv_timer_stop(&tc->timer);
      raise_ev(tc, RMX_TP_EV_ESTABLISHED, 0, NULL, NULL, 0);
    }
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
    rmx_list_push(&tc->tp->free_w, &w->link);
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

/* ---- remote reads ---- */

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

static int tcp_read(rmx_tp_conn_t *tc, void *dst, size_t len, rmx_tp_mem_t *dst_mem,
                    uint64_t raddr, uint64_t rkey, void *op)
{
  (void)dst_mem;
  if (tc->dead || tc->closing || tc->state != TC_UP)
    return RMX_ENOTCONN;
  if (len > TF_MAX_IO)
    return RMX_EMSGSIZE;
  rmx_list_t *n = rmx_list_pop(&tc->tp->free_rd);
  rd_t *rd = n ? rmx_container_of(n, rd_t, link) : malloc(sizeof(*rd));
  if (!rd)
    return RMX_ENOMEM;
  rd->id = ++tc->rd_seq;
  rd->dst = dst;
  rd->len = len;
  rd->op = op;
  uint8_t body[TF_RDREQ_LEN];
  rmx_put64(body, rd->id);
  rmx_put64(body + 8, raddr);
  rmx_put64(body + 16, len);
  rmx_put64(body + 24, rkey);
  int rc = write_small(tc, W_CTRL, TF_RD_REQ, body, sizeof(body));
  if (rc) {
    rmx_list_push(&tc->tp->free_rd, &rd->link);
    return rc;
  }
  rmx_list_push(&tc->rd_pending, &rd->link);
  return 0;
}

/* The peer asks for our memory: check everything before touching it. */
static int serve_read(rmx_tp_conn_t *tc, const uint8_t *body)
{
  uint64_t id = rmx_get64(body), addr = rmx_get64(body + 8), len = rmx_get64(body + 16);
  rmx_tp_mem_t *m = mem_find(tc->tp, rmx_get64(body + 24));
  int status = 0;

  if (!m || !(m->access & RMX_TP_ACC_REMOTE_READ))
    status = RMX_EACCES;
  else if (addr < m->addr || len > m->len || addr - m->addr > m->len - len)
    status = RMX_EACCES;
  else if (len > TF_MAX_IO)
    status = RMX_EMSGSIZE;
  if (status)
    RMX_LOG(tc->tp->ctx, WARN, "tcp: refused a remote read of %llu bytes at 0x%llx: %s",
            (unsigned long long)len, (unsigned long long)addr, rmx_strerror(status));

  wreq_t *w = wreq_get(tc, W_CTRL, NULL);
  if (!w)
    return RMX_ENOMEM;
  uint64_t dlen = status ? 0 : len;
  tf_hdr(w->hdr, (uint32_t)(TF_RDRESP_SUB + dlen), TF_RD_RESP);
  rmx_put64(w->hdr + TF_HDR, id);
  rmx_put32(w->hdr + TF_HDR + 8, (uint32_t)status);
  uv_buf_t bufs[2] = {uv_buf_init((char *)w->hdr, TF_HDR + TF_RDRESP_SUB),
                      uv_buf_init((char *)addr, (unsigned)dlen)};
  return write_bufs(tc, w, bufs, dlen ? 2 : 1);
}

static void read_done(rmx_tp_conn_t *tc, rd_t *rd, int status)
{
  rmx_list_del(&rd->link);
  rmx_list_push(&tc->tp->free_rd, &rd->link);
  raise_ev(tc, RMX_TP_EV_READ, status, rd->op, NULL, 0);
}

/* ---- reading ---- */

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  rmx_tp_conn_t *tc = h->data;
  (void)suggested;
  if (tc->cur) {
    size_t left = tc->cur->len - tc->cur_got;
    buf->base = (char *)tc->cur->dst + tc->cur_got;
    buf->len = left > TF_MAX_IO ? TF_MAX_IO : left;
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
  tc->lst = NULL;
  rmx__tp_incoming(l->owner, tc, body, blen); /* answers with accept or reject */
}

static void on_frame(rmx_tp_conn_t *tc, uint8_t kind, const uint8_t *body, size_t blen)
{
  switch (kind) {
  case TF_HELLO:
    on_hello(tc, body, blen);
    break;
  case TF_HELLO_ACK:
    tc->state = TC_UP;
    tc->established = 1;
    uv_timer_stop(&tc->timer);
    raise_ev(tc, RMX_TP_EV_ESTABLISHED, 0, NULL, body, blen);
    break;
  case TF_REJECT: {
    int32_t st = (int32_t)rmx_get32(body);
    tc_fail(tc, st < 0 && st > -5000 ? st : RMX_ECONNREFUSED);
    break;
  }
  case TF_MSG:
    if (!tc->established) { /* the peer's first message beat our write callback */
      tc->established = 1;
      uv_timer_stop(&tc->timer);
      raise_ev(tc, RMX_TP_EV_ESTABLISHED, 0, NULL, NULL, 0);
      if (tc->closing || tc->dead)
        return;
    }
    raise_ev(tc, RMX_TP_EV_RECV, 0, NULL, body, blen);
    break;
  case TF_RD_REQ: {
    int rc = serve_read(tc, body);
    if (rc)
      tc_fail(tc, rc);
    break;
  }
  }
}

/* Is this frame kind allowed now, with this body length? NULL if so. */
static const char *frame_check(rmx_tp_conn_t *tc, uint8_t kind, uint32_t blen)
{
  switch (kind) {
  case TF_HELLO:
    if (tc->state != TC_WAIT_HELLO)
      return "unexpected HELLO";
    return blen > TF_HELLO_MAX ? "oversized HELLO" : NULL;
  case TF_HELLO_ACK:
    if (tc->state != TC_HELLO_SENT)
      return "unexpected HELLO_ACK";
    return blen > TF_HELLO_MAX ? "oversized HELLO_ACK" : NULL;
  case TF_REJECT:
    if (tc->state != TC_HELLO_SENT)
      return "unexpected REJECT";
    return blen != 4 ? "malformed REJECT" : NULL;
  case TF_MSG:
    if (tc->state != TC_UP)
      return "message before the handshake";
    return blen > tc->max_frame ? "message frame larger than the receive buffers" : NULL;
  case TF_RD_REQ:
    if (tc->state != TC_UP)
      return "read request before the handshake";
    return blen != TF_RDREQ_LEN ? "malformed read request" : NULL;
  case TF_RD_RESP:
    if (tc->state != TC_UP)
      return "read response before the handshake";
    return blen < TF_RDRESP_SUB ? "malformed read response" : NULL;
  default:
    return tc->state == TC_WAIT_HELLO ? "not an rmx peer (bad first frame)" : "unknown frame kind";
  }
}

/* A read response header: match it to the oldest read, then stream its data. */
static int on_rd_resp(rmx_tp_conn_t *tc, const uint8_t *p, uint32_t blen)
{
  uint64_t id = rmx_get64(p + TF_HDR);
  int32_t status = (int32_t)rmx_get32(p + TF_HDR + 8);
  size_t dlen = blen - TF_RDRESP_SUB;
  rd_t *rd = rmx_list_empty(&tc->rd_pending)
                 ? NULL
                 : rmx_container_of(tc->rd_pending.next, rd_t, link);

  if (!rd || rd->id != id) {
    tc_proto_fail(tc, "read response for no outstanding read");
    return -1;
  }
  if (status ? (dlen != 0 || status > 0 || status < -5000) : dlen != rd->len) {
    tc_proto_fail(tc, "read response of the wrong length");
    return -1;
  }
  tc->rpos += TF_HDR + TF_RDRESP_SUB;
  if (status) {
    read_done(tc, rd, status);
    return 0;
  }
  size_t have = tc->rlen - tc->rpos;
  if (have > dlen)
    have = dlen;
  memcpy(rd->dst, tc->rbuf + tc->rpos, have);
  tc->rpos += have;
  if (have == dlen) {
    read_done(tc, rd, 0);
    return 0;
  }
  tc->cur = rd; /* the rest goes straight to rd->dst: see alloc_cb */
  tc->cur_got = have;
  tc->rpos = tc->rlen = 0;
  return 1;
}

static void parse(rmx_tp_conn_t *tc)
{
  while (!tc->closing && !tc->dead && !tc->cur) {
    size_t avail = tc->rlen - tc->rpos;
    if (avail < TF_HDR)
      break;
    const uint8_t *p = tc->rbuf + tc->rpos;
    uint32_t blen = rmx_get32(p);
    uint8_t kind = p[4];
    const char *why = frame_check(tc, kind, blen);
    if (why) {
      tc_proto_fail(tc, why);
      return;
    }
    if (kind == TF_RD_RESP) {
      if (avail < TF_HDR + TF_RDRESP_SUB || on_rd_resp(tc, p, blen) != 0)
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
  if (tc->cur) {
    tc->cur_got += (size_t)nread;
    if (tc->cur_got == tc->cur->len) {
      rd_t *rd = tc->cur;
      tc->cur = NULL;
      read_done(tc, rd, 0);
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
  RMX_LOG(tc->tp->ctx, WARN, "tcp: handshake not finished within %u ms",
          rmx__ctx_cfg(tc->tp->ctx)->connect_timeout_ms);
  tc_fail(tc, RMX_ETIMEDOUT);
}

static rmx_tp_conn_t *tc_new(rmx_tp_t *tp)
{
  const rmx_config_t *cfg = rmx__ctx_cfg(tp->ctx);
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
                       rmx_conn_t *owner, rmx_tp_conn_t **out)
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

static int tcp_accept(rmx_tp_conn_t *tc, rmx_conn_t *owner, const void *hello, size_t len)
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
    RMX_LOG(l->tp->ctx, WARN, "tcp: accept failed: %s", uv_strerror(status));
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
  uv_tcp_nodelay(&tc->h, 1);
  tc->lst = l;
  rmx_list_push(&l->pending, &tc->lst_link);
  if (uv_read_start((uv_stream_t *)&tc->h, alloc_cb, read_cb) != 0)
    tc_close(tc);
}

static int tcp_listen(rmx_tp_t *tp, const struct sockaddr *sa, rmx_listener_t *owner,
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
    RMX_LOG(tp->ctx, ERROR, "tcp: cannot listen on %s: %s", rmx__sa_str(sa, addr, sizeof(addr)),
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

static int tcp_mem_reg(rmx_tp_t *tp, void *addr, size_t len, unsigned access, rmx_tp_mem_t **out)
{
  rmx_tp_mem_t *m = malloc(sizeof(*m));
  if (!m)
    return RMX_ENOMEM;
  m->tp = tp;
  /* Low bits pick the bucket; the salt makes keys hard to guess. */
  m->key = (uint64_t)tp->key_salt << 32 | ++tp->key_seq;
  m->addr = (uintptr_t)addr;
  m->len = len;
  m->access = access;
  rmx_list_push(&tp->mem[m->key % MEM_BUCKETS], &m->link);
  *out = m;
  return 0;
}

static void tcp_mem_dereg(rmx_tp_mem_t *m)
{
  rmx_list_del(&m->link);
  free(m);
}

static uint64_t tcp_mem_rkey(const rmx_tp_mem_t *m) { return m->key; }

/* ---- instance ---- */

static int tcp_init(rmx_ctx_t *ctx, rmx_tp_t **out)
{
  rmx_tp_t *tp = calloc(1, sizeof(*tp));
  if (!tp)
    return RMX_ENOMEM;
  tp->ctx = ctx;
  tp->loop = rmx__ctx_uv(ctx);
  rmx_list_init(&tp->free_w);
  rmx_list_init(&tp->free_rd);
  for (int i = 0; i < MEM_BUCKETS; i++)
    rmx_list_init(&tp->mem[i]);
  if (getrandom(&tp->key_salt, sizeof(tp->key_salt), 0) != sizeof(tp->key_salt))
    tp->key_salt = (uint32_t)(uintptr_t)tp ^ (uint32_t)uv_hrtime();
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
  for (int i = 0; i < MEM_BUCKETS; i++)
    while ((n = rmx_list_pop(&tp->mem[i])) != NULL) {
      RMX_LOG(tp->ctx, WARN, "tcp: a registration was never released");
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
  if (tp->live == 0)
    tp_free(tp);
}

const rmx_tp_ops_t rmx_tcp_ops = {
  .name = "tcp",
  .flags = 0,
  .init = tcp_init,
  .fini = tcp_fini,
  .listen = tcp_listen,
  .listen_addr = tcp_listen_addr,
  .listen_close = tcp_listen_close,
  .connect = tcp_connect,
  .accept = tcp_accept,
  .reject = tcp_reject,
  .close = tcp_close,
  .send = tcp_send,
  .read = tcp_read,
  .flush = tcp_flush,
  .mem_reg = tcp_mem_reg,
  .mem_dereg = tcp_mem_dereg,
  .mem_rkey = tcp_mem_rkey,
};
