/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The kills test's server (fault_kills.c: rounds, faults, connections;
 * fault_kills_ops.c: the operations; fault_procfs.c: what the process
 * holds): its state, shared by the three.
 */
#ifndef RMX_FAULT_KILLS_SRV_H
#define RMX_FAULT_KILLS_SRV_H

#include <sys/types.h>
#include <uv.h>

#include "fault_kills.h"

#define CLEAN_OPS 48
#define CLEAN_EVERY 10
#define ROUND_BOUND_MS 60000
#define TICK_MS 2 /* how often a round's end is looked for */
#define MAX_PIECES 4
#define MAX_FDS 512
#define NOTE_LEN 16
#define HIST_MAX 32

enum { R_KILL, R_EARLY, R_STOP, R_CLEAN };
enum { E_DELAY, E_ACCEPT, E_KEY };                            /* how an early kill comes */
enum { M_SYNC, M_TURN, M_TIMER, M_COMPLETION, M_MODES };      /* when a kill comes */
enum { K_XWRITE, K_XREAD, K_WRITE, K_READ, K_SEND, K_CALL, K_KINDS, K_VERIFY = K_KINDS };
extern const char *const fk_kind_name[]; /* by K_* */

typedef struct kconn {
  rmx_conn_t *c;
  rmx_rkey_t *rk;
  int mine; /* its key carried this round's pid */
  int disc_cbs, disc_status, closed_cbs, closing;
  struct kconn *next;
} kconn_t;

typedef struct piece {
  uint32_t roff, loff, len;
} piece_t;

typedef struct kop {
  int live, kind, noted, after_fault;
  kconn_t *kc;
  size_t len;
  int np;
  piece_t p[MAX_PIECES];
  rmx_xfer_t *x;
} kop_t;

typedef struct fd_inv {
  int n, memfd_maps;
  int fd[MAX_FDS];
  char what[MAX_FDS][96];
} fd_inv_t;

/* One round: one client. Its counters are all checked at its end. */
typedef struct round {
  long no;
  int kind, mode, early_how, window;
  long kill_at, stop_after;
  pid_t pid;
  int wstatus, reaped, released, faulted, kill_pending, settled_ticks, left_behind, stuck;
  kconn_t *kc; /* the round's connection, once its key came */
  long adopted, strays;
  long started, ok, failed, outstanding, outstanding_at_fault, outstanding_at_disc, after_fault;
  long doubles, late, after_closed, ok_after_fail, ok_after_fault, canceled, blamed, bad_data;
  long issue_errors, issue_down;
  long sends_ok, notes_ok;
  int verify_sent, verified, disc_status;
  int big_calls; /* a stop round of large calls only: stopped mid-answer */
  int first_err, first_err_kind, other_err, other_err_kind; /* the statuses failures had */
  uint32_t nranges;
  double t_fault, fault_to_disc; /* ms; fault_to_disc < 0: no disconnect */
} round_t;

typedef struct fk_server {
  const fk_opts_t *o;
  uint64_t rng;
  char exe[4096], uri[256];
  rmx_ctx_t *ctx;
  rmx_listener_t *l;
  uint8_t *src, *arena;
  rmx_mem_t *src_mem, *arena_mem;
  uv_timer_t kill_timer, tick_timer, bound_timer;
  kconn_t *conns;
  int nopen;
  kop_t ops[FK_WINDOW + 1]; /* the last: the verify call */
  fk_verify_req_t vq;
  fk_verify_rep_t vrep;
  fd_inv_t base, now;
  round_t r;
  long rounds[4], kill_started, started, ok, failed, outstanding_at_fault, after_fault;
  long stops_done, hist_n, early_hows[3], modes[M_MODES];
  int hist_kind[HIST_MAX], hist_code[HIST_MAX];
  long hist_count[HIST_MAX];
  int finals_done, failed_run, stopping;
  double t0;
  double disc_ms[2][2]; /* kills, stops: the least and most from fault to on_disconnect */
} fk_server_t;

extern fk_server_t K;
#define R K.r

/* fault_kills_ops.c */
uint64_t fk_rnd64(void); /* splitmix64: the seed alone replays the draws */
long fk_rnd(long n);     /* 0 .. n-1 */
void fk_pump(void);      /* keep the round's window full */

/* fault_kills.c */
void fk_do_fault(int sig); /* SIGKILL or SIGSTOP the round's client, once */
void fk_on_kill_timer(uv_timer_t *t);
void fk_conn_close(kconn_t *kc);

/* fault_procfs.c: this process's fds (each, and what it is) and its
 * memfd:rmx mappings */
void fk_inventory(fd_inv_t *v);
int fk_inv_same(const fd_inv_t *a, const fd_inv_t *b);
void fk_inv_print(const char *title, const fd_inv_t *v);
void fk_inv_diff(const fd_inv_t *base, const fd_inv_t *now); /* a line per difference */

#endif
