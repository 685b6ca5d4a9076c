/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The reconnecting client role: echo calls on a connection opened with
 * rmx_connect_opts and reconnect on, through one loss of the server's host
 * and its return. What it checks is what rmx.h promises of a reconnecting
 * connection:
 *   - at the loss, every call in flight fails once, before on_disconnect,
 *     which comes once with a nonzero status;
 *   - while it is down, calls are refused with RMX_ENOTCONN and nothing
 *     completes;
 *   - on_reconnect reports attempts 1, 2, ... in order, the last with 0;
 *   - afterwards the new server's key unpacks and --ops calls all succeed
 *     with the right bytes; then on_closed once, nothing after it.
 * One "fault-peer: result reconnect ..." line gives the verdict and the
 * times: the fault to on_disconnect, on_disconnect to the reconnect.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

#include "fault_peer.h"

enum { WINDOW = 16, POLL_MS = 20 };

typedef struct call {
  int live;
  uint32_t seed;
  uint32_t len;
} call_t;

static struct {
  const fp_client_opts_t *o;
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  rmx_rkey_t *rk;
  call_t calls[WINDOW];
  uint32_t next_seed;
  int lives, ready, closing, deadline_hit, destroy_rc, loaded;
  int connect_cbs, connect_status, disc_cbs, disc_status, closed_cbs, after_closed;
  int outstanding, outstanding_at_disc, late, doubles, bad_data, issue_errors;
  unsigned attempts, attempt_gaps, resumed, refused_ok, refused_wrong;
  long ok[3], failed[3]; /* per life: before the loss, after the reconnect */
  double t_fault, t_disc, t_resume;
} R;

static uv_timer_t poll_timer, deadline_timer;

static void cb_enter(void)
{
  if (R.closed_cbs)
    R.after_closed++;
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  cb_enter();
  R.closed_cbs++;
  rmx_ctx_stop(R.ctx);
}

static void client_close(void)
{
  if (R.closing)
    return;
  R.closing = 1;
  int rc = rmx_conn_close(R.c, on_closed, NULL);
  if (rc) {
    fprintf(stderr, "fault-peer reconnect: close: %s\n", rmx_strerror(rc));
    rmx_ctx_stop(R.ctx);
  }
}

static void on_deadline(uv_timer_t *t)
{
  R.deadline_hit = 1;
  fprintf(stderr, "fault-peer reconnect: no end in time (--deadline-ms)\n");
  if (R.closing)
    rmx_ctx_stop(R.ctx); /* on_closed never came */
  else
    client_close();
}

static void on_poll(uv_timer_t *t)
{
  struct stat st;
  if (!R.t_fault && stat(R.o->fault_file, &st) == 0)
    R.t_fault = fp_now_ms();
}

static void pump(void);

static void reply_cb(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  call_t *k = arg;
  int life = R.lives > 2 ? 2 : R.lives;
  cb_enter();
  if (!k->live) {
    R.doubles++;
    return;
  }
  k->live = 0;
  R.outstanding--;
  if (R.disc_cbs && !R.resumed)
    R.late++; /* on_disconnect promised everything had completed */
  if (status != 0) {
    R.failed[life]++;
    return;
  }
  fp_msg_hdr_t h;
  if (len != k->len || len < sizeof(h))
    R.bad_data++;
  else {
    memcpy(&h, data, sizeof(h));
    if (h.seed != k->seed || fp_check((const uint8_t *)data + sizeof(h), len - sizeof(h), k->seed, 0))
      R.bad_data++;
  }
  R.ok[life]++;
  if (life == 1 && R.ok[1] == 200 && !R.loaded) {
    R.loaded = 1;
    if (R.o->loaded_file && fp_write_file(R.o->loaded_file, "loaded\n") != 0)
      perror(R.o->loaded_file);
    printf("fault-peer: loaded\n");
  }
  if (life == 2 && R.ok[2] >= R.o->ops) {
    if (R.outstanding == 0)
      client_close();
    return;
  }
  pump();
}

static void pump(void)
{
  uint8_t req[272];
  for (int i = 0; i < WINDOW && R.ready && !R.closing; i++) {
    call_t *k = &R.calls[i];
    if (k->live)
      continue;
    fp_msg_hdr_t h = {.seed = R.next_seed++, .len = 16 + R.next_seed % 256};
    memcpy(req, &h, sizeof(h));
    fp_fill(req + sizeof(h), h.len - sizeof(h), h.seed, 0);
    int rc = rmx_rpc_call(R.c, FP_RPC_ECHO, req, h.len, 0, reply_cb, k, NULL);
    if (rc) {
      fprintf(stderr, "fault-peer reconnect: call: %s\n", rmx_strerror(rc));
      R.issue_errors++;
      return;
    }
    *k = (call_t){.live = 1, .seed = h.seed, .len = h.len};
    R.outstanding++;
  }
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  cb_enter();
  R.connect_cbs++;
  R.connect_status = status;
  if (status) {
    fprintf(stderr, "fault-peer reconnect: connect: %s\n", rmx_strerror(status));
    client_close();
  }
}

/* The server's key, once per life: it also says the server is ready. A new
 * server process packs a new key; the old one is void. */
static void on_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  const uint8_t *p = data;
  cb_enter();
  if (R.ready || len < 2 || p[0] != FP_KEY_MSG || rmx_rkey_unpack(c, p + 1, len - 1, &R.rk)) {
    R.bad_data++;
    return;
  }
  R.ready = 1;
  pump();
}

