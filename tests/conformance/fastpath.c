/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fast-path suite (fastpath.h): every case drives its contexts by
 * spinning on rmx_ctx_progress(), as an application polling rmx would.
 *
 *   rmx-fastpath SCHEME [cmocka filter]
 *
 * This file: the counting ends, the world, the child that bursts until it
 * is killed, and main. The cases are in fastpath_cases.c.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "fastpath.h"
#include "harness.h"
#include "spin.h"

int fp_destroyed, fp_after_destroy;

/* ---- messages ---- */

size_t fp_size_mixed(uint32_t seq)
{
  switch (seq % 16) {
  case 7: return (1u << 20) + seq % 3;   /* rendezvous, 1 MiB */
  case 11: return 8184 + (seq / 16) % 2; /* the default eager limit and one above */
  case 15: return (64u << 10) + seq % 5; /* rendezvous, 64 KiB */
  default: return 8 + (seq * 37u) % 2000;
  }
}

size_t fp_size_small(uint32_t seq) { return 8 + (seq * 37u) % (RMX_EAGER_MSG_MIN - 7); }

static void fill_msg(uint8_t *p, size_t len, uint32_t seq)
{
  uint32_t l32 = (uint32_t)len;
  pattern(p + 8, len - 8, seq);
  memcpy(p, &seq, 4);
  memcpy(p + 4, &l32, 4);
}

static int msg_ok(const uint8_t *p, size_t len, uint32_t seq)
{
  uint32_t s, l;
  if (len < 8)
    return 0;
  memcpy(&s, p, 4);
  memcpy(&l, p + 4, 4);
  if (s != seq || l != len)
    return 0;
  /* the pattern, checked in pieces so a 1 MiB message costs no big copy */
  uint8_t want[4096];
  uint32_t x = seq * 2654435761u + 1;
  for (size_t i = 0; i < len - 8; i += sizeof(want)) {
    size_t n = len - 8 - i < sizeof(want) ? len - 8 - i : sizeof(want);
    for (size_t k = 0; k < n; k++) { /* pattern() continued at offset i */
      if (((i + k) & 3) == 0)
        x = x * 1103515245u + 12345u;
      want[k] = (uint8_t)(x >> (((i + k) & 3) * 8));
    }
    if (memcmp(p + 8 + i, want, n) != 0)
      return 0;
  }
  return 1;
}

/* ---- the ends ---- */

static void count_late(fp_end_t *e)
{
  if (e->closed)
    e->after_closed++;
  if (fp_destroyed)
    fp_after_destroy++;
}

void fp_end_init(fp_end_t *e, int cap, size_t (*size_of)(uint32_t))
{
  memset(e, 0, sizeof(*e));
  e->cap = cap;
  e->sends = calloc((size_t)cap, sizeof(*e->sends));
  assert_non_null(e->sends);
  e->size_of = size_of;
}

void fp_end_free(fp_end_t *e)
{
  for (int i = 0; i < e->nsends; i++)
    free(e->sends[i].buf); /* left only by a send whose callback never ran */
  free(e->sends);
  e->sends = NULL;
}

static void fp_sent(rmx_conn_t *c, int status, void *arg)
{
  fp_send_t *s = arg;
  fp_end_t *e = s->e;
  (void)c;
  count_late(e);
  if (s->fired++) {
    e->double_fired++;
    return;
  }
  s->status = status;
  free(s->buf);
  s->buf = NULL;
  if (status == 0)
    e->sent_ok++;
  else
    e->sent_err++;
}

static int send_buf(fp_end_t *e, void *buf, size_t len)
{
  if (e->nsends >= e->cap) {
    free(buf);
    return RMX_ENOMEM; /* the case sends more than it planned */
  }
  fp_send_t *s = &e->sends[e->nsends];
  *s = (fp_send_t){.e = e, .buf = buf};
  if (len <= RMX_EAGER_MSG_MIN && (e->nsends & 1)) {
    /* Every other small message goes with no on_sent (over verbs, the
     * narrow path when nothing waits ahead): rmx copies it before the call
     * returns, so it is sent from a copy scribbled over right after. */
    uint8_t copy[RMX_EAGER_MSG_MIN];
    memcpy(copy, buf, len);
    free(buf);
    int rc = rmx_send(e->c, copy, len, NULL, NULL);
    memset(copy, 0xdb, len);
    if (rc == 0) {
      *s = (fp_send_t){.e = e, .fired = 1}; /* nothing to run */
      e->nsends++;
      e->sent_ok++;
    }
    return rc;
  }
  int rc = rmx_send(e->c, buf, len, fp_sent, s);
  if (rc == 0)
    e->nsends++;
  else {
    s->buf = NULL;
    free(buf);
  }
  return rc;
}

