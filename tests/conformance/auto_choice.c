/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * auto:// per peer on one host (docs/architecture.md, "auto:// per peer"):
 * a client reaching a tcp:// listener of this host takes shm, and the
 * application sees one connection, on the listener it made; RMX_TRANSPORTS
 * decides the order on either side; a required transport this host lacks
 * fails at the call; an alias held by another uid is not taken; the
 * alias goes with its listener.
 *
 *   rmx-auto-choice
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define TEST_NAME "auto-choice"
#include "test_util.h"

typedef struct side {
  rmx_ctx_t *ctx;
  rmx_listener_t *l, *accepted_on;
  rmx_conn_t *conn; /* accepted, or connected */
  int accepted, connected, status, got, closed;
  char last[64];
} side_t;

static void on_msg(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  side_t *s = arg;
  snprintf(s->last, sizeof(s->last), "%.*s", (int)len, (const char *)data);
  s->got++;
}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  side_t *s = arg;
  rmx_conn_cbs_t cbs = {.on_recv = on_msg};
  rmx_conn_set_cbs(c, &cbs, s);
  s->accepted_on = l;
  s->conn = c;
  s->accepted++;
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  side_t *s = arg;
  rmx_conn_cbs_t cbs = {.on_recv = on_msg};
  if (status == 0)
    rmx_conn_set_cbs(c, &cbs, s);
  s->status = status;
  s->connected++;
}

static void on_closed(rmx_conn_t *c, void *arg) { ((side_t *)arg)->closed++; }

static void ctx_make(side_t *s, const char *transports)
{
  rmx_config_t cfg;
  memset(s, 0, sizeof(*s));
  if (rmx_config_init(&cfg) != 0)
    FAIL("config");
  if (transports)
    snprintf(cfg.transports, sizeof(cfg.transports), "%s", transports);
  if (rmx_ctx_create(&s->ctx, NULL, &cfg) != 0)
    FAIL("ctx_create (RMX_TRANSPORTS %s)", transports ? transports : "(default)");
}

/* A tcp listener on 127.0.0.1, its port in *port. */
static void listen_tcp(side_t *srv, int *port)
{
  char uri[128];
  if (rmx_listen(srv->ctx, "tcp://127.0.0.1:0", on_accept, srv, &srv->l) != 0 ||
      rmx_listener_uri(srv->l, uri, sizeof(uri)) != 0)
    FAIL("listen");
  *port = atoi(strrchr(uri, ':') + 1);
}

static void pump_until(side_t *a, side_t *b, const int *n, int want)
{
  uint64_t end = now_ms() + 10000;
  while (*n < want) {
    pump(a->ctx, b->ctx);
    if (now_ms() > end)
      FAIL("timed out: %d of %d", *n, want);
  }
}

static const char *talk(side_t *srv, side_t *cl, int port)
{
  char uri[128];
  snprintf(uri, sizeof(uri), "auto://127.0.0.1:%d", port);
  if (rmx_connect(cl->ctx, uri, on_connected, cl, &cl->conn) != 0)
    FAIL("connect %s", uri);
  pump_until(srv, cl, &cl->connected, 1);
  if (cl->status != 0)
    FAIL("%s: on_connected(%s)", uri, rmx_err_name(cl->status));
  pump_until(srv, cl, &srv->accepted, 1);
  if (srv->accepted != 1 || srv->accepted_on != srv->l)
    FAIL("on_accept: %d times, on %p (the listener made: %p)", srv->accepted,
         (void *)srv->accepted_on, (void *)srv->l);
  const char *t = rmx_conn_transport(cl->conn);
  if (strcmp(t, rmx_conn_transport(srv->conn)) != 0)
    FAIL("the ends disagree: client %s, server %s", t, rmx_conn_transport(srv->conn));
  if (rmx_send(cl->conn, "ping", 4, NULL, NULL) != 0)
    FAIL("send");
  pump_until(srv, cl, &srv->got, 1);
  if (rmx_send(srv->conn, "pong", 4, NULL, NULL) != 0)
    FAIL("send back");
  pump_until(srv, cl, &cl->got, 1);
  if (strcmp(srv->last, "ping") || strcmp(cl->last, "pong"))
    FAIL("messages: '%s', '%s'", srv->last, cl->last);
  return t;
}

static void done(side_t *srv, side_t *cl)
{
  if (cl->conn && cl->connected && cl->status == 0) {
    rmx_conn_close(cl->conn, on_closed, cl);
    pump_until(srv, cl, &cl->closed, 1);
  }
  if (srv->conn) {
    rmx_conn_close(srv->conn, on_closed, srv);
    pump_until(srv, cl, &srv->closed, 1);
  }
  if (srv->l)
    rmx_listener_close(srv->l);
  for (int i = 0; i < 50; i++)
    pump(srv->ctx, cl->ctx);
  if (rmx_ctx_destroy(cl->ctx) != 0 || rmx_ctx_destroy(srv->ctx) != 0)
    FAIL("ctx_destroy");
}

/* A same-host peer at a tcp:// listener: shm, one connection. */
static void same_host_takes_shm(void)
{
  side_t srv, cl;
  int port;
  ctx_make(&srv, NULL);
  ctx_make(&cl, NULL);
  listen_tcp(&srv, &port);
  const char *t = talk(&srv, &cl, port);
  if (strcmp(t, "shm") != 0)
    FAIL("same host: took %s, want shm", t);
  done(&srv, &cl);
  printf("auto-choice: same host takes shm ok\n");
}

