/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Conformance, listening: an address another socket holds is refused with
 * RMX_EADDRINUSE on every way to listen (an address, IPv6, a host name,
 * auto://, a listener group), the log says so, and no listener is left
 * anywhere else; a port of 0 still gets a free port, [::] takes IPv4
 * peers, and a port whose last connections are closing can be listened on
 * again at once.
 */
#include <dirent.h>
#include <errno.h>
#include <netdb.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <cmocka.h>

#include "conformance.h"

static char logged[512];

static void keep_listen_line(rmx_log_level_t level, const char *line, void *arg)
{
  if (strstr(line, "cannot listen on"))
    snprintf(logged, sizeof(logged), "%s", line);
}

/* The listening sockets this process holds; the address of the one with
 * the highest descriptor goes to last. A listen that fails must leave
 * none behind (one bound by the kernel to any address and port). */
static int listening_sockets(char *last, size_t len)
{
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  assert_non_null(d);
  while ((e = readdir(d)) != NULL) {
    int fd = atoi(e->d_name), on = 0;
    socklen_t olen = sizeof(on);
    struct stat st;
    struct sockaddr_storage ss;
    socklen_t slen = sizeof(ss);
    if (e->d_name[0] == '.' || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &olen) != 0 || !on ||
        getsockname(fd, (struct sockaddr *)&ss, &slen) != 0)
      continue;
    n++;
    char host[INET6_ADDRSTRLEN] = "?";
    const void *a = ss.ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
                                             : (const void *)&((struct sockaddr_in *)&ss)->sin_addr;
    inet_ntop(ss.ss_family, a, host, sizeof(host));
    snprintf(last, len, "%s port %u", host, ntohs(((struct sockaddr_in *)&ss)->sin_port));
  }
  closedir(d);
  return n;
}

/* A plain socket bound to host:*port and listening (*port 0: a free one,
 * written back); -1 where host's family is not usable here. */
static int hold(const char *host, int *port, int reuse)
{
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_PASSIVE};
  struct addrinfo *res;
  struct sockaddr_storage ss;
  socklen_t slen = sizeof(ss);
  char p[16];
  snprintf(p, sizeof(p), "%d", *port);
  if (getaddrinfo(host, p, &hints, &res) != 0)
    return -1;
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse)) != 0 ||
                  bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 8) != 0 ||
                  getsockname(fd, (struct sockaddr *)&ss, &slen) != 0)) {
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd >= 0)
    *port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
  return fd;
}

/* The last "cannot listen on" line says the port of uri is in use, and
 * names where (or NULL). */
static void logged_in_use(const char *uri, const char *where)
{
  char port[160];
  if (strncmp(uri, "shm://", 6) == 0) /* a socket name: the name itself */
    snprintf(port, sizeof(port), "%s: ", uri + 6);
  else
    snprintf(port, sizeof(port), "%s: ", strrchr(uri, ':'));
  if (!strstr(logged, port) || !strstr(logged, "in use") || (where && !strstr(logged, where)))
    fail_msg("the log does not say that %s (%s) is in use: '%s'", uri, where ? where : "",
             logged);
}

/* rmx_listen(uri) is refused with RMX_EADDRINUSE, says so in the log, and
 * leaves no listening socket behind. */
static void refused_in_use(rmx_ctx_t *ctx, const char *uri, const char *where)
{
  char before[96] = "", after[96] = "";
  rmx_listener_t *l = NULL;
  int n = listening_sockets(before, sizeof(before));
  logged[0] = '\0';
  rmx_log_set_handler(keep_listen_line, NULL);
  int rc = rmx_listen(ctx, uri, srv_accept, NULL, &l);
  rmx_log_set_handler(NULL, NULL);
  if (listening_sockets(after, sizeof(after)) != n)
    fail_msg("rmx_listen(%s) on a taken port (%s) left a listener on %s", uri, rmx_err_name(rc),
             after);
  if (rc != RMX_EADDRINUSE)
    fail_msg("rmx_listen(%s) on a taken port: %s, not RMX_EADDRINUSE", uri, rmx_err_name(rc));
  assert_null(l);
  logged_in_use(uri, where);
}

