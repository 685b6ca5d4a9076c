/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Servers on another host, for running the conformance cases across two
 * machines: `rmx-conformance SCHEME --serve [READY_FILE]` on one host
 * listens for control requests, and the cases on the other host, given
 * RMX_TEST_PEER=tcp://HOST:PORT, start, inspect and stop their servers
 * there instead of in their own process.
 *
 * Control runs over rmx's TCP transport in a context of its own, so it
 * never shares a connection with what is tested. Its contexts neither send
 * keepalives nor watch for them (keepalive_ms 0): the side running the
 * cases runs the control loop only while it waits for an answer.
 * Requests and replies are one short line each, one request at a time:
 *   start KIND          -> ok ID URI
 *   stats ID            -> ok COUNTERS          (see counters_fmt)
 *   unlisten ID         -> ok
 *   stop ID             -> ok COUNTERS          (after every on_closed)
 *   dying               -> ok PID URI           (a --dying-server child)
 *   reap PID            -> ok STATUS            (its waitpid status)
 * and anything else gets "error WHAT".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include "harness.h"

const char *peer_ctl;

#define COUNTERS_FMT "%d %d %d %d %d %d %d"
#define COUNTERS(s) (s)->accepted, (s)->disconnects, (s)->last_disconnect, (s)->recvs, \
                    (s)->closed, (s)->bad, (s)->nconns

/* ---- the side that runs the cases ---- */

static struct {
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  int connected, status, sent, replies, closed;
  char req[128], rep[256];
} ctl;

static void ctl_connected(rmx_conn_t *c, int status, void *arg)
{
  ctl.connected = 1;
  ctl.status = status;
}

static void ctl_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  if (len >= sizeof(ctl.rep))
    len = sizeof(ctl.rep) - 1;
  memcpy(ctl.rep, data, len);
  ctl.rep[len] = '\0';
  ctl.replies++;
}

static void ctl_sent(rmx_conn_t *c, int status, void *arg) { ctl.sent++; }

static void ctl_lost(rmx_conn_t *c, int status, void *arg)
{
  /* Nothing can be checked without the peer: end the run loudly. */
  fprintf(stderr, "conformance: the control connection to %s dropped: %s\n", peer_ctl,
          rmx_strerror(status));
  _exit(3);
}

static void ctl_closed(rmx_conn_t *c, void *arg) { ctl.closed = 1; }

static rmx_ctx_t *ctl_ctx_new(uv_loop_t *loop)
{
  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  if (rmx_config_init(&cfg) != 0)
    return NULL;
  cfg.keepalive_ms = 0;
  return rmx_ctx_create(&ctx, loop, &cfg) == 0 ? ctx : NULL;
}

static void ctl_done(void)
{
  if (rmx_conn_close(ctl.c, ctl_closed, NULL) == 0)
    run_until(ctl.ctx, &ctl.closed, 1);
  rmx_ctx_destroy(ctl.ctx);
}

/* Send one request, wait for its reply; fails the case unless it is "ok".
 * Returns what follows "ok ". */
static const char *ctl_call(const char *fmt, ...)
{
  if (!ctl.ctx) {
    static const rmx_conn_cbs_t cbs = {.on_recv = ctl_recv, .on_disconnect = ctl_lost};
    assert_non_null(ctl.ctx = ctl_ctx_new(NULL));
    assert_int_equal(rmx_connect(ctl.ctx, peer_ctl, ctl_connected, NULL, &ctl.c), 0);
    rmx_conn_set_cbs(ctl.c, &cbs, NULL);
    run_until(ctl.ctx, &ctl.connected, 1);
    if (ctl.status != 0)
      fail_msg("no control connection to %s: %s", peer_ctl, rmx_strerror(ctl.status));
    atexit(ctl_done);
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctl.req, sizeof(ctl.req), fmt, ap);
  va_end(ap);
  int sent = ctl.sent + 1, replies = ctl.replies + 1;
  assert_int_equal(rmx_send(ctl.c, ctl.req, strlen(ctl.req) + 1, ctl_sent, NULL), 0);
  run_until(ctl.ctx, &ctl.replies, replies);
  run_until(ctl.ctx, &ctl.sent, sent);
  if (strncmp(ctl.rep, "ok", 2) != 0)
    fail_msg("the peer host answered \"%s\" to \"%s\"", ctl.rep, ctl.req);
  return ctl.rep[2] ? ctl.rep + 3 : ctl.rep + 2;
}

static void counters_parse(server_t *s, const char *text)
{
  if (sscanf(text, COUNTERS_FMT, &s->accepted, &s->disconnects, &s->last_disconnect,
             &s->recvs, &s->closed, &s->bad, &s->nconns) != 7)
    fail_msg("bad counters from the peer host: \"%s\"", text);
}

void peer_server_start(server_t *s)
{
  const char *r = ctl_call("start %d", s->echo);
  s->remote = 1;
  if (sscanf(r, "%d %127s", &s->id, s->uri) != 2)
    fail_msg("bad answer from the peer host: \"%s\"", r);
}

void peer_server_stats(server_t *s) { counters_parse(s, ctl_call("stats %d", s->id)); }
void peer_server_unlisten(server_t *s) { ctl_call("unlisten %d", s->id); }
void peer_server_stop(server_t *s) { counters_parse(s, ctl_call("stop %d", s->id)); }

long dying_server(char *uri, size_t len)
{
  if (peer_ctl) {
    long pid;
    char u[128];
    if (sscanf(ctl_call("dying"), "%ld %127s", &pid, u) != 2)
      fail_msg("bad answer from the peer host");
    snprintf(uri, len, "%s", u);
    return pid;
  }
  int fd;
  pid_t pid = spawn("--dying-server", NULL, &fd);
  read_line(fd, uri, len);
  close(fd);
  return pid;
}

