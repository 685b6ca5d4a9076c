/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The soak's server: echoes every message, answers SOAK_RPC_XFORM with a
 * transform of the request, and gives each connection a region of its own
 * (registered at accept, released when the connection closes) whose key it
 * hands out by SOAK_RPC_KEY. It checks every payload it receives before
 * echoing it, so a byte damaged on the way in is counted here and one
 * damaged on the way back is counted by the client.
 *
 * It prints "PORT n" once listening (the driver waits for it) and, when
 * SIGTERM asks it to stop, closes everything, destroys its context and
 * prints one "SERVER ..." line. SIGKILL is the other way it ends.
 *
 * It also remembers every operation id it received: one arriving twice was
 * sent again behind the client's back.
 *
 * RMX_TEST_SOAK_BREAK=echo damages one byte of every 500th echo: the soak must
 * then fail (a check of the checker).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include <rmx/rmx.h>

#include "soak.h"

typedef struct sconn {
  struct sconn *next;
  rmx_conn_t *c;
  unsigned char *region;
  rmx_mem_t *mem;
  uint64_t seed;
  int closing;
} sconn_t;

static struct {
  uv_loop_t loop;
  uv_signal_t term;
  uv_timer_t retry;
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  char uri[160];
  int listen_tries, stopping, break_echo, nclients;
  uint64_t rng, start_ms;
  uv_timer_t sample;
  int fd_warm, fd_max;
  size_t rss_warm, rss_max;
  sconn_t *conns;
  unsigned long accepted, closed, msgs, rpcs, keys, corrupt, resent, send_fail, reg_fail;
  size_t echo_bytes; /* echo copies not yet sent back */
} S;

static sconn_t *find(rmx_conn_t *c)
{
  for (sconn_t *s = S.conns; s; s = s->next)
    if (s->c == c)
      return s;
  return NULL;
}

static void s_closed(rmx_conn_t *c, void *arg)
{
  sconn_t *s = arg, **pp = &S.conns;
  while (*pp != s)
    pp = &(*pp)->next;
  *pp = s->next;
  if (s->mem)
    rmx_mem_dereg(s->mem); /* nothing of ours uses it: the connection is gone */
  free(s->region);
  free(s);
  S.closed++;
}

static void close_conn(sconn_t *s)
{
  if (s->closing)
    return;
  s->closing = 1;
  rmx_conn_close(s->c, s_closed, s);
}

/* Every operation id this process received, to catch one sent again
 * (rmx never re-sends what failed at a loss). Only a process that lived
 * through a loss can see that: a server stopped past the keepalive limit
 * and resumed, whose clients reconnected to it. Open addressing, doubling. */
static struct {
  uint64_t *v;
  size_t cap, n;
} seen;

static int seen_add(uint64_t id)
{
  if (2 * (seen.n + 1) > seen.cap) {
    size_t cap = seen.cap ? 2 * seen.cap : 4096;
    uint64_t *v = calloc(cap, sizeof(*v)), *old = seen.v;
    if (!v)
      abort();
    seen.v = v;
    seen.cap = cap;
    seen.n = 0;
    for (size_t i = 0; old && i < cap / 2; i++)
      if (old[i])
        seen_add(old[i]);
    free(old);
  }
  size_t i = soak_mix(id) & (seen.cap - 1);
  for (; seen.v[i]; i = (i + 1) & (seen.cap - 1))
    if (seen.v[i] == id)
      return 0;
  seen.v[i] = id;
  seen.n++;
  return 1;
}

/* Said at once, not only in the last report: a server may be killed. */
static size_t count_corrupt(size_t bad, const char *what, const void *data, size_t n)
{
  if (!bad)
    return 0;
  const unsigned char *p = data;
  fprintf(stderr, "soak server %d: %zu bad bytes in %s of %zu bytes (id field %#llx, first "
          "bytes %02x %02x %02x %02x)\n", (int)getpid(), bad, what, n,
          (unsigned long long)soak_payload_id(data, n), n > 0 ? p[0] : 0, n > 1 ? p[1] : 0,
          n > 2 ? p[2] : 0, n > 3 ? p[3] : 0);
  S.corrupt += bad;
  printf("CORRUPT %zu\n", bad);
  fflush(stdout);
  return bad;
}

static void check_once(const void *data, size_t n)
{
  uint64_t id = soak_payload_id(data, n);
  if (!id || seen_add(id))
    return;
  S.resent++;
  printf("RESENT %#llx\n", (unsigned long long)id);
  fflush(stdout);
}

/* An echo's own copy, with its length: the bytes of those in flight are
 * left out of the heap samples (a 3 MiB message being echoed to each client
 * is traffic, not growth). */
typedef struct echo {
  size_t n;
  unsigned char b[];
} echo_t;