static void on_disconnect(rmx_conn_t *c, int status, void *arg)
{
  cb_enter();
  R.disc_cbs++;
  R.disc_status = status;
  on_poll(NULL); /* a fault file seen only now counts as at the loss */
  R.t_disc = fp_now_ms();
  R.outstanding_at_disc = R.outstanding;
  R.ready = 0;
  if (R.rk) {
    rmx_rkey_release(R.rk);
    R.rk = NULL;
  }
  printf("fault-peer: on_disconnect: %s\n", rmx_err_name(status));
}

static void on_reconnect(rmx_conn_t *c, unsigned attempt, int status, void *arg)
{
  cb_enter();
  if (attempt != R.attempts + 1)
    R.attempt_gaps++;
  R.attempts = attempt;
  if (status != 0) {
    /* Down: a call must be refused, not queued. */
    int rc = rmx_rpc_call(c, FP_RPC_ECHO, "x", 1, 0, reply_cb, &R.calls[0], NULL);
    if (rc == RMX_ENOTCONN)
      R.refused_ok++;
    else
      R.refused_wrong++;
    return;
  }
  R.resumed++;
  R.lives++;
  R.t_resume = fp_now_ms();
  printf("fault-peer: reconnected after %u attempts\n", attempt);
}

static char failed_checks[512];

static void check(int ok, const char *name)
{
  if (ok)
    return;
  size_t n = strlen(failed_checks);
  snprintf(failed_checks + n, sizeof(failed_checks) - n, "%s%s", n ? "," : "", name);
}

int fp_reconnect_main(const fp_client_opts_t *o)
{
  R.o = o;
  R.lives = 1;
  int rc = rmx_ctx_create(&R.ctx, NULL, NULL);
  if (rc) {
    fprintf(stderr, "fault-peer reconnect: %s\n", rmx_strerror(rc));
    return 1;
  }
  uv_loop_t *loop = rmx_ctx_loop(R.ctx);
  uv_timer_init(loop, &poll_timer);
  uv_timer_init(loop, &deadline_timer);
  if (o->fault_file)
    uv_timer_start(&poll_timer, on_poll, POLL_MS, POLL_MS);
  uv_timer_start(&deadline_timer, on_deadline, (uint64_t)o->deadline_ms, 0);
  rmx_connect_opts_t co = {.size = sizeof(co), .reconnect_min_ms = 250, .reconnect_max_ms = 2000,
                           .on_reconnect = on_reconnect};
  rc = rmx_connect_opts(R.ctx, o->uri, &co, on_connected, NULL, &R.c);
  if (rc) {
    fprintf(stderr, "fault-peer reconnect: %s: %s\n", o->uri, rmx_strerror(rc));
    return 1;
  }
  rmx_conn_set_cbs(R.c, &(rmx_conn_cbs_t){.on_recv = on_recv, .on_disconnect = on_disconnect},
                   NULL);
  rmx_ctx_run(R.ctx);
  uv_close((uv_handle_t *)&poll_timer, NULL);
  uv_close((uv_handle_t *)&deadline_timer, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
  if (R.rk)
    rmx_rkey_release(R.rk);
  R.destroy_rc = rmx_ctx_destroy(R.ctx);

  check(R.connect_cbs == 1 && R.connect_status == 0, "connected-once");
  check(R.loaded, "loaded");
  check(R.disc_cbs == 1 && R.disc_status != 0, "disconnect-once");
  check(R.outstanding_at_disc == 0, "ops-done-before-disconnect");
  check(R.failed[1] > 0, "outstanding-ops-failed");
  check(R.late == 0, "nothing-while-down");
  check(R.refused_wrong == 0, "refused-while-down");
  check(R.resumed == 1 && R.attempt_gaps == 0, "attempts-in-order");
  check(R.ok[2] >= o->ops && R.failed[2] == 0, "resumed-ops-ok");
  check(R.bad_data == 0, "data");
  check(R.issue_errors == 0, "issue");
  check(R.doubles == 0, "each-callback-once");
  check(R.outstanding == 0, "every-op-completed");
  check(R.closed_cbs == 1 && R.after_closed == 0, "closed-once");
  check(R.destroy_rc == 0, "destroy");
  check(!R.deadline_hit, "ended-in-time");
  char fault_ms[32] = "NA", resume_ms[32] = "NA";
  if (R.t_fault && R.t_disc)
    snprintf(fault_ms, sizeof(fault_ms), "%.1f", R.t_disc - R.t_fault);
  if (R.t_disc && R.t_resume)
    snprintf(resume_ms, sizeof(resume_ms), "%.1f", R.t_resume - R.t_disc);
  printf("fault-peer: result workload=reconnect transport=%s status=%s ok_before=%ld "
         "failed_at_loss=%ld attempts=%u refused_while_down=%u ok_after=%ld "
         "fault_to_disc_ms=%s disc_to_reconnect_ms=%s checks=%s%s\n",
         o->uri, rmx_err_name(R.disc_status), R.ok[1], R.failed[1], R.attempts, R.refused_ok,
         R.ok[2], fault_ms, resume_ms, failed_checks[0] ? "fail:" : "pass", failed_checks);
  return failed_checks[0] ? 1 : 0;
}
