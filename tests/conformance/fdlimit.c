/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Out of file descriptors (public API only). Two ends:
 *
 * - A server that runs out of descriptors keeps serving: the server child
 *   lowers its soft and hard limits to LIMIT before its context exists (so
 *   the context cannot raise them), and more clients than that connect.
 *   The server's log names the limit; the clients beyond it wait, none
 *   fails; the connected ones exchange messages; after some of them close,
 *   as many waiting clients get in and are served.
 * - A connect that finds no descriptor fails with RMX_EMFILE in its
 *   on_connected, and the others go on: this process lowers its own soft
 *   limit (after its context raised it once) and connects a few clients.
 *   Each such failure counts in rmx_ctx_stats_t tp_refused.
 *
 *   rmx-fdlimit tcp [LIMIT [CLIENTS]]      (default 48 and 100)
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rmx/rmx.h>
#include <uv.h>

#define TEST_NAME "fdlimit"
#include "test_util.h"

/* ---- the server (child) ---- */

static int accepted, echoed, s_out = -1, starved_told;
static rmx_ctx_t *s_ctx;

static void s_log(rmx_log_level_t level, const char *line, void *arg)
{
  (void)arg;
  const char *lim = strstr(line, "RLIMIT_NOFILE ");
  int here;
  /* Once: the sockets it had taken (in their handshake or accepted). */
  if (level == RMX_LOG_ERROR && strstr(line, "out of file descriptors") && lim &&
      sscanf(lim, "RLIMIT_NOFILE %*u, %d connections here", &here) == 1 && !starved_told++)
    dprintf(s_out, "starved %d\n", here);
}

static void s_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  (void)arg;
  if (rmx_send(c, data, len, NULL, NULL) == 0)
    echoed++;
}

static void s_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  (void)l;
  (void)arg;
  rmx_conn_cbs_t cbs = {.on_recv = s_recv};
  rmx_conn_set_cbs(c, &cbs, NULL);
  accepted++;
}

static void on_term(uv_signal_t *h, int sig)
{
  (void)sig;
  uv_close((uv_handle_t *)h, NULL);
  rmx_ctx_stop(s_ctx);
}

static int serve(int out, rlim_t limit)
{
  rmx_listener_t *l;
  char bound[128];
  /* Hard limit too: the context's raise to the hard limit cannot undo it. */
  struct rlimit rl = {limit, limit};
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
    return 3;
  s_out = out;
  rmx_log_set_handler(s_log, NULL);
  if (rmx_ctx_create(&s_ctx, NULL, NULL) != 0 ||
      rmx_listen(s_ctx, "tcp://127.0.0.1:0", s_accept, NULL, &l) != 0 ||
      rmx_listener_uri(l, bound, sizeof(bound)) != 0)
    return 1;
  uv_signal_t term;
  uv_signal_init(rmx_ctx_loop(s_ctx), &term);
  uv_signal_start(&term, on_term, SIGTERM);
  dprintf(out, "%s\n", bound);
  rmx_ctx_run(s_ctx);
  dprintf(out, "%d %d\n", accepted, echoed);
  rmx_ctx_destroy(s_ctx);
  return 0;
}

/* ---- the clients ---- */

typedef struct cl {
  rmx_conn_t *c;
  int status, connected, got, closed;
} cl_t;

static int nconnected, nfailed, ngot, nemfile, last_err;

static void c_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  cl_t *k = arg;
  (void)c;
  if (len != sizeof(k) || memcmp(data, &k, sizeof(k)) != 0)
    FAIL("a client got a message that is not its own back");
  k->got++;
  ngot++;
}

static void c_connected(rmx_conn_t *c, int status, void *arg)
{
  cl_t *k = arg;
  if (k->connected++)
    FAIL("on_connected ran twice");
  k->status = status;
  if (status == RMX_EMFILE)
    nemfile++;
  if (status) {
    last_err = status;
    nfailed++;
    return;
  }
  nconnected++;
  rmx_conn_cbs_t cbs = {.on_recv = c_recv};
  rmx_conn_set_cbs(c, &cbs, k);
}