void listen_on_taken_port_fails(void **state)
{
  if (peer_ctl)
    skip();
  rmx_ctx_t *ctx = ctx_new(0);
  server_t s;
  char uri[128], where[96];
  int port = 0;
  /* another listener of ours holds it */
  server_start(ctx, &s, 1);
  refused_in_use(ctx, s.uri, NULL);
  /* ... and still serves */
  client_t cl;
  client_connect(ctx, &cl, s.uri);
  run_until(ctx, &cl.connected, 1);
  assert_int_equal(cl.connect_status, 0);
  client_close(ctx, &cl);
  server_stop(ctx, &s);
  if (strcmp(scheme, "tcp") == 0) {
    /* a socket of someone else's, on the address and on every interface */
    int fd = hold(addr, &port, 0);
    assert_true(fd >= 0);
    uri_for(uri, sizeof(uri), port);
    snprintf(where, sizeof(where), strchr(addr, ':') ? "[%s]:%d" : "%s:%d", addr, port);
    refused_in_use(ctx, uri, where);
    close(fd);
    port = 0;
    fd = hold(strchr(addr, ':') ? "::" : "0.0.0.0", &port, 1);
    assert_true(fd >= 0);
    uri_for(uri, sizeof(uri), port);
    refused_in_use(ctx, uri, NULL);
    close(fd);
  }
  ctx_done(ctx);
}

/* tcp://[::1]:P and tcp://localhost:P (what localhost resolves to first
 * is held) fail alike. */
void listen_taken_ipv6_and_name(void **state)
{
  if (strcmp(scheme, "tcp") != 0 || peer_ctl)
    skip();
  rmx_ctx_t *ctx = ctx_new(0);
  char uri[128];
  int port = 0, fd = hold("::1", &port, 0);
  if (fd >= 0) { /* a host without IPv6 has nothing to check here */
    snprintf(uri, sizeof(uri), "tcp://[::1]:%d", port);
    refused_in_use(ctx, uri, NULL);
    close(fd);
  }
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res, *ai;
  assert_int_equal(getaddrinfo("localhost", NULL, &hints, &res), 0);
  int fds[8], n = 0;
  port = 0;
  for (ai = res; ai && n < 8; ai = ai->ai_next) {
    char host[INET6_ADDRSTRLEN];
    if (getnameinfo(ai->ai_addr, ai->ai_addrlen, host, sizeof(host), NULL, 0, NI_NUMERICHOST) ||
        (fds[n] = hold(host, &port, 0)) < 0)
      assert_true(ai != res); /* the first one rmx_listen takes must be held */
    else
      n++;
  }
  freeaddrinfo(res);
  snprintf(uri, sizeof(uri), "tcp://localhost:%d", port);
  refused_in_use(ctx, uri, NULL);
  while (n)
    close(fds[--n]);
  ctx_done(ctx);
}

/* auto:// takes the first transport usable here; a port it holds is
 * refused to the next auto:// listener. */
void listen_auto_taken_port_fails(void **state)
{
  if (peer_ctl)
    skip();
  rmx_ctx_t *ctx = ctx_new(0);
  rmx_listener_t *l;
  char uri[128], bound[128];
  snprintf(uri, sizeof(uri), strchr(addr, ':') ? "auto://[%s]:0" : "auto://%s:0", addr);
  assert_int_equal(rmx_listen(ctx, uri, srv_accept, NULL, &l), 0);
  assert_int_equal(rmx_listener_uri(l, bound, sizeof(bound)), 0);
  snprintf(uri, sizeof(uri), "auto%s", strstr(bound, "://"));
  refused_in_use(ctx, uri, NULL);
  rmx_listener_close(l);
  ctx_done(ctx);
}

