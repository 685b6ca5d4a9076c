/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The metadata service against a real etcd (public API only; the member
 * is the test's own, meta_etcd.c). Cases:
 *   1. etcd unreachable: open fails with a connect error, a read on the
 *      handle too, and two contexts still connect and exchange a message;
 *   2. URIs and names: set, resolve, publish, find, withdraw, RMX_ENOENT;
 *   3. a watch of one agent sees PUT then DELETE, READY first, END last;
 *   4. an agent process: its entries stay while it lives (past its lease:
 *      the keepalive holds them); stopped past its lease they go, and come
 *      back when it goes on (a new lease); killed, they go after its lease
 *      (DELETE seen, find and resolve give RMX_ENOENT);
 *   5. close with requests in flight: every callback exactly once, with
 *      RMX_ECANCELED, before on_closed; a closed agent's entries go at once;
 *   6. (meta_loop.c) in the application's own libuv loop: requests keep
 *      uv_run going, an open idle handle does not, nothing is left after
 *      close (uv_loop_close succeeds);
 *   7. etcd killed: an open watch ends with an error, a request fails with
 *      a connect error, close reports the revoke it could not make; the
 *      log says so in etcd's terms (the endpoint, what happened, what rmx
 *      does next), not libcurl's.
 * Waits are bounded; no duration is a pass criterion.
 *
 *   rmx-meta-test [etcd binary: RMX_TEST_ETCD]
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rmx/rmx.h>

#define TEST_NAME "meta"
#include "meta_etcd.h"

static rmx_ctx_t *ca, *cb_;
static char endpoint[64];

/* One callback's record: how often it ran, and its last status. */
typedef struct rec {
  int n, status;
  char uri[128];
  uint64_t len;
  unsigned access;
} rec_t;

static void until(const int *n, int want, int secs, const char *what)
{
  uint64_t end = now_ms() + (uint64_t)secs * 1000;
  while (*n < want) {
    if (rmx_ctx_progress(ca) < 0 || rmx_ctx_progress(cb_) < 0)
      FAIL("progress");
    if (now_ms() > end) {
      etcd_log_tail();
      FAIL("%s: timed out", what);
    }
  }
}

/* Turn both loops for ms milliseconds. */
static void spin(int ms)
{
  uint64_t end = now_ms() + (uint64_t)ms;
  while (now_ms() < end) {
    rmx_ctx_progress(ca);
    rmx_ctx_progress(cb_);
    usleep(1000);
  }
}

static void on_done(rmx_meta_t *m, int status, void *arg)
{
  rec_t *r = arg;
  (void)m;
  r->n++;
  r->status = status;
}

static void on_resolve(rmx_meta_t *m, int status, const char *uri, void *arg)
{
  rec_t *r = arg;
  (void)m;
  r->n++;
  r->status = status;
  if ((status == 0) != (uri != NULL))
    FAIL("resolve: status %d with uri %p", status, (const void *)uri);
  snprintf(r->uri, sizeof(r->uri), "%s", uri ? uri : "");
}

static void on_find(rmx_meta_t *m, int status, uint64_t len, unsigned access, void *arg)
{
  rec_t *r = arg;
  (void)m;
  r->n++;
  r->status = status;
  r->len = len;
  r->access = access;
}

/* A watch's record: its events in order, as "P agent name" lines. */
typedef struct wrec {
  int ready, ends, end_status, events;
  char log[2048];
} wrec_t;

static void on_watch(rmx_meta_watch_t *w, int kind, int status, const char *agent,
                     const char *name, void *arg)
{
  wrec_t *r = arg;
  (void)w;
  if (r->ends)
    FAIL("watch: a call after RMX_META_END");
  if (kind == RMX_META_READY) {
    r->ready++;
  } else if (kind == RMX_META_END) {
    r->ends++;
    r->end_status = status;
  } else {
    size_t n = strlen(r->log);
    snprintf(r->log + n, sizeof(r->log) - n, "%c %s %s\n", kind == RMX_META_PUT ? 'P' : 'D',
             agent, name ? name : "-");
    r->events++;
  }
}

