/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs transport's internals: RC queue pairs through rdma_cm. */
#ifndef RMX_VERBS_H
#define RMX_VERBS_H

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <uv.h>

#include "../transport.h"

#define VB_BOUNCE RMX_TP_SMALL_FRAME /* per send slot: frames too big to inline, with no lkey */
#define VB_SIG_EVERY 16    /* at most this many unsignaled sends in a row */
#define VB_POLL_BATCH 32
#define VB_SPIN_CHECK 16   /* adaptive: empty polls per clock read */
#define VB_POLL_SPIN 32    /* poll and adaptive: empty polls per loop turn */
#define VB_ACK_EVERY 64    /* CQ events acknowledged in batches: acking locks */
/* A remote access error on a live connection is held this long for the
 * peer's disconnect (a peer that went away), and a side that refused its
 * live peer waits the longer one before its own (cq.c, "Whose refusal"). */
#define VB_REFUSAL_HOLD_MS 300
#define VB_REFUSED_LINGER_MS 1500
#define VB_INLINE_WANT 256
/* Devices differ in how much they inline: a QP asks for these in turn until
 * one fits (rmx__vb_qp_create; devinfo.c probes the same way). */
#define VB_INLINE_TRY {VB_INLINE_WANT, 64, 0}
/* On the shared receive queue, where connections are many, a small queue
 * of small entries: no more inline than the three SGEs take anyway (rxe's
 * entry is then 256 B, not 512), larger copies from registered bounce
 * areas, and 6 entries (7 with the one kept for BYE: rxe's ring of 8 then
 * fits a page with its header). The provider's ring is most of what an
 * idle connection costs there (docs/scaling.md). */
#define VB_INLINE_TRY_SRQ {3 * 16, 32, 0}
#define VB_SRQ_SQ 6
#define VB_SQ_MIN 3  /* a window's bind, a send, and a read's part (qp.c) */
#define VB_PDATA_MAX 256
#define VB_REJECT_MAGIC 0x52584d52u /* "RMXR": our reject carries a status */
#define VB_RX_TAG 1u       /* low bit of wr_id: a receive buffer, not a send slot */

/* A completion queue shared by some of a device's QPs. Each QP reserves
 * room for every completion it can raise (its send and receive depths);
 * a closing QP gives back what can no longer come. */
typedef struct vb_cq {
  struct ibv_cq *cq;
  int size, used;
  unsigned unacked;        /* events taken, acknowledged in batches */
  uint8_t srq_room;        /* holds room for every shared receive buffer */
} vb_cq_t;

#define VB_CQ_FIRST 4096   /* entries of a device's first CQ; grown, then more added */
#define VB_CQ_MAX 64       /* CQs per device */

/* One device opened by the context: a PD, and CQs shared by its QPs, added
 * as connections need room, all on one completion channel. */
struct vb_async_reader;
typedef struct vb_dev {
  rmx_list_t link;
  struct rmx_tp *tp;
  struct ibv_context *verbs;
  struct ibv_pd *pd;
  struct ibv_comp_channel *chan;
  vb_cq_t cqs[VB_CQ_MAX];
  int ncq;
  uint64_t cq_empty_gen;   /* times a poll found every CQ empty */
  /* RMX_SRQ (srq.c): the shared receive queue, made by its first QP */
  struct ibv_srq *srq;
  struct vb_rx *srq_rx;
  uint8_t *srq_mem;
  struct ibv_mr *srq_mr;
  uint32_t srq_depth;
  uint64_t srq_limits;     /* limit events seen */
  struct ibv_recv_wr *srq_repost, *srq_repost_last;
  /* every QP of the device by number (srq.c) */
  struct rmx_tp_conn **qpn_map;
  uint32_t qpn_cap, nqp;
  uv_poll_t chan_poll;
  /* adaptive progress: the channel is not armed while spinning, and the
   * idle handler polls the CQ until it has been quiet for spin_ns */
  int spinning;
  int spin_active;         /* a post since the last poll */
  uint32_t spin_empty;     /* empty polls since the last activity */
  uint64_t spin_quiet;     /* uv_hrtime when quiet was first seen; 0: not yet */
  /* async events: the process's reader for this device queues them in the
   * inbox (under its lock) and wakes us; see async.c */
  struct vb_async_reader *reader;
  rmx_list_t async_link;   /* in the reader's subscribers */
  rmx_list_t async_inbox;
  uv_async_t async_wake;
  int handles;
  struct ibv_device_attr attr;
  uint64_t port_max_msg[4]; /* per port (1 to 4): 0 until asked */
  uint8_t windows;         /* keys scoped by type-2 memory windows bound to a QP */
  uint8_t pd_per_conn;     /* RMX_KEY_SCOPE=pd, auto without windows, or not the
                              first device: pd.c */
  uint8_t told_no_cap;     /* rmx_mem_pack refused in PD mode: logged once (first device) */
  char name[64];
} vb_dev_t;

