/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-key-forge: can a connected peer read memory it was never given? The
 * acceptance test of issue 24 ("the tests as an attacker writes them").
 *
 *   rmx-key-forge tcp|rdma
 *   rmx-key-forge --server-on HOST:PORT URI [READY_FILE]
 *
 * A server, a victim and an attacker run as separate processes (this
 * program, fork+exec'ed in each role; key_forge.h). The server gives each
 * client a registration of its own and streams 16 MiB messages to the
 * victim; the attacker, a client of the same server, forges packed keys
 * for (a) the victim's registration and (b) the victim's in-flight
 * messages, and (c) replays the victim's own key on its own connection
 * (key_forge_attacker.c says how). Every byte of the victim's memory
 * carries a tag, so a byte of it read by the attacker is counted wherever
 * it lands.
 *
 * Budget per attack: RMX_TEST_FORGE_ATTEMPTS (2048) attempts and
 * RMX_TEST_FORGE_SECONDS (20) seconds, whichever ends first; the seed of
 * (b)'s guesses is RMX_TEST_FORGE_SEED (else the clock), printed. Over
 * rdma:// the address is RMX_TEST_ADDR (else RXE_VM_ADDR, else 192.0.2.1,
 * the SoftRoCE VM's: tests/vm/run-in-vm).
 *
 * Across two hosts: `--server-on HOST:PORT URI` on one host listens for
 * the driver on a plain TCP socket (port 0: any; it says which on stdout
 * and in READY_FILE), then runs the server role on URI with that
 * connection as its stdin and stdout. The driver on the other host, given
 * RMX_TEST_FORGE_SERVER=HOST:PORT, connects there instead of starting a
 * server, and runs the victim and the attacker itself: every forged
 * access crosses the wire (tests/faults/twohost.sh, scenario forge).
 *
 * Exit status: 0 when no attack read a byte of the victim's memory
 * (KF_SCOPED_PACK says when (c) counts), 1 when one did, 2 when the test
 * could not run as designed (a control failed, a role died, the stream
 * stopped). The table is printed in every case.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "key_forge.h"

/*
 * Whether the server packs the victim's key for the victim's connection
 * alone (rmx_mem_pack_for, key_forge_server.c): attack (c) then counts like
 * (a) and (b). With capability keys (rmx_mem_pack: any holder may use them
 * on any connection, docs/security.md) (c) reads the victim's region by
 * design and would be reported, not counted.
 */
#define KF_SCOPED_PACK 1

/* How long --server-on waits for its driver, and the driver for it to
 * take the connection: bounds against a partner that never comes. */
#define KF_CONTROL_WAIT_MS 600000
#define KF_CONNECT_WAIT_MS 120000

typedef struct kid {
  const char *role;
  pid_t pid;   /* 0 for a server on another host */
  int remote;  /* on another host: in and out are one TCP socket */
  int in, out; /* its stdin (ours to write) and stdout (ours to read) */
  char buf[8192];
  size_t used;
} kid_t;

static struct {
  char exe[4096], scheme[8], uri[192];
  kid_t srv, vic, att;
  uint64_t deadline;
} D;

static void kill_all(void)
{
  kid_t *k[] = {&D.att, &D.vic, &D.srv};
  for (int i = 0; i < 3; i++)
    if (k[i]->pid > 0) {
      kill(k[i]->pid, SIGKILL);
      waitpid(k[i]->pid, NULL, 0);
      k[i]->pid = 0;
    }
}

static void setup_failed(const char *fmt, const char *arg)
{
  fprintf(stderr, "key-forge: the test could not run: ");
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  kill_all();
  exit(2);
}

static void spawn(kid_t *k, const char *role, char **argv)
{
  int in[2], out[2];
  k->role = role;
  if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
    setup_failed("pipe: %s", strerror(errno));
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0)
    setup_failed("fork: %s", strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphans if the driver dies */
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    execv(D.exe, argv);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  k->pid = pid;
  k->in = in[1];
  k->out = out[0];
  k->used = 0;
}

/* HOST:PORT ([V6ADDR]:PORT too) for getaddrinfo; 0, or -1 when malformed. */
static int split_hostport(const char *hp, char *host, size_t cap, const char **port)
{
  const char *colon = strrchr(hp, ':');
  if (!colon || colon == hp || colon[1] == 0 || (size_t)(colon - hp) >= cap)
    return -1;
  const char *h = hp;
  size_t n = (size_t)(colon - hp);
  if (h[0] == '[' && h[n - 1] == ']') {
    h++;
    n -= 2;
  }
  snprintf(host, cap, "%.*s", (int)n, h);
  *port = colon + 1;
  return 0;
}

/* The server role on another host (--server-on there): one TCP connection
 * to it is that kid's stdin and stdout. Tried again every 200 ms until it
 * connects or KF_CONNECT_WAIT_MS pass. */
static void attach(kid_t *k, const char *hostport)
{
  char host[256];
  const char *port;
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
  k->role = "server";
  if (split_hostport(hostport, host, sizeof(host), &port))
    setup_failed("RMX_TEST_FORGE_SERVER=%s: not HOST:PORT", hostport);
  int rc = getaddrinfo(host, port, &hints, &ai);
  if (rc)
    setup_failed("RMX_TEST_FORGE_SERVER: %s", gai_strerror(rc));
  uint64_t until = kf_now_ms() + KF_CONNECT_WAIT_MS;
  int fd = -1, err = 0;
  while (fd < 0) {
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      setup_failed("socket: %s", strerror(errno));
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
      break;
    err = errno;
    close(fd);
    fd = -1;
    if (kf_now_ms() >= until)
      break;
    usleep(200 * 1000);
  }
  freeaddrinfo(ai);
  if (fd < 0) {
    static char what[320];
    snprintf(what, sizeof(what), "%s: %s", hostport, strerror(err));
    setup_failed("no server role listens at %s (rmx-key-forge --server-on there)", what);
  }
  k->pid = 0;
  k->remote = 1;
  k->in = k->out = fd;
  k->used = 0;
}

/* The end of the kid's stdin: it ends its role. */
static void end_input(kid_t *k)
{
  if (k->remote)
    shutdown(k->in, SHUT_WR); /* our half: its replies still come back */
  else
    close(k->in);
  k->in = -1;
}

/* The kid's next stdout line, or NULL at EOF or past the deadline. */
static const char *next_line(kid_t *k, char *line, size_t cap)
{
  for (;;) {
    char *nl = memchr(k->buf, '\n', k->used);
    if (nl) {
      size_t n = (size_t)(nl - k->buf);
      snprintf(line, cap, "%.*s", (int)n, k->buf);
      memmove(k->buf, nl + 1, k->used - n - 1);
      k->used -= n + 1;
      return line;
    }
    uint64_t now = kf_now_ms();
    if (now >= D.deadline || k->used == sizeof(k->buf))
      return NULL;
    struct pollfd p = {.fd = k->out, .events = POLLIN};
    int r = poll(&p, 1, (int)(D.deadline - now));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return NULL;
    ssize_t n = read(k->out, k->buf + k->used, sizeof(k->buf) - k->used);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return NULL;
    k->used += (size_t)n;
  }
}

/* The kid's next line starting with word (others are passed through). */
static const char *expect(kid_t *k, const char *word, char *line, size_t cap)
{
  size_t wl = strlen(word);
  const char *l;
  while ((l = next_line(k, line, cap)) != NULL) {
    if (strncmp(l, word, wl) == 0 && (l[wl] == ' ' || l[wl] == 0))
      return l + wl + (l[wl] == ' ');
    printf("key-forge %s: %s\n", k->role, l);
  }
  static char what[96];
  snprintf(what, sizeof(what), "%s: no \"%s\" line", k->role, word);
  setup_failed("%s (it died or timed out)", what);
  return NULL;
}

static int reap(kid_t *k)
{
  int st = 0;
  if (k->remote) { /* its exit status comes as its last line */
    char line[256];
    const char *l;
    int rc = -1;
    while (rc < 0 && (l = next_line(k, line, sizeof(line))) != NULL)
      if (sscanf(l, "exit %d", &rc) != 1)
        printf("key-forge %s: %s\n", k->role, l);
    close(k->out);
    k->in = k->out = -1;
    return rc;
  }
  if (k->in >= 0)
    close(k->in);
  close(k->out);
  if (waitpid(k->pid, &st, 0) != k->pid)
    return -1;
  k->pid = 0;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

typedef struct row {
  unsigned long long attempts, hits, victim, other, cuts, first_hit, ms, learned;
  int seen;
} row_t;

static void usage(void)
{
  fprintf(stderr, "usage: rmx-key-forge tcp|rdma  (RMX_TEST_FORGE_SERVER=HOST:PORT: the server\n"
                  "                               role runs on another host)\n"
                  "       rmx-key-forge --server-on HOST:PORT URI [READY_FILE]\n");
  exit(2);
}

static int driver(const char *scheme)
{
  char line[8192];
  const char *l;
  ssize_t n = readlink("/proc/self/exe", D.exe, sizeof(D.exe) - 1);
  if (n <= 0)
    setup_failed("/proc/self/exe: %s", strerror(errno));
  D.exe[n] = 0;
  snprintf(D.scheme, sizeof(D.scheme), "%s", scheme);
  const char *addr = "127.0.0.1";
  if (strcmp(scheme, "rdma") == 0)
    addr = getenv("RMX_TEST_ADDR")  ? getenv("RMX_TEST_ADDR")
           : getenv("RXE_VM_ADDR") ? getenv("RXE_VM_ADDR")
                                   : "192.0.2.1";
  uint64_t attempts = kf_env_u64("RMX_TEST_FORGE_ATTEMPTS", 2048);
  uint64_t seconds = kf_env_u64("RMX_TEST_FORGE_SECONDS", 20);
  uint64_t seed =
      kf_env_u64("RMX_TEST_FORGE_SEED", (kf_now_ms() ^ (uint64_t)getpid()) % 1000000 + 1);
  char seedtxt[32];
  snprintf(seedtxt, sizeof(seedtxt), "%llu", (unsigned long long)seed);
  setenv("RMX_TEST_FORGE_SEED", seedtxt, 1);
  /* every refused guess is a warning on one side or the other */
  setenv("RMX_LOG", "error", 0);
  const char *remote = getenv("RMX_TEST_FORGE_SERVER");
  if (remote && !*remote)
    remote = NULL;
  char where[320];
  if (remote)
    snprintf(where, sizeof(where),
             "server on %s (RMX_TEST_FORGE_SERVER), victim and attacker here, in separate "
             "processes",
             remote);
  else
    snprintf(where, sizeof(where), "server, victim and attacker here, in separate processes");
  printf("key-forge %s: %s; per attack at most %llu attempts or %llu s (RMX_TEST_FORGE_ATTEMPTS, "
         "RMX_TEST_FORGE_SECONDS); seed %llu (RMX_TEST_FORGE_SEED)\n",
         scheme, where, (unsigned long long)attempts, (unsigned long long)seconds,
         (unsigned long long)seed);
  fflush(stdout);
  /* setup, three attacks, and the close: generous, only against a hang */
  D.deadline = kf_now_ms() + 3 * seconds * 1000 + 180000;

  char listen_uri[160];
  snprintf(listen_uri, sizeof(listen_uri), "%s://%s:0", scheme, addr);
  char *sargv[] = {D.exe, "--server", listen_uri, NULL};
  if (remote)
    attach(&D.srv, remote);
  else
    spawn(&D.srv, "server", sargv);
  l = expect(&D.srv, "listening", line, sizeof(line));
  snprintf(D.uri, sizeof(D.uri), "%s", l);
  size_t sl = strlen(scheme);
  if (strncmp(D.uri, scheme, sl) != 0 || strncmp(D.uri + sl, "://", 3) != 0)
    setup_failed("the server listens on %s, not over this test's scheme", D.uri);
  printf("key-forge %s: the server listens on %s\n", scheme, D.uri);
  fflush(stdout);
  unsigned long long saddr = 0, slen = 0, vaddr = 0, vlen = 0;
  l = expect(&D.srv, "source", line, sizeof(line));
  if (sscanf(l, "%llu %llu", &saddr, &slen) != 2)
    setup_failed("server: bad source line: %s", l);

  /* the attacker first: the victim comes to a server it is already on */
  char *aargv[] = {D.exe, "--attacker", D.uri, D.scheme, NULL};
  spawn(&D.att, "attacker", aargv);
  expect(&D.att, "registered", line, sizeof(line));

  char *vargv[] = {D.exe, "--victim", D.uri, NULL};
  spawn(&D.vic, "victim", vargv);
  l = expect(&D.vic, "ready", line, sizeof(line));
  char khex[2 * RMX_RKEY_MAX + 1];
  snprintf(khex, sizeof(khex), "%s", l);
  l = expect(&D.srv, "victim-region", line, sizeof(line));
  if (sscanf(l, "%llu %llu", &vaddr, &vlen) != 2)
    setup_failed("server: bad victim-region line: %s", l);

  char go[512];
  int gl = snprintf(go, sizeof(go), "go %llu %llu %llu %llu %s\n", vaddr, vlen, saddr, slen, khex);
  if (write(D.att.in, go, (size_t)gl) != gl)
    setup_failed("attacker: %s", "cannot write its go line");

  row_t rows[3] = {{0}};
  unsigned long long stream_sent = 0, stream_inflight = 0;
  int stream_seen = 0;
  while ((l = next_line(&D.att, line, sizeof(line))) != NULL) {
    char name;
    row_t r = {0};
    if (sscanf(l, "result %c %llu %llu %llu %llu %llu %llu %llu %llu", &name, &r.attempts, &r.hits,
               &r.victim, &r.other, &r.cuts, &r.first_hit, &r.ms, &r.learned) == 9 &&
        name >= 'a' && name <= 'c') {
      r.seen = 1;
      rows[name - 'a'] = r;
    } else if (sscanf(l, "stream %llu %llu", &stream_sent, &stream_inflight) == 2) {
      stream_seen = 1;
    } else {
      printf("key-forge attacker: %s\n", l);
    }
  }
  if (kf_now_ms() >= D.deadline) {
    printf("key-forge: the attacker ran past the test's deadline: killed\n");
    kill(D.att.pid, SIGKILL);
  }
  int att_rc = reap(&D.att);

  unsigned long long received = 0, bad = 0;
  int lost = 0, vic_ok;
  end_input(&D.vic);
  l = expect(&D.vic, "victim", line, sizeof(line));
  vic_ok = sscanf(l, "received %llu bad %llu lost %d", &received, &bad, &lost) == 3;
  int vic_rc = reap(&D.vic);
  end_input(&D.srv);
  l = expect(&D.srv, "server", line, sizeof(line));
  printf("key-forge server: %s\n", l);
  int srv_rc = reap(&D.srv);

  static const char *names[3] = {
      "(a) forged keys: victim's registration",
      "(b) forged keys: victim's in-flight messages",
      "(c) victim's key on the attacker's connection",
  };
  printf("\nkey-forge %s: bytes of the victim's memory the attacker read\n", scheme);
  printf("%-46s %9s %9s %13s %11s %9s %9s %8s\n", "attack", "attempts", "accepted",
         "victim bytes", "other bytes", "conns cut", "1st hit", "seconds");
  unsigned long long counted = 0, others = 0, total_attempts = 0;
  for (int i = 0; i < 3; i++) {
    row_t *r = &rows[i];
    printf("%-46s %9llu %9llu %13llu %11llu %9llu %9llu %8.1f\n", names[i], r->attempts, r->hits,
           r->victim, r->other, r->cuts, r->first_hit, r->ms / 1000.0);
    total_attempts += r->attempts;
    if (i < 2 || KF_SCOPED_PACK) {
      counted += r->victim;
      others += r->other; /* not the victim's, but not given either */
    }
  }
  printf("(b): %llu of its guesses aimed at indices skipped between two probe keys; the server "
         "completed %llu messages to the victim meanwhile (%llu in flight at the end); the victim "
         "received %llu in all\n",
         rows[1].learned, stream_sent, stream_inflight, received);
  if (!KF_SCOPED_PACK)
    printf("(c): not counted: rmx_mem_pack makes capability keys, which any holder may use on any "
           "connection (docs/security.md); counted once keys can be packed for one connection "
           "(issue 24, KF_SCOPED_PACK)\n");

  const char *invalid = NULL;
  if (att_rc != 0 || !rows[0].seen || !rows[1].seen || !rows[2].seen)
    invalid = "the attacker did not finish its attacks";
  else if (!stream_seen || stream_sent == 0 || stream_inflight == 0)
    invalid = "no message to the victim was in flight through attack (b)";
  else if (!vic_ok || vic_rc != 0 || bad || lost)
    invalid = "the victim did not end well (its connection lost, or a message damaged)";
  else if (srv_rc != 0)
    invalid = "the server did not end well";
  else if (rows[2].attempts != 1 || rows[0].attempts == 0 || rows[1].attempts == 0)
    invalid = "an attack made no attempt";
  if (invalid)
    printf("key-forge: the test did not run as designed: %s\n", invalid);
  if (counted || others) {
    printf("FAIL: the attacker read %llu bytes of the victim's memory and %llu other bytes it was "
           "never given (issue 24)\n",
           counted, others);
    return 1;
  }
  if (invalid)
    return 2;
  printf("PASS: 0 bytes of the victim's memory in %llu attempts\n", total_attempts);
  return 0;
}

/*
 * --server-on HOST:PORT URI [READY_FILE]: the server role for a driver on
 * another host. One connection is taken, made the role's stdin and
 * stdout, and the role run on URI as under --server; its exit status
 * follows as a last line, "exit N" (the driver has no pid to wait for).
 * stdin and stdout then share one file description, which the role's
 * stdin watch makes nonblocking: its few short lines fit in a socket's
 * buffer.
 */
static int server_on(const char *hostport, const char *uri, const char *ready)
{
  char host[256], name[300];
  const char *port;
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
  if (split_hostport(hostport, host, sizeof(host), &port)) {
    fprintf(stderr, "key-forge: --server-on %s: not HOST:PORT\n", hostport);
    return 2;
  }
  int rc = getaddrinfo(host, port, &hints, &ai), one = 1;
  if (rc) {
    fprintf(stderr, "key-forge: --server-on %s: %s\n", hostport, gai_strerror(rc));
    return 2;
  }
  int l = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_storage sa;
  socklen_t salen = sizeof(sa);
  if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
      bind(l, ai->ai_addr, ai->ai_addrlen) || listen(l, 1) ||
      getsockname(l, (struct sockaddr *)&sa, &salen) ||
      getnameinfo((struct sockaddr *)&sa, salen, NULL, 0, name, sizeof(name), NI_NUMERICSERV)) {
    fprintf(stderr, "key-forge: --server-on %s: %s\n", hostport, strerror(errno));
    freeaddrinfo(ai);
    if (l >= 0)
      close(l);
    return 2;
  }
  freeaddrinfo(ai);
  /* the address as given, the port as bound */
  char ctl[600];
  snprintf(ctl, sizeof(ctl), "%s%s%s:%s", strchr(host, ':') ? "[" : "", host,
           strchr(host, ':') ? "]" : "", name);
  printf("key-forge: the server role waits for its driver at %s (RMX_TEST_FORGE_SERVER)\n", ctl);
  fflush(stdout);
  if (ready) { /* written whole: a reader on another host polls for it */
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", ready);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%s\n", ctl) < 0 || fclose(f) || rename(tmp, ready)) {
      fprintf(stderr, "key-forge: --server-on: cannot write %s: %s\n", ready, strerror(errno));
      return 2;
    }
  }
  struct pollfd p = {.fd = l, .events = POLLIN};
  int r;
  do
    r = poll(&p, 1, KF_CONTROL_WAIT_MS);
  while (r < 0 && errno == EINTR);
  int c = r > 0 ? accept(l, NULL, NULL) : -1;
  close(l);
  if (c < 0) {
    fprintf(stderr, "key-forge: --server-on %s: no driver came within %d s\n", ctl,
            KF_CONTROL_WAIT_MS / 1000);
    return 2;
  }
  if (dup2(c, STDIN_FILENO) < 0 || dup2(c, STDOUT_FILENO) < 0) {
    fprintf(stderr, "key-forge: --server-on: dup2: %s\n", strerror(errno));
    return 2;
  }
  close(c);
  setenv("RMX_LOG", "error", 0); /* as the driver sets for its roles */
  rc = kf_server_main(uri);
  printf("exit %d\n", rc);
  fflush(stdout);
  return rc;
}

int main(int argc, char **argv)
{
  signal(SIGPIPE, SIG_IGN);
  if (argc == 3 && strcmp(argv[1], "--server") == 0)
    return kf_server_main(argv[2]);
  if (argc == 3 && strcmp(argv[1], "--victim") == 0)
    return kf_victim_main(argv[2]);
  if (argc == 4 && strcmp(argv[1], "--attacker") == 0)
    return kf_attacker_main(argv[2], argv[3]);
  if ((argc == 4 || argc == 5) && strcmp(argv[1], "--server-on") == 0)
    return server_on(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
  if (argc != 2 || (strcmp(argv[1], "tcp") && strcmp(argv[1], "rdma")))
    usage();
  return driver(argv[1]);
}
