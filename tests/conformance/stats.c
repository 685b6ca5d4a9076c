/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx_ctx_stats_get (public API only): the connections of a context, the
 * bytes and registrations the application holds, the transport's own
 * numbers (0 over TCP here: nothing registered, nothing refused), and the
 * structure's size contract. rmx_ctx_stats (the first version) writes nothing past
 * pool_bytes; rmx_ctx_stats_get writes what the caller's size holds and
 * zeros past the library's own fields; a size below the first version's is
 * refused.
 *
 *   rmx-stats tcp
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rmx/rmx.h>

#define TEST_NAME "stats"
#include "test_util.h"

static rmx_ctx_stats_t get(rmx_ctx_t *ctx)
{
  rmx_ctx_stats_t st;
  if (rmx_ctx_stats_get(ctx, &st, sizeof(st)) != 0)
    FAIL("rmx_ctx_stats_get");
  return st;
}

static int connected, accepted;
static rmx_conn_t *srv[3];

static void on_conn(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  (void)arg;
  if (status)
    FAIL("connect: %s", rmx_strerror(status));
  connected++;
}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  (void)l;
  (void)arg;
  srv[accepted++] = c;
}

/* Progress until the context counts want connections. */
static void conns_until(rmx_ctx_t *ctx, uint64_t want)
{
  time_t end = time(NULL) + 30;
  while (get(ctx).conns != want) {
    rmx_ctx_progress(ctx);
    if (time(NULL) > end)
      FAIL("conns is %llu, not %llu", (unsigned long long)get(ctx).conns,
           (unsigned long long)want);
  }
}

static void sizes(rmx_ctx_t *ctx)
{
  enum { V0 = RMX_CTX_STATS_SIZE_V0, ALL = sizeof(rmx_ctx_stats_t) };
  unsigned char buf[ALL + 16];
  /* The first version's callers allocate V0 bytes: nothing past them. */
  memset(buf, 0xaa, sizeof(buf));
  rmx_ctx_stats(ctx, (rmx_ctx_stats_t *)(void *)buf);
  for (size_t i = V0; i < sizeof(buf); i++)
    if (buf[i] != 0xaa)
      FAIL("rmx_ctx_stats wrote byte %zu, past the first version's %d", i, (int)V0);
  memset(buf, 0xaa, sizeof(buf));
  if (rmx_ctx_stats_get(ctx, (rmx_ctx_stats_t *)(void *)buf, V0) != 0)
    FAIL("rmx_ctx_stats_get with the first version's size");
  for (size_t i = V0; i < sizeof(buf); i++)
    if (buf[i] != 0xaa)
      FAIL("rmx_ctx_stats_get(%d) wrote byte %zu", (int)V0, i);
  /* A caller from a newer rmx.h: zeros past what this library has. */
  memset(buf, 0xaa, sizeof(buf));
  if (rmx_ctx_stats_get(ctx, (rmx_ctx_stats_t *)(void *)buf, sizeof(buf)) != 0)
    FAIL("rmx_ctx_stats_get with a larger size");
  for (size_t i = ALL; i < sizeof(buf); i++)
    if (buf[i] != 0)
      FAIL("byte %zu past the library's fields is not 0", i);
  if (rmx_ctx_stats_get(ctx, (rmx_ctx_stats_t *)(void *)buf, V0 - 8) != RMX_EINVAL ||
      rmx_ctx_stats_get(ctx, NULL, ALL) != RMX_EINVAL)
    FAIL("a size below the first version's, or NULL, is not RMX_EINVAL");
}

