/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The socket pipe (tcp.h, tcp_pipe_t): a tcp:// connection's bytes over its
 * uv_tcp_t. Writes libuv queues end in write_cb; reads land where the
 * stream says (rmx__tcp_rbuf); the orderly end is uv_shutdown's FIN.
 */
#include <errno.h>
#include <stddef.h>
#include <sys/socket.h>

#include "tcp.h"

static void handle_closed(uv_handle_t *h) { rmx__tcp_pipe_closed(h->data); }

/* A socket error a call took off the socket (the kernel reports it once;
 * libuv's read then finds only the end): kept, so the connection's end
 * reports the cause (ETIMEDOUT), not a reset. The first one counts. */
static void took(rmx_tp_conn_t *tc, int uverr)
{
  if (uverr < 0 && uverr != UV_EAGAIN && uverr != UV_ECANCELED && !tc->spin_err)
    tc->spin_err = uverr;
}

static void write_cb(uv_write_t *req, int status)
{
  wreq_t *w = rmx_container_of(req, wreq_t, req);
  took(w->tc, status);
  rmx__tcp_write_end(w, rmx__uv_err(status));
}

static ssize_t sock_try_write(rmx_tp_conn_t *tc, const uv_buf_t *bufs, unsigned n)
{
  int r = uv_try_write((uv_stream_t *)&tc->h, bufs, n); /* EAGAIN while writes queue */
  if (r == UV_EAGAIN)
    return 0;
  took(tc, r);
  return r < 0 ? rmx__uv_err(r) : r;
}

static int sock_write(rmx_tp_conn_t *tc, wreq_t *w, const uv_buf_t *bufs, unsigned n)
{
  int r = uv_write(&w->req, (uv_stream_t *)&tc->h, bufs, n, write_cb);
  took(tc, r);
  return rmx__uv_err(r);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  (void)suggested;
  rmx__tcp_rbuf(h->data, buf); /* len 0: libuv reports UV_ENOBUFS */
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
  rmx_tp_conn_t *tc = s->data;
  (void)buf;
  if (nread < 0)
    rmx__tcp_fail(tc, nread == UV_EOF ? RMX_ECONNRESET : rmx__uv_err((int)nread));
  else if (nread > 0)
    rmx__tcp_got(tc, (size_t)nread);
}

static int sock_read_start(rmx_tp_conn_t *tc)
{
  return rmx__uv_err(uv_read_start((uv_stream_t *)&tc->h, alloc_cb, read_cb));
}

static void sock_read_stop(rmx_tp_conn_t *tc) { uv_read_stop((uv_stream_t *)&tc->h); }

static void finish_shut(uv_shutdown_t *req, int status)
{
  rmx_tp_conn_t *tc = req->data;
  if (status && !tc->closing)
    rmx__tcp_conn_close(tc); /* the write side did not drain: nothing left to wait for */
}

static void sock_shutdown(rmx_tp_conn_t *tc)
{
  tc->sreq.data = tc;
  if (uv_shutdown(&tc->sreq, (uv_stream_t *)&tc->h, finish_shut) != 0)
    rmx__tcp_conn_close(tc);
}

static void sock_close(rmx_tp_conn_t *tc) { uv_close((uv_handle_t *)&tc->h, handle_closed); }

/* Memory a queued write reads from was released: the kernel takes no more
 * of it (libuv's queued writes fail), and the connection ends. */
static void sock_cut(rmx_tp_conn_t *tc)
{
  uv_os_fd_t fd;
  if (uv_fileno((uv_handle_t *)&tc->h, &fd) == 0)
    shutdown(fd, SHUT_WR);
}

/* Busy-polling (the core calls this once per loop turn while it spins):
 * read the connection that last had input straight from its socket, as
 * libuv would once its poll said the socket is readable. The socket's end
 * is left to libuv's read, which reports it in order. An error recv
 * returns is taken off the socket (libuv's reads and writes then find
 * only the end): it is kept, and the connection's end reports it. */
static int sock_read_now(rmx_tp_conn_t *tc)
{
  uv_os_fd_t fd;
  uv_buf_t b;
  if (uv_fileno((uv_handle_t *)&tc->h, &fd) != 0)
    return 0;
  rmx__tcp_rbuf(tc, &b);
  if (b.len == 0)
    return 0;
  ssize_t n = recv(fd, b.base, b.len, MSG_DONTWAIT);
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    took(tc, uv_translate_sys_error(errno));
  if (n <= 0)
    return 0;
  rmx__tcp_got(tc, (size_t)n);
  return 1;
}

static const char *sock_peer(rmx_tp_conn_t *tc, char *buf, size_t size)
{
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  if (uv_tcp_getpeername(&tc->h, (struct sockaddr *)&ss, &len) != 0)
    return "?";
  return rmx__sa_str((struct sockaddr *)&ss, buf, size);
}

/* The kernel's tcp_info goes on past glibc's copy of it; its layout is
 * the kernel's ABI (bytes_acked since Linux 4.1). */
struct tcp_info_acked {
  struct tcp_info base;
  uint64_t pacing_rate, max_pacing_rate, bytes_acked;
};
_Static_assert(sizeof(struct tcp_info) == 104, "glibc's tcp_info ends at total_retrans: "
               "a C library whose struct goes further needs its own field here");

/* Bytes wait in libuv's queue, behind a full socket buffer (what fits in
 * the kernel's is not waiting on the peer: no system call while libuv
 * holds nothing); the peer took what the kernel counts as acknowledged. */
static int sock_waiting(rmx_tp_conn_t *tc, uint64_t *taken)
{
  uv_os_fd_t fd;
  struct tcp_info_acked ti;
  socklen_t len = sizeof(ti);
  if (uv_stream_get_write_queue_size((uv_stream_t *)&tc->h) == 0 ||
      uv_fileno((uv_handle_t *)&tc->h, &fd) != 0 ||
      getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
      len < offsetof(struct tcp_info_acked, bytes_acked) + sizeof(ti.bytes_acked))
    return 0; /* nothing held back, or not knowable: never called stuck */
  *taken = ti.bytes_acked;
  return 1;
}

static void sock_open(rmx_tp_conn_t *tc)
{
  uv_tcp_init(tc->tp->loop, &tc->h);
  tc->h.data = tc;
  tc->open_handles++;
}

const tcp_pipe_t rmx__tcp_sock_pipe = {
  .open = sock_open,
  .try_write = sock_try_write,
  .write = sock_write,
  .read_start = sock_read_start,
  .read_stop = sock_read_stop,
  .shutdown = sock_shutdown,
  .close = sock_close,
  .cut = sock_cut,
  .read_now = sock_read_now,
  .peer = sock_peer,
  .waiting = sock_waiting,
};

/* Read what tc's pipe holds now (busy-polling): 1 when it read some. */
int rmx__tcp_read_now(rmx_tp_conn_t *tc)
{
  if (!tc || tc->closing || tc->dead || tc->state != TC_UP)
    return 0;
  return tc->tp->pipe->read_now(tc);
}

int rmx__tcp_read_start(rmx_tp_conn_t *tc) { return tc->tp->pipe->read_start(tc); }
