/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-embed: rmx inside an application's own libuv loop, next to the
 * application's timers and plain sockets. The loop is the application's:
 * rmx adds its handles to it and never runs it.
 *
 *   rmx-embed [URI]     (default tcp://127.0.0.1:0)
 *
 * On one loop: a timer that ticks every 10 ms, a plain TCP "status" socket
 * that answers one line, and an rmx server and client exchanging 1000
 * checked messages. When all three are done the program takes everything
 * down, and uv_loop_close() proves nothing of rmx or the application is
 * left in the loop. Exit 0 when every check held, 1 when one did not, 2 for
 * a bad command line (tool.h).
 */
#include <rmx/rmx.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "tool.h"

enum { MESSAGES = 1000 };

static uv_loop_t loop;
static rmx_ctx_t *ctx;
static rmx_listener_t *listener;
static rmx_conn_t *client, *server_side;
static uv_timer_t ticker;
static uv_tcp_t status_server, status_client;
static uv_connect_t status_connect;
static int ticks, echoed, bad, status_ok, closed, stopping;

/* ---- the application's own timer and socket ---- */

static void on_tick(uv_timer_t *t) { ticks++; }

static void status_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
  static char buf[256];
  *b = uv_buf_init(buf, sizeof(buf));
}

static void status_written(uv_write_t *w, int status) { free(w); }

static void free_handle(uv_handle_t *h) { free(h); }

/* The status server answers "ok N" (messages so far) to whatever comes. */
static void status_server_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
  if (n <= 0) {
    uv_close((uv_handle_t *)s, free_handle);
    return;
  }
  static char line[64];
  int len = snprintf(line, sizeof(line), "ok %d\n", echoed);
  uv_write_t *w = malloc(sizeof(*w));
  uv_buf_t out = uv_buf_init(line, (unsigned)len);
  uv_write(w, s, &out, 1, status_written);
}

static void status_accept(uv_stream_t *server, int status)
{
  uv_tcp_t *c = malloc(sizeof(*c));
  uv_tcp_init(&loop, c);
  if (status != 0 || uv_accept(server, (uv_stream_t *)c) != 0) {
    uv_close((uv_handle_t *)c, free_handle);
    return;
  }
  uv_read_start((uv_stream_t *)c, status_alloc, status_server_read);
}

static void status_client_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
  if (n > 0 && strncmp(b->base, "ok ", 3) == 0)
    status_ok = 1;
  uv_read_stop(s);
}

static void status_connected(uv_connect_t *req, int status)
{
  static uv_write_t w;
  static char ask[] = "status?\n";
  uv_buf_t b = uv_buf_init(ask, sizeof(ask) - 1);
  if (status != 0) {
    fprintf(stderr, "rmx-embed: status socket: %s\n", uv_strerror(status));
    bad++;
    return;
  }
  uv_write(&w, req->handle, &b, 1, NULL);
  uv_read_start(req->handle, status_alloc, status_client_read);
}

/* ---- rmx, on the same loop ---- */

static void maybe_finish(void);

static void on_closed(rmx_conn_t *c, void *arg)
{
  closed++;
  maybe_finish();
}

static void server_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  if (rmx_send(c, data, len, NULL, NULL) != 0) /* small: copied at once */
    bad++;
}

static void server_gone(rmx_conn_t *c, int status, void *arg) { rmx_conn_close(c, on_closed, NULL); }

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  static const rmx_conn_cbs_t cbs = {.on_recv = server_recv, .on_disconnect = server_gone};
  server_side = c;
  rmx_conn_set_cbs(c, &cbs, NULL);
}

static void send_next(rmx_conn_t *c)
{
  char msg[32];
  int len = snprintf(msg, sizeof(msg), "message %d", echoed);
  if (rmx_send(c, msg, (size_t)len, NULL, NULL) != 0)
    bad++;
}