static void echo_sent(rmx_conn_t *c, int status, void *arg)
{
  echo_t *e = arg;
  S.echo_bytes -= e->n;
  free(e);
  S.send_fail += status != 0;
}

static void s_recv(rmx_conn_t *c, const void *data, size_t n, void *arg)
{
  S.msgs++;
  if (!count_corrupt(soak_payload_check(data, n, 0), "a message", data, n))
    check_once(data, n); /* a damaged id is no evidence of a resend */
  /* Large echoes go by rendezvous from our memory, which must outlive the
   * send: every echo gets its own copy, freed by its callback. */
  echo_t *e = malloc(sizeof(*e) + (n ? n : 1));
  if (!e)
    abort();
  e->n = n;
  memcpy(e->b, data, n);
  if (S.break_echo && n > 0 && S.msgs % 500 == 0)
    e->b[n / 2] ^= 0x01;
  if (rmx_send(c, e->b, n, echo_sent, e) != 0) {
    free(e); /* the connection is going down; the client counts the loss */
    S.send_fail++;
  } else {
    S.echo_bytes += n;
  }
}

static void s_disconnect(rmx_conn_t *c, int status, void *arg) { close_conn(arg); }

static void s_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  sconn_t *s = calloc(1, sizeof(*s));
  if (!s)
    abort();
  s->c = c;
  s->next = S.conns;
  S.conns = s;
  S.accepted++;
  rmx_conn_set_cbs(c, &(rmx_conn_cbs_t){.on_recv = s_recv, .on_disconnect = s_disconnect}, s);
  /* A fresh region per connection: a client's writes never meet another's,
   * and releasing it at close is exercised as often as connections end. */
  s->seed = soak_rand(&S.rng);
  s->region = malloc(SOAK_REGION);
  if (!s->region)
    abort();
  memset(s->region, 0, (size_t)SOAK_LANES * SOAK_LANE);
  soak_pattern(s->region + (size_t)SOAK_LANES * SOAK_LANE, SOAK_LANE, s->seed, 0);
  int rc = rmx_mem_reg(S.ctx, s->region, SOAK_REGION,
                       RMX_MEM_LOCAL | RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE, &s->mem);
  if (rc) {
    fprintf(stderr, "soak server: rmx_mem_reg: %s\n", rmx_strerror(rc));
    s->mem = NULL;
    S.reg_fail++;
    close_conn(s);
  }
}

static void rpc_xform(rmx_rpc_req_t *req, const void *data, size_t n, void *arg)
{
  S.rpcs++;
  if (!count_corrupt(soak_payload_check(data, n, 0), "an RPC request", data, n))
    check_once(data, n); /* a damaged id is no evidence of a resend */
  unsigned char *out = malloc(n ? n : 1);
  if (!out)
    abort();
  const unsigned char *in = data;
  for (size_t i = 0; i < n; i++)
    out[i] = in[i] ^ SOAK_XOR;
  rmx_rpc_reply(req, out, n); /* copied; an error only means the caller is gone */
  free(out);
}

static void rpc_key(rmx_rpc_req_t *req, const void *data, size_t n, void *arg)
{
  sconn_t *s = find(rmx_rpc_req_conn(req));
  unsigned char out[sizeof(soak_key_t) + RMX_RKEY_MAX];
  size_t blob = RMX_RKEY_MAX;
  S.keys++;
  if (!s || !s->mem || rmx_mem_pack(s->mem, out + sizeof(soak_key_t), &blob) != 0) {
    rmx_rpc_reply_error(req, RMX_ENOENT);
    return;
  }
  soak_key_t k = {.seed = s->seed, .lane = SOAK_LANE, .lanes = SOAK_LANES};
  memcpy(out, &k, sizeof(k));
  rmx_rpc_reply(req, out, sizeof(k) + blob);
}

/* Resource samples, comparable only while every client is connected and
 * no connection is closing: then the same connections are open each time.
 * A socket the listener has taken whose handshake is not done yet (a
 * client coming back before this side has seen its old connection end)
 * holds a descriptor but is no connection yet, so a sample counts only once
 * the descriptors have held for a second in which no connection came or
 * went; a leaked descriptor holds for good, so it is still seen. The first
 * sample after a warm-up of 5 s is the reference. */
