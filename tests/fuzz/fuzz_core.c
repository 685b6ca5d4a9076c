/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The core's message path (credits, rendezvous, RPC, one-sided ops) over a
 * fake transport, as tests/unit/test_credits.c does it, driven by a program
 * the fuzzer writes: inbound frames (raw or built), completions of what the
 * core posted, application calls, transport failures, in any order the
 * transport contract allows. Each input runs on a fresh context that must
 * close and destroy cleanly, with nothing leaked.
 *
 * Checked on the way: every frame the core sends decodes, fits the peer's
 * eager size, and spends a credit the peer granted; the connection's close
 * callback runs exactly once. Programs whose hello byte has bit 7 set also
 * prepare, post and release transfer requests and send notifications
 * (fuzz_core_xfer.c, which checks them).
 */
#include <string.h>

#include "fuzz_core.h"
#include "conn/hello.h"

#define QMAX 16 /* fake send queue: past it, RMX_EAGAIN */
#define RMAX 64

struct rmx_tp_conn { int unused; };
struct rmx_tp_mem { int unused; };

typedef struct pend {
  rmx_tp_ev_type_t type;
  void *op;
  void *dst; /* READ: where the data goes; WRITE: the source */
  size_t len;
  uint64_t *old; /* ATOMIC */
  int xtag;      /* READ/WRITE of a transfer request: fx_rma_posted's tag */
  uint32_t xgen;
  rmx_tp_sge_t sge[RMX_TP_MAX_SGE]; /* SEND: must stay valid until completed */
  int nsge;
} pend_t;

static struct fake {
  rmx_conn_t *owner;
  struct rmx_tp_conn tc;
  int closed, closed_raised, broken;
  pend_t sends[QMAX];
  int nsends;
  pend_t rmas[RMAX];
  int nrmas;
  /* the peer's books */
  uint32_t peer_eager, peer_depth, peer_credits;
  uint64_t rts_ids[8];
  int nrts;
} fk;

struct app app;
size_t fk_io_max_now;
int fk_fail_post;
int fk_reorder;

static uint8_t big[64 << 10]; /* message and RMA source: outlives every op */
static volatile uint8_t touched;

/* Read both ends of what the core hands over, so ASan sees a bad span. */
static void touch(const void *p, size_t len)
{
  if (len)
    touched = ((const uint8_t *)p)[0] ^ ((const uint8_t *)p)[len - 1];
}
static uint8_t sink[64 << 10];
static uint64_t olds[RMAX];

/* ---- the fake transport ---- */

static int fk_init(const rmx_tp_env_t *env, rmx_tp_t **tp) { *tp = (rmx_tp_t *)&fk; return 0; }
static void fk_fini(rmx_tp_t *tp) {}
static int fk_listen(rmx_tp_t *tp, const struct sockaddr *sa, void *o,
                     rmx_tp_listener_t **out) { return RMX_ENOTSUP; }
static int fk_listen_addr(rmx_tp_listener_t *l, struct sockaddr_storage *ss) { return RMX_ENOTSUP; }
static int fk_peer_addr(rmx_tp_conn_t *tc, struct sockaddr_storage *ss) { return RMX_ENOTSUP; }
static void fk_listen_close(rmx_tp_listener_t *l) {}
static int fk_connect(rmx_tp_t *tp, const struct sockaddr *sa, const void *h, size_t len,
                      void *owner, rmx_tp_conn_t **out)
{
  fk.owner = owner;
  *out = &fk.tc;
  return 0;
}
static int fk_accept(rmx_tp_conn_t *tc, void *o, const void *h, size_t l) { return RMX_ENOTSUP; }
static void fk_reject(rmx_tp_conn_t *tc, int st) {}
static void fk_close(rmx_tp_conn_t *tc)
{
  FUZZ_CHECK(!fk.closed); /* once */
  fk.closed = 1;
}

