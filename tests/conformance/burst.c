/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Bursts of clients against one listener: N clients connecting at the
 * same instant all get in; over TCP again while M raw sockets hold
 * half-open handshakes (connected, never a byte); then, while a bad peer
 * makes F connections in a row that fail (raw rdma_cm or sockets: dropped
 * as soon as made, refused after the server's reply, abandoned before
 * it), a good client connecting over and over is never turned away. The
 * listener keeps RMX_MAX_HANDSHAKES handshakes at once and lets the rest
 * wait (TCP: the kernel's backlog; verbs: requests held unanswered); a
 * silent peer is dropped after RMX_HANDSHAKE_TIMEOUT_MS; nobody is refused.
 *
 *   rmx-burst SCHEME [CLIENTS [SILENT [FAILING]]]  (default 1000, 300, 500)
 *
 * SCHEME is tcp (127.0.0.1) or rdma ($RMX_TEST_ADDR, else $RXE_VM_ADDR).
 * The server is a child process with its own context; the clients are one
 * context here. Every client must connect with status 0, every connection
 * must then carry one message each way, and the server must have accepted
 * exactly the good clients (the bad peer's connections are not counted:
 * some of them are accepted before they fail).
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
#include <pthread.h>
#include <rmx/rmx.h>
#include <uv.h>

#include "rawpeer.h"
#define TEST_NAME "burst"
#include "test_util.h"

/* ---- the server (child) ---- */

static int accepted, echoed;

/* A good client's connection sends one message: the ones that did are the
 * good clients (a bad peer's accepted connection sends none). */
static void s_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  (void)arg;
  if (rmx_send(c, data, len, NULL, NULL) == 0)
    echoed++;
}

static void s_gone(rmx_conn_t *c, int status, void *arg)
{
  (void)status;
  (void)arg;
  rmx_conn_close(c, NULL, NULL);
}

static void s_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  (void)l;
  (void)arg;
  rmx_conn_cbs_t cbs = {.on_recv = s_recv, .on_disconnect = s_gone};
  rmx_conn_set_cbs(c, &cbs, NULL);
  accepted++;
}

static rmx_ctx_t *s_ctx;

/* The test's end: once every connection the clients closed is gone here
 * too (or after 20 s), stop and report. */
static int term_ticks;

static void term_tick(uv_timer_t *t)
{
  rmx_ctx_stats_t st;
  if (rmx_ctx_stats_get(s_ctx, &st, sizeof(st)) != 0 || st.conns == 0 || ++term_ticks > 400) {
    uv_close((uv_handle_t *)t, NULL);
    rmx_ctx_stop(s_ctx);
  }
}

static void on_term(uv_signal_t *h, int sig)
{
  static uv_timer_t t;
  (void)sig;
  uv_close((uv_handle_t *)h, NULL);
  uv_timer_init(rmx_ctx_loop(s_ctx), &t);
  uv_timer_start(&t, term_tick, 0, 50);
}

static int serve(const char *uri, int out, int n)
{
  rmx_listener_t *l;
  rmx_config_t cfg;
  char bound[128];
  rmx_config_init(&cfg);
  /* Every phase's connections at once: one phase's may still be closing
   * when the next comes (the connection limit is not what this tests). */
  (void)n;
  cfg.max_conns = 1u << 20;
  if (rmx_ctx_create(&s_ctx, NULL, &cfg) != 0 ||
      rmx_listen(s_ctx, uri, s_accept, NULL, &l) != 0 ||
      rmx_listener_uri(l, bound, sizeof(bound)) != 0)
    return 1;
  uv_signal_t term; /* the test's end: stop, report, leave */
  uv_signal_init(rmx_ctx_loop(s_ctx), &term);
  uv_signal_start(&term, on_term, SIGTERM);
  dprintf(out, "%s\n", bound);
  rmx_ctx_run(s_ctx);
  rmx_ctx_stats_t st;
  rmx_ctx_stats_get(s_ctx, &st, sizeof(st));
  dprintf(out, "%d %d %llu %llu\n", accepted, echoed, (unsigned long long)st.conns,
          (unsigned long long)st.tp_reg_bytes);
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
  progress_until(ctx, &nconnected, &nfailed, n, 60);
  if (nfailed)
    FAIL("%s: %d of %d clients could not connect", what, nfailed, n);
  progress_until(ctx, &ngot, NULL, n, 60);
  printf("burst: %s: %d of %d clients connected, each got its message back\n", what,
         nconnected, n);
  for (int i = 0; i < n; i++)
    rmx_conn_close(k[i].c, NULL, NULL);
  for (int i = 0; i < 200; i++)
    rmx_ctx_progress(ctx);
  free(k);
}

/* ---- a peer whose connections fail, and a good client beside it ---- */

static struct sockaddr_in bad_sa;
static int bad_count, bad_done;

#ifdef BURST_RDMA
#include "fault_cm_peer.h"
static void bad_rdma_once(int attempt)
{
  const char *why = fault_cm_fail_once(&bad_sa, attempt);
  if (why)
    FAIL("bad peer: %s", why);
}
static void bad_rdma_end(void) { fault_cm_end(); }
#else
static void bad_rdma_once(int attempt)
{
  (void)attempt;
  FAIL("built without verbs");
}
static void bad_rdma_end(void) {}
#endif

/* The same over TCP: a hello cut short, nothing, or a connection reset. */
static void bad_tcp_once(int way)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&bad_sa, sizeof(bad_sa)) != 0)
    FAIL("bad peer: connect: %s", strerror(errno));
  if (way == 0) {
    uint8_t half[12] = {0};
    p32(half, HELLO_LEN); /* a frame header promising a hello that never comes whole */
    half[4] = K_HELLO;
    (void)!write(fd, half, sizeof(half));
  } else if (way == 1) {
    struct linger lg = {.l_onoff = 1, .l_linger = 0}; /* a reset, not a close */
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
  }
  close(fd);
}

