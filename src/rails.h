/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rails: more connections of the same transport that carry one connection's
 * transfer requests (src/rails.c). The table is shared by the connection
 * (lane 0) and its rails, and freed when the last of them lets go.
 */
#ifndef RMX_RAILS_H
#define RMX_RAILS_H

#include "rmx_int.h"

struct rmx__rails {
  /* [0] the connection; [l] rail l from the moment it is opened (or, where
   * accepted, attached) until it is freed; NULL otherwise. A rail carries
   * parts while it is established. */
  rmx_conn_t *lane[RMX__LANES];
  /* Accepting side: rail l's token on offer until its hello comes (0: none),
   * and when the offer lapses (uv_now). */
  uint64_t token[RMX__LANES];
  uint64_t due[RMX__LANES];
  uint64_t parts[RMX__LANES], bytes[RMX__LANES]; /* transfer parts each lane completed */
  struct rail_add *add[RMX__LANES]; /* connecting side: rail l's rmx_rail_add under way */
  uint8_t given; /* rail numbers given so far: the next is given + 1; never reused */
  uint8_t ready; /* bit l: rail l is attached at the accepting side (there, or told here) */
  uint8_t refs;  /* the connection and each lane still pointing here */
};

/* Lane l of c's table is a rail that may carry parts now. */
static inline rmx_conn_t *rmx__rail_up(const struct rmx__rails *t, unsigned l)
{
  rmx_conn_t *r = t->lane[l];
  return r && (t->ready >> l & 1) && r->state == RMX_CS_ESTABLISHED && r->rails == t ? r : NULL;
}

int rmx__rails_ctx_init(rmx_ctx_t *ctx);
int rmx__rail_offered(rmx_ctx_t *ctx, uint64_t token);
void rmx__rail_attach(rmx_conn_t *c);
void rmx__rails_down(rmx_conn_t *c);
void rmx__rails_conn_gone(rmx_conn_t *c);

#endif
