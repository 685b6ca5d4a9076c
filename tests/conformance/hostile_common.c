/* SPDX-License-Identifier: BSD-3-Clause */
/* The hostile-peer suite's server, clients, setup and teardown, data
 * patterns, heap in use, log capture and registrations (hostile.h). */
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "hostile.h"
#include "spin.h"

#ifdef __SANITIZE_ADDRESS__
/* libasan's own (GCC ships no allocator_interface.h) */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

/* ---- data patterns ---- */

/* Byte o of a buffer tagged tag: 8-byte words of (tag << 56 | o & ~7). */
static uint8_t pat(uint8_t tag, uint64_t o)
{
  return (uint8_t)(((uint64_t)tag << 56 | (o & ~7ull)) >> (8 * (o & 7)));
}
void fill(uint8_t *b, size_t n, uint8_t tag, uint64_t off)
{
  for (size_t i = 0; i < n; i++)
    b[i] = pat(tag, off + i);
}
size_t mismatches(const uint8_t *b, size_t n, uint8_t tag, uint64_t off)
{
  size_t bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += b[i] != pat(tag, off + i);
  return bad;
}
size_t foreign_tags(const uint8_t *b, size_t n, uint64_t off, uint8_t tag)
{
  size_t hits = 0;
  for (size_t i = 0; i < n; i++)
    hits += ((off + i) & 7) == 7 && b[i] == tag;
  return hits;
}

/* ---- the server ---- */

hostile_server_t S;

void pump_once(void)
{
  if (spin_mode() && S.running)
    spin_once(S.ctx, &S.loop); /* the context is destroyed in srv_stop only */
  else
    uv_run(&S.loop, UV_RUN_ONCE);
}

void pump_for(unsigned ms)
{
  uint64_t t0 = now_ms();
  while (now_ms() - t0 < ms)
    pump_once();
}

static void tick_cb(uv_timer_t *t) { (void)t; }

static void s_closed(rmx_conn_t *c, void *a) { ((sconn_t *)a)->closed++; }

static void s_close(sconn_t *s)
{
  if (!s->user_closed) {
    s->user_closed = 1;
    assert_int_equal(rmx_conn_close(s->c, s_closed, s), 0);
  }
}

void s_disc(rmx_conn_t *c, int st, void *a)
{
  sconn_t *s = a;
  s->disconnects++;
  s->disc_status = st;
  s_close(s);
}

void s_recv(rmx_conn_t *c, const void *d, size_t n, void *a)
{
  sconn_t *s = a;
  if (s->recvs < KEEP_MSGS) {
    s->msgs[s->recvs] = malloc(n ? n : 1);
    memcpy(s->msgs[s->recvs], d, n);
    s->lens[s->recvs] = n;
  }
  s->recvs++;
}

static void s_accept(rmx_listener_t *l, rmx_conn_t *c, void *a)
{
  assert_true(S.nsc < MAX_SC);
  sconn_t *s = &S.sc[S.nsc++];
  s->c = c;
  rmx_conn_cbs_t cbs = {.on_recv = s_recv, .on_disconnect = s_disc};
  rmx_conn_set_cbs(c, &cbs, s);
}

void srv_start(const srvcfg_t *o)
{
  rmx_config_t cfg;
  char uri[128];
  memset(&S, 0, sizeof(S));
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.max_msg_size = 64u << 20;
#ifndef HOSTILE_OLD_PROTOCOL
  cfg.close_timeout_ms = 2000;
#endif
  if (o && o->rx_depth)
    cfg.rx_depth = o->rx_depth;
  if (o && o->connect_timeout_ms)
    cfg.connect_timeout_ms = o->connect_timeout_ms;
#ifndef HOSTILE_OLD_PROTOCOL
  if (o && o->max_handshakes)
    cfg.max_handshakes = o->max_handshakes;
  if (o && o->max_conns)
    cfg.max_conns = o->max_conns;
  if (o && o->rma_window)
    cfg.rma_window = o->rma_window;
  if (o && o->handshake_timeout_ms)
    cfg.handshake_timeout_ms = o->handshake_timeout_ms;
#endif
  assert_int_equal(uv_loop_init(&S.loop), 0);
  uv_timer_init(&S.loop, &S.tick);
  uv_timer_start(&S.tick, tick_cb, 1, 1);
  assert_int_equal(rmx_ctx_create(&S.ctx, &S.loop, &cfg), 0);
  assert_int_equal(rmx_listen(S.ctx, "tcp://127.0.0.1:0", s_accept, NULL, &S.l), 0);
  assert_int_equal(rmx_listener_uri(S.l, uri, sizeof(uri)), 0);
  S.port = atoi(strrchr(uri, ':') + 1);
  S.running = 1;
}

/* ---- in-process clients (the public API): the connections that must not
 * be affected ---- */

