/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The rails cases of the hostile-peer suite (hostile_rails*.c): the raw
 * client's side of docs/protocol.md "Rails (hello flag RAIL)" on top of
 * hostile.h's peers and server.
 */
#ifndef RMX_TEST_HOSTILE_RAILS_H
#define RMX_TEST_HOSTILE_RAILS_H

#include "hostile.h"

#define OFFER_ID 0xFFFFFF02u
#define UP_ID 0xFFFFFF03u

/* An rmx frame DATA with flags 1 (an RPC request to handler, call id id),
 * or 4 (a notification: pl alone). */
int rpc_req(peer_t *p, uint64_t id, uint32_t handler, uint8_t flags, const void *pl, uint32_t n);
/* Frames until the reply to call id (status, up to 64 payload bytes), or
 * with id 0 until one UP; UPs met are noted in p->u[6] (a bit per rail)
 * and counted in p->u[5]. */
int rpc_wait(peer_t *p, uint64_t id, int32_t *st, uint8_t *out, uint32_t *n);
/* OFFER (with payload pl): 0 with the rail's number and token, or the
 * status of the refusal, or -1 (the peer failed). */
int offer(peer_t *p, const void *pl, uint32_t n, unsigned *lane, uint64_t *token);
/* Wait for UP of rail lane on p. */
int wait_up(peer_t *p, unsigned lane);
/* A rail's socket r: a hello with these flags (2 RAIL, 1 AUTH, a nonce
 * then), token after it, len bytes in all. 0 with r open and r->srv the
 * server's hello; the REJECT's status (r closed); -1 (the peer failed). */
int rail_dial(peer_t *p, peer_t *r, uint16_t flags, uint64_t token, size_t len);

void rail_keys_stay_on_their_connection(void **state); /* hostile_rails_srv.c */
void server_hello_with_rail_is_refused(void **state);
void hostile_offers_and_ups(void **state);
void rail_lost_before_up(void **state);
void rail_never_told_up(void **state);

#endif
