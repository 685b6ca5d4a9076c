/* SPDX-License-Identifier: BSD-3-Clause */
/* The one-sided suite's world, shared by its files (one_sided.c,
 * one_sided_scope.c): one context, a listener, a client connection and the
 * accepted end of it, and a registered region. */
#ifndef RMX_TEST_ONE_SIDED_H
#define RMX_TEST_ONE_SIDED_H

#include <rmx/rmx.h>
#include <stdint.h>

#include "harness.h"

#define REGION ((256u << 20) + (64u << 10))
#define GUARD 4096 /* bytes after the registered region that must never change */

typedef struct world {
  rmx_ctx_t *ctx;
  server_t s;
  client_t cl;
  rmx_conn_t *target;  /* the accepted end (of the connection accepted last) */
  uint8_t *region;     /* REGION + GUARD bytes */
  rmx_mem_t *mem;
  rmx_rkey_t *rk;
  int done, status, errors;
  int imms;
  uint32_t imm_seen[256];
  int imm_bad;
  uint32_t order[512]; /* what the target saw, messages and immediates alike */
  int norder;
} world_t;

extern world_t W;

/* Per case: a fresh world (W.cl connected to W.target, W.mem registered
 * over the region, W.rk its key on W.cl.c, key_pack's), and its end, which
 * checks that nothing landed after the region. */
int world_setup(void **state);
int world_teardown(void **state);

/* Over RDMA with a protection domain per connection (RMX_KEY_SCOPE=pd, or
 * auto on a device without type-2 memory windows) there are no capability
 * keys: rmx_mem_pack is RMX_ENOTSUP (checked here each time), and the
 * suite's keys are packed with rmx_mem_pack_for for the target end t of
 * the connection that uses them. Elsewhere: rmx_mem_pack. */
int pd_keys(void);
int key_pack(rmx_mem_t *m, rmx_conn_t *t, void *blob, size_t *len);

/* Keys packed for one connection (one_sided_scope.c). */
void scoped_key_works_only_on_its_connection(void **state);
void scoped_key_is_stable_per_connection(void **state);
void revoke_withdraws_that_key_alone(void **state);
void dereg_ends_every_key(void **state);
void connection_end_revokes_its_keys(void **state);
void scoped_key_argument_errors(void **state);

#define ONE_SIDED_SCOPE_TESTS                                                                  \
  T(scoped_key_works_only_on_its_connection), T(scoped_key_is_stable_per_connection),          \
      T(revoke_withdraws_that_key_alone), T(dereg_ends_every_key),                             \
      T(connection_end_revokes_its_keys), T(scoped_key_argument_errors)

#endif
