# SPDX-License-Identifier: BSD-3-Clause
"""cffi builder of rmx._rmx_cffi, the C side of the Python package.

API (out-of-line) mode: the declarations below are checked against
<rmx/rmx.h> by the C compiler, and the callbacks are `extern "Python"`
functions compiled into the module (no libffi closures).

Where librmx comes from:
  RMX_BUILD_DIR=/path/to/build   a CMake build tree: the headers of the source
                                 tree it was configured from (its CMakeCache.txt;
                                 RMX_SOURCE_DIR overrides), the library in
                                 RMX_BUILD_DIR/lib (run path set)
  otherwise                      pkg-config rmx (an installed librmx)

Run directly (`python3 rmx_build.py OUTDIR`) to compile the module into
OUTDIR/rmx/ without setuptools; setup.py uses `ffibuilder` the usual way.
"""
import os
import shlex
import subprocess
import sys

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))

CDEF = r"""
typedef struct rmx_ctx rmx_ctx_t;
typedef struct rmx_listener rmx_listener_t;
typedef struct rmx_conn rmx_conn_t;
typedef struct rmx_mem rmx_mem_t;
typedef struct rmx_rkey rmx_rkey_t;
typedef struct rmx_rpc_req rmx_rpc_req_t;

typedef enum {
  RMX_EINVAL, RMX_ENOMEM, RMX_EAGAIN, RMX_EBUSY, RMX_EALREADY, RMX_ECANCELED,
  RMX_ECONNRESET, RMX_ECONNREFUSED, RMX_ENOTCONN, RMX_EMSGSIZE, RMX_ETIMEDOUT,
  RMX_EPROTO, RMX_EACCES, RMX_ENOTSUP, RMX_ENODEV, RMX_EADDRINUSE,
  RMX_EADDRNOTAVAIL, RMX_EHOSTUNREACH, RMX_ENETUNREACH, RMX_ENOENT, RMX_EIO,
  RMX_EMFILE, RMX_EINPROGRESS, RMX_EVERSION, RMX_ENORESOLVE, RMX_EMEMLOCK,
  RMX_EUNKNOWN, RMX_ENOHANDLER, ...
} rmx_err_t;

typedef enum { RMX_PROGRESS_EVENT, RMX_PROGRESS_POLL, RMX_PROGRESS_ADAPTIVE, ... }
  rmx_progress_t;

enum { RMX_MEM_LOCAL, RMX_MEM_REMOTE_READ, RMX_MEM_REMOTE_WRITE,
       RMX_MEM_REMOTE_ATOMIC, ... };
#define RMX_RKEY_MAX ...
#define RMX_EAGER_MSG_MIN ...

typedef struct rmx_config {
  uint32_t eager_size;
  uint32_t rx_depth;
  uint64_t max_msg_size;
  uint32_t rndv_depth;
  uint32_t connect_timeout_ms;
  uint32_t rpc_max_inflight;
  rmx_progress_t progress;
  uint32_t close_timeout_ms;
  uint32_t max_conns;
  ...;
} rmx_config_t;

typedef struct rmx_ctx_stats {
  uint64_t reg_cache_hits;
  uint64_t reg_cache_misses;
  uint64_t reg_cache_evictions;
  uint64_t reg_cache_bytes;
  uint64_t pool_bytes;
  uint64_t conns;
  uint64_t mem_reg_bytes;
  uint64_t mem_regs;
  uint64_t tp_reg_bytes;
  uint64_t tp_refused;
  ...;
} rmx_ctx_stats_t;

typedef struct rmx_conn_stats {
  uint64_t msgs_sent; uint64_t bytes_sent; uint64_t msgs_recv; uint64_t bytes_recv;
  uint64_t eager_sent; uint64_t rndv_sent; uint64_t credit_stalls;
  uint64_t credit_frames; uint64_t errors; ...;
} rmx_conn_stats_t;

typedef void (*rmx_accept_cb)(rmx_listener_t *, rmx_conn_t *, void *);
typedef void (*rmx_connect_cb)(rmx_conn_t *, int, void *);
typedef void (*rmx_recv_cb)(rmx_conn_t *, const void *, size_t, void *);
typedef void (*rmx_disconnect_cb)(rmx_conn_t *, int, void *);
typedef void (*rmx_send_cb)(rmx_conn_t *, int, void *);
typedef void (*rmx_close_cb)(rmx_conn_t *, void *);
typedef void (*rmx_imm_cb)(rmx_conn_t *, uint32_t, size_t, void *);
typedef void (*rmx_op_cb)(rmx_conn_t *, int, void *);
typedef void (*rmx_rpc_handler)(rmx_rpc_req_t *, const void *, size_t, void *);
typedef void (*rmx_rpc_reply_cb)(rmx_conn_t *, int, const void *, size_t, void *);

typedef struct rmx_conn_cbs {
  rmx_recv_cb on_recv;
  rmx_disconnect_cb on_disconnect;
  rmx_imm_cb on_imm;
  rmx_recv_cb on_notify;
  ...;
} rmx_conn_cbs_t;

typedef struct rmx_iov { void *addr; size_t len; rmx_mem_t *mem; ...; } rmx_iov_t;

typedef struct rmx_xfer rmx_xfer_t;
typedef enum rmx_xfer_op { RMX_XFER_WRITE, RMX_XFER_READ, ... } rmx_xfer_op_t;
typedef struct rmx_xfer_entry {
  void *addr; size_t len; rmx_mem_t *mem; rmx_rkey_t *rkey; uint64_t offset; ...;
} rmx_xfer_entry_t;
typedef void (*rmx_xfer_cb)(rmx_xfer_t *, int, size_t, void *);
#define RMX_XFER_MAX_ENTRIES ...
#define RMX_XFER_NO_ENTRY ...

unsigned rmx_version(void);
const char *rmx_version_string(void);
const char *rmx_strerror(int err);
const char *rmx_err_name(int err);

int rmx_config_init(rmx_config_t *cfg);
int rmx_ctx_create(rmx_ctx_t **ctx, void *loop, const rmx_config_t *cfg);
int rmx_ctx_destroy(rmx_ctx_t *ctx);
int rmx_ctx_fd(rmx_ctx_t *ctx);
int rmx_ctx_timeout(rmx_ctx_t *ctx);
int rmx_ctx_progress(rmx_ctx_t *ctx);
int rmx_ctx_flush(rmx_ctx_t *ctx);
int rmx_ctx_wait(rmx_ctx_t *ctx);
int rmx_ctx_stats_get(const rmx_ctx_t *ctx, rmx_ctx_stats_t *st, size_t size);

int rmx_listen(rmx_ctx_t *ctx, const char *uri, rmx_accept_cb on_accept, void *arg,
               rmx_listener_t **l);
int rmx_listener_uri(rmx_listener_t *l, char *buf, size_t len);
void rmx_listener_close(rmx_listener_t *l);
int rmx_connect(rmx_ctx_t *ctx, const char *uri, rmx_connect_cb on_connected, void *arg,
                rmx_conn_t **c);
void rmx_conn_set_cbs(rmx_conn_t *c, const rmx_conn_cbs_t *cbs, void *arg);
int rmx_conn_close(rmx_conn_t *c, rmx_close_cb on_closed, void *arg);
const char *rmx_conn_transport(const rmx_conn_t *c);
void rmx_conn_stats(const rmx_conn_t *c, rmx_conn_stats_t *st);
int rmx_send(rmx_conn_t *c, const void *data, size_t len, rmx_send_cb on_sent, void *arg);

int rmx_mem_reg(rmx_ctx_t *ctx, void *addr, size_t len, unsigned access, rmx_mem_t **m);
void rmx_mem_dereg(rmx_mem_t *m);
int rmx_mem_pack(rmx_mem_t *m, void *blob, size_t *len);
int rmx_mem_pack_for(rmx_mem_t *m, rmx_conn_t *c, void *blob, size_t *len);
int rmx_rkey_unpack(rmx_conn_t *c, const void *blob, size_t len, rmx_rkey_t **rk);
size_t rmx_rkey_size(const rmx_rkey_t *rk);
void rmx_rkey_release(rmx_rkey_t *rk);
int rmx_write(rmx_conn_t *c, const rmx_iov_t *iov, int iovcnt, rmx_rkey_t *rk,
              uint64_t offset, rmx_op_cb cb, void *arg);
int rmx_read(rmx_conn_t *c, const rmx_iov_t *iov, int iovcnt, rmx_rkey_t *rk,
             uint64_t offset, rmx_op_cb cb, void *arg);

int rmx_xfer_prep(rmx_conn_t *c, rmx_xfer_op_t op, const rmx_xfer_entry_t *e, size_t n,
                  rmx_xfer_t **x);
int rmx_xfer_post(rmx_xfer_t *x, const void *notify, size_t notify_len, rmx_xfer_cb cb,
                  void *arg);
int rmx_xfer_status(const rmx_xfer_t *x, size_t *failed);
int rmx_xfer_release(rmx_xfer_t *x);
int rmx_notify_take(rmx_conn_t *c, void *buf, size_t cap, size_t *len);
#define RMX_NAME_MAX ...
typedef void (*rmx_lookup_cb)(rmx_conn_t *, int, rmx_rkey_t *, void *);
int rmx_mem_publish(rmx_mem_t *m, const char *name);
int rmx_mem_unpublish(rmx_mem_t *m);
int rmx_mem_lookup(rmx_conn_t *c, const char *name, uint32_t timeout_ms, rmx_lookup_cb cb,
                   void *arg);
#define RMX_RAILS_MAX ...
typedef void (*rmx_rail_cb)(rmx_conn_t *, int, unsigned, void *);
typedef struct rmx_rail_info { int up; uint64_t parts; uint64_t bytes; } rmx_rail_info_t;
int rmx_rail_add(rmx_conn_t *c, const char *uri, rmx_rail_cb cb, void *arg);
unsigned rmx_conn_rails(const rmx_conn_t *c);
int rmx_rail_info(const rmx_conn_t *c, unsigned rail, rmx_rail_info_t *out);
int rmx_rail_close(rmx_conn_t *c, unsigned rail);

int rmx_rpc_register(rmx_ctx_t *ctx, uint32_t id, rmx_rpc_handler handler, void *arg);
int rmx_rpc_call(rmx_conn_t *c, uint32_t id, const void *req, size_t len,
                 uint32_t timeout_ms, rmx_rpc_reply_cb on_reply, void *arg, uint64_t *call);
int rmx_rpc_cancel(rmx_conn_t *c, uint64_t call);
int rmx_rpc_reply(rmx_rpc_req_t *req, const void *data, size_t len);
int rmx_rpc_reply_error(rmx_rpc_req_t *req, int status);
rmx_conn_t *rmx_rpc_req_conn(const rmx_rpc_req_t *req);

extern "Python" {
  void _py_on_accept(rmx_listener_t *, rmx_conn_t *, void *);
  void _py_on_connected(rmx_conn_t *, int, void *);
  void _py_on_recv(rmx_conn_t *, const void *, size_t, void *);
  void _py_on_disconnect(rmx_conn_t *, int, void *);
  void _py_on_sent(rmx_conn_t *, int, void *);
  void _py_on_closed(rmx_conn_t *, void *);
  void _py_on_rpc(rmx_rpc_req_t *, const void *, size_t, void *);
  void _py_on_reply(rmx_conn_t *, int, const void *, size_t, void *);
  void _py_on_xfer(rmx_xfer_t *, int, size_t, void *);
  void _py_on_lookup(rmx_conn_t *, int, rmx_rkey_t *, void *);
  void _py_on_rail(rmx_conn_t *, int, unsigned, void *);
}
"""