static rmx_meta_t *open_ok(rmx_ctx_t *ctx, const char *agent, unsigned ttl)
{
  rmx_meta_t *m;
  rec_t r = {0};
  int rc = rmx_meta_open(ctx, endpoint, "/t/", agent, ttl, on_done, &r, &m);
  if (rc)
    FAIL("open %s: %s", agent, rmx_strerror(rc));
  if (r.n)
    FAIL("open: on_open ran inside the call");
  until(&r.n, 1, 10, "open");
  if (r.status)
    FAIL("open %s: %s", agent, rmx_err_name(r.status));
  return m;
}

static void close_ok(rmx_meta_t *m, int want)
{
  rec_t r = {0};
  if (rmx_meta_close(m, on_done, &r) != 0)
    FAIL("close");
  if (r.n)
    FAIL("close: on_closed ran inside the call");
  until(&r.n, 1, 10, "close");
  if (r.status != want)
    FAIL("close: on_closed got %s, not %s", rmx_err_name(r.status), rmx_err_name(want));
}

static rec_t find(rmx_meta_t *m, const char *agent, const char *name)
{
  rec_t r = {0};
  if (rmx_meta_find(m, agent, name, on_find, &r) != 0)
    FAIL("find");
  until(&r.n, 1, 10, "find");
  return r;
}

static rec_t resolve(rmx_meta_t *m, const char *agent)
{
  rec_t r = {0};
  if (rmx_meta_resolve(m, agent, on_resolve, &r) != 0)
    FAIL("resolve");
  until(&r.n, 1, 10, "resolve");
  return r;
}

/* ---- 1. etcd unreachable; peer to peer goes on ---- */

static int got_msg, accepted;
static rmx_conn_t *srv_conn;

static void on_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  (void)c;
  (void)arg;
  if (len == 5 && memcmp(data, "hello", 5) == 0)
    got_msg++;
}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  (void)l;
  (void)arg;
  rmx_conn_cbs_t cbs = {.on_recv = on_recv};
  rmx_conn_set_cbs(c, &cbs, NULL);
  srv_conn = c;
  accepted++;
}

static void on_conn(rmx_conn_t *c, int status, void *arg)
{
  int *n = arg;
  (void)c;
  if (status)
    FAIL("connect: %s", rmx_strerror(status));
  (*n)++;
}

static void on_closed_conn(rmx_conn_t *c, void *arg)
{
  (void)c;
  (*(int *)arg)++;
}

static void case_unreachable(void)
{
  char bad[64];
  snprintf(bad, sizeof(bad), "http://127.0.0.1:%d", free_port());
  rmx_meta_t *m;
  rec_t o = {0}, rs = {0};
  if (rmx_meta_open(ca, bad, NULL, "a/b", 5, on_done, &o, &m) != RMX_EINVAL ||
      rmx_meta_open(ca, bad, NULL, "a b", 5, on_done, &o, &m) != RMX_EINVAL ||
      rmx_meta_open(ca, bad, NULL, "alone", 1, on_done, &o, &m) != RMX_EINVAL ||
      rmx_meta_open(ca, bad + 7, NULL, "alone", 5, on_done, &o, &m) != RMX_EINVAL ||
      rmx_meta_open(ca, bad, "", "alone", 5, on_done, &o, &m) != RMX_EINVAL)
    FAIL("open with a bad argument was taken");
  if (rmx_meta_open(ca, bad, NULL, "alone", 5, on_done, &o, &m) != 0)
    FAIL("open on a dead port");
  if (rmx_meta_resolve(m, "someone", on_resolve, &rs) != 0)
    FAIL("resolve on a dead port");
  until(&o.n, 1, 10, "open on a dead port");
  if (rmx_meta_find(m, "someone", "", on_find, &rs) != RMX_EINVAL ||
      rmx_meta_watch(m, "x/y", on_watch, NULL, NULL) != RMX_EINVAL)
    FAIL("a request with a bad argument was taken");
  until(&rs.n, 1, 10, "resolve on a dead port");
  if (o.status != RMX_ECONNREFUSED && o.status != RMX_EHOSTUNREACH && o.status != RMX_ETIMEDOUT)
    FAIL("open on a dead port: %s", rmx_err_name(o.status));
  if (rs.status != o.status)
    FAIL("resolve on a dead port: %s", rmx_err_name(rs.status));
  rec_t p = {0};
  if (rmx_meta_set_uri(m, "tcp://x", on_done, &p) != RMX_ENOTCONN)
    FAIL("a write without a lease was taken");
  close_ok(m, 0);
  printf("meta: etcd unreachable: %s\n", rmx_err_name(o.status));

  /* Peer to peer needs none of it. */
  rmx_listener_t *l;
  char uri[128];
  int up = 0, closed = 0;
  rmx_conn_t *c;
  if (rmx_listen(ca, "tcp://127.0.0.1:0", on_accept, NULL, &l) != 0 ||
      rmx_listener_uri(l, uri, sizeof(uri)) != 0 || rmx_connect(cb_, uri, on_conn, &up, &c) != 0)
    FAIL("listen or connect");
  until(&up, 1, 10, "connect");
  until(&accepted, 1, 10, "accept");
  if (rmx_send(c, "hello", 5, NULL, NULL) != 0)
    FAIL("send");
  until(&got_msg, 1, 10, "the message");
  rmx_conn_close(c, on_closed_conn, &closed);
  rmx_conn_close(srv_conn, on_closed_conn, &closed);
  rmx_listener_close(l);
  until(&closed, 2, 10, "closes");
  printf("meta: with etcd unreachable, a TCP connection carried a message\n");
}

