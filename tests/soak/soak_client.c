/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The soak's client: one connection to each server, with reconnect, kept
 * busy by soak_client_ops.c until SIGTERM. Then it stops issuing, waits
 * until every connection is up and idle, takes its last resource sample,
 * closes everything, destroys its context and prints one "CLIENT ..." line
 * for the driver.
 *
 * Bookkeeping of the callback contract (include/rmx/rmx.h): on_connected
 * once; on_disconnect once per loss, only while up, and only after every
 * operation of the connection has had its callback; on_reconnect attempts
 * numbered 1, 2, ... per loss; on_closed once; nothing after on_closed.
 *
 * Resources: after a reconnect, when every connection is up, the open
 * descriptors and the heap in use (outside rmx's pool) are sampled. The first sample after
 * the warm-up is the reference; the driver compares the others with it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soak_client.h"

client_t C;

static uv_signal_t term;
static uv_timer_t drain_timer;
static uint64_t drain_deadline;
static int closes_pending;

#define DRAIN_MS 30000

void soak_violation(cconn_t *cc, const char *what, uint64_t id)
{
  C.violations++;
  if (C.violations <= 20)
    fprintf(stderr, "soak client %d: VIOLATION: %s (op %#llx, %s)\n", C.idx, what,
            (unsigned long long)id, cc ? cc->uri : "?");
}

cconn_t *soak_find(rmx_conn_t *c)
{
  for (int i = 0; i < C.nconns; i++)
    if (C.conns[i].c == c)
      return &C.conns[i];
  return NULL;
}

static int all_up(void)
{
  for (int i = 0; i < C.nconns; i++)
    if (!C.conns[i].up)
      return 0;
  return 1;
}

/* Comparable samples only: every connection up (one socket each on TCP)
 * and no refused first connect still closing. */
static void checkpoint(void)
{
  if (!all_up() || C.old_handles)
    return;
  int fds = soak_fds();
  size_t rss = soak_rss(C.ctx);
  C.checkpoints++;
  if (C.trace)
    fprintf(stderr, "soak client %d: %.1f s fds=%d rss=%.2f MiB\n", C.idx,
            (double)(soak_now_ms() - C.start_ms) / 1000.0, fds, (double)rss / 1048576.0);
  if (C.fd_warm < 0) {
    if (soak_now_ms() - C.start_ms < C.warm_ms)
      return;
    C.fd_warm = C.fd_max = fds;
    C.rss_warm = C.rss_max = rss;
    return;
  }
  C.fd_max = fds > C.fd_max ? fds : C.fd_max;
  C.rss_max = rss > C.rss_max ? rss : C.rss_max;
}

static void do_connect(cconn_t *cc);

static void old_closed(rmx_conn_t *c, void *arg) { C.old_handles--; }

static void again_cb(uv_timer_t *t) { do_connect(t->data); }

static void c_connected(rmx_conn_t *c, int status, void *arg)
{
  cconn_t *cc = arg;
  if (cc->closed)
    soak_violation(cc, "on_connected after on_closed", 0);
  if (status) {
    /* Not retried by rmx (only established connections are): we do it,
     * with a new handle. The server was down when we started. */
    C.old_handles++;
    rmx_conn_close(c, old_closed, NULL);
    cc->c = NULL;
    if (!C.finished)
      uv_timer_start(&cc->again, again_cb, 200, 0);
    return;
  }
  cc->up = 1;
  cc->last_attempt = 0;
  soak_fetch_key(cc);
  checkpoint();
}

static void c_disconnect(rmx_conn_t *c, int status, void *arg)
{
  cconn_t *cc = arg;
  if (cc->closed)
    soak_violation(cc, "on_disconnect after on_closed", 0);
  if (!cc->up)
    soak_violation(cc, "on_disconnect while not connected (twice?)", 0);
  cc->up = 0;
  cc->last_attempt = 0;
  C.losses++;
  soak_fail_all(cc);
}

static void c_reconnect(rmx_conn_t *c, unsigned attempt, int status, void *arg)
{
  cconn_t *cc = arg;
  if (cc->closed)
    soak_violation(cc, "on_reconnect after on_closed", 0);
  if (attempt != cc->last_attempt + 1)
    soak_violation(cc, "reconnect attempts not numbered 1, 2, ...", attempt);
  if (status) {
    cc->last_attempt = attempt;
    return;
  }
  if (cc->up)
    soak_violation(cc, "reconnected while connected", 0);
  cc->up = 1;
  cc->last_attempt = 0;
  C.reconnects++;
  soak_fetch_key(cc);
  checkpoint();
}

static void do_connect(cconn_t *cc)
{
  rmx_connect_opts_t o = {.size = sizeof(o), .reconnect_min_ms = 20, .reconnect_max_ms = 500,
                          .on_reconnect = c_reconnect};
  int rc = rmx_connect_opts(C.ctx, cc->uri, &o, c_connected, cc, &cc->c);
  if (rc) {
    fprintf(stderr, "soak client %d: rmx_connect_opts %s: %s\n", C.idx, cc->uri, rmx_strerror(rc));
    C.call_errors++;
    cc->c = NULL;
    uv_timer_start(&cc->again, again_cb, 200, 0);
    return;
  }
  rmx_conn_set_cbs(cc->c, &(rmx_conn_cbs_t){.on_recv = soak_on_recv, .on_disconnect = c_disconnect},
                   cc);
}

/* ---- the end ---- */

static void handle_closed(uv_handle_t *h) {}

static void c_closed(rmx_conn_t *c, void *arg)
{
  cconn_t *cc = arg;
  if (cc->closed)
    soak_violation(cc, "on_closed twice", 0);
  cc->closed = 1;
  for (int i = 0; i <= SOAK_SLOTS; i++)
    if (cc->ops[i].id && cc->ops[i].need_cb)
      soak_violation(cc, "still owed a callback at on_closed", cc->ops[i].id);
  if (--closes_pending > 0)
    return;
  int rc = rmx_ctx_destroy(C.ctx); /* our loop: it finishes as we run it */
  if (rc) {
    fprintf(stderr, "soak client %d: rmx_ctx_destroy: %s\n", C.idx, rmx_strerror(rc));
    C.call_errors++;
  }
  for (int i = 0; i < C.nconns; i++)
    uv_close((uv_handle_t *)&C.conns[i].again, handle_closed);
  uv_close((uv_handle_t *)&drain_timer, handle_closed);
  uv_close((uv_handle_t *)&term, handle_closed);
}

static void finish_now(void)
{
  C.finished = 1;
  uv_timer_stop(&drain_timer);
  if (all_up() && !C.old_handles) {
    C.fd_end = soak_fds();
    C.rss_end = soak_rss(C.ctx);
  }
  for (int i = 0; i < C.nconns; i++) {
    cconn_t *cc = &C.conns[i];
    uv_timer_stop(&cc->again);
    if (!cc->up || !soak_idle(cc))
      C.unfinished++;
    if (!cc->c) {
      cc->closed = 1;
      continue;
    }
    cc->closing = 1;
    closes_pending++;
    rmx_conn_close(cc->c, c_closed, cc);
  }
  if (closes_pending == 0) { /* nothing was open: end the same way */
    closes_pending = 1;
    c_closed(NULL, &(cconn_t){0});
  }
}

/* Draining: wait until every connection is up again and owes nothing. */
static void drain_cb(uv_timer_t *t)
{
  int done = 1;
  for (int i = 0; i < C.nconns; i++)
    done &= C.conns[i].up && C.conns[i].rk && soak_idle(&C.conns[i]);
  if (done || soak_now_ms() >= drain_deadline)
    finish_now();
}

static void on_term(uv_signal_t *h, int signum)
{
  if (C.draining)
    return;
  C.draining = 1;
  drain_deadline = soak_now_ms() + DRAIN_MS;
  uv_timer_start(&drain_timer, drain_cb, 20, 20);
}

static void report(void)
{
  for (int i = 0; i < C.nconns; i++)
    C.errors += C.conns[i].errs_pending; /* failed with no loss to explain it */
  printf("CLIENT idx=%d gen=%d ops=%lu msgs=%lu rpcs=%lu writes=%lu reads=%lu "
         "failed_at_loss=%lu losses=%lu reconnects=%lu corrupted=%lu violations=%lu "
         "errors=%lu call_errors=%lu unfinished=%lu checkpoints=%d fd_warm=%d fd_max=%d "
         "fd_end=%d rss_warm=%zu rss_max=%zu rss_end=%zu\n",
         C.idx, C.gen, C.ops, C.msgs, C.rpcs, C.writes, C.reads, C.failed_at_loss, C.losses,
         C.reconnects, C.corrupt, C.violations, C.errors, C.call_errors, C.unfinished,
         C.checkpoints, C.fd_warm, C.fd_max, C.fd_end, C.rss_warm, C.rss_max, C.rss_end);
  fflush(stdout);
}

/* rmx-soak client SEED IDX GEN WARM_MS URI... */
int soak_client_main(int argc, char **argv)
{
  if (argc < 7 || argc - 6 > SOAK_MAX_SERVERS) {
    fprintf(stderr, "usage: rmx-soak client SEED IDX GEN WARM_MS URI...\n");
    return 2;
  }
  C.idx = atoi(argv[3]);
  C.gen = atoi(argv[4]);
  C.rng = soak_mix(strtoull(argv[2], NULL, 0) ^ ((uint64_t)C.idx << 40) ^ ((uint64_t)C.gen << 20));
  C.warm_ms = strtoull(argv[5], NULL, 0);
  C.start_ms = soak_now_ms();
  C.fd_warm = C.fd_max = C.fd_end = -1;
  C.nconns = argc - 6;
  C.trace = getenv("RMX_TEST_SOAK_TRACE") != NULL; /* every resource sample on stderr */

  rmx_config_t cfg;
  int rc = rmx_config_init(&cfg); /* keepalive from RMX_KEEPALIVE_MS and _TIMEOUT_MS */
  cfg.close_timeout_ms = 2000;
  uv_loop_init(&C.loop);
  if (rc || (rc = rmx_ctx_create(&C.ctx, &C.loop, &cfg)) != 0) {
    fprintf(stderr, "soak client: context: %s\n", rmx_strerror(rc));
    return 3;
  }
  uv_signal_init(&C.loop, &term);
  uv_signal_start(&term, on_term, SIGTERM);
  uv_timer_init(&C.loop, &drain_timer);
  for (int i = 0; i < C.nconns; i++) {
    cconn_t *cc = &C.conns[i];
    cc->idx = i;
    snprintf(cc->uri, sizeof(cc->uri), "%s", argv[6 + i]);
    /* ids name the client, its incarnation and the connection */
    cc->next_id = ((uint64_t)(C.idx + 1) << 56) | ((uint64_t)(C.gen & 0xff) << 48) |
                  ((uint64_t)i << 40) | 1;
    for (int s = 0; s < SOAK_SLOTS; s++) {
      /* Touched now, so that the resident size does not creep up as ever
       * longer payloads reach further into them. Not with zeros: malloc
       * and memset 0 may become a calloc that touches nothing. */
      cc->buf[s] = malloc(SOAK_MAX_MSG);
      if (!cc->buf[s])
        abort();
      memset(cc->buf[s], 0xa5, SOAK_MAX_MSG);
    }
    uv_timer_init(&C.loop, &cc->again);
    cc->again.data = cc;
    do_connect(cc);
  }
  uv_run(&C.loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&C.loop) != 0)
    C.call_errors++;
  for (int i = 0; i < C.nconns; i++)
    for (int s = 0; s < SOAK_SLOTS; s++)
      free(C.conns[i].buf[s]);
  report();
  return 0;
}
