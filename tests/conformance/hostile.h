/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the hostile-peer cases (hostile_*.c) share: data patterns, the rmx
 * server on this thread's loop, in-process clients, raw peers in helper
 * threads with their I/O, the heap in use, a log capture and registrations.
 * The protocol itself is rawpeer.h's.
 */
#ifndef RMX_TEST_HOSTILE_H
#define RMX_TEST_HOSTILE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <rmx/rmx.h>
#include <uv.h>

#include "rawpeer.h"

/* ---- data patterns: every byte says which buffer and which offset ---- */

#define TAG_A 0xa5 /* the hostile peer's own message */
#define TAG_B 0xb6 /* another connection's message */
#define TAG_C 0xc7
#define TAG_STALE 0xee /* what memory holds once it is no longer the peer's */

void fill(uint8_t *b, size_t n, uint8_t tag, uint64_t off);
size_t mismatches(const uint8_t *b, size_t n, uint8_t tag, uint64_t off);
/* Bytes at tag positions (offset 7 mod 8) that carry another tag. */
size_t foreign_tags(const uint8_t *b, size_t n, uint64_t off, uint8_t tag);

/* ---- the server: an rmx context on our own loop, on this thread ---- */

#define MAX_SC 64
#define KEEP_MSGS 32

typedef struct sconn {
  rmx_conn_t *c;
  int disconnects, disc_status, closed, recvs, user_closed;
  uint8_t *msgs[KEEP_MSGS];
  size_t lens[KEEP_MSGS];
} sconn_t;

typedef struct cli {
  rmx_conn_t *c;
  int connected, status, disconnects, disc_status, closed, recvs, bad, user_closed;
  uint8_t tag;
  size_t expect_len;
} cli_t;

typedef struct hostile_server {
  uv_loop_t loop;
  uv_timer_t tick;
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  int port, running;
  sconn_t sc[MAX_SC];
  int nsc;
  cli_t *clis[16];
  int ncli;
} hostile_server_t;

extern hostile_server_t S;

/* One turn of the loop: uv_run ONCE (the tick timer keeps it under 1 ms),
 * or with RMX_PROGRESS=poll rmx_ctx_progress then uv_run NOWAIT (spin.h). */