/* Every connected client that has not sent yet sends its message. */
static int send_all(cl_t *k, int n)
{
  int sent = 0;
  for (int i = 0; i < n; i++)
    if (k[i].status == 0 && k[i].connected && !k[i].closed && !k[i].got) {
      cl_t *p = &k[i];
      if (rmx_send(p->c, &p, sizeof(p), NULL, NULL) != 0)
        FAIL("send");
      sent++;
    }
  return sent;
}

/* The limit that leaves exactly 'room' descriptors free (the lowest free
 * numbers are what the kernel hands out). */
static rlim_t limit_for(int room)
{
  int fd = 0;
  for (; room > 0; fd++)
    if (fcntl(fd, F_GETFD) == -1)
      room--;
  return (rlim_t)fd;
}

/* This process's own connects, out of descriptors: RMX_EMFILE in
 * on_connected for those that found none, the rest connect. */
static void client_side(rmx_ctx_t *ctx, const char *uri)
{
  struct rlimit rl, low;
  cl_t k[8] = {{0}};
  getrlimit(RLIMIT_NOFILE, &rl);
  low = rl;
  low.rlim_cur = limit_for(3); /* room for 3 sockets */
  if (setrlimit(RLIMIT_NOFILE, &low) != 0)
    FAIL("setrlimit");
  nconnected = nfailed = nemfile = 0;
  rmx_ctx_stats_t st0, st;
  if (rmx_ctx_stats_get(ctx, &st0, sizeof(st0)) != 0)
    FAIL("rmx_ctx_stats_get");
  for (int i = 0; i < 8; i++)
    if (rmx_connect(ctx, uri, c_connected, &k[i], &k[i].c) != 0)
      FAIL("rmx_connect %d", i);
  int done = 0;
  time_t end = time(NULL) + 30;
  while ((done = nconnected + nfailed) < 8 && time(NULL) <= end)
    rmx_ctx_progress(ctx);
  if (done < 8)
    FAIL("the connects out of descriptors did not all end: %d of 8", done);
  /* Room for 3 sockets, less what the loop may open for itself. */
  if (nemfile < 5 || nfailed != nemfile || nconnected < 1)
    FAIL("out of descriptors: %d connected, %d failed (%d with RMX_EMFILE)", nconnected,
         nfailed, nemfile);
  /* Each counted as a transport's refusal (rmx_ctx_stats_t tp_refused). */
  if (rmx_ctx_stats_get(ctx, &st, sizeof(st)) != 0 ||
      st.tp_refused - st0.tp_refused != (uint64_t)nemfile)
    FAIL("%d connects out of descriptors counted as %llu refusals", nemfile,
         (unsigned long long)(st.tp_refused - st0.tp_refused));
  printf("fdlimit: a client out of descriptors: %d connected, %d failed with %s (counted in "
         "tp_refused)\n", nconnected, nfailed, rmx_err_name(RMX_EMFILE));
  for (int i = 0; i < 8; i++)
    rmx_conn_close(k[i].c, NULL, NULL);
  for (int i = 0; i < 200; i++)
    rmx_ctx_progress(ctx);
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
    FAIL("setrlimit back");
}

