/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the two-thread verbs test (verbs_threads*.c) shares: a world per
 * context (its thread, listener, clients and what each end saw), gates
 * between the main thread and the workers, and the RDMA port.
 */
#ifndef RMX_TEST_VERBS_THREADS_H
#define RMX_TEST_VERBS_THREADS_H

#include <pthread.h>
#include <rmx/rmx.h>

#include "harness.h"

#define NCL 2         /* client connections per context */
#define NMSG 24       /* echoed messages per client and round */
#define BIG 20000     /* above the eager size: rendezvous */
#define RPC_HOLD 7    /* a handler that answers only after the fault */
#define FAULT_MS 20000

typedef struct world world_t;

/* One end of a connection: a client, or what the listener accepted. */
typedef struct peer {
  world_t *w;
  rmx_conn_t *c;
  int client;
  int connected, connect_status;
  int disconnects, disconnect_status;
  int closed, after_closed;
  int sends_out, send_errors;
  int echoes, want_echoes, bad_echoes;
  int calls_out, replies, reply_status;
  rmx_rpc_req_t *held;
} peer_t;

typedef struct gate {
  pthread_mutex_t m;
  pthread_cond_t cv;
  int n;
} gate_t;

struct world {
  const char *name;
  pthread_t thread; /* the context's own thread */
  pthread_t th;
  void (*script)(world_t *w);
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  char uri[160];
  peer_t cl[NCL], sv[NCL];
  int nsv;
  int wrong_thread;
  int errors;
  char why[512];
  gate_t ready, go; /* worker -> main, main -> worker */
};

/* ---- gates and worlds (verbs_threads_world.c) ---- */

void gate_init(gate_t *g);
void gate_open(gate_t *g);
/* Wait until the gate was opened want times; 0, or -1 after ms. */
int gate_wait(gate_t *g, int want, unsigned ms);

/* On the world's thread: a context, a listener, NCL clients connected. */
int world_setup(world_t *w);
/* One round of echoed messages on every client, small and rendezvous. */
int traffic(world_t *w);
/* Calls the peer's handler holds: outstanding when the fault comes. */
int hold_calls(world_t *w);
/* Close everything; then a while more, for anything late. */
void world_teardown(world_t *w);
/* After the port went down: every end reports it, once, with its calls. */
void await_fault(world_t *w);
/* The world's thread runs script. */
void world_start(world_t *w, const char *name, void (*script)(world_t *));
/* On the main thread, after the world's thread ended. */
void world_check(world_t *w);

/* ---- the port (verbs_threads_port.c) ---- */

int port_active(void);
void find_netdev(void);
/* Down and at once up again, in one ip call. */
int link_flap(void);
/* Up again, and the port active, before the next test connects. */
void port_restore(void);

#endif