int fp_send_next(fp_end_t *e)
{
  size_t len = e->size_of(e->next_tx);
  uint8_t *buf = malloc(len);
  assert_non_null(buf);
  fill_msg(buf, len, e->next_tx);
  int rc = send_buf(e, buf, len);
  if (rc == 0)
    e->next_tx++;
  return rc;
}

static void fp_closed(rmx_conn_t *c, void *arg)
{
  fp_end_t *e = arg;
  (void)c;
  count_late(e);
  e->closed++;
  if (e->closed_hook)
    e->closed_hook(e);
}

void fp_close(fp_end_t *e)
{
  if (e->close_called)
    return;
  e->close_called = 1;
  assert_int_equal(rmx_conn_close(e->c, fp_closed, e), 0);
}

static void fp_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  fp_end_t *e = arg;
  (void)c;
  count_late(e);
  e->recvs++;
  if (!msg_ok(data, len, e->next_rx)) {
    e->bad++;
    if (len >= 4) /* count each break once: go on from the number it carries */
      memcpy(&e->next_rx, data, 4);
  }
  e->next_rx++;
  if (e->close_called)
    return;
  if (e->echo) {
    void *copy = malloc(len);
    assert_non_null(copy);
    memcpy(copy, data, len);
    assert_int_equal(send_buf(e, copy, len), 0);
  }
  if (e->refill > 0) {
    e->refill--;
    assert_int_equal(fp_send_next(e), 0);
  }
  if (e->recv_hook)
    e->recv_hook(e);
  if (e->close_at && e->recvs >= e->close_at)
    fp_close(e);
}

static void fp_disconnect(rmx_conn_t *c, int status, void *arg)
{
  fp_end_t *e = arg;
  (void)c;
  count_late(e);
  e->disconnects++;
  e->disc_status = status;
  for (int i = 0; i < e->nsends; i++)
    e->unfired_at_disc += !e->sends[i].fired;
  if (e->close_on_disconnect)
    fp_close(e);
}

void fp_set_cbs(fp_end_t *e)
{
  static const rmx_conn_cbs_t cbs = {.on_recv = fp_recv, .on_disconnect = fp_disconnect};
  rmx_conn_set_cbs(e->c, &cbs, e);
}

void fp_connected(rmx_conn_t *c, int status, void *arg)
{
  fp_end_t *e = arg;
  (void)c;
  count_late(e);
  e->connected++;
  e->conn_status = status;
}

void fp_check_end(const fp_end_t *e, const int *ok, const char *who)
{
  int wrong = 0, unfired = 0;
  for (int i = 0; i < e->nsends; i++) {
    const fp_send_t *s = &e->sends[i];
    if (s->fired != 1) {
      unfired += !s->fired;
      continue;
    }
    int good = s->status == 0 || (!ok && s->status < 0);
    for (const int *k = ok; k && *k && !good; k++)
      good = s->status == *k;
    if (!good) {
      print_message("%s: send %d ended with %s\n", who, i, rmx_strerror(s->status));
      wrong++;
    }
  }
  print_message("%s: %d sends (%d ok, %d failed), %d received, %d disconnects (%s)\n", who,
                e->nsends, e->sent_ok, e->sent_err, e->recvs, e->disconnects,
                e->disconnects ? rmx_strerror(e->disc_status) : "-");
  if (unfired || e->double_fired || wrong || e->bad || e->closed != 1 || e->after_closed)
    fail_msg("%s: %d sends never called back, %d twice, %d with a wrong status; %d of %d "
             "messages out of order or damaged; on_closed %d times, %d callbacks after it",
             who, unfired, e->double_fired, wrong, e->bad, e->recvs, e->closed, e->after_closed);
}

/* ---- the world ---- */