/* ---- 2. URIs and names; 3. a watch ---- */

static void case_entries(rmx_meta_t *a, rmx_meta_t *b)
{
  static char buf[4096];
  rmx_mem_t *mem;
  rec_t r = {0};
  wrec_t w = {0};
  rmx_meta_watch_t *wh;
  if (rmx_meta_watch(b, "alpha", on_watch, &w, &wh) != 0)
    FAIL("watch");
  until(&w.ready, 1, 10, "the watch in place");
  if (rmx_meta_set_uri(a, "tcp://10.0.0.1:7471", on_done, &r) != 0)
    FAIL("set_uri");
  until(&r.n, 1, 10, "set_uri");
  if (r.status)
    FAIL("set_uri: %s", rmx_err_name(r.status));
  rec_t u = resolve(b, "alpha");
  if (u.status || strcmp(u.uri, "tcp://10.0.0.1:7471") != 0)
    FAIL("resolve alpha: %s '%s'", rmx_err_name(u.status), u.uri);
  if ((u = resolve(b, "nobody")).status != RMX_ENOENT)
    FAIL("resolve nobody: %s", rmx_err_name(u.status));

  unsigned acc = RMX_MEM_LOCAL | RMX_MEM_REMOTE_READ | RMX_MEM_REMOTE_WRITE;
  if (rmx_mem_reg(ca, buf, sizeof(buf), acc, &mem) != 0)
    FAIL("mem_reg");
  r.n = 0;
  if (rmx_meta_publish(a, "layer3/kv", mem, on_done, &r) != 0)
    FAIL("publish");
  until(&r.n, 1, 10, "publish");
  if (r.status)
    FAIL("publish: %s", rmx_err_name(r.status));
  rec_t f = find(b, "alpha", "layer3/kv");
  if (f.status || f.len != sizeof(buf) || f.access != acc)
    FAIL("find: %s len %llu access %u", rmx_err_name(f.status), (unsigned long long)f.len,
         f.access);
  if ((f = find(b, "alpha", "layer3/none")).status != RMX_ENOENT)
    FAIL("find of nothing: %s", rmx_err_name(f.status));
  r.n = 0;
  if (rmx_meta_withdraw(a, "layer3/kv", on_done, &r) != 0)
    FAIL("withdraw");
  until(&r.n, 1, 10, "withdraw");
  if (r.status)
    FAIL("withdraw: %s", rmx_err_name(r.status));
  r.n = 0;
  if (rmx_meta_withdraw(a, "layer3/kv", on_done, &r) != 0)
    FAIL("withdraw again");
  until(&r.n, 1, 10, "withdraw again");
  if (r.status != RMX_ENOENT)
    FAIL("withdraw again: %s", rmx_err_name(r.status));
  if ((f = find(b, "alpha", "layer3/kv")).status != RMX_ENOENT)
    FAIL("find after withdraw: %s", rmx_err_name(f.status));
  rmx_mem_dereg(mem);

  until(&w.events, 3, 10, "the watch's events");
  const char *want = "P alpha -\nP alpha layer3/kv\nD alpha layer3/kv\n";
  if (strcmp(w.log, want) != 0)
    FAIL("watch saw:\n%sand not:\n%s", w.log, want);
  if (rmx_meta_unwatch(wh) != 0 || rmx_meta_unwatch(wh) != RMX_EALREADY)
    FAIL("unwatch");
  if (w.ends)
    FAIL("unwatch: RMX_META_END inside the call");
  until(&w.ends, 1, 10, "the watch's end");
  if (w.end_status != RMX_ECANCELED)
    FAIL("watch ended with %s", rmx_err_name(w.end_status));
  printf("meta: set_uri, resolve, publish, find, withdraw, and a watch's PUT then DELETE\n");
}