/* A group's address is refused while a listener holds it, and a listener's
 * while a group holds it. */
void listen_group_taken_port_fails(void **state)
{
  if (peer_ctl || strcmp(scheme, "shm") == 0) /* no listener groups over shm yet */
    skip();
  rmx_ctx_t *ctx = ctx_new(0);
  rmx_group_t *g = NULL;
  server_t s;
  char uri[128];
  server_start(ctx, &s, 1);
  logged[0] = '\0';
  rmx_log_set_handler(keep_listen_line, NULL);
  assert_int_equal(rmx_group_open(s.uri, &g), RMX_EADDRINUSE);
  rmx_log_set_handler(NULL, NULL);
  assert_null(g);
  logged_in_use(s.uri, "listener group");
  server_stop(ctx, &s);
  uri_for(uri, sizeof(uri), 0);
  assert_int_equal(rmx_group_open(uri, &g), 0);
  assert_int_equal(rmx_group_uri(g, uri, sizeof(uri)), 0);
  refused_in_use(ctx, uri, NULL);
  rmx_group_t *g2 = NULL;
  assert_int_equal(rmx_group_open(uri, &g2), RMX_EADDRINUSE);
  assert_null(g2);
  rmx_group_close(g);
  ctx_done(ctx);
}

/* Port 0: each listener its own free port. [::] takes IPv4 peers (IPv6
 * sockets are not V6ONLY), and a port whose last connection is closing
 * (TIME_WAIT) can be listened on again (SO_REUSEADDR). */
void listen_port_zero_dual_stack_reuse(void **state)
{
  if (strcmp(scheme, "tcp") != 0 || peer_ctl)
    skip();
  rmx_ctx_t *ctx = ctx_new(0);
  server_t a, b;
  client_t cl;
  server_start(ctx, &a, 1);
  server_start(ctx, &b, 1);
  assert_string_not_equal(a.uri, b.uri);
  assert_int_not_equal(atoi(strrchr(a.uri, ':') + 1), 0);
  server_stop(ctx, &a);
  server_stop(ctx, &b);

  rmx_listener_t *l;
  char uri[128];
  memset(&a, 0, sizeof(a));
  a.echo = 1;
  if (rmx_listen(ctx, "tcp://[::]:0", srv_accept, &a, &l) == 0) { /* none: no IPv6 here */
    a.l = l;
    assert_int_equal(rmx_listener_uri(l, a.uri, sizeof(a.uri)), 0);
    snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%s", strrchr(a.uri, ':') + 1);
    client_connect(ctx, &cl, uri);
    run_until(ctx, &cl.connected, 1);
    assert_int_equal(cl.connect_status, 0);
    client_close(ctx, &cl);
    server_stop(ctx, &a);
  }

  /* the accepting side closes first: its end of the connection stays on
   * the port (TIME_WAIT) after the listener is gone */
  int port = 0, lfd = hold(addr, &port, 1);
  assert_true(lfd >= 0);
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *res;
  char p[16];
  snprintf(p, sizeof(p), "%d", port);
  assert_int_equal(getaddrinfo(addr, p, &hints, &res), 0);
  int c = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_int_equal(connect(c, res->ai_addr, res->ai_addrlen), 0);
  freeaddrinfo(res);
  int sfd = accept(lfd, NULL, NULL);
  assert_true(sfd >= 0);
  close(lfd);
  close(sfd);
  char byte;
  assert_int_equal(read(c, &byte, 1), 0);
  close(c);
  uri_for(uri, sizeof(uri), port);
  int rc = rmx_listen(ctx, uri, srv_accept, NULL, &l);
  if (rc)
    fail_msg("rmx_listen(%s) with the port's last connection in TIME_WAIT: %s", uri,
             rmx_err_name(rc));
  rmx_listener_close(l);
  ctx_done(ctx);
}
