/* SPDX-License-Identifier: BSD-3-Clause */
/* Memory by name (src/names.c): what the context calls. */
#ifndef RMX_NAMES_H
#define RMX_NAMES_H

#include "rmx_int.h"

/* Serve lookups and forgets in ctx (at its creation): 0 or RMX_ENOMEM; on
 * failure the context's own error path frees what was made. */
int rmx__names_ctx_init(rmx_ctx_t *ctx);
void rmx__names_ctx_fini(rmx_ctx_t *ctx);
/* c is being freed (after its on_closed): its cache goes. */
void rmx__names_conn_gone(rmx_conn_t *c);
/* The name_forget upcall (reg.c): m's name is withdrawn (c NULL), or the
 * key c's peer holds to m is revoked; the peers concerned are told. */
void rmx__names_forget(rmx_mem_t *m, rmx_conn_t *c);

#endif
