/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two contexts on two threads in one process, over rdma://, and a real
 * async event: the RDMA port going down (its netdev set down inside the
 * SoftRoCE VM), which the device reports once per process.
 *
 *   rmx-verbs-threads rdma [cmocka filter]
 *
 * Each context runs its own loop on its own thread, with a listener and
 * client connections to it carrying traffic, and an RPC call held open by
 * its handler when the fault comes. Every connection end must see
 * on_disconnect(RMX_ENETUNREACH) exactly once, on its own context's thread,
 * after its outstanding callbacks; nothing runs after on_closed. One
 * context is destroyed before the fault: the other two must keep working
 * and still hear of it. Before that, contexts come and go one at a time, so
 * the device's reader has stopped and started again.
 *
 * The port goes down and straight up again. Held down, the closes that the
 * fault causes send their DREQs into a dead port, and SoftRoCE then leaves
 * the CM passing no more connection requests in that VM, or a thread in
 * rdma_destroy_id unkillable in the kernel (both seen). The event is the
 * same either way.
 *
 * Needs root inside the VM ($RXE_VM): it takes the port down. Elsewhere the
 * fault test is skipped: it would take a real port down.
 *
 * The worlds are verbs_threads_world.c, the port verbs_threads_port.c.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "verbs_threads.h"

/* ---- scripts: each step opens w->ready; the main thread opens w->go ---- */

/* Works, then goes away first. */
static void script_first_gone(world_t *w)
{
  if (world_setup(w) == 0)
    traffic(w);
  gate_open(&w->ready); /* 1: up */
  gate_wait(&w->go, 1, 60000);
  if (w->ctx)
    world_teardown(w);
  gate_open(&w->ready); /* 2: gone */
}

/* Outlives the other, keeps working, and still hears of the fault. */
static void script_survivor(world_t *w)
{
  int ok = world_setup(w) == 0 && traffic(w) == 0;
  gate_open(&w->ready); /* 1: up */
  gate_wait(&w->go, 1, 60000); /* the other context is gone */
  ok = ok && traffic(w) == 0 && hold_calls(w) == 0;
  gate_open(&w->ready); /* 2: ready for the fault */
  if (ok)
    await_fault(w);
  if (w->ctx)
    world_teardown(w);
  gate_open(&w->ready); /* 3: done */
}

/* Comes and goes, with no fault: the device's reader stops and starts. */
static void script_plain(world_t *w)
{
  if (world_setup(w) == 0)
    traffic(w);
  if (w->ctx)
    world_teardown(w);
  gate_open(&w->ready); /* 1: done */
}

/* ---- tests ---- */

static void need_vm(void)
{
  if (strcmp(scheme, "rdma") != 0 || !getenv("RXE_VM")) {
    print_message("skipped: takes an RDMA port down; only inside the SoftRoCE VM\n");
    skip();
  }
  find_netdev();
  assert_true(port_active());
}

/* One context after another, each alone in the process. */
static void contexts_come_and_go(void **state)
{
  static world_t w[2];
  if (strcmp(scheme, "rdma") != 0)
    skip();
  for (int i = 0; i < 2; i++) {
    world_start(&w[i], i ? "Y" : "X", script_plain);
    assert_int_equal(gate_wait(&w[i].ready, 1, 60000), 0);
    assert_int_equal(pthread_join(w[i].th, NULL), 0);
    world_check(&w[i]);
  }
}

/* A goes away; B and C keep working and both hear of the port going down. */
static void fault_after_a_context_is_gone(void **state)
{
  static world_t a, b, c;
  need_vm();
  world_start(&a, "A", script_first_gone);
  world_start(&b, "B", script_survivor);
  world_start(&c, "C", script_survivor);
  assert_int_equal(gate_wait(&a.ready, 1, 60000), 0);
  assert_int_equal(gate_wait(&b.ready, 1, 60000), 0);
  assert_int_equal(gate_wait(&c.ready, 1, 60000), 0);
  gate_open(&a.go); /* A closes everything and destroys its context */
  assert_int_equal(gate_wait(&a.ready, 2, 60000), 0);
  assert_int_equal(pthread_join(a.th, NULL), 0);
  gate_open(&b.go); /* B and C work on without it */
  gate_open(&c.go);
  assert_int_equal(gate_wait(&b.ready, 2, 60000), 0);
  assert_int_equal(gate_wait(&c.ready, 2, 60000), 0);
  int down = link_flap();
  int done = gate_wait(&b.ready, 3, FAULT_MS + 30000);
  done |= gate_wait(&c.ready, 3, FAULT_MS + 30000);
  port_restore();
  assert_int_equal(down, 0);
  assert_int_equal(done, 0);
  assert_int_equal(pthread_join(b.th, NULL), 0);
  assert_int_equal(pthread_join(c.th, NULL), 0);
  world_check(&a);
  world_check(&b);
  world_check(&c);
}

static int arm_alarm(void **state)
{
  alarm(150); /* a hang kills the run instead of stalling CI */
  return 0;
}

int main(int argc, char **argv)
{
  if (harness_args(argc, argv) != 0)
    return 2;
  if (argc > 2)
    cmocka_set_test_filter(argv[2]);
  signal(SIGPIPE, SIG_IGN);
  /* In this order: the fault comes to a reader started anew after the
   * first test let it go, and it comes last (see the top). */
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup(contexts_come_and_go, arm_alarm),
    cmocka_unit_test_setup(fault_after_a_context_is_gone, arm_alarm),
  };
  char name[64];
  snprintf(name, sizeof(name), "verbs-threads/%s", scheme);
  return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
