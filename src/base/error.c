#include "error.h"

#include <rmx/rmx.h>
#include <uv.h>

const char *rmx_strerror(int err)
{
  if (err == 0)
    return "success";
  switch (err) {
#define RMX_ERR_MSG_(name, val, msg) case (val): return msg;
    RMX_ERRNO_MAP(RMX_ERR_MSG_)
#undef RMX_ERR_MSG_
  }
  return "unknown error";
}

const char *rmx_err_name(int err)
{
  if (err == 0)
    return "RMX_OK";
  switch (err) {
#define RMX_ERR_NAME_(name, val, msg) case (val): return "RMX_" #name;
    RMX_ERRNO_MAP(RMX_ERR_NAME_)
#undef RMX_ERR_NAME_
  }
  return "RMX_EUNKNOWN";
}

/* libuv's codes are negative errno values on Unix; keep the ones rmx names
 * and fold the rest into RMX_EIO so callers see one error space. */
int rmx__uv_err(int s)
{
  switch (s) {
  case 0: return 0;
  case UV_ECANCELED: return RMX_ECANCELED;
  case UV_ECONNREFUSED: return RMX_ECONNREFUSED;
  case UV_ECONNRESET: case UV_EPIPE: case UV_EOF: case UV_ECONNABORTED: return RMX_ECONNRESET;
  case UV_ETIMEDOUT: return RMX_ETIMEDOUT;
  case UV_EADDRINUSE: return RMX_EADDRINUSE;
  case UV_EADDRNOTAVAIL: return RMX_EADDRNOTAVAIL;
  case UV_EHOSTUNREACH: return RMX_EHOSTUNREACH;
  case UV_ENETUNREACH: return RMX_ENETUNREACH;
  case UV_ENOMEM: case UV_ENOBUFS: return RMX_ENOMEM;
  case UV_EINVAL: return RMX_EINVAL;
  case UV_EACCES: case UV_EPERM: return RMX_EACCES;
  case UV_ENOTCONN: return RMX_ENOTCONN;
  case UV_EAI_NONAME: case UV_EAI_AGAIN: case UV_EAI_FAIL: case UV_EAI_NODATA:
  case UV_EAI_FAMILY: case UV_EAI_SERVICE: return RMX_ENORESOLVE;
  default: return RMX_EIO;
  }
}

int32_t rmx_wire_status(int32_t v) { return v <= 0 && v > -5000 ? v : RMX_EIO; }
