/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Losses the verbs transport must detect and report, in one process with
 * two contexts, each on its own loop, both loops run from this thread (so
 * the test decides which side runs: a side whose loop is not run is a peer
 * that no longer reacts).
 *
 *   rmx-verbs-faults rdma [cmocka filter]
 *
 * - lost_peer_times_out: the accepting end's QP is moved to the error
 *   state behind rmx's back (it answers nothing, and no disconnect is
 *   sent): the connecting end, with sends outstanding, fails each send once
 *   and then gets on_disconnect(RMX_ETIMEDOUT) once; close and destroy end.
 * - close_when_the_device_never_flushes: a close towards a peer that does
 *   not take part (its loop is not run), while the device pretends to move
 *   the QP to the error state, so no receive is ever flushed: on_closed
 *   still comes, after every send's callback, and the context is
 *   destroyed.
 * - refused_read_at_target: a read with a released key. The reader gets
 *   RMX_EACCES; the target, whose device refused it, on_disconnect with
 *   RMX_EPROTO, once, whichever of its signals comes first.
 * - peer_short_of_memory: the accepting side cannot register its receive
 *   buffers (a registration fails as the locked-memory limit makes it):
 *   the connecting side hears RMX_ECONNREFUSED, not RMX_EMEMLOCK, which
 *   would tell it to raise its own limit.
 * - registration_fails_one_call: the pool slab of an RPC request cannot be
 *   registered: rmx_rpc_call says so and the connection stays (the next
 *   call is answered, no on_disconnect).
 * - link_down_reaches_every_context: the port's netdev goes down (and
 *   stays down): both contexts, each holding one end of an idle
 *   connection, get on_disconnect(RMX_ENETUNREACH) once; both ends then
 *   close and both contexts are destroyed with the link still down. Last:
 *   it takes the port away (root inside the SoftRoCE VM only).
 *
 * Measured times from the fault to on_disconnect are printed; nothing is
 * asserted on them (the alarm only guards against hangs).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include "harness.h"
#include "verbs_faults.h"

#define NSEND 4
static double wait_s = 120; /* RMX_TEST_WAIT_S: the hang guard of each wait */

typedef struct end {
  rmx_conn_t *c;
  int connected, connect_status;
  int disconnects, disconnect_status, out_at_disconnect;
  int closed, late;
  int sends_out, sent_ok, sent_err, sent_status;
  double t_disconnect;
} end_t;

typedef struct side {
  uv_loop_t loop;
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
} side_t;

static side_t S[2]; /* 0 connects, 1 listens */
static end_t E[2];  /* E[i] is the end in S[i] */
static char g_netdev[64] = "rxevm0";

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- callbacks ---- */

static void on_disconnect(rmx_conn_t *c, int status, void *arg)
{
  end_t *e = arg;
  e->disconnects++;
  e->disconnect_status = status;
  e->out_at_disconnect = e->sends_out;
  e->t_disconnect = now_s();
}

static void on_recv(rmx_conn_t *c, const void *d, size_t len, void *arg) {}

static void set_cbs(end_t *e)
{
  rmx_conn_cbs_t cbs = {.on_recv = on_recv, .on_disconnect = on_disconnect};
  rmx_conn_set_cbs(e->c, &cbs, e);
}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  E[1].c = c;
  E[1].connected = 1;
  set_cbs(&E[1]);
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  E[0].connected = 1;
  E[0].connect_status = status;
  if (status == 0)
    set_cbs(&E[0]);
}

static void on_closed(rmx_conn_t *c, void *arg) { ((end_t *)arg)->closed++; }

static void on_sent(rmx_conn_t *c, int status, void *arg)
{
  end_t *e = arg;
  e->sends_out--;
  if (e->closed)
    e->late++;
  if (status == 0)
    e->sent_ok++;
  else {
    e->sent_err++;
    e->sent_status = status;
  }
}

/* ---- two loops, one thread ---- */

