/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-xfer lookup: what finding memory by name costs. One context, a
 * connection to itself over the URI, --count registrations published as
 * "n0", "n1", ...; medians in us of:
 *   rpc     an empty RPC's round trip: what "one round trip" costs here;
 *   lookup  rmx_mem_lookup of a name not looked up before on the
 *           connection (the owner packs a key for it and answers);
 *   cached  the same name again (answered from the connection's cache,
 *           from the loop: no round trip);
 * and with --etcd ENDPOINT, the names published in etcd too
 * (rmx_meta_publish, under a lease) and looked up there:
 *   find    rmx_meta_find of a name (one HTTP request to etcd's gateway).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xfer.h"

static struct {
  rmx_ctx_t *ctx;
  rmx_conn_t *cli, *srv;
  int flag, st, closing, up;
  rmx_rkey_t *rk;
} L;

static uint64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Progress until a callback sets the flag; its status. */
static int wait_flag(void)
{
  uint64_t end = now_ns() + 30ull * 1000000000u;
  while (!L.flag) {
    if (rmx_ctx_progress(L.ctx) < 0 || now_ns() > end)
      return RMX_ETIMEDOUT;
  }
  L.flag = 0;
  return L.st;
}

static void done(int st)
{
  L.st = st;
  L.flag = 1;
}

/* Both ends up: the accept and the connect, in either order. */
static void end_up(int st)
{
  if (st || ++L.up == 2)
    done(st);
}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  (void)l;
  (void)arg;
  L.srv = c;
  end_up(0);
}

static void on_connected(rmx_conn_t *c, int st, void *arg)
{
  (void)c;
  (void)arg;
  end_up(st);
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  (void)c;
  (void)arg;
  L.closing--;
}

static void echo(rmx_rpc_req_t *req, const void *data, size_t len, void *arg)
{
  (void)arg;
  rmx_rpc_reply(req, data, len);
}

static void replied(rmx_conn_t *c, int st, const void *d, size_t n, void *arg)
{
  (void)c;
  (void)d;
  (void)n;
  (void)arg;
  done(st);
}

static void looked_up(rmx_conn_t *c, int st, rmx_rkey_t *rk, void *arg)
{
  (void)c;
  (void)arg;
  L.rk = rk;
  done(st);
}

static void meta_done(rmx_meta_t *m, int st, void *arg)
{
  (void)m;
  (void)arg;
  done(st);
}

static void found(rmx_meta_t *m, int st, uint64_t len, unsigned access, void *arg)
{
  (void)m;
  (void)len;
  (void)access;
  (void)arg;
  done(st);
}

