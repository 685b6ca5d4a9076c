/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The soak's driver: starts RMX_TEST_SOAK_SERVERS servers and RMX_TEST_SOAK_CLIENTS
 * clients (this same program, fork+exec'ed in another role), then for
 * RMX_TEST_SOAK_SECONDS injects faults at random: a server killed (SIGKILL) and
 * restarted on the same port, a server stopped (SIGSTOP) past the keepalive
 * limit and then resumed or killed, now and then a client killed and
 * restarted. Then it lets every server come back, asks the clients to
 * finish (SIGTERM), then the servers, and checks what they report.
 *
 *   rmx-soak [tcp|rdma|shm]
 *
 * Exit status 0 only when every check passed (soak_check.c); the last line
 * says what was measured. Also read: RMX_TEST_SOAK_CLIENT_KILL_PCT (3: of the
 * fault turns, in the first 40% of the run), RMX_TEST_SOAK_RSS_TOL_MIB (8),
 * RMX_TEST_SOAK_TRACE (clients print each resource sample). The seed (RMX_TEST_SOAK_SEED, else the clock) is printed first: the
 * same seed gives the same faults and traffic picks (timing still varies).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "soak.h"

#define MAX_KIDS 16

typedef struct kid {
  const char *role; /* "server" or "client" */
  int idx, gen;
  pid_t pid;        /* 0: not running */
  int out;          /* its stdout, -1 when closed */
  char line[1024];
  size_t used;
  int port, ready;  /* a server: its port, and "PORT" seen since its start */
  int stopped, doomed, stopping; /* SIGSTOPped; SIGKILLed by us; SIGTERMed by us */
  uint64_t restart_at, resume_at;
  char report[1024]; /* its last CLIENT or SERVER line */
} kid_t;

static struct {
  char exe[4096], scheme[8], addr[128];
  uint64_t seed, rng, seconds;
  int nservers, nclients, failed;
  uint64_t client_kill_pct; /* of the fault turns, in the first 40% of the run */
  kid_t srv[MAX_KIDS], cli[MAX_KIDS];
  unsigned long kills, stops, resumes, client_kills, server_corrupt, server_resent;
} D;

static void fail(const char *fmt, const char *what, long v)
{
  D.failed++;
  fprintf(stderr, "soak: FAIL: ");
  fprintf(stderr, fmt, what, v);
  fputc('\n', stderr);
}

static uint64_t env_u64(const char *name, uint64_t def)
{
  const char *v = getenv(name);
  return v && *v ? strtoull(v, NULL, 0) : def;
}

/* ---- children ---- */

static void spawn(kid_t *k, char **argv)
{
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    perror("soak: pipe");
    exit(2);
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    perror("soak: fork");
    exit(2);
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphans if the driver dies */
    dup2(p[1], STDOUT_FILENO);
    execv(D.exe, argv);
    _exit(127);
  }
  close(p[1]);
  fcntl(p[0], F_SETFL, O_NONBLOCK);
  k->pid = pid;
  k->out = p[0];
  k->used = 0;
  k->ready = k->stopped = k->doomed = k->stopping = 0;
  k->restart_at = k->resume_at = 0;
}

/* Over shm a server's address is a name of its own (abstract, this run's),
 * the same at each restart; over tcp and rdma its port (0 the first time:
 * any free port). */
static void server_uri(char *buf, size_t len, const kid_t *k)
{
  if (strcmp(D.scheme, "shm") == 0)
    snprintf(buf, len, "shm://@rmx-soak-%d-%d", (int)getpid(), k->idx);
  else
    snprintf(buf, len, "%s://%s:%d", D.scheme, D.addr, k->port);
}

static void start_server(kid_t *k)
{
  char uri[160], nclients[16];
  server_uri(uri, sizeof(uri), k);
  snprintf(nclients, sizeof(nclients), "%d", D.nclients);
  char *argv[] = {D.exe, "server", uri, nclients, NULL};
  spawn(k, argv);
}

static void start_client(kid_t *k)
{
  char seed[32], idx[16], gen[16], warm[32], uris[MAX_KIDS][160];
  char *argv[6 + MAX_KIDS + 1] = {D.exe, "client", seed, idx, gen, warm};
  /* warmed up after a quarter of the run (between 3 and 20 s) */
  uint64_t w = D.seconds * 250;
  w = w < 3000 ? 3000 : w > 20000 ? 20000 : w;
  snprintf(seed, sizeof(seed), "%llu", (unsigned long long)D.seed);
  snprintf(idx, sizeof(idx), "%d", k->idx);
  snprintf(gen, sizeof(gen), "%d", k->gen);
  snprintf(warm, sizeof(warm), "%llu", (unsigned long long)w);
  for (int i = 0; i < D.nservers; i++) {
    server_uri(uris[i], sizeof(uris[i]), &D.srv[i]);
    argv[6 + i] = uris[i];
  }
  argv[6 + D.nservers] = NULL;
  spawn(k, argv);
}

