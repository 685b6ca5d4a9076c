/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * RMX_EVICT_IDLE (public API only). A server context with max_conns 4 has
 * four connections from a client context, made one after the other; all
 * but the second then carry a message, so the second has carried none for
 * the longest. A fifth client connects:
 *
 * - evict_idle 1: the fifth gets in; the server closes the second alone
 *   (its on_disconnect gets RMX_ECANCELED, the client's comes with the
 *   peer's orderly close, 0); the other three and the fifth still echo.
 * - evict_idle 0: the fifth is refused (RMX_ECONNREFUSED), nobody is
 *   closed, all four still echo.
 *
 * Every callback runs once at most, and none after on_closed.
 *
 *   rmx-evict tcp
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rmx/rmx.h>

#define TEST_NAME "evict"
#include "test_util.h"

enum { N = 4, IDLE = 1 }; /* the second client is the idle one */

typedef struct side {
  rmx_conn_t *c;
  int up, down, status, got, closed;
  int server; /* echoes what it receives */
} side_t;

static side_t cl[N + 1], sv[N + 1];
static int naccepted;
static rmx_ctx_t *srv, *cli;

static void on_down(rmx_conn_t *c, int status, void *arg)
{
  side_t *s = arg;
  (void)c;
  if (s->down++ || s->closed)
    FAIL("on_disconnect twice, or after on_closed");
  s->status = status;
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  side_t *s = arg;
  (void)c;
  if (s->closed++)
    FAIL("on_closed twice");
}

/* The server echoes; the clients count what comes back. */
static void on_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  side_t *s = arg;
  if (s->closed)
    FAIL("on_recv after on_closed");
  s->got++;
  if (s->server && rmx_send(c, data, len, NULL, NULL) != 0)
    FAIL("echo");
}

static const rmx_conn_cbs_t cbs = {.on_recv = on_recv, .on_disconnect = on_down};

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  (void)l;
  (void)arg;
  if (naccepted > N)
    FAIL("a sixth connection");
  side_t *s = &sv[naccepted++]; /* the clients connect one at a time */
  s->c = c;
  s->up = 1;
  s->server = 1;
  rmx_conn_set_cbs(c, &cbs, s);
}

static void on_conn(rmx_conn_t *c, int status, void *arg)
{
  side_t *s = arg;
  if (s->up)
    FAIL("on_connected twice");
  s->up = status ? -1 : 1;
  s->status = status;
  if (!status)
    rmx_conn_set_cbs(c, &cbs, s);
}

/* Pump until *flag reaches want (a count), or leaves 0 (want 0). */
static void until(const int *flag, int want, const char *what)
{
  uint64_t end = now_ms() + 30000;
  while (want ? *flag < want : *flag == 0) {
    pump(srv, cli);
    if (now_ms() > end)
      FAIL("timed out waiting for %s", what);
  }
}

static void pause_ms(unsigned ms)
{
  uint64_t end = now_ms() + ms;
  while (now_ms() < end)
    pump(srv, cli);
}

/* A message from client i comes back echoed. */
static void round_trip(int i)
{
  int want = cl[i].got + 1;
  if (rmx_send(cl[i].c, "ping", 4, NULL, NULL) != 0)
    FAIL("send on client %d", i + 1);
  until(&cl[i].got, want, "an echo");
}

static void run(int evict)
{
  rmx_config_t sc;
  rmx_config_init(&sc);
  sc.max_conns = N;
  sc.evict_idle = (uint32_t)evict;
  rmx_listener_t *l;
  char uri[128];
  memset(cl, 0, sizeof(cl));
  memset(sv, 0, sizeof(sv));
  naccepted = 0;
  if (rmx_ctx_create(&srv, NULL, &sc) != 0 || rmx_ctx_create(&cli, NULL, NULL) != 0 ||
      rmx_listen(srv, "tcp://127.0.0.1:0", on_accept, NULL, &l) != 0 ||
      rmx_listener_uri(l, uri, sizeof(uri)) != 0)
    FAIL("set-up");
  for (int i = 0; i < N; i++) {
    if (rmx_connect(cli, uri, on_conn, &cl[i], &cl[i].c) != 0)
      FAIL("connect");
    until(&cl[i].up, 1, "a connect");
    until(&sv[i].up, 1, "an accept");
    pause_ms(5); /* each connection's times apart */
  }
  /* All but the second carry a message after it was established. */
  pause_ms(20);
  for (int i = 0; i < N; i++)
    if (i != IDLE)
      round_trip(i);

  if (rmx_connect(cli, uri, on_conn, &cl[N], &cl[N].c) != 0)
    FAIL("connect the fifth");
  until(&cl[N].up, 0, "the fifth's on_connected"); /* 1 connected, -1 refused */
  if (evict) {
    if (cl[N].up != 1)
      FAIL("the fifth was refused: %s", rmx_err_name(cl[N].status));
    until(&sv[IDLE].down, 1, "the idle one's on_disconnect at the server");
    until(&cl[IDLE].down, 1, "the idle one's on_disconnect at the client");
    if (sv[IDLE].status != RMX_ECANCELED || cl[IDLE].status != 0)
      FAIL("the evicted connection ended with %s here and %s at the client",
           rmx_err_name(sv[IDLE].status), rmx_err_name(cl[IDLE].status));
  } else if (cl[N].up != -1 || cl[N].status != RMX_ECONNREFUSED) {
    FAIL("the fifth got %s, not RMX_ECONNREFUSED", rmx_err_name(cl[N].status));
  }
  if (naccepted != (evict ? N + 1 : N))
    FAIL("the server accepted %d connections", naccepted);
  for (int i = 0; i <= N; i++)
    if (cl[i].up == 1 && !(evict && i == IDLE))
      round_trip(i);
  for (int i = 0; i <= N; i++)
    if ((sv[i].down || cl[i].down) && !(evict && i == IDLE))
      FAIL("client %d went down too (%s)", i + 1, rmx_err_name(sv[i].status));
  printf("evict: RMX_EVICT_IDLE=%d: %s\n", evict,
         evict ? "the fifth got in, the idle second was closed (server: RMX_ECANCELED; "
                 "client: orderly), the others still echo"
               : "the fifth was refused, nobody was closed");

  int open = 0;
  for (int i = 0; i <= N; i++) {
    if (cl[i].up && rmx_conn_close(cl[i].c, on_closed, &cl[i]) == 0)
      open++;
    if (sv[i].up && rmx_conn_close(sv[i].c, on_closed, &sv[i]) == 0)
      open++;
  }
  rmx_listener_close(l);
  uint64_t end = now_ms() + 30000;
  int closed = 0;
  while (closed < open) {
    pump(srv, cli);
    closed = 0;
    for (int i = 0; i <= N; i++)
      closed += cl[i].closed + sv[i].closed;
    if (now_ms() > end)
      FAIL("%d of %d on_closed", closed, open);
  }
  if (rmx_ctx_destroy(cli) != 0 || rmx_ctx_destroy(srv) != 0)
    FAIL("destroy");
}

int main(int argc, char **argv)
{
  if (argc < 2 || strcmp(argv[1], "tcp") != 0) {
    fprintf(stderr, "usage: rmx-evict tcp\n");
    return 2;
  }
  run(1);
  run(0);
  return 0;
}