static int fk_send(rmx_tp_conn_t *tc, const rmx_tp_sge_t *sge, int n, void *op)
{
  static uint8_t f[(1 << 20) + 64];
  size_t len = 0;
  FUZZ_CHECK(!fk.closed && n >= 1 && n <= RMX_TP_MAX_SGE);
  if (fk.nsends == QMAX)
    return RMX_EAGAIN;
  for (int i = 0; i < n; i++) {
    FUZZ_CHECK(len + sge[i].len <= fk.peer_eager);
    memcpy(f + len, sge[i].addr, sge[i].len);
    len += sge[i].len;
  }
  rmx_frame_t fr;
  const char *why;
  FUZZ_CHECK(rmx__wire_decode(f, len, &fr, &why) == 0);
  if (fr.type != RMX_FR_BYE) {
    FUZZ_CHECK(fk.peer_credits > 0);
    fk.peer_credits--;
  }
  if (fr.type == RMX_FR_RTS)
    fk.rts_ids[fk.nrts++ % 8] = fr.u.rts.id;
  if (fr.type == RMX_FR_DATA && fr.flags == RMX_FF_NOTIFY)
    fx_notify_sent(&fr);
  pend_t *p = &fk.sends[fk.nsends++];
  *p = (pend_t){.type = RMX_TP_EV_SEND, .op = op, .nsge = n};
  memcpy(p->sge, sge, sizeof(*sge) * (size_t)n);
  return 0;
}

static int rma_post(pend_t p)
{
  FUZZ_CHECK(!fk.closed);
  if (fk.nrmas == RMAX)
    return RMX_EAGAIN;
  fk.rmas[fk.nrmas++] = p;
  return 0;
}
static int fk_read(rmx_tp_conn_t *tc, void *dst, size_t len, rmx_tp_mem_t *m, uint64_t raddr,
                   uint64_t rkey, void *op)
{
  FUZZ_CHECK(len <= fk_io_max_now);
  if (fk.nrmas == RMAX)
    return RMX_EAGAIN;
  if (fk_fail_post && !(fk_fail_post = 0))
    return RMX_EIO; /* refused: never reported */
  uint32_t gen = 0;
  int tag = fx_rma_posted(op, RMX_TP_EV_READ, dst, len, raddr, rkey, &gen);
  return rma_post((pend_t){.type = RMX_TP_EV_READ, .op = op, .dst = dst, .len = len,
                           .xtag = tag, .xgen = gen});
}
static int fk_write(rmx_tp_conn_t *tc, const void *src, size_t len, rmx_tp_mem_t *m,
                    uint64_t raddr, uint64_t rkey, const uint32_t *imm, void *op)
{
  if (imm) { /* spends a receive buffer at the peer, like a message */
    FUZZ_CHECK(fk.peer_credits > 0);
    fk.peer_credits--;
  }
  touch(src, len);
  FUZZ_CHECK(len <= fk_io_max_now);
  if (fk.nrmas == RMAX)
    return RMX_EAGAIN;
  if (fk_fail_post && !(fk_fail_post = 0))
    return RMX_EIO;
  uint32_t gen = 0;
  int tag = fx_rma_posted(op, RMX_TP_EV_WRITE, src, len, raddr, rkey, &gen);
  return rma_post((pend_t){.type = RMX_TP_EV_WRITE, .op = op, .dst = (void *)(uintptr_t)src,
                           .len = len, .xtag = tag, .xgen = gen});
}
static int fk_atomic(rmx_tp_conn_t *tc, rmx_tp_atomic_t kind, uint64_t raddr, uint64_t rkey,
                     uint64_t cmp_add, uint64_t swap, uint64_t *old, void *op)
{
  return rma_post((pend_t){.type = RMX_TP_EV_ATOMIC, .op = op, .old = old});
}
static unsigned fk_caps(rmx_tp_conn_t *tc) { return RMX_TP_CAP_ATOMIC; }
static size_t fk_io_max(rmx_tp_conn_t *tc) { return fk_io_max_now; }
static void fk_flush(rmx_tp_conn_t *tc) {}
static void fk_ready(rmx_tp_conn_t *tc) {}
static struct rmx_tp_mem fake_mem;
static int fk_mem_reg(rmx_tp_t *tp, void *a, size_t l, unsigned acc, rmx_tp_conn_t *scope,
                      rmx_tp_mem_t **out)
{
  *out = &fake_mem;
  return 0;
}
static void fk_mem_dereg(rmx_tp_mem_t *m) {}
static uint64_t fk_mem_rkey(const rmx_tp_mem_t *m) { return 42; }