static void on_line(kid_t *k, char *line)
{
  unsigned long n;
  if (sscanf(line, "PORT %d", &k->port) == 1)
    k->ready = 1;
  else if (sscanf(line, "CORRUPT %lu", &n) == 1)
    D.server_corrupt += n; /* said at once: the server may be killed later */
  else if (!strncmp(line, "RESENT ", 7))
    D.server_resent++;
  else if (!strncmp(line, "CLIENT ", 7) || !strncmp(line, "SERVER ", 7))
    snprintf(k->report, sizeof(k->report), "%s", line);
}

static void read_kid(kid_t *k)
{
  while (k->out >= 0) {
    ssize_t r = read(k->out, k->line + k->used, sizeof(k->line) - 1 - k->used);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return; /* EAGAIN: later */
    if (r == 0) {
      close(k->out);
      k->out = -1;
      return;
    }
    k->used += (size_t)r;
    k->line[k->used] = 0;
    char *nl;
    while ((nl = strchr(k->line, '\n'))) {
      *nl = 0;
      on_line(k, k->line);
      k->used -= (size_t)(nl + 1 - k->line);
      memmove(k->line, nl + 1, k->used + 1);
    }
    if (k->used == sizeof(k->line) - 1)
      k->used = 0; /* a line too long to be ours */
  }
}

static kid_t *kid_of(pid_t pid)
{
  for (int i = 0; i < D.nservers; i++)
    if (D.srv[i].pid == pid)
      return &D.srv[i];
  for (int i = 0; i < D.nclients; i++)
    if (D.cli[i].pid == pid)
      return &D.cli[i];
  return NULL;
}

/* Reap what ended: our SIGKILLs, our SIGTERMs (status 0 expected), and
 * anything else, which is a failure (a crash, a sanitizer report). */
