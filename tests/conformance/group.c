/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Listener groups: several contexts, one thread each, serve one address.
 *
 *   rmx-group SCHEME    (tcp: 127.0.0.1; rdma: $RMX_TEST_ADDR, else $RXE_VM_ADDR)
 *
 * Every client sends its number once and waits for it back; the member
 * that serves it records which it was. Checked, phase by phase:
 *  A. three members, 60 clients at once: each client is served exactly
 *     once, by one member, and the members serve 20 each (peers are
 *     handed in turn, whichever thread takes them);
 *  B. member 2's thread is stuck (its loop does not run) while 30 clients
 *     come: its share waits in its mailbox; it then leaves and its
 *     context is destroyed, and the other two serve all 30 (none refused);
 *  C. member 1 stuck, 10 clients: member 0 serves its 5 and leaves; member
 *     1 leaves with its 5 untaken and no member left: they wait in the
 *     group, and a member that joins later serves them;
 *  D. the application closes the group, its last member leaves: the
 *     address is closed and a new client is refused.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <rmx/rmx.h>

#define TEST_NAME "group"
#include "test_util.h"

#define MAXC 256
#define NMEM 4

static rmx_group_t *group;
static atomic_int seen[MAXC];   /* times client i was served */
static atomic_int by[MAXC];     /* 1 + the member that served it */

/* ---- members: one context and thread each ---- */

typedef struct member {
  int idx;
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  pthread_t th;
  atomic_int joined, served, open, stuck, gone;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int go, leave;
} member_t;

static member_t mem[NMEM];

static void s_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  member_t *m = arg;
  uint32_t id;
  if (len != sizeof(id))
    FAIL("member %d got %zu bytes", m->idx, len);
  memcpy(&id, data, sizeof(id));
  if (id >= MAXC)
    FAIL("client number %u", id);
  seen[id]++;
  by[id] = m->idx + 1;
  m->served++;
  if (rmx_send(c, data, len, NULL, NULL) != 0)
    FAIL("member %d: send", m->idx);
}

static void s_closed(rmx_conn_t *c, void *arg)
{
  (void)c;
  ((member_t *)arg)->open--;
}

static void s_gone(rmx_conn_t *c, int status, void *arg)
{
  (void)status;
  rmx_conn_close(c, s_closed, arg);
}

static void s_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  member_t *m = arg;
  (void)l;
  rmx_conn_cbs_t cbs = {.on_recv = s_recv, .on_disconnect = s_gone};
  rmx_conn_set_cbs(c, &cbs, m);
  m->open++;
}

/* Posted to a member: its loop stops here until released; then it leaves
 * (closes its listener) and stops, or runs on. */
static void stick(void *arg)
{
  member_t *m = arg;
  pthread_mutex_lock(&m->mu);
  m->stuck = 1;
  while (!m->go)
    pthread_cond_wait(&m->cv, &m->mu);
  m->go = 0;
  m->stuck = 0;
  int leave = m->leave;
  pthread_mutex_unlock(&m->mu);
  if (leave) {
    rmx_listener_close(m->l);
    rmx_ctx_stop(m->ctx);
  }
}

static void *member_main(void *arg)
{
  member_t *m = arg;
  rmx_config_t cfg;
  rmx_config_init(&cfg);
  if (rmx_ctx_create(&m->ctx, NULL, &cfg) != 0)
    FAIL("member %d: context", m->idx);
  int rc = rmx_listen_group(m->ctx, group, s_accept, m, &m->l);
  if (rc)
    FAIL("member %d: rmx_listen_group: %s", m->idx, rmx_strerror(rc));
  rmx_listener_t *again;
  if (rmx_listen_group(m->ctx, group, s_accept, m, &again) != RMX_EALREADY)
    FAIL("member %d: joined the same group twice", m->idx);
  m->joined = 1;
  rmx_ctx_run(m->ctx);
  if ((rc = rmx_ctx_destroy(m->ctx)) != 0)
    FAIL("member %d: rmx_ctx_destroy: %s", m->idx, rmx_strerror(rc));
  return NULL;
}

static void wait_for(atomic_int *v, int want, rmx_ctx_t *cl, const char *what);

