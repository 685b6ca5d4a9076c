/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory by name: registrations published under names in their context,
 * looked up by peers over a connection. (Being built: issue 27.)
 */
#include "rmx_int.h"

int rmx_mem_publish(rmx_mem_t *m, const char *name)
{
  (void)m;
  (void)name;
  return RMX_ENOTSUP;
}

int rmx_mem_unpublish(rmx_mem_t *m)
{
  (void)m;
  return RMX_ENOTSUP;
}

int rmx_mem_lookup(rmx_conn_t *c, const char *name, uint32_t timeout_ms, rmx_lookup_cb cb,
                   void *arg)
{
  (void)c;
  (void)name;
  (void)timeout_ms;
  (void)cb;
  (void)arg;
  return RMX_ENOTSUP;
}

void rmx__names_conn_gone(rmx_conn_t *c) { (void)c; }
void rmx__names_ctx_fini(rmx_ctx_t *ctx) { (void)ctx; }
