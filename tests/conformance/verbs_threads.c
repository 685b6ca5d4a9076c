/*
 * Two contexts on two threads in one process, over rdma://, and a real
 * async event: the RDMA port going down (its netdev set down inside the
 * SoftRoCE VM), which the device reports once per process.
 *
 *   rmx-verbs-threads rdma [cmocka filter]
 *
 * Each context runs its own loop on its own thread, with a listener and
 * client connections to it carrying traffic, and an RPC call held open by
 * its handler when the fault comes. Every connection end must see
 * on_disconnect(RMX_ENETUNREACH) exactly once, on its own context's thread,
 * after its outstanding callbacks; nothing runs after on_closed. One
 * context is destroyed before the fault: the other two must keep working
 * and still hear of it. Before that, contexts come and go one at a time, so
 * the device's reader has stopped and started again.
 *
 * The port goes down and straight up again. Held down, the closes that the
 * fault causes send their DREQs into a dead port, and SoftRoCE then leaves
 * the CM passing no more connection requests in that VM, or a thread in
 * rdma_destroy_id unkillable in the kernel (both seen). The event is the
 * same either way.
 *
 * Needs root inside the VM ($RXE_VM): it takes the port down. Elsewhere the
 * fault test is skipped: it would take a real port down.
 */
#include <pthread.h>
#include <rmx/rmx.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include "harness.h"

#define NCL 2         /* client connections per context */
#define NMSG 24       /* echoed messages per client and round */
#define BIG 20000     /* above the eager size: rendezvous */
#define RPC_HOLD 7    /* a handler that answers only after the fault */
#define FAULT_MS 20000

typedef struct world world_t;

/* One end of a connection: a client, or what the listener accepted. */
typedef struct peer {
  world_t *w;
  rmx_conn_t *c;
  int client;
  int connected, connect_status;
  int disconnects, disconnect_status;
  int closed, after_closed;
  int sends_out, send_errors;
  int echoes, want_echoes, bad_echoes;
  int calls_out, replies, reply_status;
  rmx_rpc_req_t *held;
} peer_t;

typedef struct gate {
  pthread_mutex_t m;
  pthread_cond_t cv;
  int n;
} gate_t;

struct world {
  const char *name;
  pthread_t thread; /* the context's own thread */
  pthread_t th;
  void (*script)(world_t *w);
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  char uri[160];
  peer_t cl[NCL], sv[NCL];
  int nsv;
  int wrong_thread;
  int errors;
  char why[512];
  gate_t ready, go; /* worker -> main, main -> worker */
};

/* ---- bookkeeping (worker threads record; the main thread asserts) ---- */

static void bad(world_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bad(world_t *w, const char *fmt, ...)
{
  va_list ap;
  if (w->errors++ == 0) {
    va_start(ap, fmt);
    vsnprintf(w->why, sizeof(w->why), fmt, ap);
    va_end(ap);
  }
}

/* Every callback: on the context's thread, and never after on_closed. */
static void on_thread(peer_t *p, const char *what)
{
  world_t *w = p->w;
  if (!pthread_equal(pthread_self(), w->thread)) {
    __atomic_fetch_add(&w->wrong_thread, 1, __ATOMIC_RELAXED);
    return;
  }
  if (p->closed) {
    p->after_closed++;
    bad(w, "%s: %s after on_closed", w->name, what);
  }
}

static void gate_init(gate_t *g)
{
  pthread_mutex_init(&g->m, NULL);
  pthread_cond_init(&g->cv, NULL);
  g->n = 0;
}

static void gate_open(gate_t *g)
{
  pthread_mutex_lock(&g->m);
  g->n++;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->m);
}

/* Wait until the gate was opened want times; 0, or -1 after ms. */
static int gate_wait(gate_t *g, int want, unsigned ms)
{
  struct timespec ts;
  int rc = 0;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  pthread_mutex_lock(&g->m);
  while (g->n < want && rc == 0)
    rc = pthread_cond_timedwait(&g->cv, &g->m, &ts);
  int ok = g->n >= want;
  pthread_mutex_unlock(&g->m);
  return ok ? 0 : -1;
}