static int cmp_d(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
  qsort(v, n, sizeof(*v), cmp_d);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Each kind measured count times: us per sample into v. */
static int measure(const xfer_opts_t *o, rmx_meta_t *meta, double *rpc, double *lk, double *hit,
                   double *fnd)
{
  char name[32];
  int rc = 0;
  for (uint64_t i = 0; i < o->count && !rc; i++) {
    snprintf(name, sizeof(name), "n%llu", (unsigned long long)i);
    uint64_t t = now_ns();
    if (!(rc = rmx_rpc_call(L.cli, 1, "x", 1, 0, replied, NULL, NULL)))
      rc = wait_flag();
    rpc[i] = (double)(now_ns() - t) / 1e3;
    for (int again = 0; again < 2 && !rc; again++) {
      t = now_ns();
      if (!(rc = rmx_mem_lookup(L.cli, name, 0, looked_up, NULL)))
        rc = wait_flag();
      (again ? hit : lk)[i] = (double)(now_ns() - t) / 1e3;
      rmx_rkey_release(L.rk);
      L.rk = NULL;
    }
    if (meta && !rc) {
      t = now_ns();
      if (!(rc = rmx_meta_find(meta, "bench", name, found, NULL)))
        rc = wait_flag();
      fnd[i] = (double)(now_ns() - t) / 1e3;
    }
  }
  return rc;
}

int xfer_lookup(const xfer_opts_t *o)
{
  uint64_t n = o->count;
  rmx_listener_t *l = NULL;
  rmx_meta_t *meta = NULL;
  rmx_mem_t **mems = calloc(n, sizeof(*mems));
  uint8_t *region = calloc(n, 64);
  double *v = calloc(4 * n, sizeof(*v));
  char where[128], name[32];
  int rc = !mems || !region || !v ? RMX_ENOMEM : rmx_ctx_create(&L.ctx, NULL, NULL);
  if (!rc && !(rc = rmx_rpc_register(L.ctx, 1, echo, NULL)) &&
      !(rc = rmx_listen(L.ctx, o->uri ? o->uri : "tcp://127.0.0.1:0", on_accept, NULL, &l)) &&
      !(rc = rmx_listener_uri(l, where, sizeof(where))) &&
      !(rc = rmx_connect(L.ctx, where, on_connected, NULL, &L.cli)))
    rc = wait_flag();
  for (uint64_t i = 0; i < n && !rc; i++) {
    snprintf(name, sizeof(name), "n%llu", (unsigned long long)i);
    if (!(rc = rmx_mem_reg(L.ctx, region + i * 64, 64, RMX_MEM_REMOTE_READ, &mems[i])))
      rc = rmx_mem_publish(mems[i], name);
  }
  if (!rc && o->etcd) {
    if (!(rc = rmx_meta_open(L.ctx, o->etcd, "/rmx-bench/", "bench", 30, meta_done, NULL, &meta)))
      rc = wait_flag();
    for (uint64_t i = 0; i < n && !rc; i++) {
      snprintf(name, sizeof(name), "n%llu", (unsigned long long)i);
      if (!(rc = rmx_meta_publish(meta, name, mems[i], meta_done, NULL)))
        rc = wait_flag();
    }
  }
  if (!rc)
    rc = measure(o, meta, v, v + n, v + 2 * n, v + 3 * n);
  if (!rc) {
    double r = median(v, n), k = median(v + n, n), h = median(v + 2 * n, n);
    const char *tp = strncmp(where, "rdma", 4) == 0 ? "rdma" : "tcp";
    if (o->json) {
      printf("{\"transport\": \"%s\", \"count\": %llu, \"rpc_us\": %.2f, \"lookup_us\": %.2f, "
             "\"cached_us\": %.2f, \"lookup_over_rpc\": %.3f", tp, (unsigned long long)n, r, k,
             h, k / r);
      if (meta)
        printf(", \"etcd_find_us\": %.2f", median(v + 3 * n, n));
      printf("}\n");
    } else {
      printf("# rmx-xfer lookup over %s, %llu names, medians in us\n", tp, (unsigned long long)n);
      printf("rpc %.2f  lookup %.2f (%.2f x rpc)  cached %.2f", r, k, k / r, h);
      if (meta)
        printf("  etcd find %.2f", median(v + 3 * n, n));
      printf("\n");
    }
  } else {
    fprintf(stderr, "rmx-xfer lookup: %s\n", rmx_strerror(rc));
  }
  if (meta && rmx_meta_close(meta, meta_done, NULL) == 0)
    wait_flag();
  L.closing = (L.cli != NULL) + (L.srv != NULL);
  if (L.cli)
    rmx_conn_close(L.cli, on_closed, NULL);
  if (L.srv)
    rmx_conn_close(L.srv, on_closed, NULL);
  while (L.closing && rmx_ctx_progress(L.ctx) >= 0)
    ;
  if (l)
    rmx_listener_close(l);
  for (uint64_t i = 0; mems && i < n; i++)
    rmx_mem_dereg(mems[i]);
  if (L.ctx) {
    int drc = rmx_ctx_destroy(L.ctx);
    if (drc && !rc) {
      fprintf(stderr, "rmx-xfer lookup: destroying the context: %s\n", rmx_strerror(drc));
      rc = drc;
    }
  }
  free(mems);
  free(region);
  free(v);
  return rc ? 1 : 0;
}
