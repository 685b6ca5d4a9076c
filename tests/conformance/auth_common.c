/* SPDX-License-Identifier: BSD-3-Clause */
/* The authentication suite's loop, server, client, raw peers' threads and
 * proofs (auth.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sodium.h>

#include "auth.h"

/* ---- the loop and the contexts ---- */

uv_loop_t loops[64];
static uv_timer_t ticks[64];
int cur;

void pump_for(unsigned ms)
{
  uint64_t t0 = now_ms();
  while (now_ms() - t0 < ms)
    uv_run(LOOP, UV_RUN_ONCE);
}

static void tick_cb(uv_timer_t *t) { (void)t; }

int setup(void **state)
{
  assert_int_equal(uv_loop_init(LOOP), 0);
  uv_timer_init(LOOP, &ticks[cur]);
  uv_timer_start(&ticks[cur], tick_cb, 1, 1);
  return 0;
}

int teardown(void **state)
{
  uv_close((uv_handle_t *)&ticks[cur], NULL);
  uint64_t t0 = now_ms();
  while (uv_run(LOOP, UV_RUN_NOWAIT) && now_ms() - t0 < 2000)
    ;
  if (uv_loop_close(LOOP) != 0) { /* a failed test left something open */
    assert_true(cur + 1 < 64);
    cur++;
    fail_msg("handles were left on the loop");
  }
  return 0;
}

rmx_ctx_t *mkctx(const char *secret, uint32_t connect_timeout_ms)
{
  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  assert_int_equal(rmx_config_init(&cfg), 0);
  snprintf(cfg.auth_secret, sizeof(cfg.auth_secret), "%s", secret ? secret : "");
  cfg.max_msg_size = 4u << 20;
  if (connect_timeout_ms)
    cfg.connect_timeout_ms = connect_timeout_ms;
  assert_int_equal(rmx_ctx_create(&ctx, LOOP, &cfg), 0);
  return ctx;
}

/* ---- a server: echoes messages, serves RPC 42 (the request reversed) ---- */

static void s_sent(rmx_conn_t *c, int st, void *a) { free(a); }
static void s_closed(rmx_conn_t *c, void *a) { ((srv_t *)a)->closed++; }

static void s_recv(rmx_conn_t *c, const void *d, size_t n, void *a)
{
  srv_t *s = a;
  s->recvs++;
  void *copy = malloc(n ? n : 1);
  assert_non_null(copy);
  memcpy(copy, d, n);
  assert_int_equal(rmx_send(c, copy, n, s_sent, copy), 0);
}

static void s_disc(rmx_conn_t *c, int st, void *a)
{
  srv_t *s = a;
  s->disconnects++;
  for (int i = 0; i < s->n; i++)
    if (s->conns[i] == c) {
      s->conns[i] = s->conns[--s->n];
      assert_int_equal(rmx_conn_close(c, s_closed, s), 0);
      return;
    }
}

static void s_accept(rmx_listener_t *l, rmx_conn_t *c, void *a)
{
  srv_t *s = a;
  rmx_conn_cbs_t cbs = {.on_recv = s_recv, .on_disconnect = s_disc};
  rmx_conn_set_cbs(c, &cbs, s);
  assert_true(s->n < 16);
  s->conns[s->n++] = c;
  s->accepted++;
}

static void rpc_reverse(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  uint8_t out[256];
  assert_true(len <= sizeof(out));
  for (size_t i = 0; i < len; i++)
    out[i] = ((const uint8_t *)data)[len - 1 - i];
  assert_int_equal(rmx_rpc_reply(req, out, len), 0);
}

void srv_open_ctx(srv_t *s, rmx_ctx_t *ctx)
{
  char uri[128];
  memset(s, 0, sizeof(*s));
  s->ctx = ctx;
  assert_int_equal(rmx_rpc_register(s->ctx, 42, rpc_reverse, NULL), 0);
  uri_for(uri, sizeof(uri), 0);
  assert_int_equal(rmx_listen(s->ctx, uri, s_accept, s, &s->l), 0);
  assert_int_equal(rmx_listener_uri(s->l, s->uri, sizeof(s->uri)), 0);
  s->port = atoi(strrchr(s->uri, ':') + 1);
}

void srv_open(srv_t *s, const char *secret, uint32_t connect_timeout_ms)
{
  srv_open_ctx(s, mkctx(secret, connect_timeout_ms));
}

