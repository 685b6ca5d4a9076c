/* SPDX-License-Identifier: BSD-3-Clause */
/* Liveness (src/msg/alive.c): keepalives, silence, RMX_IDLE_TIMEOUT_MS and
 * RMX_EVICT_IDLE. Included by rmx_int.h after the objects it works on. */
#ifndef RMX_MSG_ALIVE_H
#define RMX_MSG_ALIVE_H

void rmx__alive_ctx_init(rmx_ctx_t *ctx);
uint32_t rmx__alive_limit(const rmx_config_t *cfg);
void rmx__alive_start(rmx_conn_t *c);
/* RMX_EVICT_IDLE: an accepted connection is established (listed last). */
void rmx__alive_listed(rmx_conn_t *c, rmx_listener_t *l);
/* RMX_EVICT_IDLE: the listener's established connection that has carried
 * no message for the longest, or NULL; closed (RMX_ECANCELED) to make room
 * for the peer named addr. */
rmx_conn_t *rmx__alive_idlest(rmx_listener_t *l);
void rmx__alive_evict(rmx_conn_t *c, const char *addr);
/* A message came or went (now, uv_now): for RMX_IDLE_TIMEOUT_MS, and a
 * listed connection moves to its listener's tail (RMX_EVICT_IDLE), which
 * keeps that list in order of last_msg at O(1) a message. */
static inline void rmx__alive_msg(rmx_conn_t *c, uint64_t now)
{
  c->ka.last_msg = now;
  if (!rmx_list_empty(&c->ka.evict_link)) {
    rmx_list_del(&c->ka.evict_link);
    rmx_list_push(&c->from->evict, &c->ka.evict_link);
  }
}

#endif
