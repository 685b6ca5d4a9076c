/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RMX_IDLE_TIMEOUT_MS (public API only). A server context with an idle
 * limit of 1 s and keepalives every 100 ms (so keepalives flow on every
 * connection throughout) has two connections from a client context with
 * no limit: A carries nothing, B a message every 100 ms. The server closes
 * A (its on_disconnect gets RMX_ETIMEDOUT, the client's on_disconnect
 * comes with the peer's orderly close, 0) while B stays up on both sides;
 * once B stops, the server closes B too.
 *
 *   rmx-idle tcp
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rmx/rmx.h>
#include <uv.h>

#define TEST_NAME "idle"
#include "test_util.h"

enum { A, B };

typedef struct side {
  rmx_conn_t *c;
  int up, down, status, got;
} side_t;

static side_t cl[2], sv[2];
static int naccepted;

static void on_down(rmx_conn_t *c, int status, void *arg)
{
  side_t *s = arg;
  (void)c;
  s->down++;
  s->status = status;
}

static void on_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  side_t *s = arg;
  (void)c;
  (void)data;
  (void)len;
  s->got++;
}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  (void)l;
  (void)arg;
  if (naccepted >= 2)
    FAIL("a third connection");
  side_t *s = &sv[naccepted++]; /* A connects first, and alone */
  s->c = c;
  s->up = 1;
  rmx_conn_cbs_t cbs = {.on_recv = on_recv, .on_disconnect = on_down};
  rmx_conn_set_cbs(c, &cbs, s);
}

static void on_conn(rmx_conn_t *c, int status, void *arg)
{
  side_t *s = arg;
  if (status)
    FAIL("connect: %s", rmx_strerror(status));
  s->up = 1;
  rmx_conn_cbs_t cbs = {.on_recv = on_recv, .on_disconnect = on_down};
  rmx_conn_set_cbs(c, &cbs, s);
}

static rmx_ctx_t *srv, *cli;

/* Pump until *flag, B sending every 100 ms while busy. */
static void until(const int *flag, int busy, int secs)
{
  uint64_t end = now_ms() + (uint64_t)secs * 1000, next = 0;
  while (!*flag) {
    pump(srv, cli);
    if (busy && now_ms() >= next) {
      if (rmx_send(cl[B].c, "x", 1, NULL, NULL) != 0)
        FAIL("send on B");
      next = now_ms() + 100;
    }
    if (now_ms() > end)
      FAIL("timed out");
  }
}

int main(int argc, char **argv)
{
  if (argc < 2 || strcmp(argv[1], "tcp") != 0) {
    fprintf(stderr, "usage: rmx-idle tcp\n");
    return 2;
  }
  rmx_config_t sc;
  rmx_config_init(&sc);
  sc.idle_timeout_ms = 1000;
  sc.keepalive_ms = 100;
  sc.keepalive_timeout_ms = 1000;
  rmx_listener_t *l;
  char uri[128];
  if (rmx_ctx_create(&srv, NULL, &sc) != 0 || rmx_ctx_create(&cli, NULL, NULL) != 0 ||
      rmx_listen(srv, "tcp://127.0.0.1:0", on_accept, NULL, &l) != 0 ||
      rmx_listener_uri(l, uri, sizeof(uri)) != 0)
    FAIL("set-up");
  for (int i = A; i <= B; i++) {
    if (rmx_connect(cli, uri, on_conn, &cl[i], &cl[i].c) != 0)
      FAIL("connect");
    until(&cl[i].up, 0, 30);
    until(&sv[i].up, 0, 30);
  }

  /* A carries nothing but keepalives; B a message every 100 ms. */
  until(&sv[A].down, 1, 30);
  until(&cl[A].down, 1, 30);
  if (sv[A].status != RMX_ETIMEDOUT)
    FAIL("the server's A ended with %s, not RMX_ETIMEDOUT", rmx_err_name(sv[A].status));
  if (cl[A].status != 0)
    FAIL("the client's A ended with %s, not the peer's orderly close",
         rmx_err_name(cl[A].status));
  if (sv[B].down || cl[B].down || sv[B].got < 5)
    FAIL("B, which carried %d messages, went down too", sv[B].got);
  printf("idle: the idle connection was closed (server: %s; client: orderly), the busy one "
         "stayed (%d messages)\n", rmx_err_name(sv[A].status), sv[B].got);

  /* B stops: it goes the same way. */
  until(&sv[B].down, 0, 30);
  until(&cl[B].down, 0, 30);
  if (sv[B].status != RMX_ETIMEDOUT || cl[B].status != 0)
    FAIL("B ended with %s here and %s at the client", rmx_err_name(sv[B].status),
         rmx_err_name(cl[B].status));
  printf("idle: once quiet, the other was closed too\n");

  for (int i = A; i <= B; i++) {
    rmx_conn_close(cl[i].c, NULL, NULL);
    rmx_conn_close(sv[i].c, NULL, NULL);
  }
  rmx_listener_close(l);
  for (int i = 0; i < 100; i++)
    pump(srv, cli);
  if (rmx_ctx_destroy(cli) != 0 || rmx_ctx_destroy(srv) != 0)
    FAIL("destroy");
  return 0;
}