typedef enum {
  SLOT_FREE, SLOT_SEND, SLOT_READ, SLOT_WRITE, SLOT_ATOMIC, SLOT_INTERNAL, SLOT_DRAIN
} slot_kind_t;

/* RMX_KEY_SCOPE=pd: a connection's own protection domain (pd.c), freed
 * when its connection's QP and the last MR in it are gone. */
typedef struct vb_pd {
  struct rmx_tp *tp;
  struct ibv_pd *pd;
  unsigned refs;           /* the connection, and each MR in it */
} vb_pd_t;

/* RMX_KEY_SCOPE=pd: a registration's local MR in one connection's PD, made
 * the first time the registration is used there: in both the connection's
 * and the registration's lists, released by whichever ends first. */
typedef struct vb_pdmr {
  rmx_list_t conn_link;    /* in tc->pdmrs */
  rmx_list_t mem_link;     /* in rmx_tp_mem.pdmrs */
  struct rmx_tp_conn *tc;
  struct rmx_tp_mem *m;
  struct ibv_mr *mr;
} vb_pdmr_t;

/* One send-queue entry; wr_id points at it. */
typedef struct vb_slot {
  struct rmx_tp_conn *tc;
  void *op;
  uint8_t kind;
  uint8_t signaled;
  uint64_t *old;       /* atomics: the caller's word; the NIC writes bounce */
  uint8_t *bounce;
  struct ibv_send_wr wr;
  struct ibv_sge sge[RMX_TP_MAX_SGE];
} vb_slot_t;

/* One receive buffer; wr_id points at it. A shared one (RMX_SRQ) has no
 * connection, only its device. */
typedef struct vb_rx {
  struct rmx_tp_conn *tc;
  struct vb_dev *dev;
  struct ibv_recv_wr wr;
  struct ibv_sge sge;
} vb_rx_t;

typedef enum {
  VC_RESOLVING, /* active: address and route */
  VC_CONNECTING,
  VC_REQUESTED, /* passive: the core is deciding */
  VC_ACCEPTING,
  VC_UP,
  VC_DRAINING,  /* closing: waiting for the flush of everything posted */
  VC_DONE,
} vc_state_t;

struct rmx_tp_conn {
  rmx_list_t link; /* in tp->conns */
  struct rmx_tp *tp;
  void *owner;
  struct rdma_cm_id *id;
  vb_dev_t *dev;
  struct ibv_qp *qp;
  vb_cq_t *cq;             /* its QP's: both queues complete there */
  int cq_resv;             /* entries of cq it holds */
  uint32_t qpn;
  uint8_t srq, in_map;     /* receives from the device's SRQ; in dev->qpn_map */
  struct ibv_pd *pd;       /* its QP's: own_pd's, or the device's */
  vb_pd_t *own_pd;         /* RMX_KEY_SCOPE=pd: from the QP's creation to its end */
  rmx_list_t pdmrs;        /* RMX_KEY_SCOPE=pd: registrations' MRs in own_pd */
  vc_state_t state;
  uint8_t passive, established, dead, closing, reaped;
  uint8_t undrained;       /* the drain could not start: completions may linger */
  uint8_t refused;         /* this side refused the live peer: its DREQ lingers */
  uint8_t held;            /* a remote access error, held for the peer's DREQ */
  struct vb_slot *held_slot, *held_upto; /* the slot that failed; the last since */
  uint64_t park_gen;       /* undrained: dev->cq_empty_gen when the QP went */
  int fail_status;         /* a failure to report from the loop */
  uint8_t hello[VB_PDATA_MAX];
  size_t hello_len;
  char peer[64];           /* the peer's address, for logs that name it */
  uv_timer_t timer;
  int timer_open;

