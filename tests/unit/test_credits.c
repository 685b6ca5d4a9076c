/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Flow control and frame handling of the core, against a fake transport:
 * the test plays the peer, sees every frame the core posts, and injects
 * frames of its choosing, malformed ones included.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "rmx_int.h"

#define MAXSENT 256

typedef struct sent {
  void *op;
  uint8_t frame[64];
  size_t len;
  int done;
} sent_t;

struct rmx_tp_conn { int unused; };
struct rmx_tp_mem { int unused; };

static struct fake {
  rmx_conn_t *owner;
  struct rmx_tp_conn tc;
  int closed, closed_raised;
  sent_t sent[MAXSENT];
  int nsent;
  void *read_op;
  void *read_dst;
  size_t read_len;
  uint64_t read_addr;
  int regs, deregs;         /* registrations made and released */
  rmx_tp_conn_t *reg_scope; /* the last one's scope */
  unsigned reg_access;
} fk;

static struct app {
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  int connected, disconnects, disconnect_status, closed;
  int sent_ok, sent_err, last_err;
  int recvs;
  size_t recv_len[16];
  uint8_t recv_first[16];
} app;

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
static void fk_close(rmx_tp_conn_t *tc) { fk.closed = 1; }
static int fk_send(rmx_tp_conn_t *tc, const rmx_tp_sge_t *sge, int n, void *op)
{
  assert_int_equal(n, 1);
  assert_true(fk.nsent < MAXSENT);
  sent_t *s = &fk.sent[fk.nsent++];
  s->op = op;
  s->len = sge[0].len;
  s->done = 0;
  memcpy(s->frame, sge[0].addr, sge[0].len < sizeof(s->frame) ? sge[0].len : sizeof(s->frame));
  return 0;
}
static int fk_read(rmx_tp_conn_t *tc, void *dst, size_t len, rmx_tp_mem_t *m, uint64_t raddr,
                   uint64_t rkey, void *op)
{
  fk.read_op = op;
  fk.read_dst = dst;
  fk.read_len = len;
  fk.read_addr = raddr;
  return 0;
}
static void fk_flush(rmx_tp_conn_t *tc) {}
static void fk_ready(rmx_tp_conn_t *tc) {}
static struct rmx_tp_mem fake_mem;
static int fk_mem_reg(rmx_tp_t *tp, void *a, size_t l, unsigned acc, rmx_tp_conn_t *scope,
                      rmx_tp_mem_t **out)
{
  fk.regs++;
  fk.reg_scope = scope;
  fk.reg_access = acc;
  *out = &fake_mem;
  return 0;
}
static void fk_mem_dereg(rmx_tp_mem_t *m) { fk.deregs++; }
static uint64_t fk_mem_rkey(const rmx_tp_mem_t *m) { return 42; }

static const rmx_tp_ops_t fake_ops = {
  .name = "fake", .init = fk_init, .fini = fk_fini, .listen = fk_listen,
  .listen_addr = fk_listen_addr, .peer_addr = fk_peer_addr, .listen_close = fk_listen_close, .connect = fk_connect,
  .accept = fk_accept, .reject = fk_reject, .close = fk_close, .send = fk_send, .read = fk_read, .flush = fk_flush,
  .ready = fk_ready,
  .mem_reg = fk_mem_reg, .mem_dereg = fk_mem_dereg, .mem_rkey = fk_mem_rkey,
};

/* The same, as a transport whose local buffers must be registered (verbs),
 * so the registration cache is in play. */
static rmx_tp_ops_t fake_reg_ops;

/* ---- the application ---- */

static void on_recv(rmx_conn_t *c, const void *d, size_t len, void *arg)
{
  if (app.recvs < 16) {
    app.recv_len[app.recvs] = len;
    app.recv_first[app.recvs] = len ? *(const uint8_t *)d : 0;
  }
  app.recvs++;
}
static void on_disconnect(rmx_conn_t *c, int status, void *arg)
{
  app.disconnects++;
  app.disconnect_status = status;
}
static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  static const rmx_conn_cbs_t cbs = {.on_recv = on_recv, .on_disconnect = on_disconnect};
  assert_int_equal(status, 0);
  app.connected = 1;
  rmx_conn_set_cbs(c, &cbs, NULL);
}
static void on_sent(rmx_conn_t *c, int status, void *arg)
{
  if (status == 0)
    app.sent_ok++;
  else {
    app.sent_err++;
    app.last_err = status;
  }
}
static void on_closed(rmx_conn_t *c, void *arg) { app.closed++; }

/* ---- helpers: the test as the peer ---- */

