/* SPDX-License-Identifier: BSD-3-Clause */
/* The guard's test (guard.c, guard_xfer.c): its world and its helpers. */
#ifndef RMX_TEST_GUARD_H
#define RMX_TEST_GUARD_H

#include <rmx/rmx.h>

#include "harness.h"

#define STRIKES 4
#define BAN_MS 3000
#define FORGED_MAX 64

typedef struct world {
  rmx_ctx_t *ctx;
  rmx_ctx_t *ctx2; /* its registrations' keys are forgeries to ctx */
  server_t s, s2;  /* s2: ctx2's, which opens its transport */
  client_t cl;
  uint8_t region[4096], buf[64];
  rmx_mem_t *good;
  rmx_rkey_t *good_rk;
  rmx_mem_t *forged_mem[FORGED_MAX];
  rmx_rkey_t *forged_rk[FORGED_MAX];
  int nforged;
  int done, status;
} world_t;

/* The guard's lines: all of them, the ones that ban, the ones that
 * refuse; and the lines of transfer entries refused at prep. */
typedef struct guard_log {
  int lines, bans, refusals, named;
  unsigned held; /* the "(and N more like it not logged ...)" counts */
  char last[512];
  int xfer_lines, xfer_warn;
  char xfer_last[512];
} guard_log_t;

extern world_t W;
extern guard_log_t L;

/* Both ends in W.ctx, the guard at strikes (0: off) in 10 s, a ban of BAN_MS. */
void start(uint32_t strikes);
void stop(void);
/* m's capability key, unpacked on c. */
rmx_rkey_t *share(rmx_mem_t *m, rmx_conn_t *c);
/* A key the server never gave out (W.ctx2's), unpacked on c; stop releases it. */
rmx_rkey_t *forged(rmx_conn_t *c);
/* One read on the standing connection; its status. */
int read_with(rmx_rkey_t *rk);
/* One refused read with a new forged key: one strike. */
void bad_read(void);
/* A new connection from the same address: what on_connected said. */
int try_connect(void);

void stale_keys_strike_nobody(void **state);
void a_request_of_forged_entries_strikes_once(void **state);
void a_key_revoked_from_another_connection_still_strikes(void **state);
void refused_entries_are_logged_once_a_second(void **state);

#endif
