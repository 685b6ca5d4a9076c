/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rmx-shm-hostile: a peer that writes into the shared segment from
 * outside the library, against a server that must survive it
 * (security.shm-hostile; docs/security.md, "Shared memory").
 *
 * Four processes (shm_hostile.h): the victim serves on shm://@NAME; a good
 * client keeps strict traffic going for the whole run; an attacker, round
 * after round, opens a new connection (a new segment), maps that segment
 * itself and corrupts it one way (sh_kind_t), at a random moment of its own
 * traffic, then freezes. While it is frozen the good client must complete
 * more operations (a stalled or broken connection does not hold the victim
 * up); then the attacker closes. The driver checks, round by round:
 *
 * - the victim lives (it runs under the sanitizers in the ASan build: any
 *   access outside what it mapped or allocated is a report and an exit);
 * - the attacked connection ends on the victim's side with exactly one
 *   on_disconnect and then on_closed (the victim checks that nothing comes
 *   after it), with RMX_EPROTO where the corruption is out of range or a
 *   frame the rules refuse; a forged read or write past the attacker's
 *   region is answered RMX_EACCES (read straight out of the ring); a
 *   header written after set-up changes nothing;
 * - the good client's every byte is right and its connection never ends.
 *
 * - after each round the victim's fds and segment mappings (memfd:rmx-shm
 *   in /proc/self/maps) are back at their count before the attacks.
 *
 * The last round's attacker leaves a stalled frame and dies. Then the good
 * client stops cleanly, a fresh client is served, the victim's counts are
 * those it had before any client came, and everything exits 0.
 *
 * Knobs: RMX_TEST_SHM_HOSTILE_ROUNDS (10 per kind, then the dying one),
 * RMX_TEST_SHM_HOSTILE_SECONDS (no round starts after that many seconds;
 * 0, the default: no limit), RMX_TEST_SHM_HOSTILE_SEED (else the clock;
 * printed, with the line that repeats the run). Exit status 0, or 1 with
 * the reason, the seed and the round.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shm_hostile.h"

#define WAIT_MS 120000 /* the longest any one step may take: generous */
#define MAX_IDS 4096

typedef struct kid {
  const char *role;
  pid_t pid;
  int in;          /* its stdin */
  sh_lines_t out;  /* its stdout */
  int gone, status;
  int may_go;      /* its exit is expected now */
} kid_t;

static struct {
  char exe[4096], name[64];
  uint64_t seed;
  int round;
  const char *kind;
  kid_t vic, good, att, fresh;
  /* the victim's lines */
  int ready, last_acc, stat_open, stat_fds, stat_maps, stats, bye, bye_viol;
  int disc[MAX_IDS], disc_status[MAX_IDS], closed[MAX_IDS];
  /* the clients' */
  int up, checked, good_bye, fresh_bye;
  /* the attacker's */
  int hit, done;
  char hit_note[200], done_line[256];
  /* what the victim's side of the attacked connections ended with, per kind */
  int eproto[SH_KINDS], reset[SH_KINDS], clean[SH_KINDS], other[SH_KINDS], rounds[SH_KINDS];
  int noquiet;
} D = {.hit = -1, .done = -1};

static void kill_all(void)
{
  kid_t *k[] = {&D.vic, &D.good, &D.att, &D.fresh};
  for (size_t i = 0; i < 4; i++)
    if (k[i]->pid > 0 && !k[i]->gone)
      kill(k[i]->pid, SIGKILL);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
  va_list ap;
  printf("FAIL: ");
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  /* a client's failure is often the victim's death seen from outside */
  for (int i = 0; i < 20 && D.vic.pid > 0 && !D.vic.gone; i++) {
    if (waitpid(D.vic.pid, &D.vic.status, WNOHANG) == D.vic.pid) {
      D.vic.gone = 1;
      if (WIFSIGNALED(D.vic.status))
        printf("\n  the victim died of signal %d", WTERMSIG(D.vic.status));
      else
        printf("\n  the victim exited with status %d", WEXITSTATUS(D.vic.status));
      break;
    }
    usleep(50000);
  }
  printf("\n  round %d (%s), seed %llu: RMX_TEST_SHM_HOSTILE_SEED=%llu repeats the run\n",
         D.round, D.kind ? D.kind : "before the rounds", (unsigned long long)D.seed,
         (unsigned long long)D.seed);
  fflush(stdout);
  kill_all();
  exit(1);
}