int dying_server_reap(long handle)
{
  int st = -1;
  if (peer_ctl) {
    if (sscanf(ctl_call("reap %ld", handle), "%d", &st) != 1)
      fail_msg("bad answer from the peer host");
    return st;
  }
  assert_int_equal(waitpid((pid_t)handle, &st, 0), (pid_t)handle);
  return st;
}

/* ---- the side that serves ---- */

enum { MAX_SERVERS = 256, MAX_PENDING = 16 };

static struct {
  rmx_ctx_t *ctx; /* the servers' */
  server_t *servers[MAX_SERVERS];
  int nservers;
  struct {
    rmx_conn_t *c;
    char req[128];
  } pending[MAX_PENDING];
  int npending;
} srv;

/* Requests are queued by the callback and served between loop turns,
 * where a request may run the loop itself (stop waits for on_closed). */
static void serve_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  if (srv.npending == MAX_PENDING || len == 0 || len > sizeof(srv.pending[0].req) ||
      ((const char *)data)[len - 1] != '\0') {
    rmx_send(c, "error bad request", 18, NULL, NULL);
    return;
  }
  srv.pending[srv.npending].c = c;
  memcpy(srv.pending[srv.npending].req, data, len);
  srv.npending++;
}

static void serve_closed(rmx_conn_t *c, void *arg) {}

static void serve_lost(rmx_conn_t *c, int status, void *arg)
{
  for (int i = 0; i < srv.npending; i++)
    if (srv.pending[i].c == c)
      srv.pending[i].c = NULL; /* its answers go nowhere */
  rmx_conn_close(c, serve_closed, NULL);
}

static void serve_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  static const rmx_conn_cbs_t cbs = {.on_recv = serve_recv, .on_disconnect = serve_lost};
  rmx_conn_set_cbs(c, &cbs, NULL);
}

static server_t *server_by_id(const char *text)
{
  int id;
  if (sscanf(text, "%d", &id) != 1 || id < 0 || id >= srv.nservers || !srv.servers[id])
    return NULL;
  return srv.servers[id];
}

/* Serve one request into rep. */
static void serve_one(const char *req, char *rep, size_t len)
{
  server_t *s;
  int kind;
  long pid;
  if (sscanf(req, "start %d", &kind) == 1 && kind >= SRV_SINK && kind <= SRV_SEQ_ECHO &&
      srv.nservers < MAX_SERVERS) {
    s = calloc(1, sizeof(*s));
    server_start(srv.ctx, s, kind);
    srv.servers[srv.nservers] = s;
    snprintf(rep, len, "ok %d %s", srv.nservers++, s->uri);
  } else if (strncmp(req, "stats ", 6) == 0 && (s = server_by_id(req + 6))) {
    snprintf(rep, len, "ok " COUNTERS_FMT, COUNTERS(s));
  } else if (strncmp(req, "unlisten ", 9) == 0 && (s = server_by_id(req + 9))) {
    server_unlisten(srv.ctx, s);
    snprintf(rep, len, "ok");
  } else if (strncmp(req, "stop ", 5) == 0 && (s = server_by_id(req + 5))) {
    server_stop(srv.ctx, s);
    snprintf(rep, len, "ok " COUNTERS_FMT, COUNTERS(s));
    srv.servers[atoi(req + 5)] = NULL;
    free(s);
  } else if (strcmp(req, "dying") == 0) {
    char uri[128];
    int fd;
    pid_t p = spawn("--dying-server", NULL, &fd);
    read_line(fd, uri, sizeof(uri));
    close(fd);
    snprintf(rep, len, "ok %ld %s", (long)p, uri);
  } else if (sscanf(req, "reap %ld", &pid) == 1) {
    int st;
    if (waitpid((pid_t)pid, &st, 0) == (pid_t)pid)
      snprintf(rep, len, "ok %d", st);
    else
      snprintf(rep, len, "error no child %ld", pid);
  } else {
    snprintf(rep, len, "error cannot \"%s\"", req);
  }
}

int serve_main(const char *ready_file)
{
  rmx_listener_t *l;
  rmx_ctx_t *ctl_ctx;
  char uri[128], rep[256];
  snprintf(uri, sizeof(uri), strchr(addr, ':') ? "tcp://[%s]:0" : "tcp://%s:0", addr);
  if (rmx_ctx_create(&srv.ctx, NULL, NULL) != 0 ||
      !(ctl_ctx = ctl_ctx_new(rmx_ctx_loop(srv.ctx))) ||
      rmx_listen(ctl_ctx, uri, serve_accept, NULL, &l) != 0 ||
      rmx_listener_uri(l, uri, sizeof(uri)) != 0) {
    fprintf(stderr, "conformance: cannot serve on %s\n", addr);
    return 3;
  }
  printf("serving %s cases on %s\n", scheme, uri);
  fflush(stdout);
  if (ready_file) { /* whole or not at all: the other host polls for it */
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", ready_file);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%s\n", uri) < 0 || fclose(f) != 0 || rename(tmp, ready_file) != 0)
      return 3;
  }
  for (;;) {
    uv_run(rmx_ctx_loop(srv.ctx), UV_RUN_ONCE);
    for (int i = 0; i < srv.npending; i++) {
      serve_one(srv.pending[i].req, rep, sizeof(rep));
      if (srv.pending[i].c) /* small: copied before rmx_send returns */
        rmx_send(srv.pending[i].c, rep, strlen(rep) + 1, NULL, NULL);
    }
    srv.npending = 0;
  }
}