static void ev(rmx_tp_ev_type_t t, int status, void *op, const void *data, size_t len)
{
  rmx_tp_ev_t e = {.type = t, .status = status, .op = op, .data = data, .len = len};
  rmx__tp_event(fk.owner, &e);
}

static void inject(uint8_t type, uint16_t credits, const void *body, uint32_t blen)
{
  uint8_t f[256];
  rmx__wire_hdr_encode(f, type, credits, blen);
  if (blen)
    memcpy(f + RMX_WIRE_HDR_LEN, body, blen);
  ev(RMX_TP_EV_RECV, 0, NULL, f, RMX_WIRE_HDR_LEN + blen);
}

static rmx_frame_t frame_at(int i)
{
  rmx_frame_t f;
  const char *why;
  assert_int_equal(rmx__wire_decode(fk.sent[i].frame, fk.sent[i].len, &f, &why), 0);
  return f;
}

static void complete_sends(int status)
{
  for (int i = 0; i < fk.nsent; i++)
    if (!fk.sent[i].done) {
      fk.sent[i].done = 1;
      ev(RMX_TP_EV_SEND, status, fk.sent[i].op, NULL, 0);
    }
}

/* The transport finishes closing: everything in flight fails, then CLOSED. */
static void raise_closed(void)
{
  complete_sends(RMX_ECANCELED);
  fk.closed_raised = 1;
  ev(RMX_TP_EV_CLOSED, 0, NULL, NULL, 0);
}

static void run_loop(void) { uv_run(rmx_ctx_loop(app.ctx), UV_RUN_NOWAIT); }

static int setup(void **state)
{
  rmx_config_t cfg;
  memset(&fk, 0, sizeof(fk));
  memset(&app, 0, sizeof(app));
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.rx_depth = 4;
  cfg.eager_size = 1024;
  cfg.max_msg_size = 1 << 20;
  cfg.log_level = RMX_LOG_NONE;
  assert_int_equal(rmx_ctx_create(&app.ctx, NULL, &cfg), 0);
  fake_reg_ops = fake_ops;
  fake_reg_ops.flags = RMX_TP_F_LOCAL_REG;
  int slot; /* the fake stands in for tcp:// */
  const char *why;
  assert_int_equal(rmx__tp_lookup("tcp", &slot, &why), 0);
  app.ctx->tp_ops[slot] = *state ? &fake_reg_ops : &fake_ops;
  assert_int_equal(rmx_connect(app.ctx, "tcp://127.0.0.1:9", on_connected, NULL, &app.c), 0);
  while (!fk.owner)
    uv_run(rmx_ctx_loop(app.ctx), UV_RUN_ONCE);
  /* the peer answers: 4 receive buffers of 1024 bytes */
  rmx_wire_hello_t h = {.magic = RMX_WIRE_MAGIC, .version = RMX_WIRE_VERSION,
                        .eager_size = 1024, .rx_depth = 4, .max_msg = 1 << 20, .rma_window = 64};
  uint8_t hb[RMX_WIRE_HELLO_LEN];
  rmx__wire_hello_encode(&h, hb);
  ev(RMX_TP_EV_ESTABLISHED, 0, NULL, hb, sizeof(hb));
  assert_true(app.connected);
  return 0;
}

/* Close, play the transport's part of it, and check the books balance. */
static int teardown(void **state)
{
  int was_closed = fk.closed;
  assert_int_equal(rmx_conn_close(app.c, on_closed, NULL), 0);
  if (!was_closed)
    complete_sends(0); /* BYE and anything else in flight */
  assert_true(fk.closed);
  if (!fk.closed_raised)
    raise_closed();
  run_loop();
  assert_int_equal(app.closed, 1);
  assert_int_equal(rmx_ctx_destroy(app.ctx), 0);
  return 0;
}

static void sender_keeps_one_credit_back(void **state)
{
  char m = 'a';
  for (int i = 0; i < 10; i++)
    assert_int_equal(rmx_send(app.c, &m, 1, on_sent, NULL), 0);
  /* 4 credits, one reserved for a credit return: three frames go */
  assert_int_equal(fk.nsent, 3);
  for (int i = 0; i < 3; i++)
    assert_int_equal(frame_at(i).type, RMX_FR_DATA);
  rmx_conn_stats_t st;
  rmx_conn_stats(app.c, &st);
  assert_int_equal(st.credit_stalls, 1);

  inject(RMX_FR_CREDIT, 3, NULL, 0);
  assert_int_equal(fk.nsent, 6);
  complete_sends(0);
  assert_int_equal(app.sent_ok, 6);
  assert_int_equal(app.sent_err, 0);
  /* the CREDIT frame itself is owed back, but never answered by a CREDIT */
  assert_int_equal(fk.nsent, 6);
}