/* ---- 4. an agent killed ---- */

/* The watch's last n events are all of kind k ('P' or 'D'). */
static int last_are(const wrec_t *w, int n, char k)
{
  const char *p = w->log + strlen(w->log);
  for (int i = 0; i < n; i++) {
    if (p == w->log)
      return 0;
    for (p--; p > w->log && p[-1] != '\n'; p--)
      ;
    if (*p != k)
      return 0;
  }
  return 1;
}

static void agent_child(int fd)
{
  rmx_ctx_t *ctx;
  static char buf[256];
  rmx_mem_t *mem;
  rmx_meta_t *m;
  rec_t o = {0}, u = {0}, p = {0};
  if (rmx_ctx_create(&ctx, NULL, NULL) != 0 ||
      rmx_mem_reg(ctx, buf, sizeof(buf), RMX_MEM_LOCAL | RMX_MEM_REMOTE_READ, &mem) != 0 ||
      rmx_meta_open(ctx, endpoint, "/t/", "gamma", 2, on_done, &o, &m) != 0)
    _exit(2);
  while (!o.n)
    rmx_ctx_progress(ctx);
  if (o.status || rmx_meta_set_uri(m, "tcp://gamma", on_done, &u) != 0 ||
      rmx_meta_publish(m, "g/mem", mem, on_done, &p) != 0)
    _exit(3);
  while (!u.n || !p.n)
    rmx_ctx_progress(ctx);
  if (u.status || p.status || write(fd, "k", 1) != 1)
    _exit(4);
  for (;;) { /* keep the lease alive until killed */
    rmx_ctx_progress(ctx);
    usleep(1000);
  }
}

static void case_killed(rmx_meta_t *b)
{
  wrec_t w = {0};
  rmx_meta_watch_t *wh;
  int fds[2];
  if (rmx_meta_watch(b, "gamma", on_watch, &w, &wh) != 0)
    FAIL("watch gamma");
  until(&w.ready, 1, 10, "the watch in place");
  if (pipe(fds) != 0)
    FAIL("pipe");
  pid_t pid = fork();
  if (pid < 0)
    FAIL("fork");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives a FAIL */
    if (getppid() == 1)
      _exit(5);
    close(fds[0]);
    agent_child(fds[1]);
  }
  close(fds[1]);
  char k;
  struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
  uint64_t end = now_ms() + 15000;
  while (poll(&pfd, 1, 0) == 0) {
    spin(5);
    if (now_ms() > end) {
      kill(pid, SIGKILL);
      FAIL("the agent did not publish");
    }
  }
  if (read(fds[0], &k, 1) != 1) {
    int st = 0;
    waitpid(pid, &st, 0);
    FAIL("the agent failed (exit %d)", WEXITSTATUS(st));
  }
  close(fds[0]);
  /* Alive past its 2 s lease: the keepalive holds its entries. */
  spin(3000);
  rec_t f = find(b, "gamma", "g/mem");
  if (f.status) {
    kill(pid, SIGKILL);
    FAIL("the live agent's entry went: %s", rmx_err_name(f.status));
  }
  /* Stopped past its lease: its entries go; let go on, it takes a new
   * lease and writes them again. */
  kill(pid, SIGSTOP);
  until(&w.events, 4, 15, "the stopped agent's entries going");
  if (!last_are(&w, 2, 'D'))
    FAIL("the watch saw:\n%s", w.log);
  kill(pid, SIGCONT);
  until(&w.events, 6, 15, "the agent's entries written again");
  if (!last_are(&w, 2, 'P') || find(b, "gamma", "g/mem").status ||
      strcmp(resolve(b, "gamma").uri, "tcp://gamma") != 0) {
    kill(pid, SIGKILL);
    FAIL("the watch saw:\n%s", w.log);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  until(&w.events, 8, 15, "the dead agent's entries going");
  if (!last_are(&w, 2, 'D') || !strstr(w.log, "D gamma g/mem\n") || !strstr(w.log, "D gamma -\n"))
    FAIL("the watch saw:\n%s", w.log);
  if ((f = find(b, "gamma", "g/mem")).status != RMX_ENOENT)
    FAIL("find after the agent died: %s", rmx_err_name(f.status));
  if (resolve(b, "gamma").status != RMX_ENOENT)
    FAIL("resolve after the agent died");
  rmx_meta_unwatch(wh);
  until(&w.ends, 1, 10, "the watch's end");
  printf("meta: a stopped agent's entries went and came back; a killed one's went\n");
}

