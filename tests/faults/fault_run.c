/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The client role's connection, from connect to destroy, and its verdict.
 *
 * The fault's time comes from outside: the injector creates the fault file
 * (polled every FAULT_POLL_MS, which bounds the measurement's error; over
 * 9p from another VM too) or sends SIGUSR1 (exact, same host only). The
 * time from the last successful completion is printed as well: it needs no
 * marker and shows how long the connection went silent before it was
 * declared dead.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

#include "fault_client.h"

#define FAULT_POLL_MS 20
#define CLOSE_BOUND_MS 30000 /* RMX_CLOSE_TIMEOUT_MS is 5000 by default */

static uv_timer_t poll_timer, deadline_timer;
static uv_signal_t usr1;
static char transport[16] = "?";

static void cb_enter(void)
{
  if (C.closed_cbs)
    C.after_closed++;
}

/* A bound on every wait, closing included: a close whose on_closed never
 * comes (an operation never completed) stops the loop and is reported. */
static void on_deadline(uv_timer_t *t)
{
  C.deadline_hit = 1;
  if (C.closing) {
    fprintf(stderr, "fault-peer client: on_closed never came\n");
    rmx_ctx_stop(C.ctx);
    return;
  }
  fprintf(stderr, "fault-peer client: no end in time (%s); closing\n",
          C.t_fault ? "--after-fault-ms" : "--deadline-ms");
  fp_client_close();
  uv_timer_start(&deadline_timer, on_deadline, CLOSE_BOUND_MS, 0);
}

static void mark_fault(const char *how)
{
  if (C.t_fault)
    return;
  /* Seen only after the loss (same loop turn): the measurement's
   * resolution, so it counts as zero rather than negative. */
  C.t_fault = C.t_disc ? C.t_disc : fp_now_ms();
  printf("fault-peer: fault noticed (%s)\n", how);
  /* From now on the loss must be seen within --after-fault-ms. */
  if (C.o->after_fault_ms && !C.t_disc && !C.closing)
    uv_timer_start(&deadline_timer, on_deadline, (uint64_t)C.o->after_fault_ms, 0);
}

static int fault_file_exists(void)
{
  struct stat st;
  return C.o->fault_file && stat(C.o->fault_file, &st) == 0;
}

static void on_poll(uv_timer_t *t)
{
  if (fault_file_exists())
    mark_fault("file");
}

static void on_usr1(uv_signal_t *h, int signum)
{
  mark_fault("signal");
}

static void stop_timers(void)
{
  uv_timer_stop(&poll_timer);
  uv_timer_stop(&deadline_timer);
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  cb_enter();
  C.closed_cbs++;
  rmx_ctx_stop(C.ctx);
}

void fp_client_close(void)
{
  if (C.closing)
    return;
  C.closing = 1;
  uv_timer_stop(&poll_timer);
  uv_timer_start(&deadline_timer, on_deadline, CLOSE_BOUND_MS, 0);
  int rc = rmx_conn_close(C.c, on_closed, NULL);
  if (rc)
    fprintf(stderr, "fault-peer client: close: %s\n", rmx_strerror(rc));
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  cb_enter();
  C.connect_cbs++;
  C.connect_status = status;
  if (status) {
    fprintf(stderr, "fault-peer client: connect: %s\n", rmx_strerror(status));
    fp_client_close();
    return;
  }
  snprintf(transport, sizeof(transport), "%s", rmx_conn_transport(c));
}

/* The only message a client gets: the server's key, which also says the
 * server has set the connection up; the workload starts then. */
static void on_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  cb_enter();
  C.recv_cbs++;
  const uint8_t *p = data;
  if (C.rk || len < 2 || p[0] != FP_KEY_MSG) {
    C.bad_data++;
    return;
  }
  int rc = rmx_rkey_unpack(c, p + 1, len - 1, &C.rk);
  if (rc) {
    fprintf(stderr, "fault-peer client: the server's key: %s\n", rmx_strerror(rc));
    C.bad_data++;
    fp_client_close();
    return;
  }
  fp_workload_start();
}

static void on_disconnect(rmx_conn_t *c, int status, void *arg)
{
  cb_enter();
  C.disc_cbs++;
  C.disc_status = status;
  C.t_disc = fp_now_ms();
  C.outstanding_at_disc = C.outstanding;
  if (!C.t_fault && fault_file_exists()) {
    mark_fault("file, at on_disconnect");
    C.fault_after_disc = 1;
  }
  printf("fault-peer: on_disconnect: %s\n", rmx_err_name(status));
  fp_client_close();
}

/* ---- the verdict ---- */

static char failed_checks[512];

static void check(int ok, const char *name)
{
  if (ok)
    return;
  size_t n = strlen(failed_checks);
  snprintf(failed_checks + n, sizeof(failed_checks) - n, "%s%s", n ? "," : "", name);
}

