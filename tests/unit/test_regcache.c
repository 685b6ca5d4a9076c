/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registration cache (src/mem/regcache.c) against a stand-in
 * transport that records what it registers: malloc is glibc's own until
 * the cache first keeps a registration; from then on malloc maps no block
 * itself; a block malloc had mapped before that moment (which free unmaps
 * behind the hooks) is registered for each transfer and never kept, also
 * once it is gone, except where the hooks saw a new mapping made; memory
 * allocated afterwards is kept and found again; an unmap through the hooks
 * drops what it covered, and so does a fresh mapping the hooks see made
 * over memory that was unmapped unseen; a child forked while another
 * thread is inside the hooks can still map and unmap.
 */
#include <malloc.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "rmx_int.h"

#define MIB ((size_t)1 << 20)

static int live; /* registrations not yet released */

static int fake_reg(rmx_tp_t *tp, void *addr, size_t len, unsigned access, rmx_tp_conn_t *scope,
                    rmx_tp_mem_t **out)
{
  (void)tp, (void)addr, (void)len, (void)access, (void)scope;
  live++;
  *out = (rmx_tp_mem_t *)malloc(1);
  return *out ? 0 : RMX_ENOMEM;
}

static void fake_dereg(rmx_tp_mem_t *m)
{
  live--;
  free(m);
}

static const rmx_tp_ops_t fake_ops = {.name = "fake", .mem_reg = fake_reg, .mem_dereg = fake_dereg};

/* One transfer from [p, p + len): 1 when the cache had it. */
static int transfer(rmx_ctx_t *ctx, void *p, size_t len)
{
  uint64_t hits = ctx->st.reg_cache_hits;
  rmx__rc_entry_t *e;
  assert_int_equal(rmx__regcache_get(ctx, 0, p, len, RMX_TP_ACC_LOCAL, &e), 0);
  rmx__regcache_put(ctx, e);
  return ctx->st.reg_cache_hits != hits;
}

#ifndef __SANITIZE_ADDRESS__
/* AddressSanitizer's allocator is not glibc's: malloc's settings and the
 * blocks it maps say nothing there. */
