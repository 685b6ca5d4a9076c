/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The kills test (rmx-fault-peer kills URI ...): a server that starts every
 * operation toward client processes of its own (fault_victim.c) and kills
 * each at a point drawn from a seeded generator, so that the surviving
 * side is the one with operations outstanding. It runs rounds, one client
 * each, until --transfers operations have been started toward clients that
 * were then killed, and --stops clients were stopped (SIGSTOP) past the
 * keepalive limit:
 *
 *   kill   the client is SIGKILLed once the round's k-th operation has
 *          started: at once, on the next loop turn, 1-3 ms later, or at
 *          the next completion; operations keep being started until the
 *          loss is seen (those toward the dead client must fail)
 *   early  killed before any operation: 0-30 ms after it was started, in
 *          on_accept, or when its key arrives
 *   stop   SIGSTOPped after a few operations succeeded; the keepalive limit
 *          must end the connection with RMX_ETIMEDOUT while it is stopped
 *   clean  every 10th round and the last: operations, then the client
 *          verifies every byte it got (FK_RPC_VERIFY), the server closes,
 *          and the client must exit 0: the server still serves
 *
 * Operations: transfer requests (writes with and without a notification,
 * reads; 1-4 entries), rmx_write and rmx_read (1-3 buffers), sends and
 * echo RPCs, 1 byte to 256 KiB, 1-16 in flight. After each round: every
 * operation completed exactly once, none after on_disconnect or on_closed,
 * none succeeded after the first failure, none started after the fault
 * succeeded (sends excepted: their success is local), none ended with
 * RMX_ECANCELED (we never closed first) or blamed an entry, on_disconnect
 * once with RMX_ECONNRESET (kill) or RMX_ETIMEDOUT (stop), on_closed once;
 * every failure carried the connection's cause; the child died of our
 * SIGKILL (or exited 0: clean); and at the connection's on_closed this
 * process's descriptors (/proc/self/fd) and memfd mappings
 * (/proc/self/maps) are what they were before the first client (for a
 * stopped client, while it is still stopped). No time is judged; a round
 * that has not ended after ROUND_BOUND_MS fails, saying where it stood.
 */
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "fault_kills_srv.h"

extern char **environ;

static const char *const round_name[] = {"kill", "early", "stop", "clean"};
static const char *const mode_name[] = {"at once", "next turn", "timer", "next completion"};

static void give_up(void);
static void maybe_settle(void);

/* ---- the faults ---- */

void fk_do_fault(int sig)
{
  if (R.faulted)
    return;
  R.faulted = 1;
  R.t_fault = fp_now_ms();
  R.kill_pending = 0;
  R.outstanding_at_fault = R.outstanding;
  uv_timer_stop(&K.kill_timer);
  /* Wait until it has taken hold (the child dead or stopped, left for
   * waitpid): what is started from now on goes to a peer that cannot
   * answer, so none of it may succeed. */
  siginfo_t si;
  if (kill(R.pid, sig) != 0 ||
      waitid(P_PID, (id_t)R.pid, &si, (sig == SIGSTOP ? WSTOPPED : WEXITED) | WNOWAIT) != 0)
    perror("fault-kills: kill");
  maybe_settle(); /* nothing to wait for when no connection came */
}

void fk_on_kill_timer(uv_timer_t *t)
{
  fk_do_fault(SIGKILL);
}

/* ---- connections ---- */

static void on_closed(rmx_conn_t *c, void *arg)
{
  kconn_t *kc = arg;
  kc->closed_cbs++;
  K.nopen--;
  if (kc->rk)
    rmx_rkey_release(kc->rk);
  kc->rk = NULL;
  if (K.stopping)
    return; /* the run is over: what is left closes with the context */
  /* The round's connection closed, none other open: nothing of it stays. */
  if (kc->mine && !K.nopen) {
    fk_inventory(&K.now);
    if (!fk_inv_same(&K.now, &K.base)) {
      printf("fault-kills: round %ld: left behind at on_closed:\n", R.no);
      fk_inv_diff(&K.base, &K.now);
      R.left_behind = 1;
      give_up();
      return;
    }
  }
  maybe_settle();
}

void fk_conn_close(kconn_t *kc)
{
  if (kc->closing)
    return;
  kc->closing = 1;
  if (rmx_conn_close(kc->c, on_closed, kc) != 0)
    R.issue_errors++;
}