/* Either side's RMX_TRANSPORTS without shm: tcp. */
static void transports_decide(const char *srv_t, const char *cl_t, const char *want)
{
  side_t srv, cl;
  int port;
  ctx_make(&srv, srv_t);
  ctx_make(&cl, cl_t);
  listen_tcp(&srv, &port);
  const char *t = talk(&srv, &cl, port);
  if (strcmp(t, want) != 0)
    FAIL("server %s, client %s: took %s, want %s", srv_t ? srv_t : "default",
         cl_t ? cl_t : "default", t, want);
  done(&srv, &cl);
  printf("auto-choice: server %s, client %s: %s ok\n", srv_t ? srv_t : "default",
         cl_t ? cl_t : "default", want);
}

/* rdma! where this host has no device: refused at the call, not later. */
static void required_absent_fails_at_once(void)
{
  side_t cl;
  rmx_conn_t *c = NULL;
  rmx_device_info_t *devs = NULL;
  int ndev = 0;
  if (rmx_transport_available("rdma", NULL) == 0 && rmx_device_list(&devs, &ndev) == 0)
    rmx_device_list_free(devs);
  if (ndev > 0) {
    printf("auto-choice: required-absent skipped (this host has an RDMA device)\n");
    return;
  }
  ctx_make(&cl, "rdma!");
  uint64_t t0 = now_ms();
  int rc = rmx_connect(cl.ctx, "auto://127.0.0.1:7471", on_connected, &cl, &c);
  if (rc != RMX_ENOTSUP && rc != RMX_ENODEV)
    FAIL("RMX_TRANSPORTS=rdma! without a device: rmx_connect gave %s", rmx_err_name(rc));
  if (c || cl.connected)
    FAIL("a refused connect left a connection or a callback");
  printf("auto-choice: rdma! without a device refused at the call (%s, %llu ms) ok\n",
         rmx_err_name(rc), (unsigned long long)(now_ms() - t0));
  rmx_ctx_destroy(cl.ctx);
}

static int refused_alias;

static void watch_log(rmx_log_level_t lvl, const char *line, void *arg)
{
  (void)arg;
  if (strstr(line, "is held by uid 65534"))
    refused_alias = 1;
  fprintf(stderr, "%s\n", line);
}

/* Another uid holds the alias name: the client goes over tcp. */
static void alias_of_another_uid_is_not_taken(void)
{
  if (geteuid() != 0) {
    printf("auto-choice: foreign-alias skipped (needs root to run a child as another uid)\n");
    return;
  }
  side_t srv, cl;
  int port, ready[2];
  ctx_make(&srv, "tcp"); /* no alias of its own */
  ctx_make(&cl, NULL);
  listen_tcp(&srv, &port);
  if (pipe(ready) != 0)
    FAIL("pipe");
  pid_t pid = fork();
  if (pid == 0) { /* a squatter: the name the listener would have had */
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the test */
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "rmx-127.0.0.1:%d", port);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0 || fd < 0 ||
        bind(fd, (struct sockaddr *)&sa, (socklen_t)(sizeof(sa.sun_family) + 1 + n)) != 0 ||
        listen(fd, 8) != 0)
      _exit(1);
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  char x;
  if (read(ready[0], &x, 1) != 1)
    FAIL("the squatter did not start");
  refused_alias = 0;
  rmx_log_set_handler(watch_log, NULL);
  const char *t = talk(&srv, &cl, port);
  rmx_log_set_handler(NULL, NULL);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  /* refused at the connect, not after a set-up with the squatter failed */
  if (strcmp(t, "tcp") != 0 || !refused_alias)
    FAIL("an alias held by uid 65534 was %s (took %s)", refused_alias ? "refused" : "not refused",
         t);
  done(&srv, &cl);
  close(ready[0]);
  close(ready[1]);
  printf("auto-choice: an alias of another uid is not taken ok\n");
}

/* The alias goes with its listener: a connect after the close is refused,
 * over shm as over tcp, never answered by what is left. */
static void alias_goes_with_its_listener(void)
{
  side_t srv, cl;
  int port;
  char uri[128];
  ctx_make(&srv, NULL);
  ctx_make(&cl, NULL);
  listen_tcp(&srv, &port);
  rmx_listener_close(srv.l);
  srv.l = NULL;
  for (int i = 0; i < 20; i++)
    pump(srv.ctx, cl.ctx);
  snprintf(uri, sizeof(uri), "auto://127.0.0.1:%d", port);
  if (rmx_connect(cl.ctx, uri, on_connected, &cl, &cl.conn) != 0)
    FAIL("connect");
  pump_until(&srv, &cl, &cl.connected, 1);
  if (cl.status != RMX_ECONNREFUSED)
    FAIL("after the listener's close: on_connected(%s), want RMX_ECONNREFUSED",
         rmx_err_name(cl.status));
  rmx_conn_close(cl.conn, on_closed, &cl);
  pump_until(&srv, &cl, &cl.closed, 1);
  cl.conn = NULL;
  done(&srv, &cl);
  printf("auto-choice: the alias goes with its listener ok\n");
}

int main(void)
{
  same_host_takes_shm();
  transports_decide("tcp", NULL, "tcp");  /* the server adds no alias */
  transports_decide(NULL, "tcp", "tcp");  /* the client does not try shm */
  transports_decide(NULL, "tcp,shm", "tcp");
  transports_decide(NULL, "shm!", "shm");
  required_absent_fails_at_once();
  alias_of_another_uid_is_not_taken();
  alias_goes_with_its_listener();
  return 0;
}
