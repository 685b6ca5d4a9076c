/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The attacker (shm_hostile.h). Each round it connects to the victim
 * through the library, so that the victim makes a segment and passes it,
 * then finds that segment in its own process (/proc/self/maps names it
 * memfd:rmx-shm) and maps it a second time, outside the library, through
 * /proc/self/map_files (where the kernel refuses that, it writes through
 * the library's mapping instead, from outside the library's code all the
 * same). With traffic of its own running, it writes into the segment what
 * the round's kind says (sh_kind_t): indices, flags, the header, ring
 * data, frames published as the producer would. It rings every doorbell
 * it holds so that the victim looks at once.
 *
 * Kinds that need the stream at rest first (a frame placed where the
 * victim's parser expects the next one, an index compared with what the
 * victim saw) stop posting, wait until nothing is outstanding and both
 * rings are empty, and from then on do not turn the library's loop, so
 * that nothing of the library's own writes over the corruption. A round
 * that cannot get there says "noquiet", and the driver then asks nothing
 * particular of the victim for it.
 *
 * Lines in:  "round R KIND", "cont", "quit".
 * Lines out: "hit R own=OWN ended=E NOTE" (the corruption is in place,
 *            in our own mapping or the library's; E 1 when the victim hung
 *            up on us meanwhile; we are frozen until "cont"),
 *            "done R END DONE BAD NOTE" (END: the
 *            status its own connection ended with, "closed" when it closed
 *            it itself), "fail WHY".
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shm_hostile_attacker.h"

sh_attacker_t A;

/* ---- the library's side ---- */

static void on_disconnect(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  (void)arg;
  if (!A.ended)
    A.end_status = status;
  A.ended = 1;
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  (void)arg;
  A.connected = 1;
  A.conn_status = status;
  if (status == 0) {
    rmx_conn_cbs_t cbs = {.on_recv = sh_traffic_recv, .on_disconnect = on_disconnect};
    rmx_conn_set_cbs(c, &cbs, &A.t);
  }
}

static void on_closed(rmx_conn_t *c, void *arg)
{
  (void)c;
  (void)arg;
  A.closed = 1;
}

void at_big_done(rmx_conn_t *c, int status, void *arg)
{
  (void)c;
  (void)status;
  (void)arg;
}

/* Turn the loop (traffic posted) until cond() or ms pass; 1 if cond(). */
static int turn_until(int (*cond)(void), uint64_t ms)
{
  uint64_t end = sh_now_ms() + ms;
  while (!cond() && sh_now_ms() < end) {
    sh_turn(A.ctx, NULL, 5);
    sh_traffic_pump(&A.t);
  }
  return cond();
}

static uint64_t hdr_before; /* K_HDR: operations done before the header was written */
static int is_connected(void) { return A.connected; }
static int is_closed(void) { return A.closed; }
static int has_traffic(void) { return A.ended || (A.t.rk && A.t.done >= 4); }
static int hdr_settled(void)
{
  return A.ended || A.t.bad || A.t.failed || A.t.done >= hdr_before + 64;
}

/* ---- the segment, from outside ---- */

