/* SPDX-License-Identifier: BSD-3-Clause */
#include "error.h"

#include <rmx/rmx.h>
#include <uv.h>

/* One case per code: -Wswitch (with -Werror) fails the build when a code
 * has no name and sentence here. */
#define CODES(X)                                                              \
  X(EINVAL, "invalid argument")                                               \
  X(ENOMEM, "out of memory")                                                  \
  X(EAGAIN, "resource temporarily unavailable")                               \
  X(EBUSY, "object still has open children")                                 \
  X(EALREADY, "operation already in progress")                                \
  X(ECANCELED, "operation canceled")                                          \
  X(ECONNRESET, "connection lost")                                            \
  X(ECONNREFUSED, "connection refused")                                       \
  X(ENOTCONN, "connection is not established")                                \
  X(EMSGSIZE, "message larger than the configured maximum")                   \
  X(ETIMEDOUT, "timed out")                                                   \
  X(EPROTO, "protocol error: malformed or unexpected frame")                  \
  X(EACCES, "access denied")                                                  \
  X(ENOTSUP, "operation not supported by this transport")                     \
  X(ENODEV, "no usable RDMA device")                                          \
  X(EADDRINUSE, "address already in use")                                     \
  X(EADDRNOTAVAIL, "address not available")                                   \
  X(EHOSTUNREACH, "no route to host")                                         \
  X(ENETUNREACH, "network unreachable")                                       \
  X(ENOENT, "no such entry")                                                  \
  X(EIO, "I/O error")                                                         \
  X(EMFILE, "out of file descriptors: raise the descriptor limit (ulimit -n)") \
  X(EINPROGRESS, "still under way")                                           \
  X(EVERSION, "peer speaks another rmx protocol version")                     \
  X(ENORESOLVE, "host name did not resolve")                                  \
  X(EMEMLOCK, "cannot pin memory: raise the locked-memory limit (ulimit -l)") \
  X(EUNKNOWN, "unknown error")                                                \
  X(ENOHANDLER, "no RPC handler registered for that id at the peer")

const char *rmx_strerror(int err)
{
  if (err == 0)
    return "success";
  switch ((rmx_err_t)err) {
#define MSG_(name, msg) case RMX_##name: return msg;
    CODES(MSG_)
#undef MSG_
  }
  return "unknown error";
}

const char *rmx_err_name(int err)
{
  if (err == 0)
    return "RMX_OK";
  switch ((rmx_err_t)err) {
#define NAME_(name, msg) case RMX_##name: return "RMX_" #name;
    CODES(NAME_)
#undef NAME_
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
  case UV_EMFILE: case UV_ENFILE: return RMX_EMFILE;
  case UV_EINVAL: return RMX_EINVAL;
  case UV_EACCES: case UV_EPERM: return RMX_EACCES;
  case UV_ENOTCONN: return RMX_ENOTCONN;
  case UV_EAI_NONAME: case UV_EAI_AGAIN: case UV_EAI_FAIL: case UV_EAI_NODATA:
  case UV_EAI_FAMILY: case UV_EAI_SERVICE: return RMX_ENORESOLVE;
  default: return RMX_EIO;
  }
}

/* 1 for a code rmx names (the list above), 0 for anything else. */
static int err_known(int32_t v)
{
  switch ((rmx_err_t)v) {
#define KNOWN_(name, msg) case RMX_##name: return 1;
    CODES(KNOWN_)
#undef KNOWN_
  }
  return 0;
}

int32_t rmx__wire_status(int32_t v) { return v == 0 || err_known(v) ? v : RMX_EIO; }

int32_t rmx__reject_status(int32_t v) { return err_known(v) ? v : RMX_ECONNREFUSED; }

const char *rmx__listen_hint(int rc)
{
  switch (rc) {
  case RMX_EADDRINUSE:
    return " (another socket or listener holds that port: stop it, pick another port, or use "
           "port 0 for a free one)";
  case RMX_EADDRNOTAVAIL:
    return " (no interface of this host has that address)";
  case RMX_EACCES:
    return " (a port below 1024 needs privileges)";
  default:
    return "";
  }
}