static void fp_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  fp_world_t *w = arg;
  (void)l;
  assert_non_null(w->accept_into);
  assert_null(w->accept_into->c);
  w->accept_into->c = c;
  w->accept_into->connected = 1;
  fp_set_cbs(w->accept_into);
}

int fp_listen(fp_world_t *w)
{
  char uri[128];
  uri_for(uri, sizeof(uri), 0);
  int rc = rmx_listen(w->ctx, uri, fp_accept, w, &w->l);
  return rc ? rc : rmx_listener_uri(w->l, w->uri, sizeof(w->uri));
}

void fp_world_up(fp_world_t *w, const rmx_config_t *cfg, uv_loop_t *callers)
{
  memset(w, 0, sizeof(*w));
  w->callers = callers;
  fp_destroyed = fp_after_destroy = spin_destroy_called = 0;
  assert_int_equal(rmx_ctx_create(&w->ctx, callers, cfg), 0);
  assert_int_equal(fp_listen(w), 0);
}

void fp_connect(fp_world_t *w, fp_end_t *cl, const char *uri)
{
  assert_int_equal(rmx_connect(w->ctx, uri, fp_connected, cl, &cl->c), 0);
  fp_set_cbs(cl);
  FP_SPIN_UNTIL(w, cl->connected);
  assert_int_equal(cl->conn_status, 0);
}

void fp_world_down(fp_world_t *w)
{
  if (w->l)
    rmx_listener_close(w->l);
  w->l = NULL;
  assert_int_equal(rmx_ctx_destroy(w->ctx), 0);
  w->ctx = NULL;
  if (w->callers) {
    uv_run(w->callers, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(w->callers), 0);
  }
}

void fp_spin(fp_world_t *w)
{
  if (spin_once(w->ctx, w->callers) == SPIN_GONE)
    fail_msg("the context is gone while the case still runs it");
}

void fp_spin_ms(fp_world_t *w, unsigned ms)
{
  uint64_t end = uv_hrtime() + (uint64_t)ms * 1000000u;
  while (uv_hrtime() < end)
    fp_spin(w);
}

/* ---- the child that bursts until it is killed ---- */

int fp_burster_main(const char *uri)
{
  fp_world_t w = {0};
  fp_end_t e;
  alarm(60); /* never outlives a lost parent for long */
  fp_end_init(&e, 1 << 18, fp_size_mixed);
  if (rmx_ctx_create(&w.ctx, NULL, NULL) != 0 ||
      rmx_connect(w.ctx, uri, fp_connected, &e, &e.c) != 0)
    return 1;
  fp_set_cbs(&e);
  while (!e.connected)
    if (rmx_ctx_progress(w.ctx) < 0)
      return 1;
  if (e.conn_status != 0)
    return 1;
  printf("connected\n");
  fflush(stdout);
  /* Sixty-four messages in flight, for ever: the parent kills us. */
  for (;;) {
    while (!e.disconnects && e.nsends - e.sent_ok - e.sent_err < 64 && e.nsends < e.cap)
      if (fp_send_next(&e) != 0)
        return 1;
    if (rmx_ctx_progress(w.ctx) < 0 || e.disconnects)
      return 1;
  }
}

/* ---- main ---- */

static int arm_alarm(void **state)
{
  (void)state;
  alarm(120); /* a hang kills the run: it fails, it is no timing threshold */
  return 0;
}

int main(int argc, char **argv)
{
  if (harness_args(argc, argv) != 0)
    return 2;
  if (argc > 3 && strcmp(argv[2], "--burster") == 0)
    return fp_burster_main(argv[3]);
  signal(SIGPIPE, SIG_IGN);
  if (argc > 2)
    cmocka_set_test_filter(argv[2]);
#define T(f) cmocka_unit_test_setup(f, arm_alarm)
  const struct CMUnitTest tests[] = {
    T(ordering_eager_and_rendezvous), T(ordering_on_callers_loop),
    T(credits_exhausted_mid_burst), T(close_from_recv_mid_burst),
    T(destroy_from_on_closed), T(peer_killed_mid_burst), T(peer_closes_mid_burst),
  };
  char name[64];
  snprintf(name, sizeof(name), "fastpath/%s%s", scheme, spin_mode() ? " (RMX_PROGRESS=poll)" : "");
  return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