  /* send queue: a ring of slots, oldest at tail */
  vb_slot_t *slots;
  uint32_t sq_depth, head, tail, posted_unsig;
  uint32_t sig_every;      /* at most this many unsignaled sends in a row */
  uint8_t unsig_ops;       /* an unsignaled slot since the last signaled one carries an op */
  uint8_t want_room;       /* a post was refused for a full ring: the owner hears when
                              a completion frees room (cq.c complete_upto) */
  struct ibv_send_wr *chain, *chain_last; /* built, not yet posted */
  rmx_list_t flush_link;   /* in tp->unflushed while chain is non-empty */
  uint32_t max_inline;
  uint8_t *bounce;         /* sq_depth * VB_BOUNCE: in rx_mr, except where the QP
                              inlines a whole one (every copied send is inlined) */
  uint8_t *atomics;        /* sq_depth * 8, in rx_mr: atomics' results */
  uint64_t max_msg;        /* largest single RDMA operation */

  /* receive queue */
  vb_rx_t *rx;
  uint32_t rx_count;
  size_t rx_size;
  uint8_t *rx_mem;
  struct ibv_mr *rx_mr;
  struct ibv_recv_wr *repost, *repost_last;
  rmx_list_t repost_link;  /* in tp->repost when repost is non-empty */

  /* memory windows bound to this QP (rmx_tp_mem.link), and those whose
   * bind waits for room in the send ring (wait_link), in order */
  rmx_list_t windows;
  rmx_list_t bind_wait;

  /* draining: the send queue by a marker, the receive queue by count
   * (some rxe kernels never flush a receive posted after the error state) */
  int drain_send_seen;
  uint32_t rx_posted;      /* receive buffers on the QP, not yet completed */
  vb_slot_t drain_slot;
};

/* A connect request the listener holds while the core has paused it, or
 * one a group's gate took (gate.c), on its way to a member's listener. */
typedef struct vb_held {
  rmx_tp_raw_t raw;
  struct rdma_cm_id *id;
  uint64_t since;          /* uv_now when it came */
  size_t len;
  uint8_t pd[VB_PDATA_MAX];
} vb_held_t;

#define VB_BACKLOG 1024    /* requests held at most while paused; more are refused */

struct rmx_tp_listener {
  struct rmx_tp *tp;
  void *owner;
  struct rdma_cm_id *id;
  uint8_t paused;
  rmx_list_t held;         /* vb_held_t, oldest first */
  uint32_t nheld;
  uv_timer_t timer;        /* takes held requests on resume, refuses stale ones */
};

/*
 * One registration (mem.c). On a device with type-2 memory windows, memory
 * with remote rights is registered without them (IBV_ACCESS_MW_BIND only):
 * peers reach it through a window bound to one QP (scoped: mw and tc set),
 * or, once opened as a capability, through a second MR with remote access.
 * With a PD per connection (pd.c), a scoped registration or a grant is an
 * MR in that connection's PD (in_pd), with the remote rights; one without
 * scope has no MR of its own (mr NULL), only one per PD it is used in.
 */
struct rmx_tp_mem {
  struct rmx_tp *tp;
  struct ibv_mr *mr;       /* local access and windows: its own, or parent's */
  struct ibv_mr *open_mr;  /* mem_open: the capability's remote access */
  struct rmx_tp_mem *parent; /* a grant: the registration it is a window on */
  struct ibv_mw *mw;       /* scoped: the window bound to tc's QP */
  struct rmx_tp_conn *tc;  /* scoped: that connection; NULL once it is freed */
  rmx_list_t link;         /* in tc->windows */
  rmx_list_t wait_link;    /* in tc->bind_wait while waiting is set */
  uint8_t waiting;
  vb_pd_t *in_pd;          /* PD mode: mr is in this connection's PD */
  rmx_list_t pdmrs;        /* PD mode: vb_pdmr_t.mem_link, one per PD used in */
  vb_pdmr_t *hit;          /* PD mode: the one last found */
  unsigned local;          /* IBV_ACCESS_LOCAL_WRITE or 0: for those MRs */
  void *addr;
  size_t len;
  unsigned remote;         /* IBV_ACCESS_REMOTE_* a peer gets */
  uint32_t rkey;           /* what peers name it by */
};