void srv_close(srv_t *s)
{
  if (s->l)
    rmx_listener_close(s->l);
  int want = s->closed + s->n;
  while (s->n)
    assert_int_equal(rmx_conn_close(s->conns[--s->n], s_closed, s), 0);
  PUMP_UNTIL(s->closed >= want);
  assert_int_equal(rmx_ctx_destroy(s->ctx), 0);
}

/* ---- a client ---- */

static void c_connected(rmx_conn_t *c, int st, void *a)
{
  cl_t *k = a;
  k->connected++;
  k->status = st;
}
static void c_recv(rmx_conn_t *c, const void *d, size_t n, void *a)
{
  cl_t *k = a;
  int i = k->recvs++;
  if (i >= 16 || n != k->expect_len[i] || memcmp(d, k->expect[i], n) != 0)
    k->bad++;
}
static void c_disc(rmx_conn_t *c, int st, void *a) { ((cl_t *)a)->disconnects++; }
static void c_closed(rmx_conn_t *c, void *a) { ((cl_t *)a)->closed++; }
void c_sent(rmx_conn_t *c, int st, void *a)
{
  assert_int_equal(st, 0);
  ((cl_t *)a)->sent++;
}
void c_reply(rmx_conn_t *c, int st, const void *d, size_t n, void *a)
{
  cl_t *k = a;
  k->rpc_done++;
  k->rpc_status = st;
  k->rpc_len = n < sizeof(k->rpc_reply) ? n : sizeof(k->rpc_reply);
  memcpy(k->rpc_reply, d, k->rpc_len);
}

void cl_connect(cl_t *k, const char *secret, const char *uri)
{
  memset(k, 0, sizeof(*k));
  k->ctx = mkctx(secret, 0);
  assert_int_equal(rmx_connect(k->ctx, uri, c_connected, k, &k->c), 0);
  rmx_conn_cbs_t cbs = {.on_recv = c_recv, .on_disconnect = c_disc};
  rmx_conn_set_cbs(k->c, &cbs, k);
  PUMP_UNTIL(k->connected);
  assert_int_equal(k->connected, 1);
}

void cl_close(cl_t *k)
{
  assert_int_equal(rmx_conn_close(k->c, c_closed, k), 0);
  PUMP_UNTIL(k->closed);
  assert_int_equal(rmx_ctx_destroy(k->ctx), 0);
}

/* ---- raw peers: a blocking socket in a helper thread ---- */

static void *raw_main(void *a)
{
  raw_t *r = a;
  if (r->script(r) != 0 && !r->why[0])
    snprintf(r->why, sizeof(r->why), "script failed");
  atomic_store(&r->done, 1);
  return NULL;
}

void raw_start(raw_t *r, script_fn fn, int mode)
{
  r->script = fn;
  r->mode = mode;
  r->why[0] = '\0';
  atomic_store(&r->done, 0);
  assert_int_equal(pthread_create(&r->th, NULL, raw_main, r), 0);
}

void raw_join(raw_t *r)
{
  PUMP_UNTIL(atomic_load(&r->done));
  pthread_join(r->th, NULL);
  if (r->why[0])
    fail_msg("raw peer: %s", r->why);
}

/* ---- the page's authentication ---- */

void derive_bytes(const void *secret, size_t len, uint8_t k[32])
{
  crypto_generichash_state h;
  crypto_generichash_init(&h, NULL, 0, 32);
  crypto_generichash_update(&h, (const uint8_t *)"rmx auth key v1", 15);
  crypto_generichash_update(&h, secret, len);
  crypto_generichash_final(&h, k, 32);
}

void derive(const char *secret, uint8_t k[32]) { derive_bytes(secret, strlen(secret), k); }

void proof(const uint8_t k[32], const char *who, const uint8_t *c, const uint8_t *s,
           uint8_t out[32])
{
  uint8_t m[15 + 2 * C_HELLO_LEN];
  memcpy(m, "rmx auth ", 9);
  memcpy(m + 9, who, 6); /* "server" or "client": 15 bytes, no terminator */
  memcpy(m + 15, c, C_HELLO_LEN);
  memcpy(m + 15 + C_HELLO_LEN, s, C_HELLO_LEN);
  crypto_auth(out, m, sizeof(m), k);
}

void auth_hello(uint8_t *o, uint16_t flags)
{
  hello_t h = hello_default();
  h.flags = flags;
  h.max_msg = 1u << 20;
  hello_enc(o, &h);
}