/* Run the loops in mask (bit i: S[i]) until *flag >= want; 0, or -1 when
 * wait_s passes (a hang guard, not a measurement). */
static int spin(unsigned mask, const int *flag, int want)
{
  double end = now_s() + wait_s;
  while (*flag < want) {
    for (int i = 0; i < 2; i++)
      if (mask & (1u << i)) {
        shim_tag = i + 1;
        uv_run(&S[i].loop, UV_RUN_NOWAIT);
      }
    if (now_s() > end)
      return -1;
    usleep(200);
  }
  return 0;
}

/* A little more of both loops: anything late would show now. */
static void settle(unsigned mask)
{
  double end = now_s() + 0.5;
  while (now_s() < end) {
    for (int i = 0; i < 2; i++)
      if (mask & (1u << i))
        uv_run(&S[i].loop, UV_RUN_NOWAIT);
    usleep(1000);
  }
}

static void side_up(int i, const rmx_config_t *cfg)
{
  assert_int_equal(uv_loop_init(&S[i].loop), 0);
  assert_int_equal(rmx_ctx_create(&S[i].ctx, &S[i].loop, cfg), 0);
}

/* Destroy the context; its loop must then run dry: destroy completes. */
static void side_down(int i)
{
  if (S[i].l)
    rmx_listener_close(S[i].l);
  S[i].l = NULL;
  assert_int_equal(rmx_ctx_destroy(S[i].ctx), 0);
  double end = now_s() + wait_s;
  shim_tag = i + 1;
  while (uv_run(&S[i].loop, UV_RUN_NOWAIT) != 0) {
    assert_true(now_s() < end);
    usleep(1000);
  }
  assert_int_equal(uv_loop_close(&S[i].loop), 0);
}

/* S[0] connects to a listener of S[1]; both ends up. */
static void pair_up(const rmx_config_t *cfg)
{
  char uri[160];
  memset(E, 0, sizeof(E));
  shim_forget();
  side_up(0, cfg);
  side_up(1, cfg);
  uri_for(uri, sizeof(uri), 0);
  assert_int_equal(rmx_listen(S[1].ctx, uri, on_accept, NULL, &S[1].l), 0);
  assert_int_equal(rmx_listener_uri(S[1].l, uri, sizeof(uri)), 0);
  assert_int_equal(rmx_connect(S[0].ctx, uri, on_connected, NULL, &E[0].c), 0);
  assert_int_equal(spin(3, &E[0].connected, 1), 0);
  assert_int_equal(E[0].connect_status, 0);
  assert_int_equal(spin(3, &E[1].connected, 1), 0);
}

static void close_end(int i)
{
  assert_int_equal(rmx_conn_close(E[i].c, on_closed, &E[i]), 0);
  assert_int_equal(spin(1u << i, &E[i].closed, 1), 0);
}

static void config(rmx_config_t *cfg)
{
  assert_int_equal(rmx_config_init(cfg), 0);
}

static void need_rdma(void)
{
  if (strcmp(scheme, "rdma") != 0)
    skip();
}

/* ---- tests ---- */