int main(int argc, char **argv)
{
  if (argc < 2 || (strcmp(argv[1], "tcp") != 0 && strcmp(argv[1], "shm") != 0)) {
    fprintf(stderr, "usage: rmx-stats tcp|shm\n");
    return 2;
  }
  const char *scheme = argv[1];
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  char uri[128], luri[64];
  if (strcmp(scheme, "tcp") == 0)
    snprintf(luri, sizeof(luri), "tcp://127.0.0.1:0");
  else
    snprintf(luri, sizeof(luri), "shm://@rmx-stats-%d", (int)getpid());
  if (rmx_ctx_create(&ctx, NULL, NULL) != 0)
    FAIL("context");
  rmx_ctx_stats_t st = get(ctx);
  if (st.conns || st.mem_reg_bytes || st.mem_regs || st.tp_refused)
    FAIL("a new context counts %llu connections, %llu registered bytes, %llu refusals",
         (unsigned long long)st.conns, (unsigned long long)st.mem_reg_bytes,
         (unsigned long long)st.tp_refused);
  sizes(ctx);

  /* Registrations: counted once each, gone when released. */
  static char a[4096], b[100], c[1 << 16];
  rmx_mem_t *ma, *mb, *mc;
  if (rmx_mem_reg(ctx, a, sizeof(a), RMX_MEM_LOCAL, &ma) != 0 ||
      rmx_mem_reg(ctx, b, sizeof(b), RMX_MEM_LOCAL | RMX_MEM_REMOTE_READ, &mb) != 0 ||
      rmx_mem_reg(ctx, c, sizeof(c), RMX_MEM_LOCAL, &mc) != 0)
    FAIL("rmx_mem_reg");
  st = get(ctx);
  if (st.mem_reg_bytes != sizeof(a) + sizeof(b) + sizeof(c) || st.mem_regs != 3)
    FAIL("3 registrations of %zu bytes counted as %llu of %llu bytes",
         sizeof(a) + sizeof(b) + sizeof(c), (unsigned long long)st.mem_regs,
         (unsigned long long)st.mem_reg_bytes);
  rmx_mem_dereg(mb);
  st = get(ctx);
  if (st.mem_reg_bytes != sizeof(a) + sizeof(c) || st.mem_regs != 2)
    FAIL("after a release: %llu of %llu bytes", (unsigned long long)st.mem_regs,
         (unsigned long long)st.mem_reg_bytes);

  /* Connections: both ends of three, then none once all are freed. */
  if (rmx_listen(ctx, luri, on_accept, NULL, &l) != 0 ||
      rmx_listener_uri(l, uri, sizeof(uri)) != 0)
    FAIL("listen");
  rmx_conn_t *cl[3];
  for (int i = 0; i < 3; i++)
    if (rmx_connect(ctx, uri, on_conn, NULL, &cl[i]) != 0)
      FAIL("connect");
  time_t end = time(NULL) + 30;
  while ((connected < 3 || accepted < 3) && time(NULL) <= end)
    rmx_ctx_progress(ctx);
  if (connected < 3 || accepted < 3)
    FAIL("connected %d, accepted %d", connected, accepted);
  conns_until(ctx, 6);
  for (int i = 0; i < 3; i++)
    if (strcmp(rmx_conn_transport(cl[i]), scheme) != 0 ||
        strcmp(rmx_conn_transport(srv[i]), scheme) != 0)
      FAIL("a connection over %s, not %s", rmx_conn_transport(cl[i]), scheme);
  for (int i = 0; i < 3; i++)
    rmx_conn_close(cl[i], NULL, NULL);
  for (int i = 0; i < 3; i++)
    rmx_conn_close(srv[i], NULL, NULL);
  conns_until(ctx, 0);
  st = get(ctx);
  if (st.tp_reg_bytes || st.tp_refused)
    FAIL("%s counts %llu registered bytes of its own, %llu refusals", scheme,
         (unsigned long long)st.tp_reg_bytes, (unsigned long long)st.tp_refused);
  printf("stats %s: 6 connections then none, registrations counted, sizes kept\n", scheme);
  rmx_mem_dereg(ma);
  rmx_mem_dereg(mc);
  if (get(ctx).mem_reg_bytes || get(ctx).mem_regs)
    FAIL("registrations counted after all were released");
  rmx_listener_close(l);
  if (rmx_ctx_destroy(ctx) != 0)
    FAIL("destroy");
  return 0;
}
