/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A message larger than 1 GiB over TCP. The transport once refused reads
 * above 1 GiB, which took the connection down for any rendezvous message
 * that large, though both sides had allowed it. The sender's buffer is
 * calloc'd (untouched pages cost nothing) with a pattern at a few places;
 * the receiver checks those places and the zeros around them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include <rmx/rmx.h>

#define BIG ((1ull << 30) + (3ull << 20) + 5)

static rmx_ctx_t *ctx;
static rmx_conn_t *srv, *cli;
static int accepted, connected, sent, recvs, sent_status = 1, ok;

static uint64_t spot(int i) { return (BIG - 8) / 7 * (uint64_t)i; }

static void on_recv(rmx_conn_t *c, const void *data, size_t len, void *arg)
{
  const uint8_t *p = data;
  recvs++;
  ok = len == BIG;
  for (int i = 0; ok && i < 8; i++) {
    uint64_t at = spot(i);
    ok = p[at] == (uint8_t)(0xa0 + i) && p[at + 1] == 0 && (at == 0 || p[at - 1] == 0);
  }
}

static void on_accept(rmx_listener_t *l, rmx_conn_t *c, void *arg)
{
  rmx_conn_set_cbs(c, &(rmx_conn_cbs_t){.on_recv = on_recv}, NULL);
  srv = c;
  accepted = 1;
}

static void on_connected(rmx_conn_t *c, int status, void *arg)
{
  assert_int_equal(status, 0);
  connected = 1;
}

static void on_sent(rmx_conn_t *c, int status, void *arg)
{
  sent = 1;
  sent_status = status;
}

static int closed;
static void on_closed(rmx_conn_t *c, void *arg) { closed++; }

static void run_until(const int *flag)
{
  while (!*flag)
    uv_run(rmx_ctx_loop(ctx), UV_RUN_ONCE);
}

static void rendezvous_over_1gib(void **state)
{
  rmx_config_t cfg;
  rmx_listener_t *l;
  char uri[128];
  alarm(300);
  assert_int_equal(rmx_config_init(&cfg), 0);
  cfg.max_msg_size = 2ull << 30;
  assert_int_equal(rmx_ctx_create(&ctx, NULL, &cfg), 0);
  assert_int_equal(rmx_listen(ctx, "tcp://127.0.0.1:0", on_accept, NULL, &l), 0);
  assert_int_equal(rmx_listener_uri(l, uri, sizeof(uri)), 0);
  assert_int_equal(rmx_connect(ctx, uri, on_connected, NULL, &cli), 0);
  run_until(&connected);
  run_until(&accepted);
  uint8_t *buf = calloc(1, BIG);
  assert_non_null(buf);
  for (int i = 0; i < 8; i++)
    buf[spot(i)] = (uint8_t)(0xa0 + i);
  assert_int_equal(rmx_send(cli, buf, BIG, on_sent, NULL), 0);
  run_until(&sent);
  assert_int_equal(sent_status, 0);
  assert_int_equal(recvs, 1);
  assert_true(ok);
  free(buf);
  assert_int_equal(rmx_conn_close(cli, on_closed, NULL), 0);
  assert_int_equal(rmx_conn_close(srv, on_closed, NULL), 0);
  rmx_listener_close(l);
  assert_int_equal(rmx_ctx_destroy(ctx), 0);
  assert_int_equal(closed, 2);
  alarm(0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {cmocka_unit_test(rendezvous_over_1gib)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