static const rmx_tp_ops_t fake_ops = {
  .name = "fake", .wire_id = 1, .max_io = 4096, .init = fk_init, .fini = fk_fini,
  .listen = fk_listen, .listen_addr = fk_listen_addr, .peer_addr = fk_peer_addr, .listen_close = fk_listen_close,
  .connect = fk_connect, .accept = fk_accept, .reject = fk_reject, .close = fk_close,
  .send = fk_send, .read = fk_read, .write = fk_write, .atomic = fk_atomic, .caps = fk_caps,
  .io_max = fk_io_max,
  .flush = fk_flush, .ready = fk_ready, .mem_reg = fk_mem_reg, .mem_dereg = fk_mem_dereg, .mem_rkey = fk_mem_rkey,
};

/* ---- the application ---- */

static void on_recv(rmx_conn_t *c, const void *d, size_t len, void *arg) { touch(d, len); }
static void on_disconnect(rmx_conn_t *c, int status, void *arg)
{
  FUZZ_CHECK(!app.closed);
  app.disconnects++;
}
static void on_imm(rmx_conn_t *c, uint32_t imm, size_t len, void *arg) {}
static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  rmx_conn_cbs_t cbs = {.on_recv = on_recv, .on_disconnect = on_disconnect, .on_imm = on_imm};
  if (status == 0)
    app.connected = 1;
  if (fx_on)
    fx_cbs(&cbs);
  rmx_conn_set_cbs(c, &cbs, NULL);
}
static void on_sent(rmx_conn_t *c, int status, void *arg) { FUZZ_CHECK(!app.closed); }
static void on_op(rmx_conn_t *c, int status, void *arg) { FUZZ_CHECK(!app.closed); }
static void on_reply(rmx_conn_t *c, int status, const void *d, size_t len, void *arg) {}
static void on_closed(rmx_conn_t *c, void *arg)
{
  if (fx_on)
    fx_closed(); /* the handle is still valid here */
  app.closed++;
}

void fc_close(void)
{
  FUZZ_CHECK(!app.app_closed && rmx_conn_close(app.c, on_closed, NULL) == 0);
  app.app_closed = 1;
}

static void rpc_echo(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  rmx_rpc_reply(req, data, len < 64 ? len : 64);
}
static void rpc_hold(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  if (app.nheld < 8)
    app.held[app.nheld++] = req;
  else
    rmx_rpc_reply_error(req, -1000);
}

/* ---- the peer's side ---- */

static void ev(rmx_tp_ev_type_t t, int status, void *op, const void *data, size_t len)
{
  rmx_tp_ev_t e = {.type = t, .status = status, .op = op, .data = data, .len = len};
  rmx__tp_event(fk.owner, &e);
}

static void complete_send(int status)
{
  pend_t p = fk.sends[0];
  memmove(fk.sends, fk.sends + 1, sizeof(pend_t) * (size_t)--fk.nsends);
  for (int i = 0; i < p.nsge; i++) /* a real transport reads it until now */
    touch(p.sge[i].addr, p.sge[i].len);
  ev(RMX_TP_EV_SEND, status, p.op, NULL, 0);
}

