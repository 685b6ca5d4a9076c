/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-xfer reg: what registering large regions costs. For each page kind
 * (4 KiB pages; 2 MiB pages by MAP_HUGETLB, or by MADV_HUGEPAGE where the
 * pool is empty) and each size from 256 MiB doubling up to --size, on
 * memory already touched (its page faults are timed apart):
 *   reg    rmx_mem_reg, with every transport the context has opened (the
 *          URI's: rdma:// pins and maps the pages for the device);
 *   pack   rmx_mem_pack_for a connection (a window or a lazy registration
 *          in that connection's domain, where the device needs one);
 *   use    the first access through that key: an 8-byte read of the last
 *          page by the peer (a connection of the same context to itself);
 *   dereg  rmx_mem_dereg;
 * and, with --verbs, ibv_reg_mr/ibv_dereg_mr of the same memory in a
 * protection domain of the first device. Then a request of 16 blocks of
 * 1 MiB without registrations (the cache's) prepared once and posted 200
 * times: the cache registers while preparing, never while posting.
 * Medians of 3 runs; costs also per GiB.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "perf_clock.h"
#include "xfer.h"

#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << 26)
#endif

static struct {
  rmx_ctx_t *ctx;
  rmx_conn_t *cli, *srv; /* the connection to itself: its two ends */
  int up, flag, st, json, closing;
  uint64_t sink;
} G;

static void stop_with(int st)
{
  G.st = st;
  G.flag = 1;
  rmx_ctx_stop(G.ctx);
}

static int wait_flag(void)
{
  while (!G.flag)
    if (rmx_ctx_run(G.ctx) < 0)
      return RMX_EIO;
  G.flag = 0;
  return G.st;
}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  G.srv = c;
  if (G.up)
    stop_with(0);
}

static void on_connected(rmx_conn_t *c, int st, void *arg)
{
  G.up = st == 0;
  if (st || G.srv)
    stop_with(st);
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  if (--G.closing == 0)
    stop_with(0);
}

static void on_op(rmx_conn_t *c, int st, void *arg) { stop_with(st); }
static void on_xfer(rmx_xfer_t *x, int st, size_t failed, void *arg) { stop_with(st); }

static double ms_since(uint64_t t0) { return perf_ns(t0, perf_ticks()) / 1e6; }

static int cmp_d(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median3(double *v)
{
  qsort(v, 3, sizeof(*v), cmp_d);
  return v[1];
}

/* len bytes of the kind: 0 4 KiB pages, 1 MAP_HUGETLB, 2 MADV_HUGEPAGE. */
static void *map(size_t len, int kind)
{
  int fl = MAP_PRIVATE | MAP_ANONYMOUS | (kind == 1 ? MAP_HUGETLB | MAP_HUGE_2MB : 0);
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, fl, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  if (kind == 2 && madvise(p, len, MADV_HUGEPAGE) != 0) {
    munmap(p, len);
    return NULL;
  }
  return p;
}

typedef struct row {
  double touch, reg, pack, use, dereg, vreg, vdereg;
} row_t;

/* One run on len bytes at p: the costs into r (ms). */
static int once(uint8_t *p, size_t len, row_t *r, int verbs)
{
  rmx_mem_t *m;
  uint8_t blob[RMX_RKEY_MAX];
  size_t blen = sizeof(blob);
  rmx_rkey_t *rk;
  uint64_t t0 = perf_ticks();
  int rc = rmx_mem_reg(G.ctx, p, len, RMX_MEM_LOCAL | RMX_MEM_REMOTE_READ, &m);
  r->reg = ms_since(t0);
  if (rc)
    return rc;
  t0 = perf_ticks();
  rc = rmx_mem_pack_for(m, G.srv, blob, &blen);
  r->pack = ms_since(t0);
  if (rc == 0 && (rc = rmx_rkey_unpack(G.cli, blob, blen, &rk)) == 0) {
    rmx_iov_t iov = {&G.sink, sizeof(G.sink), NULL};
    t0 = perf_ticks();
    rc = rmx_read(G.cli, &iov, 1, rk, len - sizeof(G.sink), on_op, NULL);
    if (rc == 0)
      rc = wait_flag();
    r->use = ms_since(t0);
    rmx_rkey_release(rk);
  }
  t0 = perf_ticks();
  rmx_mem_dereg(m);
  r->dereg = ms_since(t0);
  r->vreg = r->vdereg = -1;
  if (verbs)
    xfer_ibv_cost(p, len, perf_ns_per_tick, &r->vreg, &r->vdereg);
  return rc;
}

static const char *kind_name[] = {"4k", "hugetlb-2m", "thp-2m"};

static void print_row(int kind, size_t len, row_t *m)
{
  double gib = (double)len / (1u << 30);
  if (G.json) {
    printf("{\"test\":\"reg\",\"transport\":\"%s\",\"pages\":\"%s\",\"bytes\":%zu,"
           "\"touch_ms\":%.3f,\"reg_ms\":%.3f,\"pack_ms\":%.3f,\"use_ms\":%.3f,"
           "\"dereg_ms\":%.3f,\"reg_ms_per_gib\":%.3f,\"dereg_ms_per_gib\":%.3f,"
           "\"ibv_reg_ms\":%.3f,\"ibv_dereg_ms\":%.3f}\n", /* -1: not measured */
           rmx_conn_transport(G.cli), kind_name[kind], len, m->touch, m->reg, m->pack, m->use,
           m->dereg, (m->reg + m->pack + m->use) / gib, m->dereg / gib, m->vreg, m->vdereg);
    return;
  }
  char vr[32] = "-", vd[32] = "-";
  if (m->vreg >= 0)
    snprintf(vr, sizeof(vr), "%.2f", m->vreg), snprintf(vd, sizeof(vd), "%.2f", m->vdereg);
  printf("%-10s %6zu %9.2f %9.2f %8.3f %8.3f %9.2f %11.2f %11.2f %9s %9s\n", kind_name[kind],
         len >> 20, m->touch, m->reg, m->pack, m->use, m->dereg,
         (m->reg + m->pack + m->use) / gib, m->dereg / gib, vr, vd);
}

/* A request of 16 blocks of 1 MiB in p, without registrations, prepared
 * once and posted n times: the registration cache's misses each way. */
static int repost(uint8_t *p, size_t len, int n)
{
  rmx_mem_t *m;
  uint8_t blob[RMX_RKEY_MAX];
  size_t blen = sizeof(blob);
  rmx_rkey_t *rk = NULL;
  rmx_xfer_t *x = NULL;
  rmx_xfer_entry_t e[16];
  rmx_ctx_stats_t s0, s1, s2;
  size_t half = len / 2;
  int rc = rmx_mem_reg(G.ctx, p + half, half, RMX_MEM_REMOTE_WRITE, &m);
  if (rc == 0 && (rc = rmx_mem_pack_for(m, G.srv, blob, &blen)) == 0)
    rc = rmx_rkey_unpack(G.cli, blob, blen, &rk);
  for (int i = 0; i < 16; i++) /* every other MiB: 16 segments, not one */
    e[i] = (rmx_xfer_entry_t){p + (size_t)i * (2u << 20), 1u << 20, NULL, rk,
                              (uint64_t)i * (2u << 20)};
  rmx_ctx_stats_get(G.ctx, &s0, sizeof(s0));
  if (rc == 0)
    rc = rmx_xfer_prep(G.cli, RMX_XFER_WRITE, e, 16, &x);
  rmx_ctx_stats_get(G.ctx, &s1, sizeof(s1));
  uint64_t t0 = perf_ticks();
  for (int i = 0; i < n && rc == 0; i++)
    if ((rc = rmx_xfer_post(x, NULL, 0, on_xfer, NULL)) == 0)
      rc = wait_flag();
  double us = perf_ns(t0, perf_ticks()) / 1e3 / n;
  rmx_ctx_stats_get(G.ctx, &s2, sizeof(s2));
  if (rc == 0 && !G.json)
    printf("# a 16-entry request (16 MiB, entries without a registration) prepared once, "
           "posted %d times: %llu cache registrations preparing, %llu (and %llu hits) "
           "posting; %.1f us a post to its completion\n", n,
           (unsigned long long)(s1.reg_cache_misses - s0.reg_cache_misses),
           (unsigned long long)(s2.reg_cache_misses - s1.reg_cache_misses),
           (unsigned long long)(s2.reg_cache_hits - s1.reg_cache_hits), us);
  else if (rc == 0)
    printf("{\"test\":\"repost\",\"entries\":16,\"posts\":%d,\"misses_prep\":%llu,"
           "\"misses_post\":%llu,\"us_per_post\":%.3f}\n", n,
           (unsigned long long)(s1.reg_cache_misses - s0.reg_cache_misses),
           (unsigned long long)(s2.reg_cache_misses - s1.reg_cache_misses), us);
  rmx_xfer_release(x);
  if (rk)
    rmx_rkey_release(rk);
  if (m)
    rmx_mem_dereg(m);
  return rc;
}

int xfer_reg(const xfer_opts_t *o)
{
  rmx_listener_t *l;
  char bound[128];
  int rc = rmx_ctx_create(&G.ctx, NULL, NULL);
  G.json = o->json;
  perf_clock_init();
  if (rc == 0)
    rc = rmx_listen(G.ctx, o->uri ? o->uri : "tcp://127.0.0.1:0", on_accept, NULL, &l);
  if (rc == 0)
    rc = rmx_listener_uri(l, bound, sizeof(bound));
  if (rc == 0)
    rc = rmx_connect(G.ctx, bound, on_connected, NULL, &G.cli);
  if (rc == 0)
    rc = wait_flag();
  if (rc) {
    fprintf(stderr, "rmx-xfer reg: %s\n", rmx_strerror(rc));
    return 1;
  }
  int verbs = 0;
  if (o->verbs && !(verbs = xfer_ibv_open() == 0))
    fprintf(stderr, "rmx-xfer reg: no verbs device for ibv_reg_mr (or built without rdma-core)\n");
  if (!G.json)
    printf("# rmx-xfer reg over %s: ms, medians of 3; per GiB: reg + pack + use, dereg\n"
           "%-10s %6s %9s %9s %8s %8s %9s %11s %11s %9s %9s\n", rmx_conn_transport(G.cli),
           "pages", "MiB", "touch", "reg", "pack", "use", "dereg", "reg/GiB", "dereg/GiB",
           "ibv_reg", "ibv_dereg");
  int reposted = 0, hugetlb_ok = 0;
  for (int kind = 0; kind < (o->huge ? 3 : 1) && rc == 0; kind++) {
    if (kind == 2 && hugetlb_ok) /* THP only where the huge page pool is empty */
      break;
    for (size_t len = o->size < (256u << 20) ? o->size : 256u << 20; len <= o->size && !rc;
         len *= 2) {
      uint8_t *p = map(len, kind);
      if (!p) {
        fprintf(stderr, "rmx-xfer reg: no %zu MiB of %s pages\n", len >> 20, kind_name[kind]);
        break;
      }
      hugetlb_ok |= kind == 1;
      row_t runs[3], med;
      uint64_t t0 = perf_ticks();
      memset(p, 1, len);
      double touch = ms_since(t0), v[3];
      for (int i = 0; i < 3 && rc == 0; i++)
        rc = once(p, len, &runs[i], verbs);
      if (rc) {
        fprintf(stderr, "rmx-xfer reg: %zu MiB of %s pages: %s\n", len >> 20, kind_name[kind],
                rmx_strerror(rc));
      } else {
#define MED(f) (v[0] = runs[0].f, v[1] = runs[1].f, v[2] = runs[2].f, median3(v))
        med = (row_t){touch, MED(reg), MED(pack), MED(use), MED(dereg), MED(vreg), MED(vdereg)};
#undef MED
        print_row(kind, len, &med);
        if (!reposted++)
          rc = repost(p, len, 200);
      }
      munmap(p, len);
    }
  }
  xfer_ibv_close();
  fflush(stdout);
  G.closing = 2;
  rmx_conn_close(G.cli, on_closed, NULL);
  rmx_conn_close(G.srv, on_closed, NULL);
  rmx_listener_close(l);
  wait_flag();
  int drc = rmx_ctx_destroy(G.ctx);
  if (drc)
    fprintf(stderr, "rmx-xfer reg: destroying the context: %s\n", rmx_strerror(drc));
  return rc || drc ? 1 : 0;
}
