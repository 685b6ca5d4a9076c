/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-perf's server: echoes messages and RPCs, counts and checks streamed
 * messages, and lends clients a registered region for one-sided tests, as
 * the control RPC (perf.h) asks, per connection.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "perf.h"

static rmx_ctx_t *ctx;

/* ------------------------------------------------------------------ */
/* server                                                             */
/* ------------------------------------------------------------------ */

typedef struct srv {
  struct srv *next;  /* every connection's, for the control RPC to find */
  rmx_conn_t *c;
  int sink;          /* count (and check) messages instead of echoing them */
  uint32_t window;   /* sink: the client sends from this many buffers in turn */
  sink_report_t rep;
  uint8_t *region;   /* CTL_MEM */
  size_t region_len;
  rmx_mem_t *mem;
} srv_t;

static srv_t *srv_all;

static srv_t *srv_of(rmx_conn_t *c)
{
  srv_t *s = srv_all;
  while (s && s->c != c)
    s = s->next;
  return s;
}

static void srv_mem_free(srv_t *s)
{
  if (s->mem)
    rmx_mem_dereg(s->mem);
  free(s->region);
  s->mem = NULL;
  s->region = NULL;
}

/* Echo: the same bytes back. Sink: buffer k of the client's window holds
 * the byte k throughout. */
static void srv_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  srv_t *s = arg;
  if (s->sink) {
    const uint8_t *p = data, want = (uint8_t)(s->rep.msgs % s->window);
    s->rep.bad += len && (p[0] != want || p[len / 2] != want || p[len - 1] != want);
    s->rep.msgs++;
    s->rep.bytes += len;
    return;
  }
  /* data is only valid during this call. rmx_send copies a message of up
   * to RMX_EAGER_MSG_MIN bytes before it returns; a larger one may go by
   * rendezvous, read after it returns, so it is echoed from a pool buffer. */
  if (len <= RMX_EAGER_MSG_MIN) {
    if (rmx_send(c, data, len, NULL, NULL) != 0)
      fprintf(stderr, "rmx-perf server: cannot echo %zu bytes\n", len);
    return;
  }
  rmx_buf_t *b;
  if (rmx_buf_get(ctx, len ? len : 1, &b) != 0) {
    fprintf(stderr, "rmx-perf server: no buffer to echo %zu bytes\n", len);
    return;
  }
  memcpy(rmx_buf_data(b), data, len);
  if (rmx_send_buf(c, b, len, NULL, NULL) != 0) {
    rmx_buf_put(b);
    fprintf(stderr, "rmx-perf server: cannot echo %zu bytes\n", len);
  }
}

static void srv_echo(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  rmx_rpc_reply(req, data, len);
}