static void complete_rma_at(int k, int status)
{
  pend_t p = fk.rmas[k];
  memmove(fk.rmas + k, fk.rmas + k + 1, sizeof(pend_t) * (size_t)(--fk.nrmas - k));
  if (status == 0 && p.type == RMX_TP_EV_READ)
    memset(p.dst, 'R', p.len);
  if (status == 0 && p.type == RMX_TP_EV_WRITE)
    touch(p.dst, p.len);
  if (status == 0 && p.type == RMX_TP_EV_ATOMIC)
    *p.old = 7;
  if (p.xtag)
    fx_rma_done(p.xtag, p.xgen, p.dst, p.len, status);
  ev(p.type, status, p.op, NULL, 0);
}
static void complete_rma(int status) { complete_rma_at(0, status); }

/* The transport finishes closing: everything in flight fails, then CLOSED. */
static void raise_closed(void)
{
  while (fk.nsends)
    complete_send(RMX_ECANCELED);
  while (fk.nrmas)
    complete_rma(RMX_ECANCELED);
  fk.closed_raised = 1;
  ev(RMX_TP_EV_CLOSED, 0, NULL, NULL, 0);
}

int fc_alive(void) { return !fk.closed && !fk.broken; }

/* A frame of the peer's that grants credits. */
void fc_recv(const void *f, size_t n, unsigned credits)
{
  fk.peer_credits += credits; /* first: the core may spend them before the event returns */
  ev(RMX_TP_EV_RECV, 0, NULL, f, n);
}

/* The transport died on its own: it says so, and then waits for close(). */
static void break_transport(int status)
{
  fk.broken = 1;
  ev(RMX_TP_EV_DISCONNECTED, status, NULL, NULL, 0);
}

/* ---- the program ---- */

/* Build a frame of the peer's from a few bytes: the usual way to be valid. */
static void recv_built(prog_t *g)
{
  uint8_t f[RMX_WIRE_CTRL_MAX + 1024];
  /* one statement per byte taken: initializers have no evaluation order */
  unsigned type = next8(g) % 6;
  unsigned flags = next8(g);
  unsigned credits = next8(g) % 8;
  size_t n;
  rmx_wire_rpc_t x;
  x.call_id = next8(g) % 4 ? app.last_call : next8(g);
  x.handler = next8(g) % 4;
  x.status = -(int)(next8(g) % 8);
  switch (type) {
  case RMX_FR_RTS: {
    unsigned s = next16(g);
    rmx_wire_rts_t r = {.id = next8(g), .addr = 0x10000, .size = s ? s : 1u << 20, .rkey = 9};
    n = rmx__wire_rts_encode(f, (uint16_t)credits, &r);
    break;
  }
  case RMX_FR_FIN: {
    unsigned i = next8(g);
    rmx_wire_fin_t fin = {.id = i < 8 ? fk.rts_ids[i] : i, .status = i & 1 ? 0 : RMX_EACCES};
    n = rmx__wire_fin_encode(f, (uint16_t)credits, &fin);
    break;
  }
  case RMX_FR_CREDIT:
  case RMX_FR_BYE:
    n = rmx__wire_hdr_encode(f, (uint8_t)type, (uint16_t)credits, 0);
    break;
  default: { /* DATA */
    size_t plen = next16(g) % 1024;
    n = rmx__wire_hdr_encode(f, RMX_FR_DATA, (uint16_t)credits, (uint32_t)plen);
    memset(f + n, 'D', plen);
    n += plen;
    type = RMX_FR_DATA;
  }
  }
  if ((flags & 3) && (flags & 3) != 3 && (type == RMX_FR_DATA || type == RMX_FR_RTS)) {
    /* the extension sits after the header (DATA, before the payload) or the body */
    size_t at = type == RMX_FR_DATA ? RMX_WIRE_HDR_LEN : n;
    memmove(f + at + RMX_WIRE_RPC_LEN, f + at, n - at);
    rmx__wire_rpc_add(f, (uint8_t)(flags & 3), f + at, &x);
    n += RMX_WIRE_RPC_LEN;
  }
  /* credited first: the core may spend them before the event returns */
  fk.peer_credits += credits;
  ev(RMX_TP_EV_RECV, 0, NULL, f, n);
}

