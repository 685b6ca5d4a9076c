/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TCP's part of the polling fast path (transport.h, poll and spin): read
 * without waiting for the loop, straight from the sockets that have input.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "tcp.h"

int rmx__tcp_spin(rmx_tp_t *tp) { return rmx__tcp_read_now(tp->hot); }

/* The connection on a socket the loop's epoll set says is ready: libuv
 * keeps the fd in the event's data. Checked against the socket itself, so
 * a libuv that keeps something else there costs only a loop turn. Found
 * connections are remembered by fd (tp->by_fd) until they are freed. */
static rmx_tp_conn_t *conn_on_fd(rmx_tp_t *tp, int fd)
{
  uv_os_fd_t f;
  rmx_list_t *n;
  if (fd < 0 || fd > 65535)
    return NULL;
  rmx_tp_conn_t *tc = (size_t)fd < tp->by_fd_len ? tp->by_fd[fd] : NULL;
  if (tc && uv_fileno((uv_handle_t *)&tc->h, &f) == 0 && f == fd)
    return tc;
  tc = NULL;
  rmx_list_foreach(n, &tp->conns) {
    rmx_tp_conn_t *t = rmx_container_of(n, rmx_tp_conn_t, tp_link);
    if (uv_fileno((uv_handle_t *)&t->h, &f) == 0 && f == fd) {
      tc = t;
      break;
    }
  }
  if (!tc)
    return NULL;
  if ((size_t)fd >= tp->by_fd_len) {
    size_t len = (size_t)fd * 2 + 16;
    rmx_tp_conn_t **a = realloc(tp->by_fd, len * sizeof(*a));
    if (!a)
      return tc;
    memset(a + tp->by_fd_len, 0, (len - tp->by_fd_len) * sizeof(*a));
    tp->by_fd = a;
    tp->by_fd_len = len;
  }
  tp->by_fd[fd] = tc;
  tc->by_fd = fd;
  return tc;
}

/* What ended (as the instance's idle handle would report it), and only
 * that: the send half of a pass (rmx_ctx_flush). */
int rmx__tcp_reap(rmx_tp_t *tp)
{
  if (rmx_list_empty(&tp->laterq))
    return 0;
  rmx__tcp_later_run(tp);
  return 1;
}

/* The polling fast path: what ended, then the connection that last had
 * input. When that one has nothing and other connections live, one look
 * at the loop's epoll set, without waiting, finds the other sockets that
 * are ready: connections with input are read at once, anything else asks
 * for a turn of the loop now rather than at its next count. The look is
 * level-triggered and takes nothing from libuv. */
int rmx__tcp_poll(rmx_tp_t *tp, int *turn)
{
  int found = rmx__tcp_reap(tp);
  if (found && tp->finishing)
    return found; /* a callback destroyed the context */
  found += rmx__tcp_spin(tp);
  if (found || tp->nconns < 2)
    return found; /* a listener's peers wait for the loop's turn */
  struct epoll_event ev[8];
  int n = epoll_wait(uv_backend_fd(tp->loop), ev, 8, 0);
  for (int i = 0; i < n && !tp->finishing; i++) {
    rmx_tp_conn_t *tc = (ev[i].events & EPOLLIN) ? conn_on_fd(tp, ev[i].data.fd) : NULL;
    if (tc && rmx__tcp_read_now(tc))
      found++;
    else
      *turn = 1; /* a listener, a write, an end, a handshake: libuv's */
  }
  return found;
}

