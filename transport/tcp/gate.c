/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Listening sockets (rmx__tcp_listen_fd): a listener's (tcp.c), and a
 * listener group's (src/conn/group.c), which is bound and listening once,
 * watched by every member's loop and accepted from under the group's lock.
 * An accepted socket is only a descriptor until the member it is handed
 * to opens it in its own loop (tcp_feed, tcp.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp.h"

struct rmx_tp_gate {
  int fd;
};

static int errno_err(int e) { return rmx__uv_err(uv_translate_sys_error(e)); }

/*
 * A listening socket on sa, made here and not by libuv: uv_tcp_bind keeps
 * EADDRINUSE back for uv_listen to report, and a listen(2) on the socket
 * it left unbound binds it to every interface and a port of the kernel's
 * choosing. Options as uv_tcp_bind set them: SO_REUSEADDR (a restarted
 * server binds its port while the last run's connections are in
 * TIME_WAIT; a socket listening there still refuses it), and for IPv6
 * IPV6_V6ONLY off, so that [::] takes IPv4 peers too, whatever
 * net.ipv6.bindv6only says. Every error comes back here, as -errno, with
 * the call that failed in *step.
 */
int rmx__tcp_listen_fd(const struct sockaddr *sa, int *out, const char **step)
{
  int one = 1, off = 0;
  socklen_t len = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                             : sizeof(struct sockaddr_in);
  int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *step = "socket";
    return -errno;
  }
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
    *step = "SO_REUSEADDR";
  else if (sa->sa_family == AF_INET6 &&
           setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) != 0)
    *step = "IPV6_V6ONLY";
  else if (bind(fd, sa, len) != 0)
    *step = "bind";
  else if (listen(fd, TCP_BACKLOG) != 0)
    *step = "listen";
  else {
    *out = fd;
    return 0;
  }
  int e = errno;
  close(fd);
  return -e;
}

int rmx__tcp_gate_open(const struct sockaddr *sa, rmx_tp_gate_t **out, int *fd)
{
  const char *step;
  rmx_tp_gate_t *g = malloc(sizeof(*g));
  if (!g)
    return RMX_ENOMEM;
  int e = rmx__tcp_listen_fd(sa, &g->fd, &step);
  if (e) {
    free(g);
    return errno_err(-e);
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