static int bad_rdma;

static void *bad_peer(void *arg)
{
  (void)arg;
  for (int i = 0; i < bad_count; i++) {
    if (bad_rdma)
      bad_rdma_once(i);
    else
      bad_tcp_once(i % 3);
  }
  bad_rdma_end();
  __atomic_store_n(&bad_done, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* A good client: connect, one message each way, close. */
static void good_once(rmx_ctx_t *ctx, const char *uri, int *n)
{
  cl_t k = {0};
  nconnected = nfailed = ngot = 0;
  if (rmx_connect(ctx, uri, c_connected, &k, &k.c) != 0)
    FAIL("rmx_connect");
  progress_until(ctx, &nconnected, &nfailed, 1, 60);
  if (nfailed)
    FAIL("a good client was turned away after %d good connections, while the bad peer "
         "made %s connections that fail", *n, bad_rdma ? "rdma" : "tcp");
  progress_until(ctx, &ngot, NULL, 1, 60);
  rmx_conn_close(k.c, NULL, NULL);
  for (int i = 0; i < 50; i++)
    rmx_ctx_progress(ctx);
  (*n)++;
}

static int churn(rmx_ctx_t *ctx, const char *uri, int failing)
{
  pthread_t t;
  int good = 0;
  bad_count = failing;
  if (pthread_create(&t, NULL, bad_peer, NULL) != 0)
    FAIL("thread");
  while (!__atomic_load_n(&bad_done, __ATOMIC_ACQUIRE))
    good_once(ctx, uri, &good);
  pthread_join(t, NULL);
  good_once(ctx, uri, &good); /* and once the bad peer is done */
  printf("burst: %d connections that fail in a row: %d good clients connected beside them, "
         "none turned away\n", failing, good);
  return good;
}

int main(int argc, char **argv)
{
  int rdma = argc >= 2 && strcmp(argv[1], "rdma") == 0;
  if (argc < 2 || (!rdma && strcmp(argv[1], "tcp") != 0)) {
    fprintf(stderr, "usage: rmx-burst tcp|rdma [CLIENTS [SILENT [FAILING]]]\n");
    return 2;
  }
  int n = argc > 2 ? atoi(argv[2]) : 1000, silent = argc > 3 ? atoi(argv[3]) : 300;
  int failing = argc > 4 ? atoi(argv[4]) : 500;
  const char *addr = "127.0.0.1";
  if (rdma && !(addr = getenv("RMX_TEST_ADDR")) && !(addr = getenv("RXE_VM_ADDR"))) {
    fprintf(stderr, "burst: no RDMA address (RMX_TEST_ADDR or RXE_VM_ADDR)\n");
    return 77;
  }
  if (rdma)
    silent = 0; /* half-open sockets are TCP's; the bad peer holds verbs' half open */
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
  char listen_uri[128];
  snprintf(listen_uri, sizeof(listen_uri), "%s://%s:0", argv[1], addr);
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* the server dies with the test */
    close(p[0]);
    _exit(serve(listen_uri, p[1], n));
  }
  test_server_pid = pid; /* killed with us: never left behind */
  close(p[1]);
  FILE *from = fdopen(p[0], "r");
  char uri[128];
  if (!fgets(uri, sizeof(uri), from))
    FAIL("the server did not start");
  uri[strcspn(uri, "\n")] = 0;
  int port = atoi(strrchr(uri, ':') + 1);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
    FAIL("not an IPv4 address: %s", addr);
  bad_sa = sa;
  bad_rdma = rdma;

  rmx_ctx_t *ctx;
  if (rmx_ctx_create(&ctx, NULL, NULL) != 0)
    FAIL("context");
  int want = 0;
  if (n > 0) {
    burst(ctx, uri, n, "at once");
    want += n;
  }
  if (silent > 0 && n > 0) {
    int *fds = malloc(sizeof(int) * (size_t)silent);
    for (int i = 0; i < silent; i++)
      fds[i] = raw_connect(&sa);
    char what[64];
    snprintf(what, sizeof(what), "behind %d silent sockets", silent);
    burst(ctx, uri, n, what);
    want += n;
    for (int i = 0; i < silent; i++)
      close(fds[i]);
    free(fds);
  }
  if (failing > 0)
    want += churn(ctx, uri, failing);
  rmx_ctx_destroy(ctx);

  kill(pid, SIGTERM);
  int acc = -1, echo = -1, st;
  unsigned long long left = 0, reg = 0;
  if (fscanf(from, "%d %d %llu %llu", &acc, &echo, &left, &reg) != 4)
    FAIL("the server did not report");
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    FAIL("the server exited badly");
  if (echo != want || acc < want)
    FAIL("the server accepted %d and echoed %d, for %d good clients", acc, echo, want);
  printf("burst: the server served all %d good clients and refused none\n", want);
  /* Every connection's registrations went with it: what stays registered
   * is at most the shared receive queue, made once per device. */
  rmx_config_t dflt;
  rmx_config_init(&dflt);
  unsigned long long srq = ((unsigned long long)dflt.srq_depth * dflt.eager_size + 4095) & ~4095ull;
  if (left != 0 || reg > (rdma ? srq : 0))
    FAIL("after every client closed, the server still has %llu connections and %llu bytes "
         "registered for them (the shared receive queue is %llu)", left, reg, rdma ? srq : 0);
  printf("burst: the server is back to no connection and %llu bytes registered\n", reg);
  return 0;
}