static void lost_peer_times_out(void **state)
{
  rmx_config_t cfg;
  static char msg[1000];
  need_rdma();
  config(&cfg);
  pair_up(&cfg);
  assert_int_equal(shim_qps(2), 1);
  assert_int_equal(shim_silence(2), 1); /* S[1] is not run until the end */
  double t0 = now_s();
  for (int i = 0; i < NSEND; i++) {
    assert_int_equal(rmx_send(E[0].c, msg, sizeof(msg), on_sent, &E[0]), 0);
    E[0].sends_out++;
  }
  assert_int_equal(spin(1, &E[0].disconnects, 1), 0);
  print_message("lost peer: on_disconnect(%s) %.2f s after the peer went silent "
                "(rc_timeout_ms %u, rc_retry %u)\n", rmx_err_name(E[0].disconnect_status),
                E[0].t_disconnect - t0, cfg.rc_timeout_ms, cfg.rc_retry);
  assert_int_equal(E[0].disconnect_status, RMX_ETIMEDOUT);
  assert_int_equal(E[0].out_at_disconnect, 0); /* every send had failed first */
  assert_int_equal(E[0].sent_err, NSEND);
  close_end(0);
  /* The silent side, woken at last, finds its connection dead too. */
  assert_int_equal(spin(2, &E[1].disconnects, 1), 0);
  print_message("lost peer: the silenced end reports %s\n",
                rmx_err_name(E[1].disconnect_status));
  close_end(1);
  settle(3);
  assert_int_equal(E[0].disconnects, 1);
  assert_int_equal(E[1].disconnects, 1);
  assert_int_equal(E[0].sent_err + E[0].sent_ok, NSEND);
  assert_int_equal(E[0].late + E[1].late, 0);
  assert_int_equal(E[0].closed + E[1].closed, 2);
  side_down(0);
  side_down(1);
}

static void close_when_the_device_never_flushes(void **state)
{
  rmx_config_t cfg;
  static char msg[1000];
  need_rdma();
  config(&cfg);
  cfg.close_timeout_ms = 2000;
  pair_up(&cfg);
  for (int i = 0; i < NSEND; i++) {
    assert_int_equal(rmx_send(E[0].c, msg, sizeof(msg), on_sent, &E[0]), 0);
    E[0].sends_out++;
  }
  shim_fake_err = 1;
  double t0 = now_s();
  assert_int_equal(rmx_conn_close(E[0].c, on_closed, &E[0]), 0);
  int got = spin(1, &E[0].closed, 1);
  shim_fake_err = 0;
  print_message("never flushed: on_closed %.2f s after the close (close_timeout_ms %u)\n",
                now_s() - t0, cfg.close_timeout_ms);
  assert_int_equal(got, 0);
  assert_int_equal(E[0].sends_out, 0);
  assert_int_equal(E[0].sent_err + E[0].sent_ok, NSEND);
  assert_int_equal(E[0].disconnects, 0); /* closed locally: no on_disconnect */
  assert_int_equal(spin(2, &E[1].disconnects, 1), 0);
  close_end(1);
  settle(3);
  assert_int_equal(E[0].late + E[1].late, 0);
  side_down(0);
  side_down(1);
}

static void on_read(rmx_conn_t *c, int status, void *arg) { *(int *)arg = status ? status : 1; }

static void refused_read_at_target(void **state)
{
  rmx_config_t cfg;
  static char src[4096], dst[4096];
  uint8_t blob[128];
  size_t blen = sizeof(blob);
  rmx_mem_t *m;
  rmx_rkey_t *rk;
  int st = 0;
  need_rdma();
  config(&cfg);
  pair_up(&cfg);
  /* S[1] offers memory, packs its key, and releases it: the key is stale. */
  assert_int_equal(rmx_mem_reg(S[1].ctx, src, sizeof(src), RMX_MEM_REMOTE_READ, &m), 0);
  assert_int_equal(rmx_mem_pack(m, blob, &blen), 0);
  assert_int_equal(rmx_rkey_unpack(E[0].c, blob, blen, &rk), 0);
  rmx_mem_dereg(m);
  rmx_iov_t iov = {.addr = dst, .len = sizeof(dst)};
  double t0 = now_s();
  assert_int_equal(rmx_read(E[0].c, &iov, 1, rk, 0, on_read, &st), 0);
  assert_int_equal(spin(3, &E[1].disconnects, 1), 0);
  assert_int_equal(spin(3, &E[0].disconnects, 1), 0);
  print_message("refused read: target on_disconnect(%s) after %.3f s, reader %s, read %s\n",
                rmx_err_name(E[1].disconnect_status), E[1].t_disconnect - t0,
                rmx_err_name(E[0].disconnect_status), rmx_err_name(st));
  assert_int_equal(st, RMX_EACCES);
  assert_int_equal(E[0].disconnect_status, RMX_EACCES);
  assert_int_equal(E[1].disconnect_status, RMX_EPROTO);
  rmx_rkey_release(rk);
  close_end(0);
  close_end(1);
  settle(3);
  assert_int_equal(E[0].disconnects + E[1].disconnects, 2);
  side_down(0);
  side_down(1);
}