/* ---- the port ---- */

static char g_netdev[64] = "rxevm0";

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

/* Down and at once up again, in one ip call: the device reports PORT_ERR
 * (then PORT_ACTIVE), and the closes that follow find the port up (see the
 * top for what closing with the port down does to SoftRoCE). */
static int link_flap(void)
{
  char cmd[192];
  snprintf(cmd, sizeof(cmd), "printf 'link set dev %s down\\nlink set dev %s up\\n' | ip -batch -",
           g_netdev, g_netdev);
  return system(cmd);
}

/* Up again, and the port active, before the next test connects. */
static void port_restore(void)
{
  assert_int_equal(link_set("up"), 0);
  for (int i = 0; i < 200 && !port_active(); i++)
    usleep(50000);
  assert_true(port_active());
}

/* ---- callbacks ---- */

typedef struct sendrec {
  peer_t *p;
  uint8_t data[];
} sendrec_t;

static size_t msg_len(int i) { return i % 6 == 5 ? BIG : 100 + (size_t)i * 7; }

static void sent(rmx_conn_t *c, int status, void *arg)
{
  sendrec_t *r = arg;
  peer_t *p = r->p;
  on_thread(p, "on_sent");
  p->sends_out--;
  if (status && p->client)
    p->send_errors++;
  free(r);
}

static int send_copy(peer_t *p, const void *data, size_t len)
{
  sendrec_t *r = malloc(sizeof(*r) + (len ? len : 1));
  if (!r)
    return RMX_ENOMEM;
  r->p = p;
  memcpy(r->data, data, len);
  int rc = rmx_send(p->c, r->data, len, sent, r);
  if (rc)
    free(r);
  else
    p->sends_out++;
  return rc;
}

static void recv_msg(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  peer_t *p = arg;
  on_thread(p, "on_recv");
  if (!p->client) { /* echo */
    if (send_copy(p, data, len))
      bad(p->w, "%s: echo failed", p->w->name);
    return;
  }
  int i = p->echoes++ % NMSG;
  uint8_t want[BIG];
  pattern(want, msg_len(i), (uint32_t)i);
  if (len != msg_len(i) || memcmp(data, want, len) != 0)
    p->bad_echoes++;
}

static void disconnected(rmx_conn_t *c, int status, void *arg)
{
  peer_t *p = arg;
  on_thread(p, "on_disconnect");
  p->disconnects++;
  p->disconnect_status = status;
  if (p->calls_out || p->sends_out)
    bad(p->w, "%s: on_disconnect with %d calls and %d sends still outstanding", p->w->name,
        p->calls_out, p->sends_out);
}

static void closed(rmx_conn_t *c, void *arg)
{
  peer_t *p = arg;
  on_thread(p, "on_closed");
  p->closed++;
}

static void connected(rmx_conn_t *c, int status, void *arg)
{
  peer_t *p = arg;
  on_thread(p, "on_connected");
  p->connected++;
  p->connect_status = status;
}

static void accepted(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  world_t *w = arg;
  static const rmx_conn_cbs_t cbs = {.on_recv = recv_msg, .on_disconnect = disconnected};
  if (w->nsv >= NCL) {
    bad(w, "%s: more connections accepted than made", w->name);
    return;
  }
  peer_t *p = &w->sv[w->nsv++];
  p->c = c;
  on_thread(p, "on_accept");
  rmx_conn_set_cbs(c, &cbs, p);
}

static peer_t *server_peer(world_t *w, rmx_conn_t *c)
{
  for (int i = 0; i < w->nsv; i++)
    if (w->sv[i].c == c)
      return &w->sv[i];
  return NULL;
}

static void hold_handler(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  world_t *w = arg;
  peer_t *p = server_peer(w, rmx_rpc_req_conn(req));
  if (!p) {
    bad(w, "%s: a request on an unknown connection", w->name);
    rmx_rpc_reply_error(req, RMX_EINVAL);
    return;
  }
  on_thread(p, "rpc handler");
  p->held = req;
}

static void replied(rmx_conn_t *c, int status, const void *data, size_t len, void *arg)
{
  peer_t *p = arg;
  on_thread(p, "on_reply");
  p->calls_out--;
  p->replies++;
  p->reply_status = status;
}