/* ---- 5. close with requests in flight ---- */

static rec_t fl[8];
static wrec_t fw;
static int closed_after_all;

static void on_closed_last(rmx_meta_t *m, int status, void *arg)
{
  int all = fw.ends == 1;
  for (int i = 0; i < 8; i++)
    all &= fl[i].n == 1;
  closed_after_all = all ? 1 : -1;
  on_done(m, status, arg);
}

static void case_close(rmx_meta_t *b)
{
  static char buf[64];
  rmx_mem_t *mem;
  rmx_meta_t *d = open_ok(cb_, "delta", 30);
  rmx_meta_watch_t *wh;
  rec_t c = {0};
  if (rmx_mem_reg(cb_, buf, sizeof(buf), RMX_MEM_LOCAL | RMX_MEM_REMOTE_READ, &mem) != 0)
    FAIL("mem_reg");
  rec_t p = {0};
  if (rmx_meta_publish(d, "stays-not", mem, on_done, &p) != 0)
    FAIL("publish");
  until(&p.n, 1, 10, "publish");
  if (rmx_meta_publish(d, "a", mem, on_done, &fl[0]) || rmx_meta_publish(d, "b", mem, on_done, &fl[1]) ||
      rmx_meta_set_uri(d, "tcp://d", on_done, &fl[2]) || rmx_meta_withdraw(d, "a", on_done, &fl[3]) ||
      rmx_meta_find(d, "delta", "a", on_find, &fl[4]) || rmx_meta_resolve(d, "delta", on_resolve, &fl[5]) ||
      rmx_meta_find(d, "x", "y", on_find, &fl[6]) || rmx_meta_resolve(d, "x", on_resolve, &fl[7]) ||
      rmx_meta_watch(d, NULL, on_watch, &fw, &wh))
    FAIL("requests");
  if (rmx_ctx_destroy(cb_) != RMX_EBUSY)
    FAIL("destroy with a handle open");
  if (rmx_meta_close(d, on_closed_last, &c) != 0 || rmx_meta_close(d, NULL, NULL) != RMX_EALREADY)
    FAIL("close");
  if (rmx_meta_find(d, "x", "y", on_find, &p) != RMX_EALREADY)
    FAIL("a request after close");
  until(&c.n, 1, 10, "on_closed");
  spin(200); /* nothing runs twice */
  for (int i = 0; i < 8; i++)
    if (fl[i].n != 1 || fl[i].status != RMX_ECANCELED)
      FAIL("request %d: %d calls, %s", i, fl[i].n, rmx_err_name(fl[i].status));
  if (fw.ends != 1 || fw.end_status != RMX_ECANCELED || fw.ready || c.n != 1 || c.status)
    FAIL("watch %d ends (%s), close %d (%s)", fw.ends, rmx_err_name(fw.end_status), c.n,
         rmx_err_name(c.status));
  if (closed_after_all != 1)
    FAIL("on_closed ran before the other callbacks");
  rmx_mem_dereg(mem);
  /* Its lease revoked: its entries went at once, 30 s before it ran out. */
  rec_t f = find(b, "delta", "stays-not");
  if (f.status != RMX_ENOENT)
    FAIL("a closed agent's entry: %s", rmx_err_name(f.status));
  /* A close while the lease is still being granted. */
  rec_t o = {0};
  c.n = 0;
  if (rmx_meta_open(cb_, endpoint, "/t/", "eps", 5, on_done, &o, &d) != 0 ||
      rmx_meta_close(d, on_done, &c) != 0)
    FAIL("open then close");
  until(&c.n, 1, 10, "on_closed");
  if (o.n != 1 || o.status != RMX_ECANCELED)
    FAIL("open closed at once: %d calls, %s", o.n, rmx_err_name(o.status));
  printf("meta: close with 9 requests in flight: each ended once, RMX_ECANCELED\n");
}

