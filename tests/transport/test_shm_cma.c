/* SPDX-License-Identifier: BSD-3-Clause */
/* One copy between processes (transport/shm/cma.c) against a forked peer
 * that tells its pid and addresses over a socket pair: reads and writes of
 * 1 B to 8 MiB in gather lists of many shapes (one element, hundreds of
 * elements with gaps and empty ones, more than IOV_MAX on one side, other
 * boundaries on each side), every byte and every gap checked on both
 * sides, the peer checking its own memory; a bad address in the peer
 * (part moved, then RMX_EINVAL) or here; a peer gone, reaped or a zombie
 * (RMX_ECONNRESET); lists that do not add up (RMX_EINVAL, nothing moved).
 * The probe: a match on the real peer, a mismatch on other bytes and on
 * another process with the same address, and refused (RMX_EACCES for the
 * copy) for a process under a seccomp filter and one of another uid. */
#include <errno.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <rmx/rmx.h>

#include "../../transport/shm/cma.h"
#include "../conformance/cma_filter.h"

#define PEER_BUF (12u << 20) /* the peer's area: 8 MiB and the gaps */
#define CANARY 0xa5

/* One element of a list: off bytes into its buffer, carrying bytes
 * [base, base + len) of the stream. */
typedef struct rec {
  uint64_t off, len, base;
} rec_t;

typedef struct list {
  rec_t *r;
  int n;
  uint64_t span; /* the buffer bytes the list lies in */
} list_t;

/* What the peer sends first. */
typedef struct hello {
  pid_t pid;
  uint64_t buf, hole, probe;
  uint8_t bytes[RMX_SHM_CMA_PROBE_LEN];
} hello_t;

/* A command to the peer, then n records. */
typedef struct cmd {
  uint32_t op, seed;
  int32_t n;
  uint64_t span;
} cmd_t;
enum { OP_FILL, OP_CHECK, OP_EXIT };

typedef struct peer {
  pid_t pid;
  int sock;
  hello_t h;
} peer_t;

static peer_t P;                   /* the peer every copy test uses */
static rmx_shm_cma_probe_t probe; /* a static: at one address in every fork */

static uint8_t pat(uint32_t seed, uint64_t pos)
{
  uint64_t x = (pos + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)seed << 32;
  x ^= x >> 29;
  return (uint8_t)(x * 0xbf58476d1ce4e5b9ull >> 56);
}

/* The buffer as the list says it should be: the stream's bytes in the
 * elements, the canary everywhere else. */
static void image(uint8_t *buf, const list_t *l, uint32_t seed)
{
  memset(buf, CANARY, l->span);
  for (int i = 0; i < l->n; i++)
    for (uint64_t j = 0; j < l->r[i].len; j++)
      buf[l->r[i].off + j] = pat(seed, l->r[i].base + j);
}

/* The first byte that is not what image would write, or -1. */
static int64_t image_diff(const uint8_t *buf, const list_t *l, uint32_t seed)
{
  uint8_t *want = malloc(l->span ? l->span : 1);
  if (!want)
    return 0;
  image(want, l, seed);
  int64_t bad = -1;
  for (uint64_t i = 0; i < l->span && bad < 0; i++)
    if (buf[i] != want[i])
      bad = (int64_t)i;
  free(want);
  return bad;
}

static int full_io(int fd, void *p, size_t n, int wr)
{
  for (size_t k = 0; k < n;) {
    ssize_t r = wr ? write(fd, (char *)p + k, n - k) : read(fd, (char *)p + k, n - k);
    if (r <= 0)
      return -1;
    k += (size_t)r;
  }
  return 0;
}

/* The peer: fills and checks its buffer as told; no cmocka here. */
static void peer_main(int sock)
{
  uint8_t *buf = mmap(NULL, PEER_BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  /* three pages, the middle one unmapped: a hole right after mapped bytes */
  uint8_t *h = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED || h == MAP_FAILED || munmap(h + 4096, 4096) != 0 ||
      rmx__shm_cma_probe_init(&probe) != 0)
    _exit(3);
  hello_t hi = {.pid = getpid(), .buf = (uintptr_t)buf, .hole = (uintptr_t)(h + 4096),
                .probe = rmx__shm_cma_probe_addr(&probe)};
  memcpy(hi.bytes, probe.bytes, sizeof(hi.bytes));
  if (full_io(sock, &hi, sizeof(hi), 1) != 0)
    _exit(3);
  for (;;) {
    cmd_t c;
    if (full_io(sock, &c, sizeof(c), 0) != 0 || c.op == OP_EXIT)
      _exit(0);
    list_t l = {.n = c.n, .span = c.span, .r = malloc(sizeof(rec_t) * (size_t)(c.n + 1))};
    if (!l.r || c.span > PEER_BUF || full_io(sock, l.r, sizeof(rec_t) * (size_t)c.n, 0) != 0)
      _exit(4);
    int64_t bad = -1;
    if (c.op == OP_FILL)
      image(buf, &l, c.seed);
    else
      bad = image_diff(buf, &l, c.seed);
    free(l.r);
    if (full_io(sock, &bad, sizeof(bad), 1) != 0)
      _exit(4);
  }
}