static void member_start(int i, rmx_ctx_t *cl)
{
  member_t *m = &mem[i];
  m->idx = i;
  pthread_mutex_init(&m->mu, NULL);
  pthread_cond_init(&m->cv, NULL);
  pthread_create(&m->th, NULL, member_main, m);
  wait_for(&m->joined, 1, cl, "a member to join");
}

static void member_stick(int i, rmx_ctx_t *cl)
{
  rmx_ctx_post(mem[i].ctx, stick, &mem[i]);
  wait_for(&mem[i].stuck, 1, cl, "a member to stop");
}

static void member_release(int i, int leave)
{
  member_t *m = &mem[i];
  pthread_mutex_lock(&m->mu);
  m->go = 1;
  m->leave = leave;
  pthread_cond_signal(&m->cv);
  pthread_mutex_unlock(&m->mu);
  if (leave) {
    pthread_join(m->th, NULL);
    m->gone = 1;
  }
}

/* A member that is not stuck leaves: stick it, release it to leave. */
static void member_leave(int i, rmx_ctx_t *cl)
{
  member_stick(i, cl);
  member_release(i, 1);
}

/* ---- clients: one context, this thread ---- */

typedef struct cl {
  rmx_conn_t *c;
  uint32_t id;
  int calls, status, got;
} cl_t;

static cl_t cls[MAXC];
static atomic_int nup, nfailed, ngot;

static void c_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  cl_t *k = arg;
  (void)c;
  if (len != sizeof(k->id) || memcmp(data, &k->id, len) != 0)
    FAIL("client %u got another's message", k->id);
  k->got++;
  ngot++;
}

static void c_connected(rmx_conn_t *c, int status, void *arg)
{
  cl_t *k = arg;
  if (k->calls++)
    FAIL("client %u: on_connected ran twice", k->id);
  k->status = status;
  if (status) {
    nfailed++;
    return;
  }
  nup++;
  rmx_conn_cbs_t cbs = {.on_recv = c_recv};
  rmx_conn_set_cbs(c, &cbs, k);
  if (rmx_send(c, &k->id, sizeof(k->id), NULL, NULL) != 0)
    FAIL("client %u: send", k->id);
}

static void wait_for(atomic_int *v, int want, rmx_ctx_t *cl, const char *what)
{
  time_t end = time(NULL) + 60;
  while (*v < want) {
    if (cl && rmx_ctx_progress(cl) < 0)
      FAIL("progress");
    if (!cl) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    if (time(NULL) > end)
      FAIL("timed out waiting for %s (%d of %d)", what, *v, want);
  }
}

static void clients(rmx_ctx_t *cl, const char *uri, int from, int n)
{
  nup = nfailed = ngot = 0;
  for (int i = from; i < from + n; i++) {
    cls[i].id = (uint32_t)i;
    if (rmx_connect(cl, uri, c_connected, &cls[i], &cls[i].c) != 0)
      FAIL("rmx_connect %d", i);
  }
}

/* Every client of [from, from+n) connected once and was served exactly
 * once; returns how many each member served. */
static void served(rmx_ctx_t *cl, int from, int n, int count[NMEM], const char *phase)
{
  atomic_int done;
  time_t end = time(NULL) + 60;
  do {
    rmx_ctx_progress(cl);
    done = nup + nfailed;
    if (time(NULL) > end)
      FAIL("%s: %d of %d clients heard back", phase, (int)done, n);
  } while (done < n);
  if (nfailed)
    FAIL("%s: %d of %d clients could not connect (client %d: %s)", phase, (int)nfailed, n,
         from, rmx_strerror(cls[from].status));
  wait_for(&ngot, n, cl, "every client's message back");
  memset(count, 0, sizeof(int) * NMEM);
  for (int i = from; i < from + n; i++) {
    if (seen[i] != 1)
      FAIL("%s: client %d was served %d times", phase, i, (int)seen[i]);
    count[by[i] - 1]++;
  }
  printf("group: %s: %d clients, each served once; by member: %d %d %d %d\n", phase, n,
         count[0], count[1], count[2], count[3]);
}