static void srv_ctl(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  srv_t *s = srv_of(rmx_rpc_req_conn(req));
  ctl_t m;
  if (len != sizeof(m) || !s) {
    rmx_rpc_reply_error(req, RMX_EINVAL);
    return;
  }
  memcpy(&m, data, sizeof(m));
  switch (m.cmd) {
  case CTL_ECHO:
  case CTL_SINK:
    s->sink = m.cmd == CTL_SINK;
    s->window = m.window ? m.window : 1;
    memset(&s->rep, 0, sizeof(s->rep));
    rmx_rpc_reply(req, NULL, 0);
    return;
  case CTL_SINK_END:
    s->sink = 0;
    rmx_rpc_reply(req, &s->rep, sizeof(s->rep));
    return;
  case CTL_MEM: {
    uint8_t blob[RMX_RKEY_MAX];
    size_t blen = sizeof(blob);
    srv_mem_free(s);
    s->region_len = m.size < 8 ? 8 : (size_t)m.size;
    s->region = aligned_alloc(64, (s->region_len + 63) & ~(size_t)63);
    if (!s->region) {
      rmx_rpc_reply_error(req, RMX_ENOMEM);
      return;
    }
    if (m.window) /* reads and atomics find the pattern; writes must put it there */
      pattern_fill(s->region, s->region_len);
    else
      memset(s->region, 0, s->region_len);
    int rc = rmx_mem_reg(ctx, s->region, s->region_len,
                         RMX_MEM_LOCAL | RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE |
                             RMX_MEM_REMOTE_ATOMIC, &s->mem);
    if (rc == 0)
      rc = rmx_mem_pack_for(s->mem, rmx_rpc_req_conn(req), blob, &blen); /* this client's */
    if (rc) {
      srv_mem_free(s);
      rmx_rpc_reply_error(req, rc);
      return;
    }
    rmx_rpc_reply(req, blob, blen);
    return;
  }
  case CTL_MEM_SUM: {
    size_t n = m.size < s->region_len ? (size_t)m.size : s->region_len;
    uint64_t sum = s->region ? pattern_sum(s->region, n) : 0;
    rmx_rpc_reply(req, &sum, sizeof(sum));
    return;
  }
  case CTL_MEM_FREE:
    srv_mem_free(s);
    rmx_rpc_reply(req, NULL, 0);
    return;
  }
  rmx_rpc_reply_error(req, RMX_EINVAL);
}

static void srv_closed(rmx_conn_t *c, void *arg)
{
  srv_t *s = arg, **p = &srv_all;
  while (*p != s)
    p = &(*p)->next;
  *p = s->next;
  srv_mem_free(s);
  free(s);
}

static void srv_disc(rmx_conn_t *c, int st, void *arg) { rmx_conn_close(c, srv_closed, arg); }

static void srv_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  srv_t *s = calloc(1, sizeof(*s));
  rmx_conn_cbs_t cbs = {.on_recv = srv_recv, .on_disconnect = srv_disc};
  if (!s) {
    rmx_conn_close(c, NULL, NULL);
    return;
  }
  s->c = c;
  s->next = srv_all;
  srv_all = s;
  rmx_conn_set_cbs(c, &cbs, s);
}

static void on_signal(uv_signal_t *h, int signum) { rmx_ctx_stop(h->data); }

void perf_run_until_signal(rmx_ctx_t *c)
{
  static uv_signal_t sig[2]; /* closed as the context ends, after this returns */
  for (int i = 0; i < 2; i++) {
    uv_signal_init(rmx_ctx_loop(c), &sig[i]);
    sig[i].data = c;
    uv_signal_start(&sig[i], on_signal, i ? SIGINT : SIGTERM);
    uv_unref((uv_handle_t *)&sig[i]);
  }
  rmx_ctx_run(c);
  for (int i = 0; i < 2; i++)
    uv_close((uv_handle_t *)&sig[i], NULL);
}

int perf_server(rmx_ctx_t *c, const char *uri)
{
  ctx = c;
  rmx_listener_t *l;
  char bound[128];
  int rc = rmx_rpc_register(ctx, H_ECHO, srv_echo, NULL);
  if (rc == 0)
    rc = rmx_rpc_register(ctx, H_CTL, srv_ctl, NULL);
  if (rc == 0)
    rc = rmx_listen(ctx, uri, srv_accept, NULL, &l);
  if (rc == 0)
    rc = rmx_listener_uri(l, bound, sizeof(bound));
  if (rc == RMX_EINVAL) { /* the URI (tool.h's rule): a usage error */
    fprintf(stderr, "rmx-perf: cannot serve on '%s': %s (try 'rmx-perf --help')\n", uri,
            rmx_strerror(rc));
    return 2;
  }
  if (rc) {
    fprintf(stderr, "rmx-perf: cannot serve on %s: %s\n", uri, rmx_strerror(rc));
    return 1;
  }
  printf("listening on %s\n", bound);
  fflush(stdout);
  perf_run_until_signal(ctx);
  rmx_listener_close(l);
  return 0;
}