static void c_connected(rmx_conn_t *c, int st, void *a)
{
  cli_t *k = a;
  k->connected++;
  k->status = st;
}
static void c_closed(rmx_conn_t *c, void *a) { ((cli_t *)a)->closed++; }
void c_close(cli_t *k)
{
  if (!k->user_closed) {
    k->user_closed = 1;
    assert_int_equal(rmx_conn_close(k->c, c_closed, k), 0);
  }
}
static void c_disc(rmx_conn_t *c, int st, void *a)
{
  cli_t *k = a;
  k->disconnects++;
  k->disc_status = st;
  c_close(k);
}
static void c_recv(rmx_conn_t *c, const void *d, size_t n, void *a)
{
  cli_t *k = a;
  k->recvs++;
  if (n != k->expect_len || mismatches(d, n, k->tag, 0))
    k->bad++;
}

void cli_start(cli_t *k)
{
  char uri[64];
  memset(k, 0, sizeof(*k));
  snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%d", S.port);
  assert_int_equal(rmx_connect(S.ctx, uri, c_connected, k, &k->c), 0);
  rmx_conn_cbs_t cbs = {.on_recv = c_recv, .on_disconnect = c_disc};
  rmx_conn_set_cbs(k->c, &cbs, k);
  S.clis[S.ncli++] = k;
}

void srv_stop(void)
{
  if (!S.running)
    return;
  peers_stop();
  for (int i = 0; i < S.nsc; i++)
    s_close(&S.sc[i]);
  for (int i = 0; i < S.ncli; i++)
    c_close(S.clis[i]);
  for (int i = 0; i < S.nsc; i++)
    PUMP_UNTIL(S.sc[i].closed);
  for (int i = 0; i < S.ncli; i++)
    PUMP_UNTIL(S.clis[i]->closed);
  reg_drop_all();
  rmx_listener_close(S.l);
  assert_int_equal(rmx_ctx_destroy(S.ctx), 0);
  uv_close((uv_handle_t *)&S.tick, NULL);
  uv_run(&S.loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&S.loop), 0);
  S.running = 0;
  /* every server-side connection: at most one disconnect, exactly one close */
  for (int i = 0; i < S.nsc; i++) {
    assert_in_range(S.sc[i].disconnects, 0, 1);
    assert_int_equal(S.sc[i].closed, 1);
    for (int k = 0; k < KEEP_MSGS; k++)
      free(S.sc[i].msgs[k]);
  }
  for (int i = 0; i < S.ncli; i++) {
    assert_int_equal(S.clis[i]->connected, 1);
    assert_int_equal(S.clis[i]->closed, 1);
  }
}

int setup(void **state)
{
  atomic_store(&main_step, 0);
  atomic_store(&aborting, 0);
  return 0;
}

int teardown(void **state)
{
  static char rest[1 << 16];
  cap_end(rest, sizeof(rest)); /* a test that failed while capturing */
  srv_stop();
  return 0;
}

/* ---- heap in use, and a log capture ---- */

size_t heap_used(void)
{
#ifdef __SANITIZE_ADDRESS__
  return __sanitizer_get_current_allocated_bytes();
#else
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks;
#endif
}

static int cap_saved = -1;
static char cap_path[64];

void cap_begin(void)
{
  fflush(stderr);
  cap_saved = dup(2);
  snprintf(cap_path, sizeof(cap_path), "/tmp/rmx-hostile-log-XXXXXX");
  int fd = mkstemp(cap_path);
  assert_true(fd >= 0);
  dup2(fd, 2);
  close(fd);
}

int cap_end(char *out, size_t cap)
{
  if (cap_saved < 0)
    return 0;
  fflush(stderr);
  dup2(cap_saved, 2);
  close(cap_saved);
  cap_saved = -1;
  FILE *f = fopen(cap_path, "r");
  size_t n = f ? fread(out, 1, cap - 1, f) : 0;
  if (f)
    fclose(f);
  out[n] = 0;
  unlink(cap_path);
  int lines = 0;
  for (size_t i = 0; i < n; i++)
    lines += out[i] == '\n';
  fprintf(stderr, "%s", out);
  return lines;
}

/* ---- registrations ---- */

tkey_t K8;
static rmx_mem_t *regs[8]; /* released at teardown if a test stopped early */

rmx_mem_t *reg_track(rmx_mem_t *m)
{
  for (int i = 0; i < 8; i++)
    if (!regs[i]) {
      regs[i] = m;
      return m;
    }
  fail_msg("too many registrations");
  return m;
}

void reg_drop(rmx_mem_t *m)
{
  for (int i = 0; i < 8; i++)
    if (regs[i] == m)
      regs[i] = NULL;
  rmx_mem_dereg(m);
}

void reg_drop_all(void)
{
  for (int i = 0; i < 8; i++)
    if (regs[i])
      reg_drop(regs[i]);
}

rmx_mem_t *reg_and_publish(void *mem, size_t len, unsigned access)
{
  rmx_mem_t *m;
  uint8_t blob[RMX_RKEY_MAX];
  size_t bl = sizeof(blob);
  assert_int_equal(rmx_mem_reg(S.ctx, mem, len, access, &m), 0);
  reg_track(m);
  assert_int_equal(rmx_mem_pack(m, blob, &bl), 0);
  assert_int_equal(rkey_tcp(blob, bl, &K8), 0); /* decoded as the doc says */
  assert_int_equal(K8.addr, (uintptr_t)mem);
  assert_int_equal(K8.len, len);
  return m;
}