static void peer_short_of_memory(void **state)
{
  rmx_config_t cfg;
  char uri[160];
  struct rlimit old, lim;
  need_rdma();
  config(&cfg);
  memset(E, 0, sizeof(E));
  shim_forget();
  side_up(0, &cfg);
  side_up(1, &cfg);
  uri_for(uri, sizeof(uri), 0);
  assert_int_equal(rmx_listen(S[1].ctx, uri, on_accept, NULL, &S[1].l), 0);
  assert_int_equal(rmx_listener_uri(S[1].l, uri, sizeof(uri)), 0);
  assert_int_equal(rmx_connect(S[0].ctx, uri, on_connected, NULL, &E[0].c), 0);
  /* The client's QP first, then the server's registration fails. */
  double end = now_s() + wait_s;
  shim_tag = 1;
  while (shim_qps(1) == 0) {
    assert_true(now_s() < end);
    uv_run(&S[0].loop, UV_RUN_NOWAIT);
    usleep(200);
  }
  /* A finite limit makes a failed registration read as the limit's. */
  assert_int_equal(getrlimit(RLIMIT_MEMLOCK, &old), 0);
  lim = old;
  if (lim.rlim_cur == RLIM_INFINITY)
    lim.rlim_cur = 64 << 20;
  assert_int_equal(setrlimit(RLIMIT_MEMLOCK, &lim), 0);
  shim_fail_reg = 1;
  assert_int_equal(spin(3, &E[0].connected, 1), 0);
  setrlimit(RLIMIT_MEMLOCK, &old);
  print_message("peer short of memory: on_connected(%s), registrations left to fail %d\n",
                rmx_err_name(E[0].connect_status), shim_fail_reg);
  assert_int_equal(shim_fail_reg, 0);
  assert_int_equal(E[0].connect_status, RMX_ECONNREFUSED);
  assert_int_equal(E[1].connected, 0);
  close_end(0);
  settle(3);
  side_down(0);
  side_down(1);
}

static void echo_handler(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  rmx_rpc_reply(req, data, len);
}

static void on_reply(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  *(int *)arg = status ? status : 1;
}

static void registration_fails_one_call(void **state)
{
  rmx_config_t cfg;
  static char req[3000]; /* a size class nothing used yet: a new slab */
  int got = 0;
  need_rdma();
  config(&cfg);
  pair_up(&cfg);
  assert_int_equal(rmx_rpc_register(S[1].ctx, 7, echo_handler, NULL), 0);
  shim_fail_reg = 1;
  int rc = rmx_rpc_call(E[0].c, 7, req, sizeof(req), 0, on_reply, &got, NULL);
  print_message("registration fails: rmx_rpc_call returned %s\n", rmx_err_name(rc));
  assert_int_equal(shim_fail_reg, 0);
  assert_true(rc == RMX_ENOMEM || rc == RMX_EMEMLOCK);
  assert_int_equal(rmx_rpc_call(E[0].c, 7, req, sizeof(req), 0, on_reply, &got, NULL), 0);
  assert_int_equal(spin(3, &got, 1), 0);
  assert_int_equal(got, 1);
  settle(3);
  assert_int_equal(E[0].disconnects + E[1].disconnects, 0);
  assert_int_equal(rmx_conn_close(E[0].c, on_closed, &E[0]), 0);
  assert_int_equal(spin(3, &E[0].closed, 1), 0);
  assert_int_equal(spin(2, &E[1].disconnects, 1), 0);
  close_end(1);
  side_down(0);
  side_down(1);
}

