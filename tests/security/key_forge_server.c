/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The key-forging test's server: an ordinary rmx service that hands each
 * client a registration of its own (KF_RPC_REGISTER), a fresh key on
 * request (KF_RPC_PROBE), and streams 16 MiB messages to a client that asks
 * (KF_RPC_STREAM), KF_STREAM_DEPTH at a time, all from one buffer tagged
 * with the victim's tag. On verbs the receiver reads each message from
 * that buffer by RDMA, through a registration made for that message.
 *
 * Control lines (stdout): "listening URI", "source ADDR LEN" (the stream's
 * buffer), "victim-region ADDR LEN" once the victim registered, and at the
 * end "server sent N failed N accepted N probes N". Addresses are given to
 * the attacker by the driver: an address is no secret (it travels in
 * clear in every packed key and rendezvous frame); only keys are.
 * It stops when stdin reaches EOF.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "key_forge.h"

#define MAX_CONNS 64
#define MAX_REGIONS 8

typedef struct region {
  void *mem;
  rmx_mem_t *m;
} region_t;

static struct {
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  rmx_conn_t *conns[MAX_CONNS];
  int nconns, closing, eof, stopping;
  region_t regions[MAX_REGIONS];
  int nregions;
  uint8_t *src, *probe;
  rmx_conn_t *target; /* the stream's receiver */
  uint64_t sent, failed, inflight, accepted, probes;
} S;

static void on_closed(rmx_conn_t *c, void *arg)
{
  (void)c;
  (void)arg;
  S.closing--;
}

static void conn_close(rmx_conn_t *c)
{
  for (int i = 0; i < S.nconns; i++)
    if (S.conns[i] == c) {
      S.conns[i] = S.conns[--S.nconns];
      break;
    }
  if (S.target == c)
    S.target = NULL;
  S.closing++;
  rmx_conn_close(c, on_closed, NULL);
}

/* A connection the peer lost or the target cut (a refused remote access). */
static void on_disconnect(rmx_conn_t *c, int status, void *arg)
{
  (void)status;
  (void)arg;
  conn_close(c);
}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  (void)l;
  (void)arg;
  rmx_conn_cbs_t cbs = {.on_disconnect = on_disconnect};
  rmx_conn_set_cbs(c, &cbs, NULL);
  S.accepted++;
  if (S.stopping || S.nconns == MAX_CONNS) {
    S.closing++;
    rmx_conn_close(c, on_closed, NULL);
    return;
  }
  S.conns[S.nconns++] = c;
}

static void stream_fill(void);

static void on_sent(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  (void)arg;
  S.inflight--;
  if (status == 0) {
    S.sent++;
    stream_fill();
  } else {
    S.failed++;
    S.target = NULL; /* the victim is gone, or going */
  }
}

static void stream_fill(void)
{
  while (S.target && !S.stopping && S.inflight < KF_STREAM_DEPTH) {
    /* the same bytes several times at once: each send registers them anew */
    int rc = rmx_send(S.target, S.src, KF_MSG, on_sent, NULL);
    if (rc) {
      fprintf(stderr, "key-forge server: send to the victim: %s\n", rmx_strerror(rc));
      S.target = NULL;
      return;
    }
    S.inflight++;
  }
}

/* Pack m's key for the peer of c alone: the form an application hands a
 * peer it does not trust with the rest of its memory. */
static int pack_for(rmx_mem_t *m, rmx_conn_t *c, uint8_t *blob, size_t *len)
{
  return rmx_mem_pack_for(m, c, blob, len);
}

static void rpc_register(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  (void)arg;
  int victim = len == 6 && memcmp(data, "victim", 6) == 0;
  uint8_t blob[RMX_RKEY_MAX];
  size_t blen = sizeof(blob);
  if (S.nregions == MAX_REGIONS) {
    rmx_rpc_reply_error(req, RMX_ENOMEM);
    return;
  }
  region_t *r = &S.regions[S.nregions];
  r->mem = kf_map(KF_REGION);
  kf_fill(r->mem, KF_REGION, victim ? KF_TAG_VICTIM : KF_TAG_ATTACKER);
  int rc = rmx_mem_reg(S.ctx, r->mem, KF_REGION, RMX_MEM_REMOTE_READ, &r->m);
  if (rc == 0 && (rc = pack_for(r->m, rmx_rpc_req_conn(req), blob, &blen)) != 0)
    rmx_mem_dereg(r->m);
  if (rc) {
    fprintf(stderr, "key-forge server: register: %s\n", rmx_strerror(rc));
    kf_unmap(r->mem, KF_REGION);
    rmx_rpc_reply_error(req, rc);
    return;
  }
  S.nregions++;
  if (victim)
    kf_say("victim-region %llu %zu", (unsigned long long)(uintptr_t)r->mem, KF_REGION);
  rmx_rpc_reply(req, blob, blen);
}