static void client_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  char want[32];
  int n = snprintf(want, sizeof(want), "message %d", echoed);
  if (len != (size_t)n || memcmp(data, want, len) != 0)
    bad++;
  if (++echoed < MESSAGES)
    send_next(c);
  maybe_finish();
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  if (status != 0) {
    fprintf(stderr, "rmx-embed: connect: %s\n", rmx_strerror(status));
    bad++;
    stopping = 1;
    rmx_conn_close(c, on_closed, NULL);
    closed++; /* no server side will report */
    return;
  }
  send_next(c);
}

/* Take things down once the messages, a status answer and a few ticks
 * are in; stop the application's handles once rmx's connections closed. */
static void maybe_finish(void)
{
  if (!stopping && echoed == MESSAGES && status_ok && ticks >= 3) {
    stopping = 1;
    rmx_conn_close(client, on_closed, NULL); /* the server side follows */
  }
  if (stopping && closed == 2) {
    closed++; /* once */
    rmx_listener_close(listener);
    if (rmx_ctx_destroy(ctx) != 0) /* on the caller's loop: returns at once */
      bad++;
    uv_close((uv_handle_t *)&ticker, NULL);
    uv_close((uv_handle_t *)&status_server, NULL);
    uv_close((uv_handle_t *)&status_client, NULL);
  }
}

static void on_tick_check(uv_timer_t *t)
{
  on_tick(t);
  maybe_finish();
}

static const char usage[] =
    "usage: rmx-embed [URI]\n"
    "       rmx-embed --help | --version\n"
    "  rmx and an application's own timer and socket on one libuv loop;\n"
    "  1000 checked messages, then everything taken down (default URI\n"
    "  tcp://127.0.0.1:0, where it listens and connects)\n"
    "  Exit 0: every check held; 1: one did not; 2: a bad command line.\n";

int main(int argc, char **argv)
{
  int first = tool_options(argc, argv, usage);
  if (argc - first > 1)
    tool_bad("at most one URI, not %d operands", argc - first);
  const char *uri = argc > first ? argv[first] : "tcp://127.0.0.1:0";
  tool_uri("URI", uri);
  char bound[128];
  struct sockaddr_in sa;
  int len = sizeof(sa);

  uv_loop_init(&loop);
  uv_timer_init(&loop, &ticker);
  uv_timer_start(&ticker, on_tick_check, 10, 10);
  uv_tcp_init(&loop, &status_server);
  uv_ip4_addr("127.0.0.1", 0, &sa);
  if (uv_tcp_bind(&status_server, (const struct sockaddr *)&sa, 0) ||
      uv_listen((uv_stream_t *)&status_server, 8, status_accept) ||
      uv_tcp_getsockname(&status_server, (struct sockaddr *)&sa, &len))
    return 1;
  uv_tcp_init(&loop, &status_client);
  uv_tcp_connect(&status_connect, &status_client, (const struct sockaddr *)&sa, status_connected);

  int rc;
  if ((rc = rmx_ctx_create(&ctx, &loop, NULL)) != 0) {
    fprintf(stderr, "rmx-embed: %s\n", rmx_strerror(rc));
    return 1;
  }
  if ((rc = rmx_listen(ctx, uri, on_accept, NULL, &listener)) != 0)
    return tool_uri_failed("listen on", uri, rc);
  if ((rc = rmx_listener_uri(listener, bound, sizeof(bound))) != 0 ||
      (rc = rmx_connect(ctx, bound, on_connected, NULL, &client)) != 0) {
    fprintf(stderr, "rmx-embed: %s\n", rmx_strerror(rc));
    return 1;
  }
  rmx_conn_set_cbs(client, &(rmx_conn_cbs_t){.on_recv = client_recv}, NULL);

  uv_run(&loop, UV_RUN_DEFAULT); /* the application's loop, run by it */
  int left = uv_loop_close(&loop);
  printf("embed: %d messages echoed over %s, %d timer ticks, status socket %s, loop %s\n",
         echoed, bound, ticks, status_ok ? "answered" : "silent",
         left == 0 ? "closed clean" : "still holds handles");
  return bad || echoed != MESSAGES || !status_ok || left != 0;
}