static void spawn(kid_t *k, const char *role, const char *a1, const char *a2, const char *a3)
{
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
    fail("pipe: %s", strerror(errno));
  memset(k, 0, sizeof(*k));
  k->role = role;
  k->pid = fork();
  if (k->pid < 0)
    fail("fork: %s", strerror(errno));
  if (k->pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    char *argv[] = {D.exe, (char *)a1, (char *)a2, (char *)a3, NULL};
    execv(D.exe, argv);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  k->in = in[1];
  k->out.fd = out[0];
  fcntl(out[0], F_SETFL, O_NONBLOCK);
}

static void tell(kid_t *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tell(kid_t *k, const char *fmt, ...)
{
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
  va_end(ap);
  line[n++] = '\n';
  if (k->gone || write(k->in, line, (size_t)n) != n)
    fail("cannot tell the %s '%.*s': it is gone", k->role, n - 1, line);
}

/* ---- what the roles say ---- */

static void from_victim(const char *l)
{
  int id, st, a, b, c;
  if (strcmp(l, "ready") == 0) {
    D.ready = 1;
  } else if (sscanf(l, "acc %d", &id) == 1) {
    if (id != D.last_acc + 1 || id >= MAX_IDS)
      fail("the victim numbers connections out of order (%d after %d)", id, D.last_acc);
    D.last_acc = id;
  } else if (sscanf(l, "disc %d %d", &id, &st) == 2 && id > 0 && id < MAX_IDS) {
    D.disc[id]++;
    D.disc_status[id] = st;
  } else if (sscanf(l, "closed %d", &id) == 1 && id > 0 && id < MAX_IDS) {
    D.closed[id]++;
  } else if (sscanf(l, "stat %d %d %d", &a, &b, &c) == 3) {
    D.stat_open = a, D.stat_fds = b, D.stat_maps = c;
    D.stats++;
  } else if (sscanf(l, "bye %d", &a) == 1) {
    D.bye = 1;
    D.bye_viol = a;
  } else if (strncmp(l, "viol ", 5) == 0) {
    fail("the victim broke a promise of the API: %s", l + 5);
  } else {
    fail("the victim said '%s'", l);
  }
}

static void from_client(kid_t *k, const char *l)
{
  if (strncmp(l, "fail ", 5) == 0)
    fail("the %s: %s", k->role, l + 5);
  if (strcmp(l, "up") == 0)
    D.up = 1;
  else if (strncmp(l, "checked ", 8) == 0)
    D.checked++;
  else if (strncmp(l, "good ", 5) == 0)
    *(k == &D.good ? &D.good_bye : &D.fresh_bye) = 1;
  else
    fail("the %s said '%s'", k->role, l);
}

static void from_attacker(const char *l)
{
  int r;
  if (strncmp(l, "fail ", 5) == 0)
    fail("the attacker: %s", l + 5);
  if (sscanf(l, "hit %d", &r) == 1) {
    D.hit = r;
    snprintf(D.hit_note, sizeof(D.hit_note), "%.*s", (int)sizeof(D.hit_note) - 1, l);
  } else if (sscanf(l, "done %d", &r) == 1) {
    D.done = r;
    snprintf(D.done_line, sizeof(D.done_line), "%.*s", (int)sizeof(D.done_line) - 1, l);
  } else {
    fail("the attacker said '%s'", l);
  }
}

static void reap(kid_t *k)
{
  if (waitpid(k->pid, &k->status, 0) != k->pid)
    fail("waitpid: %s", strerror(errno));
  k->gone = 1;
  if (k->may_go && WIFEXITED(k->status) && WEXITSTATUS(k->status) == 0)
    return;
  if (WIFSIGNALED(k->status))
    fail("the %s died of signal %d", k->role, WTERMSIG(k->status));
  fail("the %s exited with status %d%s", k->role, WEXITSTATUS(k->status),
       k->may_go ? "" : " when it should still run");
}

/* Read what the roles said within ms, and act on it. */
static void listen_kids(int ms)
{
  kid_t *k[] = {&D.vic, &D.good, &D.att, &D.fresh};
  struct pollfd p[4];
  for (int i = 0; i < 4; i++)
    p[i] = (struct pollfd){.fd = k[i]->pid > 0 && !k[i]->gone ? k[i]->out.fd : -1,
                           .events = POLLIN};
  if (poll(p, 4, ms) <= 0)
    return;
  for (int i = 0; i < 4; i++) {
    if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
      continue;
    int end = sh_lines_fill(&k[i]->out) < 0;
    char line[512];
    while (sh_lines_next(&k[i]->out, line, sizeof(line))) {
      if (k[i] == &D.vic)
        from_victim(line);
      else if (k[i] == &D.att)
        from_attacker(line);
      else
        from_client(k[i], line);
    }
    if (end) {
      close(k[i]->out.fd);
      close(k[i]->in);
      reap(k[i]);
    }
  }
}

#define WAIT_FOR(cond, ...)                                                   \
  do {                                                                        \
    uint64_t end_ = sh_now_ms() + WAIT_MS;                                    \
    while (!(cond)) {                                                         \
      if (sh_now_ms() > end_)                                                 \
        fail("waited %d s for " __VA_ARGS__);                                 \
      listen_kids(100);                                                       \
    }                                                                         \
  } while (0)

static void victim_stat(void)
{
  int n = D.stats;
  tell(&D.vic, "stat");
  WAIT_FOR(D.stats > n, "the victim's counts", WAIT_MS / 1000);
}

/* ---- rounds ---- */

static void judge(int r, sh_kind_t k, int id)
{
  int st = D.disc_status[id];
  int quiet = strstr(D.hit_note, "noquiet") == NULL;
  if (D.disc[id] != 1 || D.closed[id] != 1)
    fail("the victim's connection %d: %d on_disconnect, %d on_closed", id, D.disc[id],
         D.closed[id]);
  D.rounds[k]++;
  D.noquiet += !quiet;
  if (st == RMX_EPROTO)
    D.eproto[k]++;
  else if (st == RMX_ECONNRESET)
    D.reset[k]++;
  else if (st == 0)
    D.clean[k]++;
  else
    D.other[k]++;
  printf("round %3d %-10s victim ended %-12s | %s | %s\n", r, sh_kind_names[k],
         st ? rmx_strerror(st) : "cleanly", D.hit_note, k == K_DIE ? "died" : D.done_line);
  fflush(stdout);
  if (!quiet)
    return; /* the stream never came to rest: nothing in particular to ask */
  if (sh_kind_refused(k) && !strstr(D.hit_note, "ended=1"))
    fail("the victim did not end the connection while the attacker was frozen (%s)",
         D.hit_note);
  if (sh_kind_refused(k) && st != RMX_EPROTO)
    fail("the victim ended the connection with %s, not RMX_EPROTO", rmx_strerror(st));
  if (k == F_RD_OOB || k == F_WR_OOB || k == F_RD_WRAP) {
    const char *p = strstr(D.hit_note, "resp=");
    if (!p || atoi(p + 5) != RMX_EACCES)
      fail("a forged request past the region was not answered RMX_EACCES (%s)", D.hit_note);
  }
  if (k == K_HDR &&
      (st != 0 || !strstr(D.done_line, " closed ") || !strstr(D.done_line, "clean=1")))
    fail("writing the header after set-up changed something (victim: %s; %s)",
         rmx_strerror(st), D.done_line);
  if (k == K_DIE && st != RMX_ECONNRESET)
    fail("the dead attacker's connection ended with %s, not RMX_ECONNRESET", rmx_strerror(st));
}

static void round_run(int r, sh_kind_t k, int fds, int maps)
{
  int id = D.last_acc + 1, checked = D.checked;
  D.round = r;
  D.kind = sh_kind_names[k];
  tell(&D.att, "round %d %s", r, sh_kind_names[k]);
  WAIT_FOR(D.hit == r && D.last_acc >= id, "the attack of round %d", WAIT_MS / 1000, r);
  if (D.last_acc != id)
    fail("the victim accepted %d connections in round %d", D.last_acc - id + 1, r);
  /* the attacker is frozen, its connection broken or stalled: the victim
   * must go on serving the good client all the same */
  tell(&D.good, "check");
  WAIT_FOR(D.checked > checked, "the good client's operations while the attacker is frozen",
           WAIT_MS / 1000);
  if (k == K_DIE)
    D.att.may_go = 1;
  tell(&D.att, "cont");
  if (k == K_DIE)
    WAIT_FOR(D.att.gone, "the attacker to die", WAIT_MS / 1000);
  else
    WAIT_FOR(D.done == r, "the end of round %d", WAIT_MS / 1000, r);
  WAIT_FOR(D.closed[id] > 0, "the victim to close connection %d", WAIT_MS / 1000, id);
  listen_kids(0);
  judge(r, k, id);
  /* nothing of the attacked connection is left in the victim */
  victim_stat();
  if (D.stat_open != 1 || D.stat_fds != fds || D.stat_maps != maps)
    fail("after the round the victim has %d connections, %d fds, %d segment mappings; "
         "before the attacks 1, %d, %d", D.stat_open, D.stat_fds, D.stat_maps, fds, maps);
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
  const char *v = getenv(name);
  return v && *v ? strtoull(v, NULL, 0) : dflt;
}

static int driver(void)
{
  ssize_t n = readlink("/proc/self/exe", D.exe, sizeof(D.exe) - 1);
  if (n <= 0)
    fail("cannot find this program");
  D.exe[n] = '\0';
  D.seed = env_u64("RMX_TEST_SHM_HOSTILE_SEED", (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20));
  int rounds = (int)env_u64("RMX_TEST_SHM_HOSTILE_ROUNDS", 10 * (SH_KINDS - 1) + 1);
  uint64_t secs = env_u64("RMX_TEST_SHM_HOSTILE_SECONDS", 0);
  snprintf(D.name, sizeof(D.name), "@rmx-hostile-%d", (int)getpid());
  printf("rmx-shm-hostile: seed %llu, %d rounds, on shm://%s\n", (unsigned long long)D.seed,
         rounds, D.name);
  fflush(stdout);
  signal(SIGPIPE, SIG_IGN);
  uint64_t start = sh_now_ms();

  spawn(&D.vic, "victim", "--victim", D.name, NULL);
  WAIT_FOR(D.ready, "the victim to listen", WAIT_MS / 1000);
  victim_stat();
  int fds0 = D.stat_fds, maps0 = D.stat_maps;
  spawn(&D.good, "good client", "--client", D.name, "long");
  WAIT_FOR(D.up, "the good client's first operations", WAIT_MS / 1000);
  int good_id = D.last_acc;
  victim_stat();
  int fds1 = D.stat_fds, maps1 = D.stat_maps;
  char seed[32];
  snprintf(seed, sizeof(seed), "%llu", (unsigned long long)D.seed);
  spawn(&D.att, "attacker", "--attacker", D.name, seed);

  /* every kind once in order, then at random; the dying attacker last */
  uint64_t s = D.seed;
  int r = 0;
  for (; r < rounds - 1; r++) {
    if (secs && sh_now_ms() - start > secs * 1000)
      break;
    sh_kind_t k = r < K_DIE ? (sh_kind_t)r : (sh_kind_t)(sh_rand(&s) % K_DIE);
    round_run(r, k, fds1, maps1);
  }
  if (rounds > 0)
    round_run(r++, K_DIE, fds1, maps1);
  D.round = r;
  D.kind = "after the rounds";

  D.good.may_go = 1;
  tell(&D.good, "stop");
  WAIT_FOR(D.good_bye && D.good.gone && D.closed[good_id], "the good client's end",
           WAIT_MS / 1000);
  if (D.disc[good_id] != 1 || D.disc_status[good_id] != 0)
    fail("the good client's connection ended on the victim with %s",
         rmx_strerror(D.disc_status[good_id]));
  /* a fresh client is served */
  int fresh_id = D.last_acc + 1;
  spawn(&D.fresh, "fresh client", "--client", D.name, "fresh");
  D.fresh.may_go = 1;
  WAIT_FOR(D.fresh_bye && D.fresh.gone && D.closed[fresh_id], "the fresh client",
           WAIT_MS / 1000);
  if (D.disc_status[fresh_id] != 0)
    fail("the fresh client's connection ended with %s", rmx_strerror(D.disc_status[fresh_id]));
  victim_stat();
  if (D.stat_open != 0 || D.stat_fds != fds0 || D.stat_maps != maps0)
    fail("at the end the victim has %d connections, %d fds, %d segment mappings; "
         "before any 0, %d, %d", D.stat_open, D.stat_fds, D.stat_maps, fds0, maps0);
  if (!D.att.gone) {
    D.att.may_go = 1;
    tell(&D.att, "quit");
    WAIT_FOR(D.att.gone, "the attacker to quit", WAIT_MS / 1000);
  }
  D.vic.may_go = 1;
  tell(&D.vic, "quit");
  WAIT_FOR(D.bye && D.vic.gone, "the victim to quit", WAIT_MS / 1000);

  int eproto = 0;
  printf("\n%-11s %6s %7s %10s %7s %6s\n", "kind", "rounds", "EPROTO", "ECONNRESET", "clean",
         "other");
  for (int k = 0; k < SH_KINDS; k++) {
    printf("%-11s %6d %7d %10d %7d %6d\n", sh_kind_names[k], D.rounds[k], D.eproto[k],
           D.reset[k], D.clean[k], D.other[k]);
    eproto += D.eproto[k];
  }
  printf("%d rounds in %.1f s, %d of them never at rest (nothing particular asked); "
         "victim fds %d and segment mappings %d as before\n",
         r, (double)(sh_now_ms() - start) / 1000, D.noquiet, fds0, maps0);
  if (r > 1 && eproto == 0)
    fail("no attack was ever refused with RMX_EPROTO");
  printf("PASS (seed %llu)\n", (unsigned long long)D.seed);
  return 0;
}

int main(int argc, char **argv)
{
  if (argc == 3 && strcmp(argv[1], "--victim") == 0)
    return sh_victim_main(argv[2]);
  if (argc == 4 && strcmp(argv[1], "--client") == 0)
    return sh_client_main(argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "--attacker") == 0)
    return sh_attacker_main(argv[2], strtoull(argv[3], NULL, 10));
  if (argc == 1)
    return driver();
  fprintf(stderr, "usage: %s [--victim NAME | --client NAME long|fresh | --attacker NAME SEED]\n",
          argv[0]);
  return 2;
}
