/* SPDX-License-Identifier: BSD-3-Clause */
/* What fuzz_core.c (the core over a fake transport) shares with its
 * transfer-request steps (fuzz_core_xfer.c). */
#ifndef RMX_FUZZ_CORE_H
#define RMX_FUZZ_CORE_H

#include "fuzz.h"
#include "rmx_int.h"

/* The program the fuzzer writes, read a byte at a time (0 once it ends). */
typedef struct prog {
  const uint8_t *p;
  size_t n;
} prog_t;

static inline unsigned next8(prog_t *g)
{
  if (!g->n)
    return 0;
  g->n--;
  return *g->p++;
}
static inline unsigned next16(prog_t *g) { unsigned lo = next8(g); return lo | next8(g) << 8; }

struct app {
  rmx_ctx_t *ctx;
  rmx_conn_t *c;
  int connected, disconnects, closed, app_closed;
  uint64_t last_call;
  rmx_rpc_req_t *held[8];
  int nheld;
};
extern struct app app;
extern size_t fk_io_max_now; /* the fake's io_max: max_io, or less */
extern int fk_fail_post;     /* the fake refuses its next read or write (RMX_EIO) */
extern int fk_reorder;       /* it reports reads and writes in any order (not the contract's) */

void fc_close(void); /* the application closes its connection (once) */
int fc_alive(void);  /* the fake transport still moves data */
void fc_recv(const void *f, size_t n, unsigned credits); /* a frame from the peer */

/* ---- fuzz_core_xfer.c: transfer requests and notifications ---- */

/* Programs whose hello byte has bit 7 set use these steps too. */
extern int fx_on;
void fx_begin(prog_t *g, rmx_wire_hello_t *h); /* before ESTABLISHED */
void fx_cbs(rmx_conn_cbs_t *cbs);              /* the callbacks' on_notify */
void fx_step(prog_t *g, unsigned what);
/* The fake posted a read or write (op as the core passed it): the tag of
 * the transfer request it belongs to, 0 for any other op. */
int fx_rma_posted(void *op, rmx_tp_ev_type_t type, const void *addr, size_t len,
                  uint64_t raddr, uint64_t rkey, uint32_t *gen);
/* ... and is about to report it with status. */
void fx_rma_done(int tag, uint32_t gen, const void *addr, size_t len, int status);
/* The core handed the fake a DATA frame flagged NOTIFY. */
void fx_notify_sent(const rmx_frame_t *fr);
/* Inside on_closed: every post ended; posting is refused, kept
 * notifications may still be taken. */
void fx_closed(void);
/* The connection's on_closed ran; the context is about to be destroyed. */
void fx_end(void);

#endif