struct rmx_tp {
  const rmx_tp_env_t *env; /* = &env_copy */
  rmx_tp_env_t env_copy;    /* its cfg points at cfg_copy */
  rmx_config_t cfg_copy;
  uv_loop_t *loop;
  struct rdma_event_channel *ech;
  uv_poll_t ech_poll;
  uv_idle_t idle;          /* reaping, deferred failures, and poll mode */
  rmx_list_t devs;
  vb_dev_t *dev;           /* the first device opened: registrations without a
                              connection, capability keys (dev.c) */
  rmx_list_t conns;
  rmx_list_t lingering; /* vb_linger_t: ids of refused peers, destroyed late (ep.c) */
  rmx_list_t repost;       /* conns with receive buffers to give back */
  rmx_list_t unflushed;    /* conns with requests built, not yet posted */
  rmx_list_t parked;       /* closed undrained conns, kept until the CQ is clear */
  uint32_t live;           /* conns and listeners not yet freed */
  uint64_t reg_bytes;      /* registered for itself: QPs' regions, SRQs */
  uint64_t refused;        /* QPs refused for want of CQ room or of QPs (stats) */
  int handles;
  int finishing;
  int polling;             /* RMX_PROGRESS=poll */
  uint64_t spin_ns;        /* RMX_PROGRESS=adaptive: spin_us in ns; else 0 */
  rmx__ratelimit_t rl_refused; /* refused remote accesses, refused connects */
  /* the instance's own, set by vb_init: see vb_kick and vb_tp_unlive */
  uv_idle_cb idle_cb;
  void (*free_cb)(struct rmx_tp *tp);
};

/*
 * The objects, one file each, each calling only those listed after it (the
 * file graph has no cycle): verbs.c (the instance: init/fini, the idle
 * handler, the ops table), cm.c (rdma_cm: connect,
 * listen, accept, reject, routes), dev.c (a device: PD, CQ, completion
 * channel), async.c (the per-process async event reader and its routing),
 * cq.c (arming, draining and dispatching completions), mem.c (registrations
 * and memory windows), qp.c (queue pairs: creation, the send ring, posting,
 * window binds, flush), ep.c (a connection's end: fail,
 * close, drain, reap, parking), pd.c (RMX_KEY_SCOPE=pd: a protection
 * domain per connection, and registrations' MRs in it), cqs.c (the
 * device's CQs and the room QPs reserve in them), srq.c (the shared
 * receive queue, and QPs by number), err.c (errors to
 * RMX_E*); devinfo.c lists
 * the host's devices without an instance. What lower objects need of the
 * instance they reach through the two callbacks it leaves in struct rmx_tp.
 */

