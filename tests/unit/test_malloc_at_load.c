/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registration cache needs glibc's malloc never to map a block on its
 * own (free would unmap it behind the unmap hooks, and a cached
 * registration would then send stale pages). librmx sets that when it is
 * loaded, before main() and the program's first allocation, unless
 * RMX_REGCACHE=0. Setting it at the first cache miss, as rmx once did,
 * left every block allocated before then exposed.
 */
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <rmx/rmx.h>

static void big_blocks_are_not_mapped_before_any_context(void **state)
{
#ifdef __SANITIZE_ADDRESS__
  skip(); /* ASan brings its own allocator: glibc's settings do not apply */
#endif
  const char *v = getenv("RMX_REGCACHE");
  int cache_off = v && strcmp(v, "0") == 0;
  void *p = malloc(8u << 20); /* far above glibc's mmap threshold */
  assert_non_null(p);
  struct mallinfo2 mi = mallinfo2();
  assert_int_equal(mi.hblks, cache_off ? 1 : 0); /* blocks malloc mapped itself */
  free(p);
  assert_non_null(rmx_strerror(0)); /* keeps librmx a dependency */
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(big_blocks_are_not_mapped_before_any_context),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