static void reap(void)
{
  int st;
  pid_t pid;
  while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
    kid_t *k = kid_of(pid);
    if (!k)
      continue;
    fcntl(k->out, F_SETFL, 0); /* dead: read to the end of what it said */
    read_kid(k);
    k->pid = 0;
    if (k->doomed && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
      continue;
    if (k->stopping && WIFEXITED(st) && WEXITSTATUS(st) == 0)
      continue;
    D.failed++;
    fprintf(stderr, "soak: FAIL: %s %d (gen %d) %s: %s %d (a sanitizer's report above?)\n",
            k->role, k->idx, k->gen, k->stopping ? "did not stop cleanly" : "ended by itself",
            WIFSIGNALED(st) ? "signal" : "exit status",
            WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
  }
}

/* Wait up to ms, reading what the children say. */
static void pump(unsigned ms)
{
  struct pollfd p[2 * MAX_KIDS];
  kid_t *who[2 * MAX_KIDS];
  int n = 0;
  for (int i = 0; i < D.nservers; i++)
    if (D.srv[i].out >= 0)
      who[n] = &D.srv[i], p[n++] = (struct pollfd){.fd = D.srv[i].out, .events = POLLIN};
  for (int i = 0; i < D.nclients; i++)
    if (D.cli[i].out >= 0)
      who[n] = &D.cli[i], p[n++] = (struct pollfd){.fd = D.cli[i].out, .events = POLLIN};
  if (poll(p, (nfds_t)n, (int)ms) > 0)
    for (int i = 0; i < n; i++)
      if (p[i].revents)
        read_kid(who[i]);
  reap();
}

static void kill_kid(kid_t *k)
{
  k->doomed = 1;
  k->ready = 0;
  kill(k->pid, SIGKILL);
}

/* ---- faults ---- */

static kid_t *pick_server(void)
{
  int i = (int)soak_range(&D.rng, 0, (uint64_t)D.nservers - 1);
  kid_t *k = &D.srv[i];
  return k->pid && k->ready && !k->stopped && !k->doomed ? k : NULL;
}

static uint64_t T0;

/* One line per fault, so that a failure can be read against them. */
static void said(uint64_t now, const char *what, const kid_t *k)
{
  printf("soak: %6.1f s %s %s %d\n", (double)(now - T0) / 1000.0, what, k->role, k->idx);
}

static void inject(uint64_t now, int clients_too)
{
  uint64_t r = soak_range(&D.rng, 0, 99);
  kid_t *k = r < 75 ? pick_server() : NULL;
  if (r < 75 && !k)
    return; /* that server is already down: a quiet turn */
  if (r < 60) {
    kill_kid(k); /* back on the same port a little later */
    k->restart_at = now + soak_range(&D.rng, 1, 1000);
    D.kills++;
    said(now, "kill", k);
  } else if (r < 75) {
    /* silent, longer than the keepalive limit: the clients must notice */
    kill(k->pid, SIGSTOP);
    k->stopped = 1;
    k->resume_at = now + soak_range(&D.rng, 1300, 2500);
    D.stops++;
    said(now, "stop", k);
  } else if (r < 75 + D.client_kill_pct && clients_too) {
    /* rarely, and early: a client's checks need a warmed-up run */
    k = &D.cli[soak_range(&D.rng, 0, (uint64_t)D.nclients - 1)];
    if (k->pid && !k->doomed) {
      kill_kid(k);
      k->restart_at = now + soak_range(&D.rng, 1, 500);
      D.client_kills++;
      said(now, "kill", k);
    }
  }
}

/* Restarts and resumptions that are due (all of them when force). */
static void due(uint64_t now, int force)
{
  for (int i = 0; i < D.nservers; i++) {
    kid_t *k = &D.srv[i];
    if (k->stopped && (force || now >= k->resume_at)) {
      k->stopped = 0;
      if (!force && soak_range(&D.rng, 0, 1)) {
        kill_kid(k); /* never woke up: killed, to be restarted */
        k->restart_at = now + soak_range(&D.rng, 1, 500);
        D.kills++;
        said(now, "kill stopped", k);
      } else {
        kill(k->pid, SIGCONT);
        D.resumes++;
        said(now, "resume", k);
      }
    }
    if (k->restart_at && !k->pid && (force || now >= k->restart_at)) {
      k->gen++;
      start_server(k);
      said(now, "restart", k);
    }
  }
  for (int i = 0; i < D.nclients; i++) {
    kid_t *k = &D.cli[i];
    if (k->restart_at && !k->pid && (force || now >= k->restart_at)) {
      k->gen++;
      k->report[0] = 0;
      start_client(k);
      said(now, "restart", k);
    }
  }
}

static int servers_ready(void)
{
  for (int i = 0; i < D.nservers; i++)
    if (!D.srv[i].pid || !D.srv[i].ready)
      return 0;
  return 1;
}

/* The end of the faults: resume what is stopped and restart what was
 * killed, as soon as it has been reaped (a restart waits for that). */
static int all_back(void)
{
  due(soak_now_ms(), 1);
  for (int i = 0; i < D.nclients; i++)
    if (!D.cli[i].pid || D.cli[i].doomed)
      return 0;
  return servers_ready();
}

static int wait_until(int (*cond)(void), unsigned ms)
{
  uint64_t end = soak_now_ms() + ms;
  while (!cond() && soak_now_ms() < end)
    pump(50);
  return cond();
}

static int clients_gone(void)
{
  for (int i = 0; i < D.nclients; i++)
    if (D.cli[i].pid)
      return 0;
  return 1;
}

static int servers_gone(void)
{
  for (int i = 0; i < D.nservers; i++)
    if (D.srv[i].pid)
      return 0;
  return 1;
}

/* ---- the run ---- */

static void setup(int argc, char **argv)
{
  ssize_t n = readlink("/proc/self/exe", D.exe, sizeof(D.exe) - 1);
  if (n <= 0) {
    perror("soak: /proc/self/exe");
    exit(2);
  }
  D.exe[n] = 0;
  snprintf(D.scheme, sizeof(D.scheme), "%s", argc > 1 ? argv[1] : "tcp");
  if (strcmp(D.scheme, "tcp") && strcmp(D.scheme, "rdma") && strcmp(D.scheme, "shm")) {
    fprintf(stderr, "usage: rmx-soak [tcp|rdma|shm]\n");
    exit(2);
  }
  const char *a = "127.0.0.1";
  if (!strcmp(D.scheme, "rdma"))
    a = getenv("RMX_TEST_ADDR") ? getenv("RMX_TEST_ADDR")
        : getenv("RXE_VM_ADDR") ? getenv("RXE_VM_ADDR") : "192.0.2.1";
  snprintf(D.addr, sizeof(D.addr), "%s", a);
  D.seconds = env_u64("RMX_TEST_SOAK_SECONDS", 60);
  D.seed = env_u64("RMX_TEST_SOAK_SEED", soak_mix(soak_now_ms() ^ (uint64_t)getpid()) & 0xffffffffu);
  D.rng = soak_mix(D.seed);
  D.nservers = (int)env_u64("RMX_TEST_SOAK_SERVERS", 3);
  D.nclients = (int)env_u64("RMX_TEST_SOAK_CLIENTS", 3);
  D.client_kill_pct = env_u64("RMX_TEST_SOAK_CLIENT_KILL_PCT", 3);
  D.client_kill_pct = D.client_kill_pct > 25 ? 25 : D.client_kill_pct;
  if (D.nservers < 1 || D.nservers > MAX_KIDS || D.nclients < 1 || D.nclients > MAX_KIDS) {
    fprintf(stderr, "soak: 1 .. %d servers and clients\n", MAX_KIDS);
    exit(2);
  }
  /* short liveness limits, unless the caller set others: a stopped server
   * is noticed within about a second */
  setenv("RMX_KEEPALIVE_MS", "100", 0);
  setenv("RMX_KEEPALIVE_TIMEOUT_MS", "1000", 0);
  setenv("RMX_LOG", "error", 0); /* every loss is a warning: thousands of lines */
  printf("soak: seed=%llu seconds=%llu transport=%s addr=%s servers=%d clients=%d "
         "keepalive=%s/%s ms%s (replay: RMX_TEST_SOAK_SEED=%llu)\n",
         (unsigned long long)D.seed, (unsigned long long)D.seconds, D.scheme, D.addr, D.nservers,
         D.nclients, getenv("RMX_KEEPALIVE_MS"), getenv("RMX_KEEPALIVE_TIMEOUT_MS"),
         soak_sanitized() ? " sanitized" : "", (unsigned long long)D.seed);
  fflush(stdout);
  for (int i = 0; i < MAX_KIDS; i++) {
    D.srv[i] = (kid_t){.role = "server", .idx = i, .out = -1};
    D.cli[i] = (kid_t){.role = "client", .idx = i, .out = -1};
  }
}

static void kill_all(void)
{
  for (int i = 0; i < D.nservers; i++)
    if (D.srv[i].pid)
      kill_kid(&D.srv[i]), kill(D.srv[i].pid, SIGCONT);
  for (int i = 0; i < D.nclients; i++)
    if (D.cli[i].pid)
      kill_kid(&D.cli[i]);
  wait_until(servers_gone, 5000);
  wait_until(clients_gone, 5000);
}

int soak_driver_main(int argc, char **argv)
{
  setup(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  uint64_t t0 = T0 = soak_now_ms();
  for (int i = 0; i < D.nservers; i++)
    start_server(&D.srv[i]);
  if (!wait_until(servers_ready, 30000)) {
    fail("%s did not start within %ld s", "a server", 30);
    kill_all();
    return 1;
  }
  for (int i = 0; i < D.nclients; i++)
    start_client(&D.cli[i]);

  uint64_t end = t0 + D.seconds * 1000, now;
  uint64_t next = soak_now_ms() + 1000; /* let traffic start first */
  while ((now = soak_now_ms()) < end && !D.failed) {
    if (now >= next) {
      inject(now, now - t0 < D.seconds * 400);
      next = now + soak_range(&D.rng, 200, 1200);
    }
    due(now, 0);
    pump(20);
  }

  /* Calm: every server back, time to reconnect, then the clients finish. */
  if (!wait_until(all_back, 30000)) {
    fail("%s not all back within %ld s", "servers or clients", 30);
    for (int i = 0; i < D.nservers; i++)
      if (!D.srv[i].ready)
        fprintf(stderr, "soak: server %d (gen %d, pid %d) is not listening\n", i, D.srv[i].gen,
                (int)D.srv[i].pid);
  }
  pump(1500);
  for (int i = 0; i < D.nclients; i++)
    if (D.cli[i].pid)
      D.cli[i].stopping = 1, kill(D.cli[i].pid, SIGTERM);
  if (!wait_until(clients_gone, 60000))
    fail("%s did not finish within %ld s", "clients", 60);
  for (int i = 0; i < D.nservers; i++)
    if (D.srv[i].pid)
      D.srv[i].stopping = 1, kill(D.srv[i].pid, SIGTERM);
  if (!wait_until(servers_gone, 30000))
    fail("%s did not finish within %ld s", "servers", 30);
  kill_all(); /* whatever is left after a failure */
  printf("soak: ran %.1f s\n", (double)(soak_now_ms() - t0) / 1000.0);
  return soak_check() ? 1 : 0;
}

/* ---- what the checks need from here ---- */

const char *soak_report_of(int client, int idx)
{
  return client ? D.cli[idx].report : D.srv[idx].report;
}

void soak_counts(soak_counts_t *out)
{
  *out = (soak_counts_t){.nservers = D.nservers, .nclients = D.nclients, .failed = D.failed,
                         .kills = D.kills, .stops = D.stops, .client_kills = D.client_kills,
                         .server_corrupt = D.server_corrupt, .server_resent = D.server_resent};
}

int main(int argc, char **argv)
{
  if (argc > 1 && !strcmp(argv[1], "server"))
    return soak_server_main(argc, argv);
  if (argc > 1 && !strcmp(argv[1], "client"))
    return soak_client_main(argc, argv);
  return soak_driver_main(argc, argv);
}
