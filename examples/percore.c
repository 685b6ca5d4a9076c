/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-percore: a server on every core. One context per thread, every
 * thread a member of one listener group on URI; each connection belongs
 * to the thread it was handed to, which answers its RPCs (id 7: the
 * request comes back as the reply) and echoes its messages.
 *
 *   rmx-percore URI [THREADS]   (THREADS: the CPUs online, by default)
 *
 * Prints the bound URI, then on SIGINT or SIGTERM how many connections
 * and requests each thread served, and exits 0. Exit 1 when it cannot
 * listen, 2 for a bad command line (tool.h).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rmx/rmx.h>
#include "tool.h"

#define RPC_ECHO 7

typedef struct link {
  struct link *prev, *next;
} link_t;

typedef struct worker {
  int idx;
  link_t open; /* the connections this thread holds */
  pthread_t th;
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  atomic_int ready; /* 1 joined, -1 failed */
  unsigned long long conns, requests; /* this thread's own: read after it ends */
} worker_t;

static rmx_group_t *group;

/* One connection of a worker's, linked while open. */
typedef struct conn {
  link_t link;
  worker_t *w;
  rmx_conn_t *c;
} conn_t;

static void on_request(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  ((worker_t *)arg)->requests++;
  rmx_rpc_reply(req, data, len);
}

static void on_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  ((conn_t *)arg)->w->requests++;
  rmx_send(c, data, len, NULL, NULL); /* copied or queued: data is ours during the call */
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  (void)c;
  free(arg);
}

/* Close once: unlinked here, freed when closed. */
static void conn_close(conn_t *k)
{
  k->link.prev->next = k->link.next;
  k->link.next->prev = k->link.prev;
  rmx_conn_close(k->c, on_closed, k);
}

static void on_disconnect(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  (void)status;
  conn_close(arg);
}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  worker_t *w = arg;
  conn_t *k = malloc(sizeof(*k));
  (void)l;
  if (!k) {
    rmx_conn_close(c, NULL, NULL);
    return;
  }
  k->w = w;
  k->c = c;
  k->link.next = w->open.next;
  k->link.prev = &w->open;
  w->open.next->prev = &k->link;
  w->open.next = &k->link;
  rmx_conn_cbs_t cbs = {.on_recv = on_recv, .on_disconnect = on_disconnect};
  rmx_conn_set_cbs(c, &cbs, k);
  w->conns++;
}

static void *worker_main(void *arg)
{
  worker_t *w = arg;
  w->open.next = w->open.prev = &w->open;
  int rc = rmx_ctx_create(&w->ctx, NULL, NULL);
  if (rc == 0)
    rc = rmx_rpc_register(w->ctx, RPC_ECHO, on_request, w);
  if (rc == 0)
    rc = rmx_listen_group(w->ctx, group, on_accept, w, &w->l);
  if (rc) {
    fprintf(stderr, "rmx-percore: thread %d: %s\n", w->idx, rmx_strerror(rc));
    w->ready = -1;
    return NULL;
  }
  w->ready = 1;
  rmx_ctx_run(w->ctx); /* until stop() posts rmx_ctx_stop */
  rmx_listener_close(w->l);
  while (w->open.next != &w->open) /* their peers are told */
    conn_close((conn_t *)w->open.next);
  rmx_ctx_destroy(w->ctx);
  return NULL;
}

static void stop(void *arg) { rmx_ctx_stop(((worker_t *)arg)->ctx); }

static const char usage[] =
    "usage: rmx-percore URI [THREADS]\n"
    "  A server on every core: THREADS contexts (default: the CPUs online), one per\n"
    "  thread, serve URI as one listener group. Each answers RPC 7 with its\n"
    "  request and echoes messages. SIGINT or SIGTERM ends it, with a count per\n"
    "  thread.\n"
    "  --version  the tool's and the library's version\n";

int main(int argc, char **argv)
{
  int i = tool_options(argc, argv, usage);
  if (argc - i < 1 || argc - i > 2)
    tool_bad("expected a URI and at most a thread count");
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int n = argc - i > 1 ? (int)tool_num("THREADS", argv[i + 1], 1, 1024) : (int)(cpus > 0 ? cpus : 1);
  int rc = rmx_group_open(argv[i], &group);
  if (rc)
    return tool_uri_failed("listen on", argv[i], rc);
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* the workers inherit the mask: main waits */
  worker_t *w = calloc((size_t)n, sizeof(*w));
  if (!w)
    return 1;
  for (int k = 0; k < n; k++) {
    w[k].idx = k;
    pthread_create(&w[k].th, NULL, worker_main, &w[k]);
  }
  int ok = 1;
  for (int k = 0; k < n; k++) {
    while (w[k].ready == 0)
      usleep(1000);
    ok &= w[k].ready == 1;
  }
  char bound[128];
  if (ok && rmx_group_uri(group, bound, sizeof(bound)) == 0) {
    printf("rmx-percore: %d threads serving %s\n", n, bound);
    fflush(stdout);
    int sig;
    sigwait(&sigs, &sig);
  }
  for (int k = 0; k < n; k++) {
    if (w[k].ready == 1)
      rmx_ctx_post(w[k].ctx, stop, &w[k]);
    pthread_join(w[k].th, NULL);
    if (w[k].ready == 1)
      printf("thread %d: %llu connections, %llu requests\n", k, w[k].conns, w[k].requests);
  }
  rmx_group_close(group);
  free(w);
  return ok ? 0 : 1;
}