/* Close the clients that are up; the running members see them go. */
static void close_clients(rmx_ctx_t *cl, int from, int n)
{
  for (int i = from; i < from + n; i++)
    if (cls[i].c && cls[i].calls && cls[i].status == 0) {
      rmx_conn_close(cls[i].c, NULL, NULL);
      cls[i].c = NULL;
    }
  for (int i = 0; i < NMEM; i++)
    while (mem[i].joined && !mem[i].gone && !mem[i].stuck && mem[i].open > 0)
      rmx_ctx_progress(cl);
}

int main(int argc, char **argv)
{
  const char *scheme = argc > 1 ? argv[1] : "tcp";
  char uri[160], bound[128];
  int count[NMEM];
  listen_uri(scheme, uri, sizeof(uri));
  int rc = rmx_group_open(uri, &group);
  if (rc)
    FAIL("rmx_group_open %s: %s", uri, rmx_strerror(rc));
  if (rmx_group_uri(group, bound, sizeof(bound)) != 0)
    FAIL("rmx_group_uri");
  rmx_ctx_t *cl;
  if (rmx_ctx_create(&cl, NULL, NULL) != 0)
    FAIL("client context");

  /* A: three members, peers in turn. */
  for (int i = 0; i < 3; i++)
    member_start(i, cl);
  char muri[128];
  if (rmx_listener_uri(mem[1].l, muri, sizeof(muri)) != 0 || strcmp(muri, bound) != 0)
    FAIL("a member's listener names %s, the group %s", muri, bound);
  clients(cl, bound, 0, 60);
  served(cl, 0, 60, count, "A: three members");
  for (int i = 0; i < 3; i++)
    if (count[i] != 20)
      FAIL("A: member %d served %d of 60, not its turn's 20", i, count[i]);
  close_clients(cl, 0, 60);

  /* B: member 2 stuck with its share, then gone. */
  member_stick(2, cl);
  clients(cl, bound, 60, 30);
  wait_for(&nup, 20, cl, "the running members' clients");
  member_release(2, 1);
  served(cl, 60, 30, count, "B: member 2 left with its share untaken");
  if (count[2] != 0 || count[0] + count[1] != 30)
    FAIL("B: member 2 served %d after it left", count[2]);
  close_clients(cl, 60, 30);

  /* C: member 1 stuck, member 0 leaves, member 1 leaves: kept, then served. */
  int before = mem[0].served;
  member_stick(1, cl);
  clients(cl, bound, 90, 10);
  wait_for(&ngot, 5, cl, "member 0's clients");
  if (mem[0].served != before + 5)
    FAIL("C: member 0 served %d, not its turn's 5", (int)mem[0].served - before);
  close_clients(cl, 90, 10); /* member 0's; member 1's are still connecting */
  member_leave(0, cl);
  member_release(1, 1);
  for (int i = 0; i < 200; i++)
    rmx_ctx_progress(cl);
  if (ngot != 5 || nfailed)
    FAIL("C: a client kept by the group heard back with no member there");
  member_start(3, cl);
  wait_for(&ngot, 10, cl, "the kept clients");
  if (nfailed)
    FAIL("C: %d kept clients failed", (int)nfailed);
  for (int i = 90; i < 100; i++)
    if (seen[i] != 1 || (by[i] != 1 && by[i] != 4))
      FAIL("C: client %d served %d times, by member %d", i, (int)seen[i], (int)by[i] - 1);
  printf("group: C: 5 clients kept with no member were served by the next to join\n");
  close_clients(cl, 90, 10);

  /* D: the group closed, its last member gone: the address is closed. */
  rmx_group_close(group);
  member_leave(3, cl);
  nup = nfailed = 0;
  cls[100].id = 100;
  if (rmx_connect(cl, bound, c_connected, &cls[100], &cls[100].c) != 0)
    FAIL("rmx_connect");
  while (!nup && !nfailed)
    rmx_ctx_progress(cl);
  if (!nfailed)
    FAIL("D: a client connected to a closed group");
  printf("group: D: the group closed: a new client is refused (%s)\n",
         rmx_strerror(cls[100].status));
  rmx_conn_close(cls[100].c, NULL, NULL);
  if (rmx_ctx_destroy(cl) != 0)
    FAIL("client context destroy");
  printf("group: ok\n");
  return 0;
}
