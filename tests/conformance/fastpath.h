/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The guarantees a polling fast path could skip, with every context driven
 * by spinning on rmx_ctx_progress() (spin.h): order and integrity of eager
 * and rendezvous messages, credits exhausted mid-burst, a close or a
 * destroy from a callback the fast path runs, a peer lost mid-batch.
 * Public API only (fastpath.c: the ends and main; fastpath_cases.c).
 */
#ifndef RMX_TEST_FASTPATH_H
#define RMX_TEST_FASTPATH_H

#include <stddef.h>
#include <stdint.h>
#include <rmx/rmx.h>
#include <uv.h>

typedef struct fp_end fp_end_t;

/* One rmx_send: its callback must run exactly once. */
typedef struct fp_send {
  fp_end_t *e;
  int fired, status;
  void *buf;
} fp_send_t;

/* One end of a connection, counting every callback it gets. Messages carry
 * their sequence number and length in their first 8 bytes and a pattern
 * seeded by the number after them. */
struct fp_end {
  rmx_conn_t *c;
  int connected, conn_status;
  int recvs, bad;             /* messages received; out of order or damaged */
  uint32_t next_rx, next_tx;  /* sequence numbers */
  int disconnects, disc_status, unfired_at_disc;
  int close_called, closed, after_closed; /* callbacks after on_closed */
  fp_send_t *sends;
  int nsends, cap;
  int sent_ok, sent_err, double_fired;
  /* behaviour, from the callbacks */
  int echo;                /* send every message back */
  int refill;              /* send a new message per message received, this many */
  int close_at;            /* rmx_conn_close from on_recv at this many messages */
  int close_on_disconnect; /* rmx_conn_close from on_disconnect */
  void (*recv_hook)(fp_end_t *e);
  void (*closed_hook)(fp_end_t *e);
  size_t (*size_of)(uint32_t seq);
  void *user;
};

/* A context with a listener; ends accepted go to *accept_into. */
typedef struct fp_world {
  rmx_ctx_t *ctx;
  uv_loop_t *callers; /* the caller's loop, or NULL for a private one */
  rmx_listener_t *l;
  char uri[128];
  fp_end_t *accept_into;
} fp_world_t;

extern int fp_destroyed;     /* set when a callback destroyed the context */
extern int fp_after_destroy; /* callbacks that ran after that */

size_t fp_size_mixed(uint32_t seq); /* eager, at the eager limit, 64 KiB, 1 MiB */
size_t fp_size_small(uint32_t seq); /* up to RMX_EAGER_MSG_MIN */
void fp_end_init(fp_end_t *e, int cap, size_t (*size_of)(uint32_t));
void fp_end_free(fp_end_t *e);
void fp_set_cbs(fp_end_t *e);
/* Send the next message of e's sequence; the rmx_send return. */
int fp_send_next(fp_end_t *e);
void fp_close(fp_end_t *e);
void fp_connected(rmx_conn_t *c, int status, void *arg);
/* Every send ran its callback exactly once, with 0 or one of the codes in
 * ok (a 0-terminated list; NULL: any error); on_closed once, and nothing
 * after it; what arrived was in order and intact. */
void fp_check_end(const fp_end_t *e, const int *ok, const char *who);

/* Listen on w->ctx (any port); its URI goes to w->uri. */
int fp_listen(fp_world_t *w);
void fp_world_up(fp_world_t *w, const rmx_config_t *cfg, uv_loop_t *callers);
void fp_connect(fp_world_t *w, fp_end_t *cl, const char *uri);
/* Close the listener and destroy the context (outside callbacks). */
void fp_world_down(fp_world_t *w);
/* One spin of rmx_ctx_progress; fails the test if the context is gone. */
void fp_spin(fp_world_t *w);
#define FP_SPIN_UNTIL(w, cond)                                                      \
  do {                                                                              \
    while (!(cond))                                                                 \
      fp_spin(w);                                                                   \
  } while (0)
/* Spin for ms more milliseconds: callbacks that must not come get a chance. */
void fp_spin_ms(fp_world_t *w, unsigned ms);
/* The child burster (--burster URI) of the killed-peer case. */
int fp_burster_main(const char *uri);

/* fastpath_cases.c */
void ordering_eager_and_rendezvous(void **state);
void ordering_on_callers_loop(void **state);
void credits_exhausted_mid_burst(void **state);
void close_from_recv_mid_burst(void **state);
void destroy_from_on_closed(void **state);
void peer_killed_mid_burst(void **state);
void peer_closes_mid_burst(void **state);

#endif
