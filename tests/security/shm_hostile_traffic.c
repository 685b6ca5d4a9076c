/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The load both clients put on the victim (shm_hostile.h): echoed
 * messages of every size (eager and rendezvous), RPC calls, and writes of
 * the connection's region read back, every byte checked. The good client
 * runs it strict (anything wrong ends the test); the attacker runs it to
 * keep its connection busy while it writes into the segment.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shm_hostile.h"

#define ECHO_WINDOW 8
#define RPC_WINDOW 2
#define MSG_MIN 16 /* tag, length, seq */

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static void wrong(sh_traffic_t *t, int failed, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void wrong(sh_traffic_t *t, int failed, const char *fmt, ...)
{
  if (failed)
    t->failed++;
  else
    t->bad++;
  if (t->bad + t->failed == 1) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->why, sizeof(t->why), fmt, ap);
    va_end(ap);
  }
  if (t->strict) {
    sh_say("fail %s", t->why);
    exit(1);
  }
  t->posting = 0; /* the connection is spoiled: stop adding to it */
}

void sh_traffic_init(sh_traffic_t *t, rmx_ctx_t *ctx, rmx_conn_t *c, uint64_t seed, int strict)
{
  memset(t, 0, sizeof(*t));
  t->ctx = ctx;
  t->c = c;
  t->seed = seed;
  t->strict = strict;
  t->rma_w = malloc(16384);
  t->rma_r = malloc(16384);
  if (!t->rma_w || !t->rma_r)
    sh_die("out of memory");
}

void sh_traffic_fini(sh_traffic_t *t)
{
  if (t->rk)
    rmx_rkey_release(t->rk);
  free(t->rma_w);
  free(t->rma_r);
  t->rk = NULL;
  t->rma_w = t->rma_r = NULL;
}

int sh_traffic_idle(const sh_traffic_t *t)
{
  return t->echo_out == 0 && t->rpc_out == 0 && t->rma_state == 0;
}

/* ---- echoes ---- */

typedef struct echo { sh_traffic_t *t; uint8_t *buf; } echo_t;

static size_t some_size(uint64_t *s)
{
  uint64_t r = sh_rand(s) % 100;
  if (r < 70)
    return MSG_MIN + sh_rand(s) % 500;
  if (r < 90)
    return 513 + sh_rand(s) % (SH_EAGER - 8 - 513); /* eager, up to the largest */
  return SH_EAGER + sh_rand(s) % (64u << 10);        /* rendezvous */
}

static void echo_sent(rmx_conn_t *c, int status, void *arg)
{
  echo_t *e = arg;
  (void)c;
  free(e->buf);
  if (status != 0)
    wrong(e->t, 1, "a send failed: %s", rmx_strerror(status));
  free(e);
}

static int echo_post(sh_traffic_t *t)
{
  size_t len = some_size(&t->seed);
  echo_t *e = malloc(sizeof(*e));
  uint8_t *b = malloc(len);
  if (!e || !b)
    sh_die("out of memory");
  put32(b, SH_TAG_ECHO);
  put32(b + 4, (uint32_t)len);
  put64(b + 8, t->next_seq);
  for (size_t i = MSG_MIN; i < len; i++)
    b[i] = sh_pat(t->next_seq, i);
  e->t = t;
  e->buf = b;
  int rc = rmx_send(t->c, b, len, echo_sent, e);
  if (rc != 0) {
    free(b);
    free(e);
    return rc;
  }
  t->next_seq++;
  t->echo_out++;
  return 0;
}

static void echo_back(sh_traffic_t *t, const uint8_t *m, size_t len)
{
  uint64_t seq = get64(m + 8);
  if (t->echo_out == 0 || len != get32(m + 4) || seq != t->want_seq) {
    wrong(t, 0, "echo %llu of %zu bytes came for echo %llu", (unsigned long long)seq, len,
          (unsigned long long)t->want_seq);
    return;
  }
  for (size_t i = MSG_MIN; i < len; i++)
    if (m[i] != sh_pat(seq, i)) {
      wrong(t, 0, "echo %llu: byte %zu of %zu is wrong", (unsigned long long)seq, i, len);
      return;
    }
  t->want_seq++;
  t->echo_out--;
  t->done++;
}

void sh_traffic_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  sh_traffic_t *t = arg;
  const uint8_t *m = data;
  (void)c;
  if (len >= 4 && get32(m) == SH_TAG_KEY && !t->rk) {
    t->key_len = len - 4 < sizeof(t->key) ? len - 4 : sizeof(t->key);
    memcpy(t->key, m + 4, t->key_len);
    int rc = rmx_rkey_unpack(t->c, m + 4, len - 4, &t->rk);
    if (rc != 0)
      wrong(t, 1, "the victim's key does not unpack: %s", rmx_strerror(rc));
    else if (rmx_rkey_size(t->rk) != SH_REGION)
      wrong(t, 0, "the victim's key spans %zu bytes", rmx_rkey_size(t->rk));
    return;
  }
  if (len < MSG_MIN || get32(m) != SH_TAG_ECHO) {
    wrong(t, 0, "a message of %zu bytes that is no echo", len);
    return;
  }
  echo_back(t, m, len);
}