static void on_disconnect(rmx_conn_t *c, int status, void *arg)
{
  kconn_t *kc = arg;
  R.after_closed += kc->closed_cbs;
  kc->disc_cbs++;
  kc->disc_status = status;
  if (kc->mine) {
    R.outstanding_at_disc = R.outstanding;
    R.disc_status = status;
    if (R.faulted)
      R.fault_to_disc = fp_now_ms() - R.t_fault;
  }
  fk_conn_close(kc);
}

/* The first message is the client's pid and key: a connection of this
 * round's client is the round's; one of an earlier, dead client is closed. */
static void on_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  kconn_t *kc = arg;
  const uint8_t *p = data;
  uint32_t pid;
  R.after_closed += kc->closed_cbs;
  if (kc->rk || kc->mine || len <= FK_KEY_HDR || p[0] != FP_KEY_MSG) {
    R.bad_data++;
    return;
  }
  memcpy(&pid, p + 1, sizeof(pid));
  if ((pid_t)pid != R.pid || R.kc) {
    R.strays++;
    fk_conn_close(kc);
    return;
  }
  int rc = rmx_rkey_unpack(c, p + FK_KEY_HDR, len - FK_KEY_HDR, &kc->rk);
  if (rc) {
    fprintf(stderr, "fault-kills: round %ld: the client's key: %s\n", R.no, rmx_strerror(rc));
    R.bad_data++;
    fk_conn_close(kc);
    return;
  }
  kc->mine = 1;
  R.kc = kc;
  R.adopted++;
  if (R.kind == R_EARLY && R.early_how == E_KEY)
    fk_do_fault(SIGKILL);
  fk_pump();
}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  kconn_t *kc = calloc(1, sizeof(*kc));
  if (!kc) {
    rmx_conn_close(c, NULL, NULL);
    R.issue_errors++;
    return;
  }
  kc->c = c;
  kc->next = K.conns;
  K.conns = kc;
  K.nopen++;
  rmx_conn_set_cbs(c, &(rmx_conn_cbs_t){.on_recv = on_recv, .on_disconnect = on_disconnect}, kc);
  if (R.kind == R_EARLY && R.early_how == E_ACCEPT)
    fk_do_fault(SIGKILL);
}

/* ---- rounds ---- */

static void next_round(void);
static void finish(void);