static inline int vb_set_nonblock(int fd)
{
  int fl = fcntl(fd, F_GETFL);
  return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Start the instance's idle handler (reaping, deferred failures, poll mode). */
static inline void vb_kick(struct rmx_tp *tp)
{
  if (!tp->finishing)
    uv_idle_start(&tp->idle, tp->idle_cb);
}

/* A connection or listener is made: while any lives, the event channel
 * keeps the loop running. */
static inline void vb_tp_live(struct rmx_tp *tp)
{
  if (tp->live++ == 0)
    uv_ref((uv_handle_t *)&tp->ech_poll);
}

/* One is freed: after fini, the last one out, with every handle closed,
 * frees the instance. */
static inline void vb_tp_unlive(struct rmx_tp *tp)
{
  if (--tp->live == 0) {
    if (!tp->finishing)
      uv_unref((uv_handle_t *)&tp->ech_poll);
    else if (tp->handles == 0)
      tp->free_cb(tp);
  }
}

/* err.c */
int rmx__vb_err_from_errno(int e);
uint8_t rmx__vb_ack_timeout_exp(uint32_t ms);
int rmx__vb_reg_err(struct rmx_tp *tp, size_t len, int e);
int rmx__vb_wc_status(enum ibv_wc_status s);

/* ep.c */
void rmx__vb_raise(struct rmx_tp_conn *tc, rmx_tp_ev_type_t t, int status, void *op,
                   const void *data, size_t len);
void rmx__vb_slot_fire(struct rmx_tp_conn *tc, vb_slot_t *s, int status);
void rmx__vb_fail_slots(struct rmx_tp_conn *tc);
void rmx__vb_qp_destroy_qp(struct rmx_tp_conn *tc);
void rmx__vb_qp_destroy(struct rmx_tp_conn *tc);
void rmx__vb_check_drained(struct rmx_tp_conn *tc);
void rmx__vb_fail(struct rmx_tp_conn *tc, int status);
void rmx__vb_close(struct rmx_tp_conn *tc);
void rmx__vb_conn_reap(struct rmx_tp_conn *tc);
void rmx__vb_parked_sweep(struct rmx_tp *tp, int all);

/* pd.c */
int rmx__vb_pd_conn_open(struct rmx_tp_conn *tc);
/* After its QP and receive MR: the MRs made in it, and its reference. */
void rmx__vb_pd_conn_release(struct rmx_tp_conn *tc);
void rmx__vb_pd_unref(vb_pd_t *p);
/* m's local key on tc's PD, registering it there the first time. */
int rmx__vb_pd_lkey(struct rmx_tp_conn *tc, rmx_tp_mem_t *m, uint32_t *lkey);
/* Every MR m has in connections' PDs. */
void rmx__vb_pd_mem_release(rmx_tp_mem_t *m);

/* The local key of m on tc: its own MR's, except with a PD per connection.
 * Without one, tc is on the first device, where m has its MR unless m was
 * made for a connection on a later device (never used elsewhere). */
static inline int vb_lkey(struct rmx_tp_conn *tc, rmx_tp_mem_t *m, uint32_t *lkey)
{
  if (!tc->own_pd) {
    if (m->in_pd)
      return RMX_EINVAL;
    *lkey = m->mr->lkey;
    return 0;
  }
  return rmx__vb_pd_lkey(tc, m, lkey);
}

/* qp.c */
int rmx__vb_qp_create(struct rmx_tp_conn *tc);
/* The QP's parameters for rdma_connect/rdma_accept, with the hello. */
void rmx__vb_qp_conn_param(struct rmx_tp_conn *tc, struct rdma_conn_param *p);
/* RMX_RC_TIMEOUT_MS as the local ACK timeout, before connect or accept. */
void rmx__vb_qp_ack_timeout(struct rmx_tp_conn *tc);
/* At establishment: the timers the device took (debug), and on the SRQ a
 * longer RNR timer. */
void rmx__vb_qp_log_timers(struct rmx_tp_conn *tc);
void rmx__vb_qp_srq_timer(struct rmx_tp_conn *tc);
int rmx__vb_send(struct rmx_tp_conn *tc, const rmx_tp_sge_t *sge, int n, void *op);
int rmx__vb_read(struct rmx_tp_conn *tc, void *dst, size_t len, rmx_tp_mem_t *dst_mem,
                 uint64_t raddr, uint64_t rkey, void *op);
int rmx__vb_write(struct rmx_tp_conn *tc, const void *src, size_t len, rmx_tp_mem_t *src_mem,
                  uint64_t raddr, uint64_t rkey, const uint32_t *imm, void *op);
int rmx__vb_atomic(struct rmx_tp_conn *tc, rmx_tp_atomic_t kind, uint64_t raddr, uint64_t rkey,
                   uint64_t cmp_add, uint64_t swap, uint64_t *old, void *op);
unsigned rmx__vb_caps(struct rmx_tp_conn *tc);
size_t rmx__vb_io_max(struct rmx_tp_conn *tc);
/* Chain the binds of windows waiting on tc, as many as the ring has room
 * for: 1 when none waits any more. */
int rmx__vb_binds_chain(struct rmx_tp_conn *tc);
/* A window goes before its bind was posted: take the bind out of what is
 * built and not yet posted, if it is there. */
void rmx__vb_bind_unchain(struct rmx_tp_conn *tc, struct ibv_mw *mw);
void rmx__vb_flush(struct rmx_tp_conn *tc);
/* Post what every connection has built (the end of a batch of completions). */
void rmx__vb_flush_all(struct rmx_tp *tp);
void rmx__vb_repost_all(struct rmx_tp *tp);

/* cqs.c */
/* Add a CQ of at least @p size entries; -1 with errno set. */
int rmx__vb_cq_open(vb_dev_t *dev, int size);
/* A CQ with room for @p need more entries (growing one or adding one), or
 * NULL with the reason logged; for a QP on the SRQ (@p srq), also room
 * for every shared buffer, held once per CQ. */
vb_cq_t *rmx__vb_cq_take(vb_dev_t *dev, int need, int srq);
/* Hold only @p keep of tc's reservation (0: the QP is gone). */
void rmx__vb_cq_give(struct rmx_tp_conn *tc, int keep);

/* srq.c */
int rmx__vb_qpn_add(vb_dev_t *dev, struct rmx_tp_conn *tc);
struct rmx_tp_conn *rmx__vb_qpn_find(const vb_dev_t *dev, uint32_t qpn);
void rmx__vb_qpn_del(vb_dev_t *dev, struct rmx_tp_conn *tc);
/* The device's SRQ, made and filled the first time: 0, RMX_ENOTSUP (none
 * on this device, or a PD per connection), or why it could not be made. */
int rmx__vb_srq_get(vb_dev_t *dev);
/* A shared buffer is free again: posted at the end of the CQ drain. */
void rmx__vb_srq_give(vb_dev_t *dev, vb_rx_t *rx);
void rmx__vb_srq_repost(vb_dev_t *dev);
/* IBV_EVENT_SRQ_LIMIT_REACHED: refill, re-arm. */
void rmx__vb_srq_limit(vb_dev_t *dev);
void rmx__vb_srq_free(vb_dev_t *dev);

/* cq.c */
/* A live connection's QP went to the error state under us: refused. */
void rmx__vb_went_error(struct rmx_tp_conn *tc);
void rmx__vb_refused(struct rmx_tp_conn *tc);
void rmx__vb_linger_end_all(struct rmx_tp *tp);
void rmx__vb_hold_end(struct rmx_tp_conn *tc, int status);
void rmx__vb_cq_event(uv_poll_t *h, int status, int events);
int rmx__vb_cq_drain(vb_dev_t *dev);
void rmx__vb_spin(vb_dev_t *dev);
void rmx__vb_spin_poll(vb_dev_t *dev, int found);

/* async.c */
void rmx__vb_async_open(vb_dev_t *dev);
void rmx__vb_async_close(vb_dev_t *dev, uv_close_cb closed);

/* mem.c */
int rmx__vb_mem_reg(struct rmx_tp *tp, void *addr, size_t len, unsigned access,
                    struct rmx_tp_conn *scope, rmx_tp_mem_t **out);
int rmx__vb_mem_open(rmx_tp_mem_t *m);
int rmx__vb_mem_grant(rmx_tp_mem_t *m, struct rmx_tp_conn *tc, rmx_tp_mem_t **out);
void rmx__vb_mem_dereg(rmx_tp_mem_t *m);
uint64_t rmx__vb_mem_rkey(const rmx_tp_mem_t *m);

/* dev.c */
/* Whether a device binds type-2 memory windows (keys scoped to one QP). */
int rmx__vb_has_windows(const struct ibv_device_attr *a);
int rmx__vb_device_named(const char *want, struct ibv_device *d);
int rmx__vb_dev_get(struct rmx_tp *tp, struct ibv_context *verbs, vb_dev_t **out);
void rmx__vb_dev_release(vb_dev_t *dev);

/* devinfo.c */
int rmx__vb_devices(rmx_device_info_t **out, int *n);

/* cm.c */
void rmx__vb_cm_events(uv_poll_t *h, int status, int events);
int rmx__vb_listen(struct rmx_tp *tp, const struct sockaddr *sa, void *owner,
                   struct rmx_tp_listener **out);
int rmx__vb_listen_addr(struct rmx_tp_listener *l, struct sockaddr_storage *ss);
int rmx__vb_peer_addr(struct rmx_tp_conn *tc, struct sockaddr_storage *ss);
int rmx__vb_local_addr(struct rmx_tp_conn *tc, struct sockaddr_storage *ss);
int rmx__vb_conn_label(struct rmx_tp_conn *tc, char *buf, size_t len);
void rmx__vb_listen_close(struct rmx_tp_listener *l);
void rmx__vb_listen_pause(struct rmx_tp_listener *l, int pause);
void rmx__vb_feed(struct rmx_tp_listener *l, rmx_tp_raw_t *raw);
rmx_tp_raw_t *rmx__vb_unfeed(struct rmx_tp_listener *l);
void rmx__vb_refuse_id(struct rdma_cm_id *id, int status);
/* gate.c: a group's connection-manager listener */
int rmx__vb_gate_open(const struct sockaddr *sa, rmx_tp_gate_t **g, int *fd);
int rmx__vb_gate_addr(rmx_tp_gate_t *g, struct sockaddr_storage *ss);
int rmx__vb_gate_take(rmx_tp_gate_t *g, rmx_tp_raw_t **raw);
int rmx__vb_gate_give(rmx_tp_gate_t *g, rmx_tp_raw_t *raw, struct rmx_tp *tp);
void rmx__vb_gate_drop(rmx_tp_raw_t *raw);
void rmx__vb_gate_close(rmx_tp_gate_t *g);
int rmx__vb_connect(struct rmx_tp *tp, const struct sockaddr *sa, const void *hello, size_t len,
                    void *owner, struct rmx_tp_conn **out);
int rmx__vb_accept(struct rmx_tp_conn *tc, void *owner, const void *hello, size_t len);
void rmx__vb_reject(struct rmx_tp_conn *tc, int status);

#endif