/* ---- RPC ---- */

typedef struct call { sh_traffic_t *t; uint64_t seq; size_t len; } call_t;

static void rpc_reply(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  call_t *k = arg;
  sh_traffic_t *t = k->t;
  const uint8_t *r = data;
  (void)c;
  t->rpc_out--;
  if (status != 0) {
    wrong(t, 1, "an RPC failed: %s", rmx_strerror(status));
  } else if (len != k->len) {
    wrong(t, 0, "an RPC of %zu bytes was answered with %zu", k->len, len);
  } else {
    size_t i = 0;
    while (i < len && r[i] == (uint8_t)(sh_pat(k->seq, i) ^ SH_XOR))
      i++;
    if (i < len)
      wrong(t, 0, "RPC %llu: byte %zu of its reply is wrong", (unsigned long long)k->seq, i);
    else
      t->done++;
  }
  free(k);
}

static int rpc_post(sh_traffic_t *t)
{
  uint8_t req[4096];
  call_t *k = malloc(sizeof(*k));
  if (!k)
    sh_die("out of memory");
  k->t = t;
  k->seq = sh_rand(&t->seed);
  k->len = 1 + sh_rand(&t->seed) % sizeof(req);
  for (size_t i = 0; i < k->len; i++)
    req[i] = sh_pat(k->seq, i);
  int rc = rmx_rpc_call(t->c, SH_RPC_XOR, req, k->len, 0, rpc_reply, k, NULL);
  if (rc != 0) {
    free(k);
    return rc;
  }
  t->rpc_out++;
  return 0;
}

/* ---- the region: a write, then the same range read back ---- */

static void rma_done(rmx_conn_t *c, int status, void *arg);

static int rma_read(sh_traffic_t *t)
{
  rmx_iov_t v = {.addr = t->rma_r, .len = t->rma_len};
  memset(t->rma_r, 0, t->rma_len);
  t->rma_state = 2;
  return rmx_read(t->c, &v, 1, t->rk, t->rma_off, rma_done, t);
}

static void rma_done(rmx_conn_t *c, int status, void *arg)
{
  sh_traffic_t *t = arg;
  (void)c;
  int was = t->rma_state;
  t->rma_state = 0;
  if (status != 0) {
    wrong(t, 1, "a %s of the region failed: %s", was == 1 ? "write" : "read",
          rmx_strerror(status));
    return;
  }
  if (was == 1) {
    int rc = t->posting ? rma_read(t) : 0;
    if (rc != 0) {
      t->rma_state = 0;
      wrong(t, 1, "a read of the region was refused: %s", rmx_strerror(rc));
    }
    return;
  }
  if (memcmp(t->rma_w, t->rma_r, t->rma_len) != 0)
    wrong(t, 0, "the region read back is not what was written (%zu bytes at %llu)",
          t->rma_len, (unsigned long long)t->rma_off);
  else
    t->done++;
}

static int rma_post(sh_traffic_t *t)
{
  /* now and then a range past the region: refused at the call, nothing sent */
  if (sh_rand(&t->seed) % 16 == 0) {
    rmx_iov_t v = {.addr = t->rma_r, .len = 16};
    int rc = rmx_read(t->c, &v, 1, t->rk, SH_REGION - 8, rma_done, t);
    if (rc != RMX_EACCES)
      wrong(t, 0, "a read past the region was not refused at the call: %d", rc);
    return 0;
  }
  t->rma_seq = sh_rand(&t->seed);
  t->rma_len = 1 + sh_rand(&t->seed) % 16384;
  t->rma_off = sh_rand(&t->seed) % (SH_REGION - t->rma_len + 1);
  for (size_t i = 0; i < t->rma_len; i++)
    t->rma_w[i] = sh_pat(t->rma_seq, i);
  rmx_iov_t v = {.addr = t->rma_w, .len = t->rma_len};
  t->rma_state = 1;
  int rc = rmx_write(t->c, &v, 1, t->rk, t->rma_off, rma_done, t);
  if (rc != 0)
    t->rma_state = 0;
  return rc;
}

void sh_traffic_pump(sh_traffic_t *t)
{
  int rc = 0;
  while (t->posting && rc == 0 && t->echo_out < ECHO_WINDOW)
    rc = echo_post(t);
  if (t->posting && rc == 0 && t->rpc_out < RPC_WINDOW)
    rc = rpc_post(t);
  if (t->posting && rc == 0 && t->rk && t->rma_state == 0)
    rc = rma_post(t);
  if (rc != 0)
    wrong(t, 1, "posting was refused: %s", rmx_strerror(rc));
}