static const char *failed_checks(void)
{
  static char buf[512];
  size_t n = 0;
  buf[0] = '\0';
#define CHECK(ok, name)                                                                          \
  do {                                                                                           \
    if (!(ok))                                                                                   \
      n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s", n ? "," : "", name);               \
  } while (0)
  int ws = R.wstatus, killed = WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL;
  kconn_t *kc = R.kc;
  CHECK(R.kind == R_CLEAN ? WIFEXITED(ws) && WEXITSTATUS(ws) == 0 : killed, "child-end");
  CHECK(R.adopted == (R.kind == R_EARLY ? R.adopted != 0 : 1), "connected-once");
  CHECK(!R.doubles, "each-op-once");
  CHECK(!R.outstanding, "every-op-completed");
  CHECK(!R.after_closed, "nothing-after-closed");
  CHECK(!R.late && !R.outstanding_at_disc, "ops-done-before-disconnect");
  CHECK(!R.ok_after_fail, "no-success-after-failure");
  CHECK(!R.ok_after_fault, "no-answer-from-the-dead");
  CHECK(!R.canceled, "no-cancel-unasked");
  CHECK(!R.failed || (kc && R.first_err == R.disc_status && !R.other_err), "failed-with-the-cause");
  CHECK(!R.blamed, "no-entry-blamed");
  CHECK(!R.bad_data, "data");
  CHECK(!R.issue_errors, "issue");
  if (kc) {
    CHECK(kc->closed_cbs == 1, "closed-once");
    if (R.kind == R_CLEAN)
      CHECK(!kc->disc_cbs && !R.failed && R.verified, "clean-and-verified");
    else
      CHECK(kc->disc_cbs == 1 && kc->disc_status == (R.kind == R_STOP ? RMX_ETIMEDOUT
                                                                       : RMX_ECONNRESET),
            "disconnect-once-with-the-cause");
  }
  for (kconn_t *s = K.conns; s; s = s->next)
    CHECK(s->disc_cbs <= 1 && s->closed_cbs == 1, "every-connection-ended-once");
  CHECK(!R.left_behind, "nothing-left-at-on_closed");
  CHECK(!R.stuck, "ended-within-the-bound");
  CHECK(R.kind != R_STOP || R.released, "clean-while-stopped");
#undef CHECK
  return buf;
}

static void round_end(void)
{
  const char *bad = failed_checks();
  char when[64] = "";
  if (R.kind == R_KILL)
    snprintf(when, sizeof(when), " kill after op %ld (%s)", R.kill_at, mode_name[R.mode]);
  else if (R.kind == R_EARLY)
    snprintf(when, sizeof(when), " %s", R.early_how == E_DELAY ? "killed on a timer"
                                        : R.early_how == E_ACCEPT ? "killed in on_accept"
                                                                  : "killed at its key");
  else if (R.kind == R_STOP)
    snprintf(when, sizeof(when), " stopped after %ld ok%s", R.stop_after,
             R.big_calls ? " (large calls only)" : "");
  char errs[96] = "";
  if (R.failed)
    snprintf(errs, sizeof(errs), " (%s:%s", fk_kind_name[R.first_err_kind], rmx_err_name(R.first_err));
  if (R.other_err)
    snprintf(errs + strlen(errs), sizeof(errs) - strlen(errs), ", then %s:%s",
             fk_kind_name[R.other_err_kind], rmx_err_name(R.other_err));
  if (R.failed)
    strcat(errs, ")");
  printf("fault-kills: round %ld %s:%s window %d started %ld ok %ld failed %ld%s in-flight-at-fault "
         "%ld after-fault %ld disconnect %s strays %ld%s%s\n",
         R.no, round_name[R.kind], when, R.window, R.started, R.ok, R.failed, errs,
         R.outstanding_at_fault, R.after_fault, R.kc && R.kc->disc_cbs ? rmx_err_name(R.disc_status)
                                                                    : "-",
         R.strays, bad[0] ? " checks=fail:" : "", bad);
  K.rounds[R.kind]++;
  K.started += R.started;
  K.ok += R.ok;
  K.failed += R.failed;
  K.outstanding_at_fault += R.outstanding_at_fault;
  K.after_fault += R.after_fault;
  K.stops_done += R.kind == R_STOP;
  if (R.kind == R_EARLY)
    K.early_hows[R.early_how]++;
  if (R.kind == R_KILL)
    K.modes[R.mode]++;
  if (R.fault_to_disc >= 0) { /* measured, not judged */
    double *mm = K.disc_ms[R.kind == R_STOP];
    mm[0] = mm[0] < 0 || R.fault_to_disc < mm[0] ? R.fault_to_disc : mm[0];
    mm[1] = R.fault_to_disc > mm[1] ? R.fault_to_disc : mm[1];
  }
  if (bad[0] || K.failed_run) {
    K.failed_run = 1;
    finish();
    return;
  }
  next_round();
}

/* The round is over once no connection is open, the client is reaped and
 * the fds and mappings are the baseline's on two ticks running (an accept
 * of a dead client's connection comes in the poll phase between). A
 * stopped client is killed only once its connection left nothing here. */
static void on_tick(uv_timer_t *t)
{
  if (K.nopen) {
    R.settled_ticks = 0;
    return;
  }
  fk_inventory(&K.now);
  if (!fk_inv_same(&K.now, &K.base)) {
    R.settled_ticks = 0;
    return;
  }
  if (R.kind == R_STOP && !R.released) {
    R.released = 1;
    kill(R.pid, SIGKILL);
    kill(R.pid, SIGCONT);
  }
  if (!R.reaped) {
    pid_t p = waitpid(R.pid, &R.wstatus, WNOHANG);
    if (p == R.pid)
      R.reaped = 1;
    else if (p < 0) {
      perror("fault-kills: waitpid");
      R.reaped = 1;
    }
  }
  if (R.reaped && ++R.settled_ticks >= 2) {
    uv_timer_stop(&K.tick_timer);
    uv_timer_stop(&K.bound_timer);
    round_end();
  }
}

static void maybe_settle(void)
{
  int over = R.faulted || (R.kind == R_CLEAN && R.kc && R.kc->closed_cbs);
  if (over && !K.nopen && !K.stopping && !uv_is_active((uv_handle_t *)&K.tick_timer))
    uv_timer_start(&K.tick_timer, on_tick, TICK_MS, TICK_MS);
}

/* A round that cannot end well: the child killed and reaped, judged now. */
static void give_up(void)
{
  if (K.stopping)
    return;
  uv_timer_stop(&K.tick_timer);
  uv_timer_stop(&K.bound_timer);
  uv_timer_stop(&K.kill_timer);
  if (!R.reaped) {
    kill(R.pid, SIGKILL);
    kill(R.pid, SIGCONT);
    R.reaped = waitpid(R.pid, &R.wstatus, 0) == R.pid;
  }
  R.released = 1;
  K.failed_run = 1;
  round_end();
}

static void on_bound(uv_timer_t *t)
{
  printf("fault-kills: round %ld %s has not ended after %d ms: %d connections open, client "
         "%s%s, started %ld, outstanding %ld\n", R.no, round_name[R.kind], ROUND_BOUND_MS,
         K.nopen, R.faulted ? "faulted" : "not faulted", R.reaped ? " and reaped" : "", R.started,
         R.outstanding);
  fk_inventory(&K.now);
  fk_inv_diff(&K.base, &K.now);
  R.stuck = 1;
  give_up();
}

static void next_round(void)
{
  const fk_opts_t *o = K.o;
  long no = R.no + 1;
  int kind;
  if (K.stops_done < o->stops)
    kind = R_STOP;
  else if (K.kill_started < o->transfers)
    kind = no % CLEAN_EVERY == CLEAN_EVERY - 1 ? R_CLEAN : fk_rnd(6) == 0 ? R_EARLY : R_KILL;
  else if (!K.finals_done++)
    kind = R_CLEAN; /* the last: the server still serves */
  else {
    finish();
    return;
  }
  R = (round_t){.no = no, .kind = kind, .window = 1 + (int)fk_rnd(FK_WINDOW),
                .mode = (int)fk_rnd(M_MODES), .early_how = (int)fk_rnd(3),
                .kill_at = 1 + fk_rnd(32), .stop_after = 1 + fk_rnd(8),
                .big_calls = kind == R_STOP && K.stops_done % 2 == 0, .fault_to_disc = -1};
  char *argv[] = {K.exe, "victim", K.uri, NULL};
  int rc = posix_spawn(&R.pid, K.exe, NULL, NULL, argv, environ);
  if (rc) {
    fprintf(stderr, "fault-kills: spawning %s: %s\n", K.exe, strerror(rc));
    K.failed_run = 1;
    finish();
    return;
  }
  uv_timer_start(&K.bound_timer, on_bound, ROUND_BOUND_MS, 0);
  if (kind == R_EARLY && R.early_how == E_DELAY)
    uv_timer_start(&K.kill_timer, fk_on_kill_timer, (uint64_t)fk_rnd(31), 0);
}

static void finish(void)
{
  if (K.stopping++)
    return;
  uv_timer_stop(&K.kill_timer);
  uv_timer_stop(&K.tick_timer);
  uv_timer_stop(&K.bound_timer);
  rmx_listener_close(K.l);
  rmx_ctx_stop(K.ctx);
}

static void summary(int destroy_rc)
{
  printf("fault-kills: %ld rounds (kill %ld, early %ld, stop %ld, clean %ld) in %.1f s\n",
         K.rounds[R_KILL] + K.rounds[R_EARLY] + K.rounds[R_STOP] + K.rounds[R_CLEAN],
         K.rounds[R_KILL], K.rounds[R_EARLY], K.rounds[R_STOP], K.rounds[R_CLEAN],
         (fp_now_ms() - K.t0) / 1e3);
  printf("fault-kills: kills %s %ld, %s %ld, %s %ld, %s %ld; early: on a timer %ld, in on_accept "
         "%ld, at the key %ld\n", mode_name[0], K.modes[0], mode_name[1], K.modes[1],
         mode_name[2], K.modes[2], mode_name[3], K.modes[3], K.early_hows[0], K.early_hows[1],
         K.early_hows[2]);
  printf("fault-kills: operations started %ld (toward clients then killed: %ld), ok %ld, failed "
         "%ld, in flight at the faults %ld, started after them %ld; failures:", K.started,
         K.kill_started, K.ok, K.failed, K.outstanding_at_fault, K.after_fault);
  for (long i = 0; i < K.hist_n; i++)
    printf(" %s:%s %ld", fk_kind_name[K.hist_kind[i]], rmx_err_name(K.hist_code[i]),
           K.hist_count[i]);
  printf("\nfault-kills: fault to on_disconnect (measured, not judged):");
  for (int k = 0; k < 2; k++)
    if (K.disc_ms[k][0] >= 0)
      printf(" %s %.1f - %.1f ms", k ? "stops" : "kills", K.disc_ms[k][0], K.disc_ms[k][1]);
  printf("\n");
  printf("fault-kills: destroy %s; %s\n", destroy_rc ? rmx_err_name(destroy_rc) : "0",
         K.failed_run || destroy_rc ? "FAIL" : "pass");
}

int fp_kills_main(const fk_opts_t *o)
{
  const char *env = getenv("RMX_TEST_FAULT_SEED"), *uri = o->uri;
  char fresh[64];
  K.o = o;
  K.disc_ms[0][0] = K.disc_ms[1][0] = -1;
  K.rng = o->seeded ? o->seed : env && *env ? strtoull(env, NULL, 0)
                  : (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)fp_now_ms();
  printf("fault-kills: seed %llu (again: --seed %llu, or RMX_TEST_FAULT_SEED=%llu)\n",
         (unsigned long long)K.rng, (unsigned long long)K.rng, (unsigned long long)K.rng);
  if (strcmp(uri, "shm") == 0) /* a name of its own */
    snprintf(fresh, sizeof(fresh), "shm://@rmx-fault-kills-%d", (int)getpid()), uri = fresh;
  else if (strcmp(uri, "tcp") == 0)
    uri = "tcp://127.0.0.1:0";
  ssize_t n = readlink("/proc/self/exe", K.exe, sizeof(K.exe) - 1);
  K.src = malloc(FK_AREA);
  K.arena = malloc((size_t)FK_WINDOW * FK_SLOT);
  if (n <= 0 || !K.src || !K.arena) {
    fprintf(stderr, "fault-kills: set-up failed\n");
    return 1;
  }
  K.exe[n] = '\0';
  fp_fill(K.src, FK_AREA, FK_WSEED, 0);
  int rc = rmx_ctx_create(&K.ctx, NULL, NULL);
  if (rc == 0)
    rc = rmx_listen(K.ctx, uri, on_accept, NULL, &K.l);
  if (rc == 0)
    rc = rmx_listener_uri(K.l, K.uri, sizeof(K.uri));
  if (rc == 0)
    rc = rmx_mem_reg(K.ctx, K.src, FK_AREA, RMX_MEM_LOCAL, &K.src_mem);
  if (rc == 0)
    rc = rmx_mem_reg(K.ctx, K.arena, (size_t)FK_WINDOW * FK_SLOT, RMX_MEM_LOCAL, &K.arena_mem);
  if (rc) {
    fprintf(stderr, "fault-kills: %s: %s\n", uri, rmx_strerror(rc));
    return 1;
  }
  uv_loop_t *loop = rmx_ctx_loop(K.ctx);
  uv_timer_init(loop, &K.kill_timer);
  uv_timer_init(loop, &K.tick_timer);
  uv_timer_init(loop, &K.bound_timer);
  fk_inventory(&K.base);
  printf("fault-kills: listening on %s; %ld transfers toward clients killed, %ld clients "
         "stopped\n", K.uri, o->transfers, o->stops);
  fk_inv_print("before the first client", &K.base);
  K.t0 = fp_now_ms();
  R.no = -1;
  next_round();
  rmx_ctx_run(K.ctx);

  uv_close((uv_handle_t *)&K.kill_timer, NULL);
  uv_close((uv_handle_t *)&K.tick_timer, NULL);
  uv_close((uv_handle_t *)&K.bound_timer, NULL);
  for (kconn_t *kc = K.conns; kc; kc = kc->next)
    if (!kc->closing)
      fk_conn_close(kc); /* only after a failed round */
  uv_run(loop, UV_RUN_NOWAIT);
  rmx_mem_dereg(K.src_mem);
  rmx_mem_dereg(K.arena_mem);
  rc = rmx_ctx_destroy(K.ctx);
  fk_inventory(&K.now);
  fk_inv_print("at the end", &K.now);
  summary(rc);
  while (K.conns) {
    kconn_t *kc = K.conns;
    K.conns = kc->next;
    free(kc);
  }
  free(K.src);
  free(K.arena);
  return K.failed_run || rc ? 1 : 0;
}