static void peer_start(peer_t *p)
{
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  p->pid = fork();
  assert_true(p->pid >= 0);
  if (p->pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(sv[0]);
    peer_main(sv[1]);
  }
  close(sv[1]);
  p->sock = sv[0];
  assert_int_equal(full_io(p->sock, &p->h, sizeof(p->h), 0), 0);
  assert_int_equal(p->h.pid, p->pid);
}

static void peer_stop(peer_t *p)
{
  cmd_t c = {.op = OP_EXIT};
  int st;
  assert_int_equal(full_io(p->sock, &c, sizeof(c), 1), 0);
  assert_int_equal(waitpid(p->pid, &st, 0), p->pid);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  close(p->sock);
}

/* Tell the peer to fill (the list's elements, canary between) or check;
 * returns the first bad offset the peer found, or -1. */
static int64_t peer_do(peer_t *p, uint32_t op, const list_t *l, uint32_t seed)
{
  cmd_t c = {.op = op, .seed = seed, .n = l->n, .span = l->span};
  int64_t bad;
  assert_int_equal(full_io(p->sock, &c, sizeof(c), 1), 0);
  assert_int_equal(full_io(p->sock, l->r, sizeof(rec_t) * (size_t)l->n, 1), 0);
  assert_int_equal(full_io(p->sock, &bad, sizeof(bad), 0), 0);
  return bad;
}

/* Shapes of a list of total bytes. */
enum { ONE, VAR_A, VAR_B, FIXED };

static uint64_t rng_next(uint64_t *s)
{
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* A list of shape kind holding total bytes. VAR_*: about 600 elements of
 * random lengths (so a copy crosses several windows of the module), gaps
 * of 0 to 3 bytes and an empty element now and then; FIXED: elements of
 * fixed bytes each, no gaps. */
static list_t shape(int kind, uint64_t total, uint64_t fixed)
{
  list_t l = {0};
  int cap = 16;
  uint64_t s = kind == VAR_A ? 0x1234567 : 0x89abcdef, maxlen = total / 300 + 1, off = 0;
  l.r = malloc(sizeof(rec_t) * (size_t)cap);
  for (uint64_t base = 0; base < total || l.n == 0;) {
    uint64_t len = total - base;
    if (kind == FIXED && len > fixed)
      len = fixed;
    else if ((kind == VAR_A || kind == VAR_B) && total > 0) {
      uint64_t x = rng_next(&s);
      uint64_t want = x % 10 == 0 ? 0 : 1 + (x >> 8) % maxlen;
      len = want < len ? want : len;
      off += (x >> 4) % 4;
    }
    if (l.n == cap)
      l.r = realloc(l.r, sizeof(rec_t) * (size_t)(cap *= 2));
    assert_non_null(l.r);
    l.r[l.n++] = (rec_t){.off = off, .len = len, .base = base};
    off += len;
    base += len;
    if (total == 0)
      break;
  }
  l.span = off + 1; /* a canary byte after the last element too */
  return l;
}

static struct iovec *iovs(const list_t *l, uint64_t at)
{
  struct iovec *v = malloc(sizeof(*v) * (size_t)l->n);
  assert_non_null(v);
  for (int i = 0; i < l->n; i++)
    v[i] = (struct iovec){(void *)(uintptr_t)(at + l->r[i].off), l->r[i].len};
  return v;
}

/* One copy each way between lists of the two shapes. */
static void copy_both_ways(uint64_t total, int lk, uint64_t lf, int rk, uint64_t rf)
{
  list_t ll = shape(lk, total, lf), rl = shape(rk, total, rf), none = {.span = rl.span};
  assert_true(rl.span <= PEER_BUF);
  uint8_t *buf = malloc(ll.span);
  assert_non_null(buf);
  struct iovec *lv = iovs(&ll, (uintptr_t)buf), *rv = iovs(&rl, P.h.buf);
  uint32_t seed = (uint32_t)(total * 31 + (uint64_t)lk * 7 + (uint64_t)rk);
  size_t done = 1;

  /* read: the peer's elements into ours, every gap left alone */
  assert_int_equal(peer_do(&P, OP_FILL, &rl, seed), -1);
  memset(buf, CANARY, ll.span);
  assert_int_equal(rmx__shm_cma_copy(P.pid, RMX_SHM_CMA_READ, lv, ll.n, rv, rl.n, &done), 0);
  assert_int_equal(done, total);
  int64_t bad = image_diff(buf, &ll, seed);
  if (bad >= 0)
    fail_msg("read %llu B (shapes %d/%d): byte %lld of the local buffer is wrong",
             (unsigned long long)total, lk, rk, (long long)bad);

  /* write: ours into the peer's, which checks its whole area */
  assert_int_equal(peer_do(&P, OP_FILL, &none, 0), -1);
  image(buf, &ll, seed + 1);
  assert_int_equal(rmx__shm_cma_copy(P.pid, RMX_SHM_CMA_WRITE, lv, ll.n, rv, rl.n, &done), 0);
  assert_int_equal(done, total);
  bad = peer_do(&P, OP_CHECK, &rl, seed + 1);
  if (bad >= 0)
    fail_msg("write %llu B (shapes %d/%d): byte %lld of the peer's buffer is wrong",
             (unsigned long long)total, lk, rk, (long long)bad);
  free(lv);
  free(rv);
  free(buf);
  free(ll.r);
  free(rl.r);
}

static void reads_and_writes_of_every_size_and_shape(void **state)
{
  static const uint64_t sizes[] = {1, 2, 3, 100, 4095, 4096, 4097, 65537, (1u << 20) + 5,
                                   8u << 20};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    copy_both_ways(sizes[i], ONE, 0, ONE, 0);
    copy_both_ways(sizes[i], ONE, 0, VAR_B, 0);
    copy_both_ways(sizes[i], VAR_A, 0, ONE, 0);
    copy_both_ways(sizes[i], VAR_A, 0, VAR_B, 0);
  }
}

