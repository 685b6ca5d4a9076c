/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The server role: checks every message against its seed, echoes RPCs,
 * and gives each connection a region of its own for one-sided writes
 * (registered once the connection exists, as rmx_mem_pack() asks, and
 * sent to the client as the first message). It is usually killed; on
 * SIGTERM it closes everything and destroys its context.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "fault_peer.h"

typedef struct sconn {
  rmx_conn_t *c;
  uint8_t *region;
  rmx_mem_t *mem;
  uint64_t msgs, bad_msgs;
  struct sconn *next;
} sconn_t;

static struct {
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  sconn_t *conns;
  uv_signal_t sigterm;
  int stopping;
} S;

static sconn_t *find(rmx_conn_t *c)
{
  for (sconn_t *s = S.conns; s; s = s->next)
    if (s->c == c)
      return s;
  return NULL;
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  sconn_t *s = arg;
  for (sconn_t **p = &S.conns; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  if (s->mem)
    rmx_mem_dereg(s->mem);
  free(s->region);
  free(s);
  if (S.stopping && !S.conns)
    rmx_ctx_stop(S.ctx); /* the context's own handles would keep the loop going */
}

static void on_disconnect(rmx_conn_t *c, int status, void *arg)
{
  rmx_conn_close(c, on_closed, arg);
}

static void on_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  sconn_t *s = arg;
  fp_msg_hdr_t h;
  s->msgs++;
  if (len < sizeof(h)) {
    s->bad_msgs++;
    return;
  }
  memcpy(&h, data, sizeof(h));
  if (!fp_msg_ok(data, len)) {
    /* Where it went wrong tells a torn transfer from a stale buffer. */
    size_t first = 0, nbad = 0;
    for (size_t off = 0; h.len == len && off + sizeof(h) < len; off += 4096) {
      size_t n = len - sizeof(h) - off < 4096 ? len - sizeof(h) - off : 4096;
      if (fp_check((const uint8_t *)data + sizeof(h) + off, n, h.seed, off) && !nbad++)
        first = off;
    }
    if (s->bad_msgs++ < 5)
      fprintf(stderr, "fault-peer server: message %" PRIu64 " of %zu bytes (says %u, seed %u) is "
              "wrong: first bad 4 KiB page at %zu, %zu pages bad\n", s->msgs, len, h.len, h.seed,
              first, nbad);
  }
}

static void rpc_echo(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  rmx_rpc_reply(req, data, len); /* an error here means the caller is gone */
}

static void rpc_verify(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  sconn_t *s = find(rmx_rpc_req_conn(req));
  fp_verify_req_t q;
  fp_verify_rep_t r = {0};
  if (!s || len != sizeof(q)) {
    rmx_rpc_reply_error(req, RMX_EINVAL);
    return;
  }
  memcpy(&q, data, sizeof(q));
  r.msgs = s->msgs;
  r.bad_msgs = s->bad_msgs;
  for (uint32_t i = 0; i < q.nseeds && i < FP_SLOTS; i++)
    if (q.seeds[i] != FP_NO_SEED &&
        fp_check(s->region + (size_t)i * FP_SLOT, FP_SLOT, q.seeds[i], 0))
      r.bad_slots++;
  rmx_rpc_reply(req, &r, sizeof(r));
}

static void key_sent(rmx_conn_t *c, int status, void *arg) {}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  sconn_t *s = calloc(1, sizeof(*s));
  uint8_t blob[1 + RMX_RKEY_MAX];
  size_t blen = RMX_RKEY_MAX;
  if (!s) {
    rmx_conn_close(c, NULL, NULL);
    return;
  }
  s->c = c;
  s->next = S.conns;
  S.conns = s;
  rmx_conn_set_cbs(c, &(rmx_conn_cbs_t){.on_recv = on_recv, .on_disconnect = on_disconnect}, s);
  s->region = calloc(1, FP_REGION);
  blob[0] = FP_KEY_MSG;
  int rc = s->region ? rmx_mem_reg(S.ctx, s->region, FP_REGION,
                                   RMX_MEM_LOCAL | RMX_MEM_REMOTE_WRITE, &s->mem)
                     : RMX_ENOMEM;
  if (rc == 0)
    rc = rmx_mem_pack(s->mem, blob + 1, &blen);
  if (rc == 0)
    rc = rmx_send(c, blob, 1 + blen, key_sent, NULL);
  if (rc) {
    fprintf(stderr, "fault-peer server: no region for a connection: %s\n", rmx_strerror(rc));
    rmx_conn_close(c, on_closed, s);
  }
}

/* SIGTERM: an orderly end, so the server can also end a clean run. */
static void on_sigterm(uv_signal_t *h, int signum)
{
  if (S.stopping++)
    return;
  uv_close((uv_handle_t *)h, NULL);
  rmx_listener_close(S.l);
  for (sconn_t *s = S.conns; s; s = s->next)
    rmx_conn_close(s->c, on_closed, s); /* EALREADY for ones closing already */
  if (!S.conns)
    rmx_ctx_stop(S.ctx);
}

int fp_server_main(const char *uri, const char *ready_file)
{
  char bound[256];
  int rc = rmx_ctx_create(&S.ctx, NULL, NULL);
  if (rc == 0)
    rc = rmx_rpc_register(S.ctx, FP_RPC_ECHO, rpc_echo, NULL);
  if (rc == 0)
    rc = rmx_rpc_register(S.ctx, FP_RPC_VERIFY, rpc_verify, NULL);
  if (rc == 0)
    rc = rmx_listen(S.ctx, uri, on_accept, NULL, &S.l);
  if (rc == 0)
    rc = rmx_listener_uri(S.l, bound, sizeof(bound));
  if (rc) {
    fprintf(stderr, "fault-peer server: %s: %s\n", uri, rmx_strerror(rc));
    return 1;
  }
  uv_signal_init(rmx_ctx_loop(S.ctx), &S.sigterm);
  uv_signal_start(&S.sigterm, on_sigterm, SIGTERM);
  printf("fault-peer server: listening on %s\n", bound);
  if (ready_file && fp_write_file(ready_file, bound) != 0) {
    perror(ready_file);
    return 1;
  }
  rmx_ctx_run(S.ctx);
  rc = rmx_ctx_destroy(S.ctx);
  printf("fault-peer server: stopped (destroy: %s)\n", rc ? rmx_err_name(rc) : "0");
  return rc ? 1 : 0;
}