int main(int argc, char **argv)
{
  if (argc < 2 || strcmp(argv[1], "tcp") != 0) {
    fprintf(stderr, "usage: rmx-fdlimit tcp [LIMIT [CLIENTS]]\n");
    return 2;
  }
  int limit = argc > 2 ? atoi(argv[2]) : 48, n = argc > 3 ? atoi(argv[3]) : 100;
  const int again = 10; /* clients closed, then as many let in */
  signal(SIGPIPE, SIG_IGN);
  int p[2];
  if (pipe(p) != 0)
    FAIL("pipe");
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(p[0]);
    _exit(serve(p[1], (rlim_t)limit));
  }
  test_server_pid = pid;
  close(p[1]);
  FILE *from = fdopen(p[0], "r");
  char uri[128], line[128];
  if (!fgets(uri, sizeof(uri), from))
    FAIL("the server did not start");
  uri[strcspn(uri, "\n")] = 0;

  rmx_config_t cfg;
  rmx_config_init(&cfg);
  cfg.connect_timeout_ms = 120000; /* the clients beyond the limit wait */
  rmx_ctx_t *ctx;
  if (rmx_ctx_create(&ctx, NULL, &cfg) != 0)
    FAIL("context");

  cl_t *k = calloc((size_t)n, sizeof(*k));
  nconnected = nfailed = ngot = 0;
  for (int i = 0; i < n; i++)
    if (rmx_connect(ctx, uri, c_connected, &k[i], &k[i].c) != 0)
      FAIL("rmx_connect %d", i);
  /* The server says when it ran out, and how many it had taken. */
  int first = -1;
  while (first < 0) {
    rmx_ctx_progress(ctx);
    fd_set r;
    FD_ZERO(&r);
    FD_SET(p[0], &r);
    struct timeval tv = {0, 1000};
    if (select(p[0] + 1, &r, NULL, NULL, &tv) > 0) {
      if (!fgets(line, sizeof(line), from) || sscanf(line, "starved %d", &first) != 1)
        FAIL("the server did not say it ran out of descriptors");
    }
    if (nfailed)
      FAIL("a client failed: %s", rmx_strerror(last_err));
  }
  if (first <= 0 || first >= n || first >= limit)
    FAIL("the server took %d connections before it ran out (limit %d)", first, limit);
  progress_until(ctx, &nconnected, NULL, first, 60);
  for (int i = 0; i < 500; i++) /* nobody else gets in, nobody fails */
    rmx_ctx_progress(ctx);
  if (nconnected != first || nfailed)
    FAIL("%d connected, %d failed (%s); the server took %d", nconnected, nfailed,
         rmx_strerror(last_err), first);
  int sent = send_all(k, n);
  progress_until(ctx, &ngot, NULL, sent, 60);
  printf("fdlimit: the server (%d descriptors) took %d of %d clients, served them all; the "
         "rest wait\n", limit, first, n);

  /* Some close: as many of those waiting get in, and are served. */
  int closed = 0;
  for (int i = 0; i < n && closed < again; i++)
    if (k[i].connected && k[i].status == 0) {
      k[i].closed = 1;
      rmx_conn_close(k[i].c, NULL, NULL);
      closed++;
    }
  progress_until(ctx, &nconnected, NULL, first + again, 60);
  for (int i = 0; i < 500; i++)
    rmx_ctx_progress(ctx);
  if (nconnected != first + again || nfailed)
    FAIL("after %d closed: %d connected, %d failed", again, nconnected, nfailed);
  sent += send_all(k, n);
  progress_until(ctx, &ngot, NULL, sent, 60);
  printf("fdlimit: %d closed, %d waiting clients got in and were served\n", again, again);

  for (int i = 0; i < n; i++)
    if (!k[i].closed)
      rmx_conn_close(k[i].c, NULL, NULL);
  for (int i = 0; i < 200; i++)
    rmx_ctx_progress(ctx);
  if (rmx_ctx_destroy(ctx) != 0)
    FAIL("destroy");
  /* A second context: the process's limit is raised once, by the first. */
  if (rmx_ctx_create(&ctx, NULL, &cfg) != 0)
    FAIL("context");
  client_side(ctx, uri); /* the server has room again */
  if (rmx_ctx_destroy(ctx) != 0)
    FAIL("destroy");
  free(k);

  kill(pid, SIGTERM);
  int acc = -1, echo = -1, st;
  if (fscanf(from, "%d %d", &acc, &echo) != 2)
    FAIL("the server did not report");
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    FAIL("the server exited badly");
  /* The client side's 3 too, and whatever of the waiting clients the
   * server took as they closed at the end. */
  if (acc < 3 + first + again || echo != sent)
    FAIL("the server accepted %d and echoed %d; want at least %d and %d", acc, echo,
         3 + first + again, sent);
  return 0;
}
