/* SPDX-License-Identifier: BSD-3-Clause */
/* A transfer request's insides, shared by xfer.c (the calls) and parts.c
 * (its parts in the lanes' one-sided queues); neither is included elsewhere. */
#ifndef RMX_XFER_XFER_INT_H
#define RMX_XFER_XFER_INT_H

#include "rails.h"
#include "rmx_int.h"

typedef struct xseg {
  uint8_t *laddr;
  uint64_t raddr, rkey;
  size_t len;
  size_t entry;       /* the first entry it covers */
  rmx_tp_mem_t *lmem; /* its local registration (NULL where none is needed) */
  uint32_t ki;        /* its key in x->keys: the rails' */
} xseg_t;

/* One part posted: where in which segment. */
typedef struct xpart {
  uint32_t seg, len;
  uint64_t off;
} xpart_t;

/* One lane a post uses: the connection (0) or one of its rails (the lane
 * of an op is its connection's: conn->lane). Each reports its parts in
 * the order posted, kept in its ring. */
typedef struct xlane {
  rmx__op_t *op;   /* while this post uses the lane */
  uint8_t l, queued, dead; /* queued: op is in the lane's rmaq */
  uint32_t cap, head, n;
  uint32_t share;  /* parts it keeps out at once: an even split of the request */
  xpart_t *ring;
} xlane_t;

struct rmx_xfer {
  rmx_ctx_t *ctx;
  rmx_conn_t *c;   /* NULL once the connection is freed */
  rmx_list_t link; /* in c->xfers */
  uint8_t kind;    /* RMX_TP_EV_READ / WRITE */
  uint8_t busy;    /* posted, not ended */
  uint8_t stop;    /* a part failed: post no more */
  uint8_t notifies; /* this post carries a notification (maybe of 0 bytes) */
  uint8_t lanes_key; /* lanes every key of the request holds one for */
  uint8_t striped; /* this post uses more than one lane (each then keeps a ring) */
  xseg_t *seg;
  size_t nseg;
  size_t *elen;    /* the entries' lengths, to name the one that failed */
  size_t nent;
  uint64_t bytes;
  rmx__rc_entry_t **cached; /* per segment: the cache entry held, or NULL */
  uint64_t (*keys)[RMX__LANES]; /* the request's keys, by lane */
  size_t nkeys;
  xlane_t lane[RMX__LANES];
  xpart_t *redo;   /* parts of rails lost, to post again */
  size_t nredo, redo_cap;
  size_t most;     /* part size of this post */
  size_t next_seg, next_off; /* what is posted next */
  size_t rep_seg, rep_off;   /* one lane: the part it reports next */
  uint64_t posted, done;
  int status, lane_err;
  size_t failed;
  uint8_t *notify;
  size_t notify_len, notify_cap;
  rmx_xfer_cb cb;
  void *arg;
  rmx__deferred_t defer; /* a request with nothing to move still ends from the loop */
};

/* parts.c, for xfer.c: a lane's op goes; a request with nothing to move ends. */
void rmx__xfer_lane_put(xlane_t *ln);
void rmx__xfer_deferred_over(rmx__deferred_t *d);

#endif