static void recv_raw(prog_t *g)
{
  size_t len = next8(g);
  if (len > g->n)
    len = g->n;
  uint8_t *f = malloc(len ? len : 1); /* exact size, for ASan */
  FUZZ_CHECK(f);
  memcpy(f, g->p, len);
  g->p += len;
  g->n -= len;
  rmx_frame_t fr;
  const char *why;
  if (rmx__wire_decode(f, len, &fr, &why) == 0)
    fk.peer_credits += fr.credits;
  ev(RMX_TP_EV_RECV, 0, NULL, f, len);
  free(f);
}

static void app_rma(prog_t *g)
{
  static rmx_rkey_t rk = {.tpi = 0 /* tcp */, .access = 15, .base = 0x100000, .len = 1 << 20,
                          .key = 9};
  unsigned what = next8(g) % 5;
  uint64_t off = next16(g) * 8u;
  size_t len = next16(g) % sizeof(big);
  rmx_iov_t iov[2] = {{.addr = big, .len = len / 2}, {.addr = sink, .len = len - len / 2}};
  int cnt = 1 + (int)(len & 1);
  uint64_t *old = &olds[off / 8 % RMAX];
  switch (what) {
  case 0:
    iov[0].addr = sink;
    iov[1].addr = sink + len / 2;
    rmx_read(app.c, iov, cnt, &rk, off, on_op, NULL);
    break;
  case 1:
    rmx_write(app.c, iov, cnt, &rk, off, on_op, NULL);
    break;
  case 2:
    rmx_write_imm(app.c, iov, cnt, &rk, off, next8(g), on_op, NULL);
    break;
  case 3:
    rmx_atomic_fadd(app.c, &rk, off, 1, old, on_op, NULL);
    break;
  default:
    rmx_atomic_cswap(app.c, &rk, off, 0, 1, old, on_op, NULL);
  }
}