#define SAMPLE_HOLD 4 /* samples, 250 ms apart */
static void sample_cb(uv_timer_t *t)
{
  static unsigned long events = ~0ul;
  static int held, held_fds;
  int live = 0;
  for (sconn_t *s = S.conns; s; s = s->next) {
    if (s->closing) {
      held = 0;
      return;
    }
    live++;
  }
  if (live != S.nclients || soak_now_ms() - S.start_ms < 5000) {
    held = 0;
    return;
  }
  int fds = soak_fds();
  if (fds != held_fds || S.accepted + S.closed != events) {
    held_fds = fds;
    events = S.accepted + S.closed;
    held = 0;
    return;
  }
  if (++held < SAMPLE_HOLD)
    return;
  size_t rss = soak_rss(S.ctx);
  rss = rss > S.echo_bytes ? rss - S.echo_bytes : 0; /* echoes in flight */
  if (S.fd_warm < 0) {
    S.fd_warm = S.fd_max = fds;
    S.rss_warm = S.rss_max = rss;
    return;
  }
  S.fd_max = fds > S.fd_max ? fds : S.fd_max;
  S.rss_max = rss > S.rss_max ? rss : S.rss_max;
}

static int try_listen(void)
{
  char got[160];
  int rc = rmx_listen(S.ctx, S.uri, s_accept, NULL, &S.l);
  if (rc)
    return rc;
  rmx_listener_uri(S.l, got, sizeof(got));
  const char *port = strrchr(got, ':');
  printf("PORT %s\n", port && port[1] != '/' ? port + 1 : "0"); /* shm://@NAME: none */
  fflush(stdout);
  return 0;
}

/* A restarted server may find its port still held for a moment. */
static void retry_cb(uv_timer_t *t)
{
  int rc = try_listen();
  if (rc == 0)
    return;
  if (++S.listen_tries % 20 == 1)
    fprintf(stderr, "soak server %d: listen on %s: %s (try %d)\n", (int)getpid(), S.uri,
            rmx_strerror(rc), S.listen_tries);
  if (S.listen_tries > 100) {
    fprintf(stderr, "soak server: cannot listen on %s: %s\n", S.uri, rmx_strerror(rc));
    exit(3);
  }
  uv_timer_start(&S.retry, retry_cb, 100, 0);
}

static void on_term(uv_signal_t *h, int signum)
{
  if (S.stopping)
    return;
  S.stopping = 1;
  uv_timer_stop(&S.retry);
  uv_timer_stop(&S.sample);
  if (S.l)
    rmx_listener_close(S.l);
  S.l = NULL;
  for (sconn_t *s = S.conns; s; s = s->next)
    close_conn(s);
  uv_signal_stop(&S.term);
}

int soak_server_main(int argc, char **argv)
{
  if (argc < 4) {
    fprintf(stderr, "usage: rmx-soak server URI NCLIENTS\n");
    return 2;
  }
  snprintf(S.uri, sizeof(S.uri), "%s", argv[2]);
  S.nclients = atoi(argv[3]);
  S.start_ms = soak_now_ms();
  S.fd_warm = S.fd_max = -1;
  S.rng = soak_mix((uint64_t)getpid() ^ soak_now_ms());
  S.break_echo = getenv("RMX_TEST_SOAK_BREAK") && strcmp(getenv("RMX_TEST_SOAK_BREAK"), "echo") == 0;
  uv_loop_init(&S.loop);
  int rc = rmx_ctx_create(&S.ctx, &S.loop, NULL);
  if (rc) {
    fprintf(stderr, "soak server: rmx_ctx_create: %s\n", rmx_strerror(rc));
    return 3;
  }
  rmx_rpc_register(S.ctx, SOAK_RPC_XFORM, rpc_xform, NULL);
  rmx_rpc_register(S.ctx, SOAK_RPC_KEY, rpc_key, NULL);
  uv_signal_init(&S.loop, &S.term);
  uv_signal_start(&S.term, on_term, SIGTERM);
  uv_timer_init(&S.loop, &S.retry);
  uv_timer_init(&S.loop, &S.sample);
  uv_timer_start(&S.sample, sample_cb, 250, 250);
  retry_cb(&S.retry);

  /* Runs until SIGTERM has closed the listener and every connection. */
  while (!S.stopping || S.conns)
    uv_run(&S.loop, UV_RUN_ONCE);
  rc = rmx_ctx_destroy(S.ctx);
  uv_close((uv_handle_t *)&S.term, NULL);
  uv_close((uv_handle_t *)&S.retry, NULL);
  uv_close((uv_handle_t *)&S.sample, NULL);
  uv_run(&S.loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&S.loop) != 0)
    rc = rc ? rc : -1;
  free(seen.v);
  printf("SERVER accepted=%lu closed=%lu msgs=%lu rpcs=%lu keys=%lu corrupted=%lu resent=%lu "
         "send_fail=%lu reg_fail=%lu destroy=%d fd_warm=%d fd_max=%d rss_warm=%zu rss_max=%zu\n",
         S.accepted, S.closed, S.msgs, S.rpcs, S.keys, S.corrupt, S.resent, S.send_fail,
         S.reg_fail, rc, S.fd_warm, S.fd_max, S.rss_warm, S.rss_max);
  return rc || S.corrupt || S.resent || S.reg_fail ? 1 : 0;
}
