/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A listener group's socket (src/conn/group.c): bound and listening once,
 * watched by every member's loop, accepted from under the group's lock.
 * An accepted socket is only a descriptor until the member it is handed
 * to opens it in its own loop (tcp_feed, tcp.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp.h"

struct rmx_tp_gate {
  int fd;
};

static int errno_err(int e) { return rmx__uv_err(uv_translate_sys_error(e)); }

int rmx__tcp_gate_open(const struct sockaddr *sa, rmx_tp_gate_t **out, int *fd)
{
  rmx_tp_gate_t *g = malloc(sizeof(*g));
  if (!g)
    return RMX_ENOMEM;
  int one = 1, rc = 0;
  socklen_t len = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                             : sizeof(struct sockaddr_in);
  g->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (g->fd < 0 || setsockopt(g->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      bind(g->fd, sa, len) != 0 || listen(g->fd, TCP_BACKLOG) != 0)
    rc = errno_err(errno);
  if (rc) {
    if (g->fd >= 0)
      close(g->fd);
    free(g);
    return rc;
  }
  *fd = g->fd;
  *out = g;
  return 0;
}

int rmx__tcp_gate_addr(rmx_tp_gate_t *g, struct sockaddr_storage *ss)
{
  socklen_t len = sizeof(*ss);
  return getsockname(g->fd, (struct sockaddr *)ss, &len) == 0 ? 0 : errno_err(errno);
}

int rmx__tcp_gate_take(rmx_tp_gate_t *g, rmx_tp_raw_t **raw)
{
  tcp_raw_t *r = malloc(sizeof(*r));
  if (!r)
    return RMX_ENOMEM;
  for (;;) {
    r->fd = accept4(g->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (r->fd >= 0) {
      *raw = &r->raw;
      return 0;
    }
    if (errno != EINTR && errno != ECONNABORTED && errno != EPROTO)
      break; /* those are a peer that gave up: the next one */
  }
  int rc = errno == EAGAIN || errno == EWOULDBLOCK ? RMX_EAGAIN : errno_err(errno);
  free(r);
  return rc;
}

int rmx__tcp_gate_give(rmx_tp_gate_t *g, rmx_tp_raw_t *raw, rmx_tp_t *tp)
{
  (void)g; /* a descriptor is the process's: any loop may open it */
  (void)raw;
  (void)tp;
  return 0;
}

/* The peer sees its connection reset before our hello: its connect fails. */
void rmx__tcp_gate_drop(rmx_tp_raw_t *raw)
{
  tcp_raw_t *r = rmx_container_of(raw, tcp_raw_t, raw);
  struct linger lg = {1, 0};
  setsockopt(r->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  close(r->fd);
  free(r);
}

void rmx__tcp_gate_close(rmx_tp_gate_t *g)
{
  close(g->fd);
  free(g);
}