/* ---- running a context on its thread ---- */

static void noop_timer(uv_timer_t *t) {}

/* Run the loop until done(w) or ms pass; 0, or -1 on time out. */
static int run_for(world_t *w, int (*done)(world_t *), unsigned ms)
{
  uv_loop_t *loop = rmx_ctx_loop(w->ctx);
  uv_timer_t t;
  uv_update_time(loop);
  uint64_t end = uv_now(loop) + ms;
  uv_timer_init(loop, &t);
  uv_timer_start(&t, noop_timer, ms, 0); /* keeps uv_run from returning at once */
  while (!done(w) && uv_now(loop) < end)
    uv_run(loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
  return done(w) ? 0 : -1;
}

static int never(world_t *w) { return 0; }

static int all_connected(world_t *w)
{
  for (int i = 0; i < NCL; i++)
    if (!w->cl[i].connected)
      return 0;
  return w->nsv == NCL;
}

static int traffic_done(world_t *w)
{
  for (int i = 0; i < NCL; i++)
    if (w->cl[i].echoes < w->cl[i].want_echoes || w->cl[i].sends_out || w->sv[i].sends_out)
      return 0;
  return 1;
}

static int requests_held(world_t *w)
{
  for (int i = 0; i < NCL; i++)
    if (!w->sv[i].held)
      return 0;
  return 1;
}

static int all_disconnected(world_t *w)
{
  for (int i = 0; i < NCL; i++)
    if (!w->cl[i].disconnects || !w->sv[i].disconnects)
      return 0;
  return 1;
}

static int all_closed(world_t *w)
{
  for (int i = 0; i < NCL; i++)
    if (!w->cl[i].closed || !w->sv[i].closed)
      return 0;
  return 1;
}

static int setup(world_t *w)
{
  rmx_config_t cfg;
  char uri[160];
  static const rmx_conn_cbs_t cbs = {.on_recv = recv_msg, .on_disconnect = disconnected};
  if (rmx_config_init(&cfg) || rmx_ctx_create(&w->ctx, NULL, &cfg)) {
    bad(w, "%s: no context", w->name);
    return -1;
  }
  uri_for(uri, sizeof(uri), 0);
  if (rmx_listen(w->ctx, uri, accepted, w, &w->l) ||
      rmx_listener_uri(w->l, w->uri, sizeof(w->uri)) ||
      rmx_rpc_register(w->ctx, RPC_HOLD, hold_handler, w)) {
    bad(w, "%s: cannot listen on %s", w->name, uri);
    return -1;
  }
  for (int i = 0; i < NCL; i++) {
    peer_t *p = &w->cl[i];
    p->client = 1;
    if (rmx_connect(w->ctx, w->uri, connected, p, &p->c)) {
      bad(w, "%s: rmx_connect failed", w->name);
      return -1;
    }
    rmx_conn_set_cbs(p->c, &cbs, p);
  }
  if (run_for(w, all_connected, 15000)) {
    bad(w, "%s: connections not up in time", w->name);
    return -1;
  }
  for (int i = 0; i < NCL; i++)
    if (w->cl[i].connect_status) {
      bad(w, "%s: connect: %s", w->name, rmx_strerror(w->cl[i].connect_status));
      return -1;
    }
  return 0;
}

/* One round of echoed messages on every client, small and rendezvous. */
static int traffic(world_t *w)
{
  uint8_t buf[BIG];
  for (int i = 0; i < NCL; i++)
    for (int m = 0; m < NMSG; m++, w->cl[i].want_echoes++) {
      pattern(buf, msg_len(m), (uint32_t)m);
      if (send_copy(&w->cl[i], buf, msg_len(m))) {
        bad(w, "%s: send failed", w->name);
        return -1;
      }
    }
  if (run_for(w, traffic_done, 15000)) {
    bad(w, "%s: traffic did not complete", w->name);
    return -1;
  }
  for (int i = 0; i < NCL; i++)
    if (w->cl[i].bad_echoes || w->cl[i].send_errors) {
      bad(w, "%s: %d bad echoes, %d send errors", w->name, w->cl[i].bad_echoes,
          w->cl[i].send_errors);
      return -1;
    }
  return 0;
}

/* Calls the peer's handler holds: outstanding when the fault comes. */
static int hold_calls(world_t *w)
{
  for (int i = 0; i < NCL; i++) {
    peer_t *p = &w->cl[i];
    if (rmx_rpc_call(p->c, RPC_HOLD, "x", 1, 0, replied, p, NULL)) {
      bad(w, "%s: rpc call failed", w->name);
      return -1;
    }
    p->calls_out++;
  }
  if (run_for(w, requests_held, 15000)) {
    bad(w, "%s: requests did not reach the handler", w->name);
    return -1;
  }
  return 0;
}

/* Close everything; then a while more, for anything late. */
static void teardown(world_t *w)
{
  for (int i = 0; i < NCL; i++) {
    if (w->sv[i].held) {
      rmx_rpc_reply(w->sv[i].held, "y", 1); /* only releases it now */
      w->sv[i].held = NULL;
    }
    if (w->cl[i].c && rmx_conn_close(w->cl[i].c, closed, &w->cl[i]))
      bad(w, "%s: close failed", w->name);
    if (w->sv[i].c && rmx_conn_close(w->sv[i].c, closed, &w->sv[i]))
      bad(w, "%s: close failed", w->name);
  }
  if (w->l)
    rmx_listener_close(w->l);
  w->l = NULL;
  if (run_for(w, all_closed, 15000))
    bad(w, "%s: connections not closed in time", w->name);
  run_for(w, never, 300);
  if (rmx_ctx_destroy(w->ctx))
    bad(w, "%s: rmx_ctx_destroy failed", w->name);
  w->ctx = NULL;
}

/* After the port went down: every end reports it, once, with its calls. */
static void await_fault(world_t *w)
{
  if (run_for(w, all_disconnected, FAULT_MS)) {
    bad(w, "%s: the port went down, and not every connection heard of it within %d ms",
        w->name, FAULT_MS);
    return;
  }
  run_for(w, never, 200); /* a second report would come now */
  for (int i = 0; i < NCL; i++) {
    peer_t *ends[2] = {&w->cl[i], &w->sv[i]};
    for (int k = 0; k < 2; k++) {
      peer_t *p = ends[k];
      if (p->disconnects != 1 || p->disconnect_status != RMX_ENETUNREACH)
        bad(w, "%s: %s %d: %d disconnects, status %s", w->name, k ? "server" : "client", i,
            p->disconnects, rmx_err_name(p->disconnect_status));
    }
    if (w->cl[i].replies != 1 || w->cl[i].reply_status == 0)
      bad(w, "%s: client %d: %d replies, status %s", w->name, i, w->cl[i].replies,
          rmx_err_name(w->cl[i].reply_status));
  }
}

static void *worker(void *arg)
{
  world_t *w = arg;
  w->thread = pthread_self();
  w->script(w);
  return NULL;
}

static void world_start(world_t *w, const char *name, void (*script)(world_t *))
{
  memset(w, 0, sizeof(*w));
  w->name = name;
  w->script = script;
  gate_init(&w->ready);
  gate_init(&w->go);
  for (int i = 0; i < NCL; i++)
    w->cl[i].w = w->sv[i].w = w;
  assert_int_equal(pthread_create(&w->th, NULL, worker, w), 0);
}

static void world_check(world_t *w)
{
  if (w->errors)
    print_error("%s: %d problems, the first: %s\n", w->name, w->errors, w->why);
  assert_int_equal(w->wrong_thread, 0);
  assert_int_equal(w->errors, 0);
  for (int i = 0; i < NCL; i++) {
    assert_int_equal(w->cl[i].closed, 1);
    assert_int_equal(w->sv[i].closed, 1);
    assert_int_equal(w->cl[i].after_closed + w->sv[i].after_closed, 0);
  }
}

/* ---- scripts: each step opens w->ready; the main thread opens w->go ---- */

/* Works, then goes away first. */
static void script_first_gone(world_t *w)
{
  if (setup(w) == 0)
    traffic(w);
  gate_open(&w->ready); /* 1: up */
  gate_wait(&w->go, 1, 60000);
  if (w->ctx)
    teardown(w);
  gate_open(&w->ready); /* 2: gone */
}

/* Outlives the other, keeps working, and still hears of the fault. */
static void script_survivor(world_t *w)
{
  int ok = setup(w) == 0 && traffic(w) == 0;
  gate_open(&w->ready); /* 1: up */
  gate_wait(&w->go, 1, 60000); /* the other context is gone */
  ok = ok && traffic(w) == 0 && hold_calls(w) == 0;
  gate_open(&w->ready); /* 2: ready for the fault */
  if (ok)
    await_fault(w);
  if (w->ctx)
    teardown(w);
  gate_open(&w->ready); /* 3: done */
}

/* Comes and goes, with no fault: the device's reader stops and starts. */
static void script_plain(world_t *w)
{
  if (setup(w) == 0)
    traffic(w);
  if (w->ctx)
    teardown(w);
  gate_open(&w->ready); /* 1: done */
}

/* ---- tests ---- */

static void need_vm(void)
{
  if (strcmp(scheme, "rdma") != 0 || !getenv("RXE_VM")) {
    print_message("skipped: takes an RDMA port down; only inside the SoftRoCE VM\n");
    skip();
  }
  find_netdev();
  assert_true(port_active());
}

/* One context after another, each alone in the process. */
static void contexts_come_and_go(void **state)
{
  static world_t w[2];
  if (strcmp(scheme, "rdma") != 0)
    skip();
  for (int i = 0; i < 2; i++) {
    world_start(&w[i], i ? "Y" : "X", script_plain);
    assert_int_equal(gate_wait(&w[i].ready, 1, 60000), 0);
    assert_int_equal(pthread_join(w[i].th, NULL), 0);
    world_check(&w[i]);
  }
}

/* A goes away; B and C keep working and both hear of the port going down. */
static void fault_after_a_context_is_gone(void **state)
{
  static world_t a, b, c;
  need_vm();
  world_start(&a, "A", script_first_gone);
  world_start(&b, "B", script_survivor);
  world_start(&c, "C", script_survivor);
  assert_int_equal(gate_wait(&a.ready, 1, 60000), 0);
  assert_int_equal(gate_wait(&b.ready, 1, 60000), 0);
  assert_int_equal(gate_wait(&c.ready, 1, 60000), 0);
  gate_open(&a.go); /* A closes everything and destroys its context */
  assert_int_equal(gate_wait(&a.ready, 2, 60000), 0);
  assert_int_equal(pthread_join(a.th, NULL), 0);
  gate_open(&b.go); /* B and C work on without it */
  gate_open(&c.go);
  assert_int_equal(gate_wait(&b.ready, 2, 60000), 0);
  assert_int_equal(gate_wait(&c.ready, 2, 60000), 0);
  int down = link_flap();
  int done = gate_wait(&b.ready, 3, FAULT_MS + 30000);
  done |= gate_wait(&c.ready, 3, FAULT_MS + 30000);
  port_restore();
  assert_int_equal(down, 0);
  assert_int_equal(done, 0);
  assert_int_equal(pthread_join(b.th, NULL), 0);
  assert_int_equal(pthread_join(c.th, NULL), 0);
  world_check(&a);
  world_check(&b);
  world_check(&c);
}

static int arm_alarm(void **state)
{
  alarm(150); /* a hang kills the run instead of stalling CI */
  return 0;
}

int main(int argc, char **argv)
{
  if (harness_args(argc, argv) != 0)
    return 2;
  if (argc > 2)
    cmocka_set_test_filter(argv[2]);
  signal(SIGPIPE, SIG_IGN);
  /* In this order: the fault comes to a reader started anew after the
   * first test let it go, and it comes last (see the top). */
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup(contexts_come_and_go, arm_alarm),
    cmocka_unit_test_setup(fault_after_a_context_is_gone, arm_alarm),
  };
  char name[64];
  snprintf(name, sizeof(name), "verbs-threads/%s", scheme);
  return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