static void more_elements_than_iov_max(void **state)
{
  long max = sysconf(_SC_IOV_MAX);
  assert_true(max > 0 && max <= 5000);
  copy_both_ways(5000, FIXED, 1, VAR_B, 0);    /* 5000 one-byte elements here */
  copy_both_ways(3 * 2500, VAR_A, 0, FIXED, 3); /* 2500 of 3 bytes there */
  copy_both_ways(3 * 5000, FIXED, 3, FIXED, 5); /* 5000 here, 3000 there, out of step */
  copy_both_ways(8u << 20, FIXED, 4096, VAR_B, 0); /* 2048 pages here */
  copy_both_ways(8u << 20, VAR_A, 0, FIXED, 4096);
}

static void nothing_to_move_and_lists_that_do_not_add_up(void **state)
{
  uint8_t b[8] = {0};
  size_t done = 9;
  assert_int_equal(rmx__shm_cma_copy(P.pid, RMX_SHM_CMA_READ, NULL, 0, NULL, 0, &done), 0);
  assert_int_equal(done, 0);
  struct iovec l = {b, 8}, r = {(void *)(uintptr_t)P.h.buf, 7}, z = {b, 0};
  assert_int_equal(peer_do(&P, OP_FILL, &(list_t){.span = 16}, 0), -1);
  assert_int_equal(rmx__shm_cma_copy(P.pid, RMX_SHM_CMA_WRITE, &l, 1, &r, 1, &done), RMX_EINVAL);
  assert_int_equal(done, 0);
  assert_int_equal(peer_do(&P, OP_CHECK, &(list_t){.span = 16}, 0), -1); /* nothing moved */
  assert_int_equal(rmx__shm_cma_copy(P.pid, 2, &l, 1, &l, 1, &done), RMX_EINVAL);
  assert_int_equal(rmx__shm_cma_copy(0, RMX_SHM_CMA_READ, &l, 1, &l, 1, &done), RMX_EINVAL);
  assert_int_equal(rmx__shm_cma_copy(P.pid, RMX_SHM_CMA_READ, NULL, 1, &l, 1, &done), RMX_EINVAL);
  assert_int_equal(rmx__shm_cma_copy(P.pid, RMX_SHM_CMA_READ, &l, -1, &l, 1, &done), RMX_EINVAL);
  struct iovec huge[2] = {{b, SIZE_MAX / 2 + 1}, {b, SIZE_MAX / 2 + 1}};
  assert_int_equal(rmx__shm_cma_copy(P.pid, RMX_SHM_CMA_READ, huge, 2, huge, 2, &done), RMX_EINVAL);
  /* empty elements only: nothing to move, no call made */
  assert_int_equal(rmx__shm_cma_copy(P.pid, RMX_SHM_CMA_READ, &z, 1, &z, 1, &done), 0);
}

