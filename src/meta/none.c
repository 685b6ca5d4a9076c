/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The metadata service in a build without libcurl or json-c
 * (CMakeLists.txt: RMX_WITH_META, or neither found): no handle can be
 * opened, so every other call has nothing to act on.
 */
#include "rmx_int.h"

int rmx_meta_open(rmx_ctx_t *ctx, const char *endpoint, const char *prefix, const char *agent,
                  unsigned ttl_s, rmx_meta_cb on_open, void *arg, rmx_meta_t **m)
{
  RMX_LOG(ctx, ERROR, "meta: this rmx was built without libcurl and json-c: no metadata service");
  return RMX_ENOTSUP;
}

int rmx_meta_close(rmx_meta_t *m, rmx_meta_cb on_closed, void *arg) { return RMX_EINVAL; }

int rmx_meta_set_uri(rmx_meta_t *m, const char *uri, rmx_meta_cb cb, void *arg)
{
  return RMX_EINVAL;
}

int rmx_meta_resolve(rmx_meta_t *m, const char *agent, rmx_meta_resolve_cb cb, void *arg)
{
  return RMX_EINVAL;
}

int rmx_meta_publish(rmx_meta_t *m, const char *name, rmx_mem_t *mem, rmx_meta_cb cb, void *arg)
{
  return RMX_EINVAL;
}

int rmx_meta_withdraw(rmx_meta_t *m, const char *name, rmx_meta_cb cb, void *arg)
{
  return RMX_EINVAL;
}

int rmx_meta_find(rmx_meta_t *m, const char *agent, const char *name, rmx_meta_find_cb cb,
                  void *arg)
{
  return RMX_EINVAL;
}

int rmx_meta_watch(rmx_meta_t *m, const char *agent, rmx_meta_watch_cb cb, void *arg,
                   rmx_meta_watch_t **w)
{
  return RMX_EINVAL;
}

int rmx_meta_unwatch(rmx_meta_watch_t *w) { return RMX_EINVAL; }