static void verdict(void)
{
  int fault_mode = C.o->ops == 0;
  check(C.connect_cbs == 1 && C.connect_status == 0, "connected-once");
  check(C.closed_cbs == 1, "closed-once");
  check(C.after_closed == 0, "nothing-after-closed");
  check(C.destroy_rc == 0, "destroy");
  check(C.doubles == 0, "each-callback-once");
  check(C.outstanding == 0, "every-op-completed");
  check(C.bad_data == 0, "data");
  check(C.issue_errors == 0 && (C.issue_down == 0 || (fault_mode && C.disc_cbs == 1)), "issue");
  check(!C.deadline_hit, "ended-in-time");
  if (fault_mode) {
    check(C.loaded, "loaded");
    check(C.disc_cbs == 1, "disconnect-once");
    check(C.disc_status != 0, "disconnect-status");
    check(C.outstanding_at_disc == 0, "ops-done-before-disconnect");
    check(C.late == 0, "no-op-after-disconnect");
    check(C.ok_after_fail == 0, "no-success-after-failure");
    check(C.canceled_unasked == 0, "no-cancel-unasked");
    /* A busy workload always has operations in flight; idle has none. */
    check(C.wl == WL_IDLE ? C.failed == 0 : C.failed > 0, "outstanding-ops-failed");
  } else {
    check(C.disc_cbs == 0, "no-disconnect");
    check(C.failed == 0 && C.ok == C.issued, "all-ops-ok");
    check(C.verify_ok && C.verify.bad_msgs == 0 && C.verify.bad_slots == 0, "server-verified");
    check(C.wl != WL_MSGS || (long)C.verify.msgs == C.issued - 1, "server-got-all");
  }
}

static void report(void)
{
  char fault_ms[32] = "NA", silent_ms[32] = "NA";
  if (C.t_fault && C.t_disc)
    snprintf(fault_ms, sizeof(fault_ms), "%.1f", C.t_disc - C.t_fault);
  if (C.t_last_ok && C.t_disc)
    snprintf(silent_ms, sizeof(silent_ms), "%.1f", C.t_disc - C.t_last_ok);
  printf("fault-peer: result workload=%s transport=%s outcome=%s status=%s issued=%ld ok=%ld "
         "failed=%ld first_error=%s fault_to_disc_ms=%s last_ok_to_disc_ms=%s "
         "big_at_loss=%d callbacks=send:%ld,reply:%ld,write:%ld,disconnect:%d,closed:%d "
         "checks=%s%s\n",
         C.o->workload, transport, C.disc_cbs ? "disconnect" : C.deadline_hit ? "deadline" : "clean",
         C.disc_cbs ? rmx_err_name(C.disc_status) : "0", C.issued, C.ok, C.failed,
         C.first_err ? rmx_err_name(C.first_err) : "0", fault_ms, silent_ms, C.big_at_loss,
         C.send_cbs,
         C.reply_cbs, C.write_cbs, C.disc_cbs, C.closed_cbs,
         failed_checks[0] ? "fail:" : "pass", failed_checks);
}

static int parse_workload(const char *w)
{
  return !strcmp(w, "msgs") ? WL_MSGS : !strcmp(w, "rpc") ? WL_RPC
       : !strcmp(w, "write") ? WL_WRITE : WL_IDLE;
}

int fp_client_main(const fp_client_opts_t *o)
{
  C.o = o;
  C.wl = parse_workload(o->workload);
  int rc = rmx_ctx_create(&C.ctx, NULL, NULL);
  if (rc || fp_workload_init() != 0) {
    fprintf(stderr, "fault-peer client: set-up: %s\n", rc ? rmx_strerror(rc) : "out of memory");
    return 1;
  }
  uv_loop_t *loop = rmx_ctx_loop(C.ctx);
  uv_timer_init(loop, &poll_timer);
  uv_timer_init(loop, &deadline_timer);
  uv_signal_init(loop, &usr1);
  uv_signal_start(&usr1, on_usr1, SIGUSR1);
  if (o->fault_file)
    uv_timer_start(&poll_timer, on_poll, FAULT_POLL_MS, FAULT_POLL_MS);
  uv_timer_start(&deadline_timer, on_deadline, (uint64_t)o->deadline_ms, 0);
  rc = rmx_connect(C.ctx, o->uri, on_connected, NULL, &C.c);
  if (rc) {
    fprintf(stderr, "fault-peer client: %s: %s\n", o->uri, rmx_strerror(rc));
    return 1;
  }
  rmx_conn_set_cbs(C.c, &(rmx_conn_cbs_t){.on_recv = on_recv, .on_disconnect = on_disconnect},
                   NULL);
  rmx_ctx_run(C.ctx);

  /* Our own handles go before destroy, which runs the loop until the
   * context's are closed; a callback it still runs counts as after_closed. */
  stop_timers();
  uv_close((uv_handle_t *)&poll_timer, NULL);
  uv_close((uv_handle_t *)&deadline_timer, NULL);
  uv_close((uv_handle_t *)&usr1, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
  if (C.rk)
    rmx_rkey_release(C.rk);
  /* With the connection still open destroy refuses (RMX_EBUSY): reported. */
  C.destroy_rc = rmx_ctx_destroy(C.ctx);
  fp_workload_fini();
  verdict();
  report();
  return failed_checks[0] ? 1 : 0;
}