static void a_bad_address_moves_what_it_can_then_einval(void **state)
{
  uint8_t b[256];
  size_t done = 0;
  /* 100 mapped bytes, then the hole */
  struct iovec l = {b, 200}, r = {(void *)(uintptr_t)(P.h.hole - 100), 200};
  assert_int_equal(rmx__shm_cma_copy(P.pid, RMX_SHM_CMA_READ, &l, 1, &r, 1, &done), RMX_EINVAL);
  assert_int_equal(done, 100);
  assert_int_equal(rmx__shm_cma_copy(P.pid, RMX_SHM_CMA_WRITE, &l, 1, &r, 1, &done), RMX_EINVAL);
  assert_int_equal(done, 100);
  r.iov_base = (void *)(uintptr_t)P.h.hole;
  assert_int_equal(rmx__shm_cma_copy(P.pid, RMX_SHM_CMA_READ, &l, 1, &r, 1, &done), RMX_EINVAL);
  assert_int_equal(done, 0);
  r.iov_base = (void *)(uintptr_t)0xffff800000000000ull; /* the kernel's half */
  assert_int_equal(rmx__shm_cma_copy(P.pid, RMX_SHM_CMA_WRITE, &l, 1, &r, 1, &done), RMX_EINVAL);
  /* a bad address here: a page of ours unmapped */
  uint8_t *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(m != MAP_FAILED);
  assert_int_equal(munmap(m, 4096), 0);
  l.iov_base = m;
  r.iov_base = (void *)(uintptr_t)P.h.buf;
  assert_int_equal(rmx__shm_cma_copy(P.pid, RMX_SHM_CMA_READ, &l, 1, &r, 1, &done), RMX_EINVAL);
  assert_int_equal(done, 0);
  /* the peer is none the worse */
  assert_int_equal(peer_do(&P, OP_FILL, &(list_t){.span = 4}, 0), -1);
}

static void a_dead_peer_is_econnreset(void **state)
{
  uint8_t b[32];
  struct iovec l = {b, 32}, r = {(void *)(uintptr_t)P.h.buf, 32};
  const char *why;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0)
    _exit(0);
  siginfo_t si;
  assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0); /* a zombie now */
  assert_int_equal(rmx__shm_cma_copy(pid, RMX_SHM_CMA_READ, &l, 1, &r, 1, NULL), RMX_ECONNRESET);
  assert_int_equal(rmx__shm_cma_probe(pid, P.h.probe, 32, P.h.bytes, &why), 0);
  assert_non_null(strstr(why, "no such process"));
  assert_int_equal(waitpid(pid, NULL, 0), pid); /* reaped: no such pid at all */
  assert_int_equal(rmx__shm_cma_copy(pid, RMX_SHM_CMA_WRITE, &l, 1, &r, 1, NULL), RMX_ECONNRESET);
  assert_int_equal(rmx__shm_cma_probe(pid, P.h.probe, 32, P.h.bytes, &why), 0);
  assert_non_null(strstr(why, "no such process"));
}

static void the_probe_matches_only_the_peer(void **state)
{
  const char *why = "unset";
  assert_int_equal(rmx__shm_cma_probe(P.pid, P.h.probe, RMX_SHM_CMA_PROBE_LEN, P.h.bytes, &why), 1);
  assert_null(why);
  assert_int_equal(rmx__shm_cma_probe(P.pid, P.h.probe, RMX_SHM_CMA_PROBE_MIN, P.h.bytes, &why), 1);
  uint8_t other[RMX_SHM_CMA_PROBE_LEN];
  memcpy(other, P.h.bytes, sizeof(other));
  other[RMX_SHM_CMA_PROBE_LEN - 1] ^= 1;
  assert_int_equal(rmx__shm_cma_probe(P.pid, P.h.probe, sizeof(other), other, &why), 0);
  assert_string_equal(why, "probe bytes differ: not the peer");
  /* another process of the same program, its probe at the same address
   * (as a pid reused by one would have): its own random bytes differ */
  peer_t q;
  peer_start(&q);
  assert_int_equal(q.h.probe, P.h.probe);
  assert_int_equal(rmx__shm_cma_probe(q.pid, P.h.probe, sizeof(other), P.h.bytes, &why), 0);
  assert_string_equal(why, "probe bytes differ: not the peer");
  assert_int_equal(rmx__shm_cma_probe(q.pid, q.h.probe, sizeof(other), q.h.bytes, NULL), 1);
  peer_stop(&q);
  /* lengths out of range, an address not mapped there */
  assert_int_equal(rmx__shm_cma_probe(P.pid, P.h.probe, RMX_SHM_CMA_PROBE_MIN - 1, P.h.bytes, &why), 0);
  assert_non_null(strstr(why, "length"));
  assert_int_equal(rmx__shm_cma_probe(P.pid, P.h.probe, RMX_SHM_CMA_PROBE_MAX + 1, P.h.bytes, &why), 0);
  assert_int_equal(rmx__shm_cma_probe(P.pid, P.h.hole, 32, P.h.bytes, &why), 0);
  assert_non_null(strstr(why, "not mapped"));
  assert_int_equal(rmx__shm_cma_probe(0, P.h.probe, 32, P.h.bytes, &why), 0);
}

