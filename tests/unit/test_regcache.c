/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registration cache (src/mem/regcache.c) against a stand-in
 * transport that records what it registers: malloc is glibc's own until
 * the cache first keeps a registration; from then on malloc maps no block
 * itself; a block malloc had mapped before that moment (which free unmaps
 * behind the hooks) is registered for each transfer and never kept, also
 * once it is gone, except where the hooks saw a new mapping made; memory
 * allocated afterwards is kept and found again; an unmap through the hooks
 * drops what it covered.
 */
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

int main(void)
{
#ifdef __SANITIZE_ADDRESS__
  /* AddressSanitizer's allocator is not glibc's: malloc's settings and the
   * blocks it maps say nothing there. */
  (void)cache;
  return 0;
#else
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(cache),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
#endif
}