static void step(prog_t *g)
{
  unsigned op = next8(g) % (fx_on ? 20 : 13);
  int alive = !fk.closed && !fk.broken; /* the transport still moves data */
  int usable = !app.app_closed;         /* the handle may be used */

  if (fk.closed && !fk.closed_raised) { /* close() was called: finish it first */
    raise_closed();
    return;
  }
  switch (op) {
  case 0:
    if (alive)
      recv_raw(g);
    break;
  case 1:
    if (alive)
      recv_built(g);
    break;
  case 2:
    if (!fk.closed && fk.nsends) {
      if (fk.broken) { /* what a dead transport still reports fails */
        complete_send(RMX_ECONNRESET);
      } else if (next8(g) == 0xff) { /* a failed send: the transport is dying */
        complete_send(RMX_ECONNRESET);
        if (!fk.broken && !fk.closed)
          break_transport(RMX_ECONNRESET);
      } else {
        complete_send(0);
      }
    }
    break;
  case 3:
    if (!fk.closed && fk.nrmas) {
      int k = fk_reorder ? (int)(next8(g) % (unsigned)fk.nrmas) : 0; /* an order it forbids */
      complete_rma_at(k, fk.broken ? RMX_ECONNRESET : next8(g) & 1 ? 0 : RMX_EACCES);
    }
    break;
  case 4:
    if (usable)
      rmx_send(app.c, big, next16(g) % 8192, on_sent, NULL);
    break;
  case 5:
    if (usable) {
      unsigned handler = next8(g) % 4;
      rmx_rpc_call(app.c, handler, big, next16(g) % 4096, 0, on_reply, NULL, &app.last_call);
    }
    break;
  case 6:
    uv_run(rmx_ctx_loop(app.ctx), UV_RUN_NOWAIT);
    break;
  case 7: /* a peer's write-with-immediate landed */
    if (alive)
      ev(RMX_TP_EV_IMM, 0, NULL, NULL, next16(g));
    break;
  case 8:
    if (usable)
      app_rma(g);
    break;
  case 9:
    if (alive)
      break_transport(next8(g) & 1 ? RMX_ECONNRESET : RMX_EIO);
    break;
  case 10:
    if (usable)
      fc_close();
    break;
  case 11:
    if (usable)
      rmx_rpc_cancel(app.c, app.last_call);
    break;
  case 12:
    if (app.nheld)
      rmx_rpc_reply(app.held[--app.nheld], "r", 1);
    break;
  default: /* 13..19, with fx_on */
    fx_step(g, op - 13);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  prog_t g = {data, size};
  rmx_config_t cfg;
  memset(&fk, 0, sizeof(fk));
  memset(&app, 0, sizeof(app));
  fk_io_max_now = fake_ops.max_io;
  fk_fail_post = fk_reorder = 0;
  FUZZ_CHECK(rmx_config_init(&cfg) == 0);
  cfg.rx_depth = 4;
  cfg.eager_size = 1024;
  cfg.max_msg_size = 64 << 10;
  cfg.rndv_depth = 2;
  cfg.rpc_max_inflight = 4;
  cfg.log_level = getenv("FUZZ_LOG") ? RMX_LOG_DEBUG : RMX_LOG_NONE; /* to see why */
  FUZZ_CHECK(rmx_ctx_create(&app.ctx, NULL, &cfg) == 0);
  int slot; /* the fake stands in for tcp:// */
  const char *why;
  FUZZ_CHECK(rmx__tp_lookup("tcp", &slot, &why) == 0);
  app.ctx->tp_ops[slot] = &fake_ops;
  FUZZ_CHECK(rmx_rpc_register(app.ctx, 1, rpc_echo, NULL) == 0);
  FUZZ_CHECK(rmx_rpc_register(app.ctx, 2, rpc_hold, NULL) == 0);
  FUZZ_CHECK(rmx_connect(app.ctx, "tcp://127.0.0.1:9", on_connected, NULL, &app.c) == 0);
  while (!fk.owner)
    uv_run(rmx_ctx_loop(app.ctx), UV_RUN_ONCE);

  /* the peer's hello: its limits come from the first byte */
  unsigned h0 = next8(&g);
  fk.peer_eager = 256u << (h0 & 3);
  fk.peer_depth = 4 + (h0 >> 2 & 7);
  fk.peer_credits = fk.peer_depth;
  uint8_t hb[RMX_WIRE_HELLO_LEN];
  rmx_wire_hello_t h;
  rmx__hello_local(app.ctx, hb); /* sane in every field the core checks */
  FUZZ_CHECK(rmx__wire_hello_decode(hb, sizeof(hb), &h) == 0);
  h.eager_size = fk.peer_eager;
  h.rx_depth = fk.peer_depth;
  h.max_msg = h0 & 0x20 ? 4096 : 1 << 20;
  fx_on = h0 >> 7;
  if (fx_on)
    fx_begin(&g, &h);
  rmx__wire_hello_encode(&h, hb);
  ev(RMX_TP_EV_ESTABLISHED, 0, NULL, hb, sizeof(hb));
  FUZZ_CHECK(app.connected);

  while (g.n)
    step(&g);

  /* Close, and play the transport's part until the core lets go. */
  if (!app.app_closed)
    fc_close();
  for (int i = 0; !fk.closed_raised; i++) {
    FUZZ_CHECK(i < 10000); /* the core must get to close() */
    if (fk.closed)
      raise_closed();
    else if (fk.nsends)
      complete_send(0);
    else if (fk.nrmas)
      complete_rma(0);
    else
      uv_run(rmx_ctx_loop(app.ctx), UV_RUN_NOWAIT);
  }
  while (app.nheld)
    rmx_rpc_reply(app.held[--app.nheld], "late", 4);
  uv_run(rmx_ctx_loop(app.ctx), UV_RUN_NOWAIT);
  FUZZ_CHECK(app.closed == 1);
  if (fx_on)
    fx_end();
  FUZZ_CHECK(rmx_ctx_destroy(app.ctx) == 0);
  return 0;
}
