/* SPDX-License-Identifier: BSD-3-Clause */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include <uv.h>

#include "rmx_int.h"

static int setup(void **state)
{
  rmx_config_t cfg;
  rmx_ctx_t *ctx;
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.max_msg_size = 8u << 20;
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), 0);
  *state = ctx;
  return 0;
}

static int teardown(void **state)
{
  assert_int_equal(rmx_ctx_destroy(*state), 0);
  return 0;
}

static void sizes_and_classes(void **state)
{
  rmx_ctx_t *ctx = *state;
  static const size_t sizes[] = {0, 1, 255, 256, 257, 4096, 8191, 65536, 1 << 20, (1 << 20) + 1,
                                 5u << 20};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    rmx_buf_t *b;
    assert_int_equal(rmx_buf_get(ctx, sizes[i], &b), 0);
    assert_true(rmx_buf_size(b) >= sizes[i]);
    /* never more than twice what was asked beyond the smallest class */
    assert_true(rmx_buf_size(b) <= (sizes[i] < 256 ? 256 : 2 * sizes[i]));
    assert_int_equal((uintptr_t)rmx_buf_data(b) % 64, 0);
    memset(rmx_buf_data(b), 0xa5, rmx_buf_size(b)); /* all of it is ours */
    rmx_buf_put(b);
  }
  assert_int_equal(rmx__pool_class(256), 0);
  assert_int_equal(rmx__pool_class(257), 1);
  assert_int_equal(rmx__pool_class(1 << 20), RMX_POOL_CLASSES - 1);
  assert_int_equal(rmx__pool_class((1 << 20) + 1), -1);
}

static void limit_is_enforced(void **state)
{
  rmx_buf_t *b = NULL;
  assert_int_equal(rmx_buf_get(*state, (8u << 20) + 1, &b), RMX_EMSGSIZE);
  assert_null(b);
  assert_int_equal(rmx_buf_get(NULL, 1, &b), RMX_EINVAL);
}

static void steady_state_reuses(void **state)
{
  rmx_ctx_t *ctx = *state;
  rmx_buf_t *held[100];
  for (int i = 0; i < 100; i++)
    assert_int_equal(rmx_buf_get(ctx, 4000, &held[i]), 0);
  for (int i = 0; i < 100; i++)
    rmx_buf_put(held[i]);
  size_t bytes = ctx->pool.bytes;
  /* Buffers in flight never exceed what was held: no growth. */
  for (int round = 0; round < 1000; round++) {
    for (int i = 0; i < 100; i++)
      assert_int_equal(rmx_buf_get(ctx, 4000, &held[i]), 0);
    for (int i = 0; i < 100; i++)
      rmx_buf_put(held[i]);
  }
  assert_int_equal(ctx->pool.bytes, bytes);
  /* a large buffer is kept for the next large one, then returned to the
   * system once unused for a while */
  rmx_buf_t *big, *again;
  assert_int_equal(rmx_buf_get(ctx, 3u << 20, &big), 0);
  size_t with_big = ctx->pool.bytes;
  assert_true(with_big >= bytes + (3u << 20));
  void *at = rmx_buf_data(big);
  rmx_buf_put(big);
  assert_int_equal(ctx->pool.bytes, with_big);
  for (int round = 0; round < 100; round++) { /* a stream of them: no growth, no new mapping */
    assert_int_equal(rmx_buf_get(ctx, (3u << 20) - 4096 * (size_t)round, &again), 0);
    assert_ptr_equal(rmx_buf_data(again), at);
    assert_int_equal(rmx_buf_size(again), (3u << 20) - 4096 * (size_t)round);
    rmx_buf_put(again);
    assert_int_equal(ctx->pool.bytes, with_big);
  }
  /* one not even half as big gets its own */
  assert_int_equal(rmx_buf_get(ctx, (1u << 20) + 1, &again), 0);
  assert_ptr_not_equal(rmx_buf_data(again), at);
  rmx_buf_put(again);
  uint64_t now = uv_now(rmx_ctx_loop(ctx));
  rmx__pool_trim(ctx, now); /* just used: kept */
  assert_true(ctx->pool.bytes > with_big);
  rmx__pool_trim(ctx, now + 1000);
  assert_int_equal(ctx->pool.bytes, bytes);
}

/* At most 4 large buffers and 32 MiB (past the first) are kept. */
static void spares_are_bounded(void **state)
{
  rmx_ctx_t *ctx = *state;
  rmx_buf_t *b[6];
  size_t base = ctx->pool.bytes;
  for (int i = 0; i < 6; i++)
    assert_int_equal(rmx_buf_get(ctx, 2u << 20, &b[i]), 0);
  for (int i = 0; i < 6; i++)
    rmx_buf_put(b[i]);
  size_t each = ((2u << 20) + RMX_BUF_HEADROOM + 4095) & ~(size_t)4095;
  assert_int_equal(ctx->pool.bytes, base + 4 * each);
  for (int i = 0; i < 3; i++) /* 8 MiB ones: the newest first, the rest while 32 MiB allow */
    assert_int_equal(rmx_buf_get(ctx, 8u << 20, &b[i]), 0);
  for (int i = 0; i < 3; i++)
    rmx_buf_put(b[i]);
  size_t big = ((8u << 20) + RMX_BUF_HEADROOM + 4095) & ~(size_t)4095;
  assert_int_equal(ctx->pool.bytes, base + 3 * big + each);
  rmx__pool_trim(ctx, uv_now(rmx_ctx_loop(ctx)) + 1000);
  assert_int_equal(ctx->pool.bytes, base);
}

static void distinct_buffers(void **state)
{
  rmx_ctx_t *ctx = *state;
  rmx_buf_t *a, *b;
  assert_int_equal(rmx_buf_get(ctx, 300, &a), 0);
  assert_int_equal(rmx_buf_get(ctx, 300, &b), 0);
  uint8_t *pa = rmx_buf_data(a), *pb = rmx_buf_data(b);
  assert_true(pa + rmx_buf_size(a) <= pb || pb + rmx_buf_size(b) <= pa);
  rmx_buf_put(a);
  rmx_buf_put(b);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(sizes_and_classes, setup, teardown),
    cmocka_unit_test_setup_teardown(limit_is_enforced, setup, teardown),
    cmocka_unit_test_setup_teardown(steady_state_reuses, setup, teardown),
    cmocka_unit_test_setup_teardown(distinct_buffers, setup, teardown),
    cmocka_unit_test_setup_teardown(spares_are_bounded, setup, teardown),
  };
  return cmocka_run_group_tests_name("pool", tests, NULL, NULL);
}