static void rpc_probe(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  (void)data;
  (void)len;
  (void)arg;
  uint8_t blob[RMX_RKEY_MAX];
  size_t blen = sizeof(blob);
  rmx_mem_t *m;
  int rc = rmx_mem_reg(S.ctx, S.probe, KF_PROBE, RMX_MEM_REMOTE_READ, &m);
  if (rc == 0) {
    rc = pack_for(m, rmx_rpc_req_conn(req), blob, &blen);
    rmx_mem_dereg(m);
  }
  if (rc) {
    rmx_rpc_reply_error(req, rc);
    return;
  }
  S.probes++;
  rmx_rpc_reply(req, blob, blen);
}

static void rpc_stream(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  (void)data;
  (void)len;
  (void)arg;
  S.target = rmx_rpc_req_conn(req);
  stream_fill();
  rmx_rpc_reply(req, NULL, 0);
}

static void rpc_ping(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  (void)data;
  (void)len;
  (void)arg;
  rmx_rpc_reply(req, NULL, 0);
}

static void rpc_stats(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  (void)data;
  (void)len;
  (void)arg;
  kf_stats_t st = {.sent = S.sent, .inflight = S.inflight};
  rmx_rpc_reply(req, &st, sizeof(st));
}

int kf_server_main(const char *uri)
{
  char buf[128];
  S.ctx = kf_ctx();
  S.src = kf_map(KF_MSG);
  kf_fill(S.src, KF_MSG, KF_TAG_VICTIM);
  S.probe = kf_map(KF_PROBE);
  kf_fill(S.probe, KF_PROBE, KF_TAG_PROBE);
  int rc = rmx_listen(S.ctx, uri, on_accept, NULL, &S.l);
  if (rc == 0)
    rc = rmx_listener_uri(S.l, buf, sizeof(buf));
  if (rc == 0)
    rc = rmx_rpc_register(S.ctx, KF_RPC_REGISTER, rpc_register, NULL);
  if (rc == 0)
    rc = rmx_rpc_register(S.ctx, KF_RPC_PROBE, rpc_probe, NULL);
  if (rc == 0)
    rc = rmx_rpc_register(S.ctx, KF_RPC_STREAM, rpc_stream, NULL);
  if (rc == 0)
    rc = rmx_rpc_register(S.ctx, KF_RPC_PING, rpc_ping, NULL);
  if (rc == 0)
    rc = rmx_rpc_register(S.ctx, KF_RPC_STATS, rpc_stats, NULL);
  if (rc) {
    fprintf(stderr, "key-forge server: listen on %s: %s\n", uri, rmx_strerror(rc));
    return 2;
  }
  kf_say("listening %s", buf);
  kf_say("source %llu %zu", (unsigned long long)(uintptr_t)S.src, KF_MSG);
  kf_stdin_watch(S.ctx, NULL, &S.eof);
  kf_run_until(S.ctx, &S.eof);

  S.stopping = 1;
  rmx_listener_close(S.l);
  while (S.nconns)
    conn_close(S.conns[0]);
  while (S.closing || S.inflight)
    uv_run(rmx_ctx_loop(S.ctx), UV_RUN_ONCE);
  for (int i = 0; i < S.nregions; i++) {
    rmx_mem_dereg(S.regions[i].m);
    kf_unmap(S.regions[i].mem, KF_REGION);
  }
  rc = rmx_ctx_destroy(S.ctx);
  kf_unmap(S.src, KF_MSG);
  kf_unmap(S.probe, KF_PROBE);
  kf_say("server sent %llu failed %llu accepted %llu probes %llu", (unsigned long long)S.sent,
         (unsigned long long)S.failed, (unsigned long long)S.accepted,
         (unsigned long long)S.probes);
  return rc ? 2 : 0;
}