/* ---- the port ---- */

static int port_active(void)
{
  char path[160], buf[64] = "";
  const char *dev = getenv("RXE_VM_DEV") ? getenv("RXE_VM_DEV") : "rxe0";
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/state", dev);
  FILE *f = fopen(path, "r");
  if (!f)
    return 0;
  if (!fgets(buf, sizeof(buf), f))
    buf[0] = '\0';
  fclose(f);
  return strstr(buf, "ACTIVE") != NULL;
}

static void find_netdev(void)
{
  char path[160];
  const char *dev = getenv("RXE_VM_DEV") ? getenv("RXE_VM_DEV") : "rxe0";
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/0", dev);
  FILE *f = fopen(path, "r");
  if (f) {
    if (fgets(g_netdev, sizeof(g_netdev), f))
      g_netdev[strcspn(g_netdev, "\n")] = '\0';
    fclose(f);
  }
}

static int link_set(const char *state)
{
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "ip link set dev %s %s", g_netdev, state);
  return system(cmd);
}

static void link_down_reaches_every_context(void **state)
{
  rmx_config_t cfg;
  need_rdma();
  if (!getenv("RXE_VM")) {
    print_message("skipped: takes an RDMA port down; only inside the SoftRoCE VM\n");
    skip();
  }
  find_netdev();
  assert_true(port_active());
  config(&cfg);
  pair_up(&cfg); /* two contexts, each with one end of an idle connection */
  double t0 = now_s();
  int down = link_set("down");
  int got0 = spin(3, &E[0].disconnects, 1), got1 = spin(3, &E[1].disconnects, 1);
  print_message("link down: on_disconnect(%s) after %.3f s and (%s) after %.3f s\n",
                rmx_err_name(E[0].disconnect_status), E[0].t_disconnect - t0,
                rmx_err_name(E[1].disconnect_status), E[1].t_disconnect - t0);
  if (down || got0 || got1)
    link_set("up");
  assert_int_equal(down, 0);
  assert_int_equal(got0 | got1, 0);
  assert_int_equal(E[0].disconnect_status, RMX_ENETUNREACH);
  assert_int_equal(E[1].disconnect_status, RMX_ENETUNREACH);
  /* Closes and destroys with the link still down. */
  double t1 = now_s();
  close_end(0);
  close_end(1);
  settle(3);
  side_down(0);
  side_down(1);
  print_message("link down: both closed and destroyed in %.3f s\n", now_s() - t1);
  assert_int_equal(E[0].disconnects + E[1].disconnects, 2);
  assert_int_equal(E[0].closed + E[1].closed, 2);
  assert_int_equal(link_set("up"), 0);
  for (int i = 0; i < 200 && !port_active(); i++)
    usleep(50000);
  assert_true(port_active());
}

static int arm_alarm(void **state)
{
  alarm(300); /* a hang kills the run instead of stalling CI */
  return 0;
}

int main(int argc, char **argv)
{
  if (harness_args(argc, argv) != 0)
    return 2;
  if (getenv("RMX_TEST_WAIT_S"))
    wait_s = atof(getenv("RMX_TEST_WAIT_S"));
  if (argc > 2)
    cmocka_set_test_filter(argv[2]);
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup(lost_peer_times_out, arm_alarm),
    cmocka_unit_test_setup(close_when_the_device_never_flushes, arm_alarm),
    cmocka_unit_test_setup(refused_read_at_target, arm_alarm),
    cmocka_unit_test_setup(peer_short_of_memory, arm_alarm),
    cmocka_unit_test_setup(registration_fails_one_call, arm_alarm),
    cmocka_unit_test_setup(link_down_reaches_every_context, arm_alarm), /* last: the port */
  };
  char name[64];
  snprintf(name, sizeof(name), "verbs-faults/%s", scheme);
  return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