static void cache(void **state)
{
  (void)state;
  rmx_ctx_t *ctx = calloc(1, sizeof(*ctx));
  assert_non_null(ctx);
  ctx->cfg.regcache = 1;
  ctx->tp_ops[0] = &fake_ops;
  assert_int_equal(rmx__regcache_init(ctx), 0);

  /* A context with the cache on changes nothing in malloc by itself. */
  size_t mapped = mallinfo2().hblks;
  unsigned char *before = malloc(8 * MIB); /* above the default mmap threshold */
  assert_non_null(before);
  memset(before, 1, 8 * MIB);
  assert_int_equal(mallinfo2().hblks, mapped + 1);

  /* The first transfer arms the cache; the block that predates it is
   * registered each time and never kept. */
  assert_int_equal(transfer(ctx, before, 8 * MIB), 0);
  assert_int_equal(transfer(ctx, before, 8 * MIB), 0);
  assert_int_equal(transfer(ctx, before + MIB, 4096), 0);
  assert_int_equal(ctx->rc.entries, 0);
  assert_int_equal(live, 0);

  /* From now on malloc maps nothing itself: a large block is cached. */
  unsigned char *after = malloc(8 * MIB);
  assert_non_null(after);
  assert_int_equal(mallinfo2().hblks, mapped + 1);
  assert_int_equal(transfer(ctx, after, 8 * MIB), 0);
  assert_int_equal(transfer(ctx, after, 8 * MIB), 1);
  assert_int_equal(transfer(ctx, after + 4096, 4096), 1);
  assert_int_equal(ctx->rc.entries, 1);

  /* free unmaps the old block unseen: its range stays out of the cache
   * (the stand-in transport never touches the memory). */
  uintptr_t at = (uintptr_t)before & ~(uintptr_t)4095;
  free(before);
  assert_int_equal(transfer(ctx, (void *)at, 8 * MIB), 0);
  assert_int_equal(transfer(ctx, (void *)at, 8 * MIB), 0);
  assert_int_equal(ctx->rc.entries, 1);

  /* A mapping the hooks see made there is the program's, and its unmap
   * will be seen too: it is cached; the rest of the old range is not. */
  unsigned char *mid = (unsigned char *)at + 2 * MIB;
  void *m = mmap(mid, MIB, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  assert_true(m == mid);
  assert_int_equal(transfer(ctx, m, MIB), 0);
  assert_int_equal(transfer(ctx, m, MIB), 1);
  assert_int_equal(transfer(ctx, (void *)at, 4096), 0);
  assert_int_equal(transfer(ctx, (void *)at, 4096), 0);
  assert_int_equal(transfer(ctx, mid + MIB, 4096), 0);
  assert_int_equal(transfer(ctx, mid + MIB, 4096), 0);
  assert_int_equal(ctx->rc.entries, 2);

  /* Memory the program maps now is cached, and its unmap (through the
   * hooks) drops the registration. */
  void *n = mmap(NULL, 4 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(n != MAP_FAILED);
  assert_int_equal(transfer(ctx, n, 4 * MIB), 0);
  assert_int_equal(transfer(ctx, n, 4 * MIB), 1);
  assert_int_equal(ctx->rc.entries, 3);
  assert_int_equal(munmap(n, 4 * MIB), 0);
  assert_int_equal(munmap(m, MIB), 0);
  assert_int_equal(transfer(ctx, after, 4096), 1); /* a lookup applies the unmaps */
  assert_int_equal(ctx->rc.entries, 1);

  free(after);
  rmx__regcache_fini(ctx);
  assert_int_equal(live, 0);
  free(ctx);
}
#endif

static rmx_ctx_t *ctx_new(void)
{
  rmx_ctx_t *ctx = calloc(1, sizeof(*ctx));
  assert_non_null(ctx);
  ctx->cfg.regcache = 1;
  ctx->tp_ops[0] = &fake_ops;
  assert_int_equal(rmx__regcache_init(ctx), 0);
  return ctx;
}

static void ctx_free(rmx_ctx_t *ctx)
{
  rmx__regcache_fini(ctx);
  free(ctx);
}

/* Memory unmapped where no hook sees it (a raw syscall here; ld.so's
 * dlclose or glibc's internals elsewhere), then mapped again through the
 * hooks: the fresh mapping proves the cached registration stale. */
static void remapped(void **state)
{
  (void)state;
  rmx_ctx_t *ctx = ctx_new();
  unsigned char *first = malloc(4096); /* arms the cache, if not yet */
  assert_non_null(first);
  transfer(ctx, first, 4096);
  free(first);

  size_t len = 4 * MIB;
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(p != MAP_FAILED);
  assert_int_equal(transfer(ctx, p, len), 0);
  assert_int_equal(transfer(ctx, p, len), 1);
  uint64_t ev = ctx->st.reg_cache_evictions;
  assert_int_equal(syscall(SYS_munmap, p, len), 0); /* unseen */
  void *q = mmap(p, MIB, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  assert_true(q == p);
  assert_int_equal(transfer(ctx, q, MIB), 0); /* not the stale one */
  assert_int_equal(ctx->st.reg_cache_evictions, ev + 1);
  assert_int_equal(transfer(ctx, q, MIB), 1); /* the new one is kept */
  assert_int_equal(munmap(q, MIB), 0);
  ctx_free(ctx);
  assert_int_equal(live, 0);
}

/* ---- fork while another thread is inside the hooks ---- */

static atomic_int stop;

static void *churn(void *arg)
{
  (void)arg;
  while (!atomic_load(&stop)) {
    void *p = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED)
      munmap(p, 65536);
  }
  return NULL;
}

/* The child's exit status, or -1 if it is still running after a minute
 * (then it is hung: killed and reaped). A liveness check, not a timing. */
static int wait_child(pid_t pid)
{
  int st;
  for (int i = 0; i < 60000; i++) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid)
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return -1;
}

static void forked(void **state)
{
  (void)state;
  /* Many caches: every hooked unmap walks them all with the lock held. */
  enum { NCTX = 64 };
  rmx_ctx_t *ctx[NCTX];
  for (int i = 0; i < NCTX; i++)
    ctx[i] = ctx_new();
  unsigned char *first = malloc(4096); /* arms the cache, if not yet */
  assert_non_null(first);
  transfer(ctx[0], first, 4096);
  free(first);

  pthread_t t[2];
  atomic_store(&stop, 0);
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&t[i], NULL, churn, NULL), 0);
  int bad = 0;
  for (int i = 0; i < 300 && !bad; i++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      void *p = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      _exit(p == MAP_FAILED || munmap(p, 65536) != 0);
    }
    int rc = wait_child(pid);
    bad = rc != 0;
    if (bad)
      print_error("fork %d: the child %s (%d)\n", i, rc < 0 ? "hung" : "failed", rc);
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  for (int i = 0; i < NCTX; i++)
    ctx_free(ctx[i]);
  assert_false(bad);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
#ifndef __SANITIZE_ADDRESS__
    cmocka_unit_test(cache),
#endif
    cmocka_unit_test(remapped),
    cmocka_unit_test(forked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