static void half_window_returns_credits(void **state)
{
  inject(RMX_FR_DATA, 0, "x", 1);
  assert_int_equal(fk.nsent, 0);
  inject(RMX_FR_DATA, 0, "y", 1);
  assert_int_equal(app.recvs, 2);
  assert_int_equal(fk.nsent, 1);
  rmx_frame_t f = frame_at(0);
  assert_int_equal(f.type, RMX_FR_CREDIT);
  assert_int_equal(f.credits, 2);
  complete_sends(0);
}

static void credits_ride_on_data(void **state)
{
  inject(RMX_FR_DATA, 0, "x", 1);
  assert_int_equal(rmx_send(app.c, "z", 1, on_sent, NULL), 0);
  assert_int_equal(fk.nsent, 1);
  rmx_frame_t f = frame_at(0);
  assert_int_equal(f.type, RMX_FR_DATA);
  assert_int_equal(f.credits, 1);
  complete_sends(0);
  assert_int_equal(app.sent_ok, 1);
}

/* The peer's last credit is for credit returns: a CREDIT frame may use it. */
static void credit_frame_may_use_the_last_credit(void **state)
{
  for (int i = 0; i < 3; i++)
    inject(RMX_FR_DATA, 0, "c", 1);
  inject(RMX_FR_CREDIT, 0, NULL, 0);
  assert_false(fk.closed);
  assert_int_equal(app.recvs, 3);
}

static void peer_over_its_credits_is_cut_off(void **state)
{
  for (int i = 0; i < 3; i++)
    assert_int_equal(rmx_send(app.c, "m", 1, on_sent, NULL), 0);
  inject(RMX_FR_DATA, 0, "a", 1);
  inject(RMX_FR_DATA, 0, "b", 1); /* CREDIT(2) goes with our last credit */
  assert_int_equal(fk.nsent, 4);
  for (int i = 0; i < 3; i++) /* three more: all the window but its last credit */
    inject(RMX_FR_DATA, 0, "c", 1);
  assert_false(fk.closed);
  inject(RMX_FR_DATA, 0, "d", 1); /* data in the last credit, kept for CREDIT frames */
  assert_true(fk.closed);
  assert_int_equal(app.recvs, 5);
  raise_closed();
  assert_int_equal(app.disconnects, 1);
  assert_int_equal(app.disconnect_status, RMX_EPROTO);
  assert_int_equal(app.sent_err, 3);
  assert_int_equal(app.last_err, RMX_EPROTO);
}

static void expect_cut_off(void)
{
  assert_true(fk.closed);
  raise_closed();
  assert_int_equal(app.disconnects, 1);
  assert_int_equal(app.disconnect_status, RMX_EPROTO);
}

static void oversized_message_claim_closes(void **state)
{
  uint8_t f[64];
  rmx_wire_rts_t rts = {.id = 1, .addr = 0x1000, .size = (1 << 20) + 1, .rkey = 1};
  size_t n = rmx__wire_rts_encode(f, 0, &rts);
  ev(RMX_TP_EV_RECV, 0, NULL, f, n);
  assert_null(fk.read_op); /* nothing allocated or read for it */
  expect_cut_off();
}

static void garbage_closes(void **state)
{
  ev(RMX_TP_EV_RECV, 0, NULL, "\xff\x00\x01", 3);
  expect_cut_off();
}

static void unknown_fin_closes(void **state)
{
  uint8_t f[64];
  rmx_wire_fin_t fin = {.id = 77};
  size_t n = rmx__wire_fin_encode(f, 0, &fin);
  ev(RMX_TP_EV_RECV, 0, NULL, f, n);
  expect_cut_off();
}

static void excess_credits_close(void **state)
{
  inject(RMX_FR_CREDIT, 100, NULL, 0);
  expect_cut_off();
}

static void oversized_eager_frame_closes(void **state)
{
  static uint8_t f[2048];
  rmx__wire_hdr_encode(f, RMX_FR_DATA, 0, 2048 - RMX_WIRE_HDR_LEN);
  ev(RMX_TP_EV_RECV, 0, NULL, f, sizeof(f));
  assert_int_equal(app.recvs, 0);
  expect_cut_off();
}