void pump_once(void);
/* Run the loop until cond. */
#define PUMP_UNTIL(cond)                                                              \
  do {                                                                                \
    uint64_t t0_ = now_ms();                                                          \
    while (!(cond)) {                                                                 \
      pump_once();                                                                    \
      if (now_ms() - t0_ > 20000)                                                     \
        fail_msg("%s:%d: timed out waiting for %s", __FILE__, __LINE__, #cond);       \
    }                                                                                 \
  } while (0)

void pump_for(unsigned ms);

typedef struct srvcfg {
  uint32_t rx_depth, connect_timeout_ms, max_handshakes, max_conns, rma_window;
  uint32_t handshake_timeout_ms;
} srvcfg_t;

/* The server's callbacks on a connection it accepted. */
void s_recv(rmx_conn_t *c, const void *d, size_t n, void *a);
void s_disc(rmx_conn_t *c, int st, void *a);
void srv_start(const srvcfg_t *o);
/* Every peer stopped, every connection closed once, the context gone. */
void srv_stop(void);

/* In-process clients (the public API): the connections that must not be
 * affected. cli_start starts a connect; the test waits for k->connected. */
void cli_start(cli_t *k);
void c_close(cli_t *k);

/* Every case's setup and teardown. */
int setup(void **state);
int teardown(void **state);

/* ---- raw peers: a TCP socket driven by a script in a helper thread ---- */

typedef struct peer peer_t;
typedef int (*script_fn)(peer_t *p);

struct peer {
  int fd;
  pthread_t th;
  script_fn script;
  void *arg;
  int iarg;
  atomic_int step, done;
  int joined;
  int failed;
  char why[512];
  hello_t srv;     /* the server's hello */
  int32_t credits; /* frames we may still send */
  uint32_t owed;   /* server frames we have not returned */
  uint64_t next_id;
  int saw_eof, timed_out;
  size_t partial; /* bytes the last failed rd_full got before failing */
  uint8_t reply[64];
  size_t reply_len;
  uint64_t u[8]; /* what a script reports */
};

/* The main thread's step, which pwait waits for; set aborting, the peers
 * wait no more. */
extern atomic_int main_step, aborting;

/* A script records what went wrong (cmocka asserts run on the main thread
 * only); the test fails with it after peer_join. */
void pfail_at(peer_t *p, const char *file, int line, const char *fmt, ...);
#define pfail(p, ...) pfail_at((p), __FILE__, __LINE__, __VA_ARGS__)
#define PCHECK(p, cond, ...)                       \
  do {                                             \
    if (!(cond)) {                                 \
      pfail((p), __VA_ARGS__);                     \
      return -1;                                   \
    }                                              \
  } while (0)

/* In the peer: tell the main thread it reached step k. */
void pmark(peer_t *p, int k);
/* In the peer: wait for the main thread's step k. */
int pwait(peer_t *p, int k);
/* A socket connected to the server. */
int raw_connect(void);
peer_t *peer_start(script_fn fn, void *arg, int iarg);
void wait_step(peer_t *p, int k);
/* Join the peer's thread and fail the test with the peer's own complaint. */
void peer_join(peer_t *p);
/* Every peer's socket shut and its thread joined. */
void peers_stop(void);

/* ---- the peer's I/O ---- */

int rd_full(peer_t *p, void *b, size_t n);
/* 0, or the errno of the failed write. */
int wr_full(peer_t *p, const void *b, size_t n);
/* Read and keep whatever comes until the server hangs up (or timeout). */
void drain(peer_t *p, unsigned ms);

/* One event from the server. */
typedef struct ev {
  uint8_t kind, tflags;
  uint32_t blen;
  /* MSG */
  uint8_t ftype, fflags;
  uint16_t fcredits;
  uint32_t flen;
  uint8_t fbody[8192];
  /* requests and responses */
  uint64_t id, addr, len, key, old;
  int32_t status;
  uint32_t dlen; /* RD_RESP: data bytes that follow on the socket */
  hello_t hello;
} ev_t;

int next_ev(peer_t *p, ev_t *e);
/* Read n bytes of data off the stream into dst, or nowhere. */
int rd_data(peer_t *p, uint8_t *dst, size_t n);
/* Send one rmx frame, returning every credit owed; spends one credit. */
int send_rmx(peer_t *p, uint8_t type, uint8_t flags, const void *body, uint32_t blen);
int handshake_with(peer_t *p, const hello_t *h);
int handshake(peer_t *p);
/* Handshake, then step 1: tell the main thread, and wait for its step 1. */
int handshake_and_wait(peer_t *p);
/* A read's answer: RD_RESP frames for id until len bytes or a nonzero
 * status. rmx frames between them are taken (credits). *got: bytes that
 * came, *end: the final status (0 when the whole length came). */
int rd_collect(peer_t *p, uint64_t id, uint8_t *dst, uint64_t len, uint64_t *got, int32_t *end,
               ev_t *e);
/* A BYE, then wait for the server to hang up. */
int goodbye(peer_t *p);
int wait_rts(peer_t *p, ev_t *e, uint64_t *id, uint64_t *addr, uint64_t *size, uint64_t *key);
/* A FIN for message id, status 0, its reserved word pad. */
int send_fin(peer_t *p, uint64_t id, uint32_t pad);

/* ---- heap in use, a log capture, registrations ---- */

size_t heap_used(void);
/* Freelists rmx keeps for reuse (bounded) and libuv's own: the slack. */
#define MEM_SLACK (1u << 20)

void cap_begin(void);
/* Stop capturing; the lines go to the real stderr too. Returns the count. */
int cap_end(char *out, size_t cap);

/* The TCP key of the last reg_and_publish, as the peers decode it. */
extern tkey_t K8;
/* Registrations are released at teardown if a test stopped early. */
rmx_mem_t *reg_track(rmx_mem_t *m);
void reg_drop(rmx_mem_t *m);
void reg_drop_all(void);
/* Register, pack, and hand the TCP key to the peers (as decoded from the
 * packed blob by the doc). */
rmx_mem_t *reg_and_publish(void *mem, size_t len, unsigned access);

/* ---- the cases, by file ---- */

void read_request_then_fin(void **state);        /* hostile_memory.c */
void write_into_deregistered_memory(void **state);
void read_of_deregistered_memory(void **state);
void destroy_with_a_registration_left(void **state);
void guessed_and_foreign_keys_are_refused(void **state); /* hostile_keys.c */
void flipped_packed_keys_are_refused(void **state);
void data_into_last_credit_is_cut_off(void **state); /* hostile_credits.c */
void rts_into_last_credit_is_cut_off(void **state);
void credit_frame_may_use_last_credit(void **state);
void write_imm_into_last_credit_is_cut_off(void **state);
void flood_past_the_window_is_cut_off(void **state);
void window_kept_exactly_is_not_cut_off(void **state);
void server_keeps_the_peers_window(void **state);
void bad_frames_close_only_that_connection(void **state); /* hostile_frames.c */
void fin_with_reserved_bits_is_refused(void **state);
void atomic_with_pad_is_refused(void **state);
void oversized_read_chunk_is_refused(void **state);
void handshake_flood_is_bounded(void **state); /* hostile_limits.c */
void connection_limit_refuses_the_next(void **state);

#endif
