/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registration cache's unmap hooks (src/mem/memhooks.c): nothing is
 * hooked until they are installed; then munmap, mremap and
 * madvise(DONTNEED) calls from this program are noted and still done,
 * and the ranges mmap and mremap map afresh are reported;
 * a library loaded afterwards is hooked at the next sync, which says so.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cmocka.h>

#include "mem/memhooks.h"
#include "rmx_int.h"

static uintptr_t noted_start, noted_end;
static int notes;
static uintptr_t mapped_start, mapped_end;
static int maps;

static void on_map(const void *addr, size_t len)
{
  maps++;
  mapped_start = (uintptr_t)addr;
  mapped_end = (uintptr_t)addr + len;
}

static void note(const void *addr, size_t len)
{
  notes++;
  noted_start = (uintptr_t)addr;
  noted_end = (uintptr_t)addr + len;
}

/* What this program's own relocation for munmap points at now (not
 * inlined: the compiler takes the relocated address for a constant). */
__attribute__((noinline)) static void *munmap_here(void)
{
  int (*volatile f)(void *, size_t) = munmap;
  return (void *)f;
}

static void *map(size_t len)
{
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(p != MAP_FAILED);
  memset(p, 0x5a, len);
  return p;
}

/* Is [p, p + len) free? (Mapping it without replacing anything works.) */
static int is_unmapped(void *p, size_t len)
{
  void *q = mmap(p, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (q == MAP_FAILED)
    return 0;
  syscall(SYS_munmap, q, len); /* not through the hooks: nothing noted */
  return q == p;
}

static void hooks(void **state)
{
  size_t pg = (size_t)sysconf(_SC_PAGESIZE), len = 4 * pg;
  void *libc_munmap = dlsym(RTLD_DEFAULT, "munmap");
  assert_non_null(libc_munmap);

  /* Before: untouched, and nothing noted. */
  assert_ptr_equal(munmap_here(), libc_munmap);
  uint8_t *p = map(len);
  assert_int_equal(munmap(p, len), 0);
  assert_int_equal(notes, 0);
  assert_int_equal(rmx__memhooks_sync(), 0);

  assert_int_equal(rmx__memhooks_install(note), 0);
  assert_int_equal(rmx__memhooks_install(note), 0); /* once is enough; again is harmless */
  assert_int_equal(rmx__memhooks_failed(), 0);
  assert_ptr_not_equal(munmap_here(), libc_munmap);

  /* mmap: a new mapping is reported, one that replaces memory is not. */
  rmx__memhooks_on_map(on_map);
  p = map(len);
  assert_int_equal(maps, 1);
  assert_int_equal(mapped_start, (uintptr_t)p);
  assert_int_equal(mapped_end, (uintptr_t)p + len);
  void *f = mmap(p, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  assert_true(f == p);
  assert_int_equal(maps, 1);
  assert_int_equal(munmap(p, len), 0);
  notes = 0;

  /* munmap: noted with its range, and done. */
  p = map(len);
  assert_int_equal(munmap(p + pg, pg), 0);
  assert_int_equal(notes, 1);
  assert_int_equal(noted_start, (uintptr_t)p + pg);
  assert_int_equal(noted_end, (uintptr_t)p + 2 * pg);
  assert_true(is_unmapped(p + pg, pg));
  assert_int_equal(p[0], 0x5a); /* its neighbours stay */

  /* mremap: the old range is noted, the data moves. */
  maps = 0;
  uint8_t *q = mremap(p + 2 * pg, 2 * pg, 8 * pg, MREMAP_MAYMOVE);
  assert_true(q != MAP_FAILED);
  assert_int_equal(notes, 2);
  assert_int_equal(noted_start, (uintptr_t)p + 2 * pg);
  assert_int_equal(noted_end, (uintptr_t)p + 4 * pg);
  assert_int_equal(q[pg], 0x5a);
  assert_int_equal(maps, 1); /* and the new range reported */
  assert_int_equal(mapped_start, (uintptr_t)q);
  assert_int_equal(mapped_end, (uintptr_t)q + 8 * pg);

  /* madvise: only what drops the pages is noted. */
  assert_int_equal(madvise(q, pg, MADV_WILLNEED), 0);
  assert_int_equal(notes, 2);
  assert_int_equal(madvise(q, pg, MADV_DONTNEED), 0);
  assert_int_equal(notes, 3);
  assert_int_equal(noted_start, (uintptr_t)q);
  assert_int_equal(q[0], 0); /* done: private anonymous pages read as zero */
  munmap(q, 8 * pg);
  munmap(p, pg);
  notes = 0;

  /* A library loaded now calls the old munmap until the next sync, which
   * reports that something new was hooked. */
  unsigned long gen = rmx__memhooks_sync();
  assert_int_equal(rmx__memhooks_sync(), gen); /* nothing new */
  void *lib = dlopen(MEMHOOKS_PEER, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(lib);
  int (*peer_unmap)(void *, size_t) = (int (*)(void *, size_t))dlsym(lib, "peer_unmap");
  assert_non_null(peer_unmap);
  p = map(len);
  assert_int_equal(peer_unmap(p, pg), 0);
  assert_int_equal(notes, 0);
  assert_int_not_equal(rmx__memhooks_sync(), gen);
  assert_int_equal(peer_unmap(p + pg, pg), 0);
  assert_int_equal(notes, 1);
  assert_int_equal(noted_start, (uintptr_t)p + pg);
  munmap(p + 2 * pg, 2 * pg);
  assert_int_equal(rmx__memhooks_failed(), 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(hooks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
