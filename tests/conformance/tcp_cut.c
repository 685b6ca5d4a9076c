/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A TCP relay on loopback that a test can cut: it takes one connection on
 * its own port, relays it both ways to a target port, and on tcp_cut()
 * resets both sockets, as a cable pulled would end the connection.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "tcp_cut.h"

typedef struct side {
  uv_tcp_t tcp;
  struct side *other;
  int open;
} side_t;

static struct {
  uv_loop_t loop;
  uv_tcp_t listener;
  side_t in, out;
  struct sockaddr_in target;
  int cut;
} P;

static void alloc_cb(uv_handle_t *h, size_t want, uv_buf_t *buf)
{
  (void)h;
  buf->base = malloc(want);
  buf->len = buf->base ? want : 0;
}

static void write_cb(uv_write_t *w, int status)
{
  (void)status;
  free(w->data);
  free(w);
}

static void closed_cb(uv_handle_t *h) { ((side_t *)h->data)->open = 0; }

static void side_close(side_t *s, int reset)
{
  if (!s->open || uv_is_closing((uv_handle_t *)&s->tcp))
    return;
  if (reset)
    uv_tcp_close_reset(&s->tcp, closed_cb);
  else
    uv_close((uv_handle_t *)&s->tcp, closed_cb);
}

static void read_cb(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
  side_t *s = st->data;
  if (n > 0 && s->other->open && !P.cut) {
    uv_write_t *w = malloc(sizeof(*w));
    uv_buf_t b = uv_buf_init(buf->base, (unsigned)n);
    assert(w);
    w->data = buf->base;
    if (uv_write(w, (uv_stream_t *)&s->other->tcp, &b, 1, write_cb) == 0)
      return;
    free(w);
  }
  free(buf->base);
  if (n < 0) { /* one side ended: so does the other */
    side_close(s, 0);
    side_close(s->other, 0);
  }
}

static void side_init(side_t *s, side_t *other)
{
  uv_tcp_init(&P.loop, &s->tcp);
  s->tcp.data = s;
  s->other = other;
  s->open = 1;
}

static void connected_cb(uv_connect_t *req, int status)
{
  free(req);
  if (status) {
    side_close(&P.in, 1);
    side_close(&P.out, 1);
    return;
  }
  uv_read_start((uv_stream_t *)&P.in.tcp, alloc_cb, read_cb);
  uv_read_start((uv_stream_t *)&P.out.tcp, alloc_cb, read_cb);
}

static void accept_cb(uv_stream_t *l, int status)
{
  if (status || P.in.open)
    return; /* one connection */
  side_init(&P.in, &P.out);
  side_init(&P.out, &P.in);
  uv_accept(l, (uv_stream_t *)&P.in.tcp);
  uv_connect_t *req = malloc(sizeof(*req));
  assert(req);
  uv_tcp_connect(req, &P.out.tcp, (const struct sockaddr *)&P.target, connected_cb);
}

int tcp_cut_start(int target_port)
{
  struct sockaddr_in a;
  int len = sizeof(a);
  memset(&P, 0, sizeof(P));
  uv_loop_init(&P.loop);
  uv_ip4_addr("127.0.0.1", target_port, &P.target);
  uv_ip4_addr("127.0.0.1", 0, &a);
  uv_tcp_init(&P.loop, &P.listener);
  if (uv_tcp_bind(&P.listener, (const struct sockaddr *)&a, 0) ||
      uv_listen((uv_stream_t *)&P.listener, 4, accept_cb) ||
      uv_tcp_getsockname(&P.listener, (struct sockaddr *)&a, &len))
    return -1;
  return ntohs(a.sin_port);
}

void tcp_cut_pump(void) { uv_run(&P.loop, UV_RUN_NOWAIT); }

void tcp_cut(void)
{
  P.cut = 1;
  side_close(&P.in, 1);
  side_close(&P.out, 1);
}

void tcp_cut_stop(void)
{
  side_close(&P.in, 1);
  side_close(&P.out, 1);
  uv_close((uv_handle_t *)&P.listener, NULL);
  while (uv_loop_close(&P.loop) == UV_EBUSY)
    uv_run(&P.loop, UV_RUN_NOWAIT);
}