/* What a child that probed its parent before and after dropping a right
 * found. */
typedef struct verdict {
  int before, after, rc_read, rc_write;
  char why[128];
} verdict_t;

typedef int (*drop_fn)(void);

/* Fork a child that probes this process, calls drop, then probes again
 * and tries a copy each way; its verdict comes back over a pipe. */
static verdict_t child_probes_us(drop_fn drop)
{
  verdict_t v = {-1, -1, 1, 1, "no verdict"};
  int pp[2];
  assert_int_equal(rmx__shm_cma_probe_init(&probe), 0);
  assert_int_equal(pipe(pp), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    pid_t parent = getppid();
    uint8_t b[32];
    memcpy(b, probe.bytes, sizeof(b)); /* a write that went through would change nothing */
    struct iovec l = {b, 32}, r = {probe.bytes, 32};
    const char *why = NULL;
    v.before = rmx__shm_cma_probe(parent, rmx__shm_cma_probe_addr(&probe), 32, probe.bytes, NULL);
    if (drop() != 0)
      _exit(5);
    v.after = rmx__shm_cma_probe(parent, rmx__shm_cma_probe_addr(&probe), 32, probe.bytes, &why);
    snprintf(v.why, sizeof(v.why), "%s", why ? why : "(none)");
    v.rc_read = rmx__shm_cma_copy(parent, RMX_SHM_CMA_READ, &l, 1, &r, 1, NULL);
    v.rc_write = rmx__shm_cma_copy(parent, RMX_SHM_CMA_WRITE, &l, 1, &r, 1, NULL);
    _exit(full_io(pp[1], &v, sizeof(v), 1) == 0 ? 0 : 6);
  }
  close(pp[1]);
  int st;
  assert_int_equal(full_io(pp[0], &v, sizeof(v), 0), 0);
  close(pp[0]);
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  return v;
}

/* The child reached us before drop and is refused after: the probe says
 * why, and a copy either way is RMX_EACCES. */
static void refused_after(drop_fn drop)
{
  verdict_t v = child_probes_us(drop);
  assert_int_equal(v.before, 1);
  assert_int_equal(v.after, 0);
  assert_string_equal(v.why, "process_vm_readv refused: Operation not permitted");
  assert_int_equal(v.rc_read, RMX_EACCES);
  assert_int_equal(v.rc_write, RMX_EACCES);
}

#ifdef CMA_FILTER
static int seccomp_drop(void) { return cma_filter_refuse(); }
#endif

static void refused_under_a_seccomp_filter(void **state)
{
#ifndef CMA_FILTER
  skip();
#else
  refused_after(seccomp_drop);
#endif
}

static int uid_drop(void)
{
  return setgroups(0, NULL) || setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534);
}

static void refused_for_another_uid(void **state)
{
  if (geteuid() != 0)
    skip(); /* it takes root to become another user */
  refused_after(uid_drop);
}

static int group_setup(void **state)
{
  peer_start(&P);
  return 0;
}

static int group_teardown(void **state)
{
  peer_stop(&P);
  return 0;
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(reads_and_writes_of_every_size_and_shape),
      cmocka_unit_test(more_elements_than_iov_max),
      cmocka_unit_test(nothing_to_move_and_lists_that_do_not_add_up),
      cmocka_unit_test(a_bad_address_moves_what_it_can_then_einval),
      cmocka_unit_test(a_dead_peer_is_econnreset),
      cmocka_unit_test(the_probe_matches_only_the_peer),
      cmocka_unit_test(refused_under_a_seccomp_filter),
      cmocka_unit_test(refused_for_another_uid),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
