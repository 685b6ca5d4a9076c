/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What rmx-xfer's parts share: the server's key message and control requests,
 * the options of a run, and the entry points of the server (xfer_server.c),
 * the client (rmx-xfer.c, xfer_client.c) and the registration-cost mode
 * (xfer_reg.c). The byte pattern and the latency statistics are rmx-perf's
 * (perf.h, perf_report.c).
 */
#ifndef RMX_XFER_BENCH_H
#define RMX_XFER_BENCH_H

#include <pthread.h>
#include <rmx/rmx.h>
#include <stddef.h>
#include <stdint.h>

#define XFER_KEY_MAGIC 0x594b5852u  /* "RXKY": the server's first message */
#define XFER_NOTE_MAGIC 0x544e5852u /* "RXNT": a write request's notification */
#define XFER_REPLY_MAGIC 0x50525852u /* "RXRP": the server's answer to a control request */
enum { XCTL_FILL, XCTL_VERIFY, XCTL_NOTES };

/* The first message on every connection: the region's length, then a key
 * to it packed for that connection alone (rmx_mem_pack_for). */
typedef struct xfer_key_hdr {
  uint32_t magic, key_len;
  uint64_t region_len;
} xfer_key_hdr_t;

/* A control request, in a message. FILL: [off, off + len) gets the pattern (arg 1) or
 * its complement (arg 0); VERIFY: counts the bytes there that are not the
 * pattern; NOTES: what this connection's notifications came to. */
typedef struct xfer_ctl {
  uint32_t cmd, arg;
  uint64_t off, len;
} xfer_ctl_t;

typedef struct xfer_ctl_reply {
  uint32_t magic;
  int32_t status;   /* 0, or RMX_EINVAL: a range outside the region, an unknown request */
  uint64_t a, b, c; /* VERIFY: checked, bad; NOTES: count, sum of seq, malformed */
} xfer_ctl_reply_t;

typedef struct xfer_note {
  uint32_t magic, thread;
  uint64_t seq;
} xfer_note_t;

typedef struct xfer_opts {
  const char *uri;
  const char *etcd;       /* lookup: an etcd endpoint to publish and find the names in */
  uint64_t block, batch, inflight, total, seconds, threads, warmup, count;
  const char *rail[RMX_RAILS_MAX]; /* client: a rail to each; server: listens there too */
  int nrail;
  uint64_t size;          /* server region; reg: the largest size */
  int op;                 /* RMX_XFER_WRITE or RMX_XFER_READ */
  int notify, check, json, contig, cache, huge, verbs;
  double ns_per_tick;     /* perf_clock.h's calibration, made once for every thread */
} xfer_opts_t;

/* One client thread: what it is given, and its results. */
typedef struct xfer_thr_res {
  const xfer_opts_t *o;
  int id;
  pthread_barrier_t *barrier; /* all threads: prepared; warmed up */
  uint64_t requests, bytes, notes, checked, post_ticks, posts;
  uint64_t misses_prep, misses_run, hits_run; /* registration cache, around the timed part */
  uint64_t t0, t1;        /* perf_ticks() of its first post and its last completion */
  double *lat;            /* us, one per timed request */
  size_t nlat;
  char transport[16];
  uint64_t lane_bytes[RMX_RAILS_MAX + 1]; /* the connection's, then each rail's */
  int failed;
} xfer_thr_res_t;

int xfer_server(rmx_ctx_t *ctx, const char *uri, uint64_t size, const char *const *also,
                int nalso);
/* The name the server publishes its region under (clients with rails look it up). */
#define XFER_NAME "rmx-xfer/region"
int xfer_reg(const xfer_opts_t *o);
/* rmx-xfer lookup (xfer_lookup.c): o->size names, looked up. */
int xfer_lookup(const xfer_opts_t *o);
/* ibv_reg_mr beside it (xfer_ibv.c): open the first device's domain (0 or
 * -1, always -1 without rdma-core), time one ibv_reg_mr and ibv_dereg_mr of
 * p in ms (-1: failed), close. */
int xfer_ibv_open(void);
void xfer_ibv_cost(void *p, size_t len, double ns_per_tick, double *reg, double *dereg);
void xfer_ibv_close(void);
/* One client thread (xfer_client.c): connect, prepare, warm up, run, check.
 * arg is its xfer_thr_res_t; it waits twice on the barrier, whatever fails. */
void *xfer_thread(void *arg);

#endif
