/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The victim (shm_hostile.h): a server on shm://NAME, public API only. It
 * echoes every message, answers SH_RPC_XOR, and gives each connection a
 * region of its own (a heap block of exactly SH_REGION bytes, so that the
 * sanitizers see any access past it) with a key packed for that connection
 * alone, sent as its first message. Each connection's events are checked
 * against the API's promises: one on_disconnect, then on_closed, then
 * nothing.
 *
 * Lines out: "ready", "acc ID", "disc ID STATUS", "closed ID",
 * "stat OPEN FDS SEGMAPS", "viol ID WHAT" (a broken promise), "bye VIOLATIONS".
 * Lines in: "stat", "quit".
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm_hostile.h"

#define MAX_CONNS 4096

typedef struct vconn {
  int id;
  rmx_conn_t *c;
  uint8_t *region;
  rmx_mem_t *mem;
  int discs, closed, sends_out;
} vconn_t;

static struct {
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  vconn_t conns[MAX_CONNS];
  int nconns, open, violations, quitting;
} V;

static void viol(vconn_t *v, const char *what)
{
  V.violations++;
  sh_say("viol %d %s", v ? v->id : 0, what);
}

typedef struct vsend { vconn_t *v; void *buf; } vsend_t;

static void echo_sent(rmx_conn_t *c, int status, void *arg)
{
  vsend_t *s = arg;
  (void)c;
  (void)status; /* an echo on a connection that ends fails: that is all */
  if (s->v->closed)
    viol(s->v, "a send completed after on_closed");
  s->v->sends_out--;
  free(s->buf);
  free(s);
}

static void on_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  vconn_t *v = arg;
  if (v->closed || v->c != c) {
    viol(v, "a message after on_closed");
    return;
  }
  vsend_t *s = malloc(sizeof(*s));
  void *buf = malloc(len ? len : 1);
  if (!s || !buf)
    sh_die("victim: out of memory");
  memcpy(buf, data, len);
  s->v = v;
  s->buf = buf;
  if (rmx_send(c, buf, len, echo_sent, s) != 0) { /* ending: not echoed */
    free(buf);
    free(s);
    return;
  }
  v->sends_out++;
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  vconn_t *v = arg;
  (void)c;
  if (v->closed)
    viol(v, "on_closed twice");
  if (v->discs != 1)
    viol(v, "on_closed without exactly one on_disconnect first");
  if (v->sends_out != 0)
    viol(v, "on_closed with sends outstanding");
  v->closed = 1;
  rmx_mem_dereg(v->mem);
  free(v->region);
  v->mem = NULL;
  v->region = NULL;
  V.open--;
  sh_say("closed %d", v->id);
}

static void on_disconnect(rmx_conn_t *c, int status, void *arg)
{
  vconn_t *v = arg;
  if (v->closed)
    viol(v, "on_disconnect after on_closed");
  if (++v->discs != 1)
    viol(v, "on_disconnect twice");
  sh_say("disc %d %d", v->id, status);
  if (v->discs == 1 && rmx_conn_close(c, on_closed, v) != 0)
    viol(v, "rmx_conn_close refused");
}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  (void)l;
  (void)arg;
  if (V.nconns == MAX_CONNS)
    sh_die("victim: more than %d connections", MAX_CONNS);
  vconn_t *v = &V.conns[V.nconns++];
  v->id = V.nconns;
  v->c = c;
  V.open++;
  rmx_conn_cbs_t cbs = {.on_recv = on_recv, .on_disconnect = on_disconnect};
  rmx_conn_set_cbs(c, &cbs, v);
  sh_say("acc %d", v->id);
  v->region = malloc(SH_REGION);
  if (!v->region)
    sh_die("victim: out of memory");
  for (size_t i = 0; i < SH_REGION; i++)
    v->region[i] = sh_pat((uint64_t)v->id, i);
  uint8_t blob[4 + RMX_RKEY_MAX];
  size_t blen = sizeof(blob) - 4;
  uint32_t tag = SH_TAG_KEY;
  memcpy(blob, &tag, 4);
  int rc = rmx_mem_reg(V.ctx, v->region, SH_REGION,
                       RMX_MEM_LOCAL | RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE, &v->mem);
  if (rc == 0)
    rc = rmx_mem_pack_for(v->mem, c, blob + 4, &blen);
  if (rc == 0)
    rc = rmx_send(c, blob, 4 + blen, NULL, NULL);
  if (rc != 0)
    sh_die("victim: cannot give connection %d its key: %s", v->id, rmx_strerror(rc));
}

static void rpc_xor(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  uint8_t *r = malloc(len ? len : 1);
  (void)arg;
  if (!r)
    sh_die("victim: out of memory");
  for (size_t i = 0; i < len; i++)
    r[i] = ((const uint8_t *)data)[i] ^ SH_XOR;
  rmx_rpc_reply(req, r, len); /* a caller that is gone gets nothing: fine */
  free(r);
}

static void command(const char *line)
{
  if (strcmp(line, "stat") == 0) {
    sh_say("stat %d %d %d", V.open, sh_count_fds(), sh_count_seg_maps());
  } else if (strcmp(line, "quit") == 0) {
    V.quitting = 1;
    rmx_listener_close(V.l);
    for (int i = 0; i < V.nconns; i++)
      if (!V.conns[i].closed && V.conns[i].discs == 0) {
        viol(&V.conns[i], "still open at the end");
        V.conns[i].discs = 1; /* the close below is the test's, not the peer's */
        rmx_conn_close(V.conns[i].c, on_closed, &V.conns[i]);
      }
  } else {
    sh_die("victim: unknown command '%s'", line);
  }
}

int sh_victim_main(const char *name)
{
  rmx_config_t cfg;
  char uri[160];
  sh_lines_t in = {.fd = 0};
  rmx_config_init(&cfg);
  cfg.eager_size = SH_EAGER;
  /* The attacker's forged requests are refused remote accesses: the guard
   * would ban the listener's one name and with it the good client's next
   * connection. What the guard does is guard.shm's to test. */
  cfg.guard_strikes = 0;
  /* A stalled attacker is ended by the attacker, not by the clock: no
   * round depends on how long the driver takes. */
  cfg.keepalive_timeout_ms = 120000;
  fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
  int rc = rmx_ctx_create(&V.ctx, NULL, &cfg);
  if (rc == 0)
    rc = rmx_rpc_register(V.ctx, SH_RPC_XOR, rpc_xor, NULL);
  snprintf(uri, sizeof(uri), "shm://%s", name);
  if (rc == 0)
    rc = rmx_listen(V.ctx, uri, on_accept, NULL, &V.l);
  if (rc != 0)
    sh_die("victim: cannot listen on %s: %s", uri, rmx_strerror(rc));
  sh_say("ready");
  char line[256];
  while (!(V.quitting && V.open == 0)) {
    if (sh_turn(V.ctx, &in, 100)) {
      while (sh_lines_next(&in, line, sizeof(line)))
        command(line);
      if (in.eof && !V.quitting)
        command("quit");
    }
  }
  rc = rmx_ctx_destroy(V.ctx);
  if (rc != 0)
    viol(NULL, "rmx_ctx_destroy refused");
  sh_say("bye %d", V.violations);
  return V.violations ? 1 : 0;
}