static int seg_find(void)
{
  FILE *f = fopen("/proc/self/maps", "re");
  char line[512];
  unsigned long lo = 0, hi = 0;
  int n = 0;
  if (!f)
    return -1;
  while (fgets(line, sizeof(line), f))
    if (strstr(line, "memfd:rmx-shm") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
      n++;
  fclose(f);
  if (n != 1) {
    sh_say("fail the attacker sees %d segments mapped, not 1", n);
    exit(1);
  }
  char path[128];
  snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", lo, hi);
  A.size = hi - lo;
  A.lib_lo = lo;
  int fd = open(path, O_RDWR | O_CLOEXEC);
  A.own = 0;
  A.base = (uint8_t *)lo;
  if (fd >= 0) {
    void *p = mmap(NULL, A.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p != MAP_FAILED) {
      A.base = p;
      A.own = 1;
    }
  }
  uint32_t magic, ring, size;
  memcpy(&magic, A.base, 4);
  memcpy(&ring, A.base + 8, 4);
  memcpy(&size, A.base + 12, 4);
  if (magic != SEG_MAGIC || ring < 4096 || (ring & (ring - 1)) != 0 || size != A.size ||
      ((512u + 2 * ring + 4095) & ~4095u) != size) {
    sh_say("fail the segment is not as docs/protocol.md says (ring %u, size %u of %zu)", ring,
           size, A.size);
    exit(1);
  }
  A.ring = ring;
  return 0;
}

/* Our writes go through the library's mapping only while it has one. */
int at_seg_alive(void)
{
  if (A.own)
    return 1;
  FILE *f = fopen("/proc/self/maps", "re");
  char line[512];
  unsigned long lo;
  int alive = 0;
  while (f && !alive && fgets(line, sizeof(line), f))
    alive = strstr(line, "memfd:rmx-shm") && sscanf(line, "%lx-", &lo) == 1 && lo == A.lib_lo;
  if (f)
    fclose(f);
  return alive;
}

_Atomic uint32_t *at_word(int r, unsigned off)
{
  return (_Atomic uint32_t *)(void *)(A.base + SEG_CTRL(r) + off);
}
uint32_t at_ld(int r, unsigned off)
{
  return atomic_load_explicit(at_word(r, off), memory_order_acquire);
}
void at_st(int r, unsigned off, uint32_t v)
{
  atomic_store_explicit(at_word(r, off), v, memory_order_release);
}
uint8_t *at_data(int r) { return A.base + SEG_DATA(r, A.ring); }
static int ring_empty(int r) { return at_ld(r, CTRL_HEAD) == at_ld(r, CTRL_TAIL); }

/* Write 1 into every eventfd we hold: the doorbells (and libuv's own,
 * which only wakes our loop). Looked up each time: only what is open now. */
void at_ring_bells(void)
{
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    char path[300], link[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(path, link, sizeof(link) - 1);
    if (n <= 0)
      continue;
    link[n] = '\0';
    if (strcmp(link, "anon_inode:[eventfd]") == 0) {
      uint64_t one = 1;
      if (write(atoi(e->d_name), &one, sizeof(one)) < 0) {
        /* a full counter: rung already */
      }
    }
  }
  if (d)
    closedir(d);
}

/* Publish n bytes into ring 1 as its producer would: at the head, then the
 * head moved on. */
void at_publish(const uint8_t *b, size_t n)
{
  uint32_t h = at_ld(1, CTRL_HEAD);
  for (size_t i = 0; i < n; i++)
    at_data(1)[(h + i) & (A.ring - 1)] = b[i];
  at_st(1, CTRL_HEAD, h + (uint32_t)n);
  at_ring_bells();
}

void at_frame_hdr(uint8_t *p, uint32_t blen, uint8_t kind, uint8_t flags, uint16_t rsv)
{
  memcpy(p, &blen, 4);
  p[4] = kind;
  p[5] = flags;
  memcpy(p + 6, &rsv, 2);
}

/* Stop, let everything outstanding finish and both rings drain; from the
 * return on the library's loop is not turned. 1 when at rest. */
int at_quiesce(void)
{
  int stable = 0;
  uint64_t end = sh_now_ms() + QUIET_MS;
  A.t.posting = 0;
  while (!A.ended && sh_now_ms() < end) {
    sh_turn(A.ctx, NULL, 5);
    if (sh_traffic_idle(&A.t) && ring_empty(0) && ring_empty(1))
      stable++;
    else
      stable = 0;
    if (stable == 3)
      return ring_empty(1); /* the last turn may have written: look again */
  }
  return 0;
}

/* Wait (frozen) for the victim's response of kind to request id in ring 0,
 * read from past what our library consumed. Its status, or 1: none came. */
int at_response(uint8_t kind, uint64_t id)
{
  uint64_t end = sh_now_ms() + RESP_MS;
  uint32_t pos = at_ld(0, CTRL_TAIL);
  while (sh_now_ms() < end) {
    uint32_t h = at_ld(0, CTRL_HEAD);
    if (h - pos > A.ring) /* the victim broke its own ring? */
      return 1;
    uint8_t f[TFH + 12];
    if (h - pos >= TFH) {
      for (unsigned i = 0; i < sizeof(f) && i < h - pos; i++)
        f[i] = at_data(0)[(pos + i) & (A.ring - 1)];
      uint32_t blen;
      memcpy(&blen, f, 4);
      if (f[4] == kind && blen >= 12 && h - pos >= sizeof(f)) {
        uint64_t got;
        int32_t status;
        memcpy(&got, f + TFH, 8);
        memcpy(&status, f + TFH + 8, 4);
        if (got == id)
          return status;
      }
      if ((uint64_t)(h - pos) >= (uint64_t)TFH + blen) {
        pos += TFH + blen;
        continue;
      }
    }
    usleep(100);
  }
  return 1;
}

/* The victim's region for our connection and its key, from the blob it
 * sent (docs/protocol.md, "Remote keys"): address at 8, first key at 32. */
void at_region_of(uint64_t *addr, uint64_t *key)
{
  memcpy(addr, A.t.key + 8, 8);
  memcpy(key, A.t.key + 32, 8);
}

/* The sockets open in this process, by fd. */
static int sockets(int *fds, int max)
{
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  int n = 0;
  while (d && (e = readdir(d)) != NULL && n < max) {
    char path[300], link[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
    ssize_t k = readlink(path, link, sizeof(link) - 1);
    if (k > 0 && strncmp(link, "socket:", 7) == 0)
      fds[n++] = atoi(e->d_name);
  }
  if (d)
    closedir(d);
  return n;
}

/* Has the victim shut the connection's socket (its end of the connection)
 * within ms? Polled only: the library, frozen, reads nothing from it. */
static int hung_up(int ms)
{
  struct pollfd p = {.fd = A.sock, .events = POLLRDHUP};
  return poll(&p, 1, ms) > 0 && (p.revents & (POLLRDHUP | POLLHUP)) != 0;
}

/* ---- rounds ---- */

static void round_run(int r, sh_kind_t k)
{
  char line[64];
  int before[64], after[64], nb, na;
  A.connected = A.ended = A.closed = 0;
  A.end_status = 0;
  nb = sockets(before, 64);
  if (rmx_connect(A.ctx, A.uri, on_connected, NULL, &A.c) != 0)
    sh_die("attacker: rmx_connect refused");
  sh_traffic_init(&A.t, A.ctx, A.c, A.seed ^ (uint64_t)r, 0);
  if (!turn_until(is_connected, 60000) || A.conn_status != 0) {
    sh_say("fail round %d: cannot connect: %s", r, rmx_strerror(A.conn_status));
    exit(1);
  }
  na = sockets(after, 64);
  A.sock = -1;
  for (int i = 0; i < na; i++) {
    int old = 0;
    for (int j = 0; j < nb; j++)
      old |= after[i] == before[j];
    if (!old && A.sock >= 0)
      sh_die("attacker: the connect opened more than one socket");
    if (!old)
      A.sock = after[i];
  }
  if (A.sock < 0)
    sh_die("attacker: the connect opened no socket");
  A.t.posting = 1;
  if (!turn_until(has_traffic, 60000) || A.ended) {
    sh_say("fail round %d: no traffic before the attack", r);
    exit(1);
  }
  seg_find();
  int warm = (int)(sh_rand(&A.seed) % 40);
  for (int i = 0; i < warm && !A.ended; i++) {
    sh_turn(A.ctx, NULL, 2);
    sh_traffic_pump(&A.t);
  }
  at_attack(k);
  /* a corruption the victim must refuse: it hangs up at once, while we
   * are frozen (a victim that does not has missed it) */
  int refused = sh_kind_refused(k) && !strstr(A.note, "noquiet");
  sh_say("hit %d own=%d ended=%d %s", r, A.own, hung_up(refused ? QUIET_MS : 0), A.note);
  if (!sh_lines_wait(&A.in, line, sizeof(line)) || strcmp(line, "cont") != 0)
    sh_die("attacker: no 'cont' (%s)", A.in.eof ? "end of input" : line);
  if (k == K_DIE)
    _exit(0); /* the connection's socket and segment go with the process */
  /* After: on with traffic a while (the header round must stay unharmed). */
  hdr_before = A.t.done;
  A.t.posting = A.t.bad == 0 && A.t.failed == 0;
  if (k == K_HDR) {
    int ok = turn_until(hdr_settled, 60000);
    snprintf(A.note, sizeof(A.note), "clean=%d", ok && !A.ended && !A.t.bad && !A.t.failed);
  } else {
    for (int i = 0; i < 100 && !A.ended; i++) {
      sh_turn(A.ctx, NULL, 5);
      sh_traffic_pump(&A.t);
    }
  }
  A.t.posting = 0;
  int ended = A.ended, status = A.end_status;
  if (rmx_conn_close(A.c, on_closed, NULL) != 0)
    sh_die("attacker: rmx_conn_close refused");
  if (!turn_until(is_closed, 60000)) {
    sh_say("fail round %d: the attacker's own close does not finish", r);
    exit(1);
  }
  if (A.own)
    munmap(A.base, A.size);
  A.base = NULL;
  char end[16];
  if (ended)
    snprintf(end, sizeof(end), "%d", status);
  else
    strcpy(end, "closed");
  sh_say("done %d %s %llu %llu %s", r, end, (unsigned long long)A.t.done,
         (unsigned long long)(A.t.bad + A.t.failed), A.note);
  sh_traffic_fini(&A.t);
}

int sh_attacker_main(const char *name, uint64_t seed)
{
  rmx_config_t cfg;
  char line[128];
  A.in.fd = 0;
  A.seed = seed;
  snprintf(A.uri, sizeof(A.uri), "shm://%s", name);
  fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
  rmx_config_init(&cfg);
  cfg.close_timeout_ms = 300; /* a spoiled connection's close need not wait */
  /* Every byte through the rings, so that a read of our region fills ring
   * 0 (ring0_full), and direct requests (kinds 11, 12) are ones the victim
   * never agreed to. */
  cfg.shm_copy = 0;
  int rc = rmx_ctx_create(&A.ctx, NULL, &cfg);
  if (rc != 0)
    sh_die("attacker: rmx_ctx_create: %s", rmx_strerror(rc));
  while (sh_lines_wait(&A.in, line, sizeof(line))) {
    int r;
    char kname[32];
    if (strcmp(line, "quit") == 0)
      break;
    if (sscanf(line, "round %d %31s", &r, kname) != 2)
      sh_die("attacker: unknown command '%s'", line);
    int k = 0;
    while (k < SH_KINDS && strcmp(sh_kind_names[k], kname) != 0)
      k++;
    if (k == SH_KINDS)
      sh_die("attacker: unknown kind '%s'", kname);
    round_run(r, (sh_kind_t)k);
  }
  if (rmx_ctx_destroy(A.ctx) != 0)
    sh_die("attacker: rmx_ctx_destroy refused");
  return 0;
}