/* ---- 7. etcd killed under open handles ---- */

/* The log while etcd goes: it must say what happened in etcd's terms. */
static char etcd_log[8192];

static void keep_log(rmx_log_level_t lvl, const char *line, void *arg)
{
  size_t n = strlen(etcd_log);
  snprintf(etcd_log + n, sizeof(etcd_log) - n, "%s\n", line);
  fprintf(stderr, "%s\n", line);
}

static void case_etcd_killed(rmx_meta_t *a, rmx_meta_t *b)
{
  wrec_t w = {0};
  rmx_meta_watch_t *wh;
  if (rmx_meta_watch(b, NULL, on_watch, &w, &wh) != 0)
    FAIL("watch");
  until(&w.ready, 1, 10, "the watch in place");
  rmx_log_set_handler(keep_log, NULL);
  kill(test_server_pid, SIGKILL);
  waitpid(test_server_pid, NULL, 0);
  until(&w.ends, 1, 15, "the watch's end with etcd gone");
  /* Which etcd, what it did, what rmx does now; not libcurl's words. */
  char want[160];
  snprintf(want, sizeof(want), "meta: etcd at %s: watch failed: etcd closed the stream", endpoint);
  if (!strstr(etcd_log, want) || !strstr(etcd_log, "the watch ends (RMX_META_END)") ||
      !strstr(etcd_log, "call rmx_meta_watch once etcd answers") ||
      strstr(etcd_log, "Transferred a partial file"))
    FAIL("the watch's end logged as:\n%s", etcd_log);
  if (w.end_status == 0 || w.end_status == RMX_ECANCELED)
    FAIL("the watch ended with %s", rmx_err_name(w.end_status));
  rec_t f = find(b, "alpha", "x");
  if (f.status != RMX_ECONNREFUSED)
    FAIL("find with etcd gone: %s", rmx_err_name(f.status));
  close_ok(a, RMX_ECONNREFUSED);
  close_ok(b, RMX_ECONNREFUSED);
  rmx_log_set_handler(NULL, NULL);
  if (!strstr(etcd_log, "nothing listens there (etcd stopped, or not started)") ||
      strstr(etcd_log, "Couldn't connect"))
    FAIL("requests with etcd gone logged as:\n%s", etcd_log);
  printf("meta: etcd killed: the watch ended (%s), requests fail (%s)\n",
         rmx_err_name(w.end_status), rmx_err_name(f.status));
}

int main(int argc, char **argv)
{
  if (argc > 1)
    setenv("RMX_TEST_ETCD", argv[1], 1);
  setvbuf(stdout, NULL, _IONBF, 0);
  setenv("no_proxy", "127.0.0.1", 1); /* libcurl honours a proxy from the environment */
  if (rmx_ctx_create(&ca, NULL, NULL) != 0 || rmx_ctx_create(&cb_, NULL, NULL) != 0)
    FAIL("contexts");
  case_unreachable();
  test_server_pid = etcd_start(endpoint, sizeof(endpoint));
  /* Ready once it grants a lease: try until then. */
  uint64_t end = now_ms() + 20000;
  rmx_meta_t *a = NULL;
  for (;;) {
    rec_t o = {0};
    if (rmx_meta_open(ca, endpoint, "/t/", "alpha", 30, on_done, &o, &a) != 0)
      FAIL("open");
    until(&o.n, 1, 10, "open");
    if (o.status == 0)
      break;
    close_ok(a, 0);
    if (now_ms() > end || !etcd_alive()) {
      etcd_log_tail();
      FAIL("etcd did not answer: %s", rmx_err_name(o.status));
    }
    usleep(100000);
  }
  rmx_meta_t *b = open_ok(cb_, "beta", 30);
  case_entries(a, b);
  case_killed(b);
  case_close(b);
  case_own_loop(endpoint); /* meta_loop.c */
  case_etcd_killed(a, b);
  if (rmx_ctx_destroy(ca) != 0 || rmx_ctx_destroy(cb_) != 0)
    FAIL("destroy");
  printf("meta: PASS\n");
  return 0;
}
