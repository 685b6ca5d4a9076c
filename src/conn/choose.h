/* SPDX-License-Identifier: BSD-3-Clause */
/* auto:// per peer and listeners over several transports (src/conn/choose.c). */
#ifndef RMX_CONN_CHOOSE_H
#define RMX_CONN_CHOOSE_H

#include "../rmx_int.h"

/* RMX_TRANSPORTS' transports this context can open, best first, into
 * slots: how many, or the error of the last that could not open (logged
 * when the one listed is required). */
int rmx__choose_slots(rmx_ctx_t *ctx, int slots[RMX_TP_COUNT]);
/* An auto:// connect tries these in turn; c takes the first. 0 or an error. */
int rmx__choose_auto(rmx_conn_t *c);
/* The transport of c refused its connect at the call (rc): 1 when c moved
 * on to the next one to try. */
int rmx__choose_next(rmx_conn_t *c, int rc);
/* A first connect of c failed with status: 1 when c moved on to the next
 * transport (connect.c's conn_fallback upcall then starts it). */
int rmx__choose_fallback(rmx_conn_t *c, int status);
/* The conn_fallback upcall (connect.c). */
int rmx__conn_fallback(rmx_conn_t *c, int status);
/* After l listens: the same listener over the other transports it adds
 * (auto: every one RMX_TRANSPORTS lists and this context opens; tcp and
 * rdma: shm's alias). Failures are logged; l works without them. */
void rmx__choose_aliases(rmx_listener_t *l, int is_auto);
/* Close l's aliases with it. */
void rmx__choose_aliases_close(rmx_listener_t *l);

/* reconnect.c: forget the last transport connection before a new attempt. */
void rmx__reconnect_reset(rmx_conn_t *c);

#endif