def _pkg_config():
    try:
        out = subprocess.run(["pkg-config", "--cflags", "--libs", "rmx"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("rmx_build: no in-tree build (RMX_BUILD_DIR) and no installed librmx "
                 f"(pkg-config rmx: {e})")
    inc, libdirs, libs, extra = [], [], [], []
    for word in shlex.split(out):
        if word.startswith("-I"):
            inc.append(word[2:])
        elif word.startswith("-L"):
            libdirs.append(word[2:])
        elif word.startswith("-l"):
            libs.append(word[2:])
        else:
            extra.append(word)
    return dict(include_dirs=inc, library_dirs=libdirs, libraries=libs,
                runtime_library_dirs=libdirs, extra_compile_args=extra)


def _source_of(build):
    """The source tree a CMake build tree was configured from (its headers):
    RMX_SOURCE_DIR, else what the build's CMakeCache.txt names, else the
    tree above python/ (a checkout)."""
    src = os.environ.get("RMX_SOURCE_DIR")
    if src:
        return os.path.abspath(src)
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as cache:
            for line in cache:
                if line.startswith("rmx_SOURCE_DIR:"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return os.path.dirname(HERE)


def _where():
    build = os.environ.get("RMX_BUILD_DIR")
    if not build:
        return _pkg_config()
    build = os.path.abspath(build)
    lib = os.path.join(build, "lib")
    inc = os.path.join(_source_of(build), "include")
    if not os.path.exists(os.path.join(lib, "librmx.so")):
        sys.exit(f"rmx_build: RMX_BUILD_DIR={build} is no built rmx tree (no lib/librmx.so; "
                 "give an absolute path: pip builds in the package's directory)")
    if not os.path.exists(os.path.join(inc, "rmx", "rmx.h")):
        sys.exit(f"rmx_build: no rmx/rmx.h under {inc}; set RMX_SOURCE_DIR to rmx's source tree")
    return dict(include_dirs=[inc], library_dirs=[lib], libraries=["rmx"],
                runtime_library_dirs=[lib])


ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source("rmx._rmx_cffi", "#include <rmx/rmx.h>\n", **_where())

if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else HERE
    ffibuilder.compile(tmpdir=out, verbose=bool(os.environ.get("RMX_BUILD_VERBOSE")))