static void rendezvous_keeps_order(void **state)
{
  uint8_t f[64];
  rmx_wire_rts_t rts = {.id = 5, .addr = 0xabc000, .size = 5000, .rkey = 9};
  size_t n = rmx__wire_rts_encode(f, 0, &rts);
  ev(RMX_TP_EV_RECV, 0, NULL, f, n);
  assert_non_null(fk.read_op);
  assert_int_equal(fk.read_len, 5000);
  assert_true(fk.read_addr == 0xabc000);
  inject(RMX_FR_DATA, 0, "x", 1); /* sent after the large one */
  assert_int_equal(app.recvs, 0); /* held back behind it */
  memset(fk.read_dst, 'L', 5000);
  ev(RMX_TP_EV_READ, 0, fk.read_op, NULL, 0);
  assert_int_equal(app.recvs, 2);
  assert_int_equal(app.recv_len[0], 5000);
  assert_int_equal(app.recv_first[0], 'L');
  assert_int_equal(app.recv_len[1], 1);
  assert_int_equal(app.recv_first[1], 'x');
  /* the FIN tells the sender which message it may release */
  int fins = 0;
  for (int i = 0; i < fk.nsent; i++) {
    rmx_frame_t fr = frame_at(i);
    if (fr.type == RMX_FR_FIN) {
      fins++;
      assert_true(fr.u.fin.id == 5);
      assert_int_equal(fr.u.fin.status, 0);
    }
  }
  assert_int_equal(fins, 1);
  complete_sends(0);
}

static void large_send_waits_for_fin(void **state)
{
  static uint8_t big[4000];
  assert_int_equal(rmx_send(app.c, big, sizeof(big), on_sent, NULL), 0);
  assert_int_equal(fk.nsent, 1);
  rmx_frame_t f = frame_at(0);
  assert_int_equal(f.type, RMX_FR_RTS);
  assert_true(f.u.rts.addr == (uintptr_t)big && f.u.rts.size == sizeof(big));
  assert_true(f.u.rts.rkey == 42);
  complete_sends(0);
  assert_int_equal(app.sent_ok, 0); /* not until the peer has read it */
  uint8_t b[64];
  rmx_wire_fin_t fin = {.id = f.u.rts.id};
  size_t n = rmx__wire_fin_encode(b, 0, &fin);
  ev(RMX_TP_EV_RECV, 0, NULL, b, n);
  assert_int_equal(app.sent_ok, 1);
  /* a second FIN for the same message is a protocol error */
  ev(RMX_TP_EV_RECV, 0, NULL, b, n);
  expect_cut_off();
}

/*
 * The memory a peer reads for a rendezvous is registered for that message
 * and that connection only, and released when the FIN comes: never cached
 * (a cached registration stayed readable after the send, by any QP of the
 * PD), even on a transport whose buffers are cached.
 */
static void rendezvous_source_scoped_to_the_message(void **state)
{
  static uint8_t big[4000];
  for (int round = 0; round < 2; round++) {
    int regs = fk.regs, deregs = fk.deregs;
    assert_int_equal(rmx_send(app.c, big, sizeof(big), on_sent, NULL), 0);
    assert_int_equal(fk.regs, regs + 1); /* the same buffer again: registered again */
    assert_ptr_equal(fk.reg_scope, &fk.tc);
    assert_true(fk.reg_access & RMX_TP_ACC_REMOTE_READ);
    rmx_frame_t f = frame_at(fk.nsent - 1);
    assert_int_equal(f.type, RMX_FR_RTS);
    complete_sends(0);
    assert_int_equal(fk.deregs, deregs); /* in use until the FIN */
    uint8_t b[64];
    rmx_wire_fin_t fin = {.id = f.u.rts.id};
    size_t n = rmx__wire_fin_encode(b, 1, &fin);
    ev(RMX_TP_EV_RECV, 0, NULL, b, n);
    assert_int_equal(fk.deregs, deregs + 1);
    assert_int_equal(app.sent_ok, round + 1);
  }
}

static void over_maximum_refused_at_sender(void **state)
{
  static uint8_t big[1];
  assert_int_equal(rmx_send(app.c, big, (1 << 20) + 1, on_sent, NULL), RMX_EMSGSIZE);
  assert_int_equal(fk.nsent, 0);
  run_loop();
  assert_int_equal(app.sent_ok + app.sent_err, 0); /* no callback for a refused call */
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
    T(sender_keeps_one_credit_back), T(half_window_returns_credits), T(credits_ride_on_data),
    T(peer_over_its_credits_is_cut_off),
    T(credit_frame_may_use_the_last_credit), T(oversized_message_claim_closes), T(garbage_closes),
    T(unknown_fin_closes), T(excess_credits_close), T(oversized_eager_frame_closes),
    T(rendezvous_keeps_order), T(large_send_waits_for_fin), T(over_maximum_refused_at_sender),
    T(rendezvous_source_scoped_to_the_message),
    {"rendezvous_source_scoped_to_the_message (cached transport)",
     rendezvous_source_scoped_to_the_message, setup, teardown, (void *)1},
  };
  return cmocka_run_group_tests_name("credits", tests, NULL, NULL);
}
