/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Bursts of clients against one listener (public API only): N clients
 * connecting at the same instant all get in, and again while M raw
 * sockets hold half-open handshakes (connected, never a byte). The
 * listener keeps RMX_MAX_HANDSHAKES handshakes at once and leaves the rest
 * in the kernel's backlog; a silent socket is dropped after
 * RMX_HANDSHAKE_TIMEOUT_MS; nobody is refused.
 *
 *   rmx-burst SCHEME [CLIENTS [SILENT]]      (default 1000 and 300)
 *
 * The server is a child process with its own context; the clients are one
 * context here. Every client must connect with status 0, every connection
 * must then carry one message each way, and the server must have accepted
 * exactly what connected.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rmx/rmx.h>
#include <uv.h>

static pid_t server_pid; /* killed with us: never left behind */

#define FAIL(...)                          \
  do {                                     \
    fprintf(stderr, "burst: FAIL: ");      \
    fprintf(stderr, __VA_ARGS__);          \
    fprintf(stderr, "\n");                 \
    if (server_pid > 0)                    \
      kill(server_pid, SIGKILL);           \
    exit(1);                               \
  } while (0)

/* ---- the server (child) ---- */

static int accepted, echoed;

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

static rmx_ctx_t *s_ctx;

static void on_term(uv_signal_t *h, int sig)
{
  (void)sig;
  uv_close((uv_handle_t *)h, NULL);
  rmx_ctx_stop(s_ctx);
}

static int serve(const char *uri, int out, int n)
{
  rmx_listener_t *l;
  rmx_config_t cfg;
  char bound[128];
  rmx_config_init(&cfg);
  /* Both bursts' connections at once: the first burst's may still be
   * closing when the second comes (the connection limit is not what this
   * tests). */
  if (cfg.max_conns < (uint32_t)(2 * n + 16))
    cfg.max_conns = (uint32_t)(2 * n + 16);
  if (rmx_ctx_create(&s_ctx, NULL, &cfg) != 0 ||
      rmx_listen(s_ctx, uri, s_accept, NULL, &l) != 0 ||
      rmx_listener_uri(l, bound, sizeof(bound)) != 0)
    return 1;
  uv_signal_t term; /* the test's end: stop, report, leave */
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
  int status, connected, got;
} cl_t;

static int nconnected, nfailed, ngot;

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
  if (status) {
    if (nfailed++ < 5) /* the first few say why */
      fprintf(stderr, "burst: a client failed to connect: %s\n", rmx_strerror(status));
    return;
  }
  nconnected++;
  rmx_conn_cbs_t cbs = {.on_recv = c_recv};
  rmx_conn_set_cbs(c, &cbs, k);
  if (rmx_send(c, &k, sizeof(k), NULL, NULL) != 0)
    FAIL("send");
}

static void run_until(rmx_ctx_t *ctx, const int *a, const int *b, int want, int secs)
{
  time_t end = time(NULL) + secs;
  while (*a + (b ? *b : 0) < want) {
    if (rmx_ctx_progress(ctx) < 0)
      FAIL("progress");
    if (time(NULL) > end)
      FAIL("timed out: %d of %d", *a + (b ? *b : 0), want);
  }
}

static int raw_connect(const struct sockaddr_in *sa)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0)
    FAIL("raw connect: %s", strerror(errno));
  return fd;
}

static void burst(rmx_ctx_t *ctx, const char *uri, int n, const char *what)
{
  cl_t *k = calloc((size_t)n, sizeof(*k));
  nconnected = nfailed = ngot = 0;
  for (int i = 0; i < n; i++)
    if (rmx_connect(ctx, uri, c_connected, &k[i], &k[i].c) != 0)
      FAIL("rmx_connect %d", i);
  run_until(ctx, &nconnected, &nfailed, n, 60);
  if (nfailed)
    FAIL("%s: %d of %d clients could not connect", what, nfailed, n);
  run_until(ctx, &ngot, NULL, n, 60);
  printf("burst: %s: %d of %d clients connected, each got its message back\n", what,
         nconnected, n);
  for (int i = 0; i < n; i++)
    rmx_conn_close(k[i].c, NULL, NULL);
  for (int i = 0; i < 200; i++)
    rmx_ctx_progress(ctx);
  free(k);
}

int main(int argc, char **argv)
{
  if (argc < 2 || strcmp(argv[1], "tcp") != 0) {
    fprintf(stderr, "usage: rmx-burst tcp [CLIENTS [SILENT]]\n");
    return 2;
  }
  int n = argc > 2 ? atoi(argv[2]) : 1000, silent = argc > 3 ? atoi(argv[3]) : 300;
  /* Both ends hold a socket per connection: make room under the hard limit. */
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)(2 * n + silent + 64)) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  signal(SIGPIPE, SIG_IGN);
  int p[2];
  if (pipe(p) != 0)
    FAIL("pipe");
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* the server dies with the test */
    close(p[0]);
    _exit(serve("tcp://127.0.0.1:0", p[1], n));
  }
  server_pid = pid;
  close(p[1]);
  FILE *from = fdopen(p[0], "r");
  char uri[128];
  if (!fgets(uri, sizeof(uri), from))
    FAIL("the server did not start");
  uri[strcspn(uri, "\n")] = 0;
  int port = atoi(strrchr(uri, ':') + 1);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

  rmx_ctx_t *ctx;
  if (rmx_ctx_create(&ctx, NULL, NULL) != 0)
    FAIL("context");
  burst(ctx, uri, n, "at once");
  int *fds = malloc(sizeof(int) * (size_t)(silent ? silent : 1));
  for (int i = 0; i < silent; i++)
    fds[i] = raw_connect(&sa);
  char what[64];
  snprintf(what, sizeof(what), "behind %d silent sockets", silent);
  burst(ctx, uri, n, what);
  for (int i = 0; i < silent; i++)
    close(fds[i]);
  free(fds);
  rmx_ctx_destroy(ctx);

  kill(pid, SIGTERM);
  int acc = -1, echo = -1, st;
  if (fscanf(from, "%d %d", &acc, &echo) != 2)
    FAIL("the server did not report");
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    FAIL("the server exited badly");
  if (acc != 2 * n || echo != 2 * n)
    FAIL("the server accepted %d and echoed %d, not %d", acc, echo, 2 * n);
  printf("burst: the server accepted %d connections and refused none\n", acc);
  return 0;
}
