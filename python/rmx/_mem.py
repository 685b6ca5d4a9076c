# SPDX-License-Identifier: BSD-3-Clause
"""One-sided memory: registrations of Python buffers, and peers' keys."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from . import _registry as reg
from ._rmx_cffi import ffi, lib
from .errors import make_error

if TYPE_CHECKING:
    from ._conn import Connection
    from ._context import Context

_ACCESS = {"r": "RMX_MEM_REMOTE_READ", "w": "RMX_MEM_REMOTE_WRITE",
           "a": "RMX_MEM_REMOTE_ATOMIC"}


class Memory:
    """A buffer-protocol object (bytearray, memoryview, mmap, numpy array)
    registered with rmx without a copy, for peers to read (``"r"``), write
    (``"w"``) or both (``"rw"``, the default).

    The object's buffer stays exported while registered: a bytearray cannot
    be resized (BufferError) until ``close()``, which every registration
    needs (Context.close() does it for those left)."""

    def __init__(self, ctx: "Context", obj: Any, access: str = "rw") -> None:
        bits = lib.RMX_MEM_LOCAL
        for ch in access:
            if ch not in _ACCESS:
                raise ValueError(f"access is made of r, w and a, not {access!r}")
            bits |= getattr(lib, _ACCESS[ch])
        self._ctx = ctx
        self._keep = ffi.from_buffer("char[]", obj, require_writable=True)
        self.nbytes: int = len(self._keep)
        if self.nbytes == 0:
            ffi.release(self._keep)
            raise ValueError("cannot register an empty buffer")
        self.obj = obj
        pm = ffi.new("rmx_mem_t **")
        rc = lib.rmx_mem_reg(ctx._ctx, self._keep, self.nbytes, bits, pm)
        if rc < 0:
            ffi.release(self._keep)
            raise make_error(rc, "register")
        self._m = pm[0]
        ctx._mems.add(self)

    def pack(self, conn: Optional["Connection"] = None) -> bytes:
        """A key to this memory for a peer: for ``conn``'s peer alone (send it
        on ``conn``), or without ``conn`` a capability any peer of the
        context may use (rmx_mem_pack; not available on every RDMA set-up)."""
        self._ctx._check()
        if self._m is None:
            raise make_error(lib.RMX_EINVAL, "pack: the memory is released")
        blob = ffi.new("char[]", lib.RMX_RKEY_MAX)
        n = ffi.new("size_t *", lib.RMX_RKEY_MAX)
        if conn is None:
            rc = lib.rmx_mem_pack(self._m, blob, n)
        else:
            rc = lib.rmx_mem_pack_for(self._m, conn._usable("pack"), blob, n)
        if rc < 0:
            raise make_error(rc, "pack")
        return ffi.buffer(blob, n[0])[:]

    def publish(self, name: str) -> None:
        """Publish this memory under ``name`` in its context: a peer gets a
        key to it, for its connection alone, with ``Connection.lookup(name)``
        (rmx_mem_publish). One name per registration; close() withdraws it."""
        self._ctx._check()
        if self._m is None:
            raise make_error(lib.RMX_EINVAL, "publish: the memory is released")
        rc = lib.rmx_mem_publish(self._m, name.encode("ascii"))
        if rc < 0:
            raise make_error(rc, "publish")

    def unpublish(self) -> None:
        """Withdraw the name: later lookups are refused (RMX_ENOENT) and the
        peers that looked it up are told to forget it; keys already handed
        out stay valid until close()."""
        self._ctx._check()
        if self._m is None:
            raise make_error(lib.RMX_EINVAL, "unpublish: the memory is released")
        rc = lib.rmx_mem_unpublish(self._m)
        if rc < 0:
            raise make_error(rc, "unpublish")

    def close(self) -> None:
        """Release the registration; peers' keys stop working at once."""
        if self._m is None:
            return
        self._ctx._check()
        lib.rmx_mem_dereg(self._m)
        self._m = None
        ffi.release(self._keep)
        self._ctx._mems.discard(self)

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class RemoteKey:
    """A peer's memory, unpacked on one connection (Connection.unpack_key)
    or found by name (Connection.lookup). ``release()`` it when done;
    Context.close() releases those left."""

    def __init__(self, conn: "Connection", blob: Any, rk: Any = None) -> None:
        if rk is None:
            n, ptr, keep = reg.buffer_of(blob)
            prk = ffi.new("rmx_rkey_t **")
            rc = lib.rmx_rkey_unpack(conn._usable("unpack_key"), ptr, n, prk)
            if keep is not None:
                ffi.release(keep)
            if rc < 0:
                raise make_error(rc, "unpack_key")
            rk = prk[0]
        self._rk = rk
        self._conn = conn
        self._busy = 0
        self._dead = False
        self.size: int = lib.rmx_rkey_size(self._rk)
        conn._ctx._rkeys.add(self)

    def _op_done(self) -> None:
        self._busy -= 1
        if self._dead and self._busy == 0:
            self._free()

    def _free(self) -> None:
        if self._rk is not None:
            lib.rmx_rkey_release(self._rk)
            self._rk = None
            self._conn._ctx._rkeys.discard(self)

    def release(self) -> None:
        """Release the key (at once, or when its last operation completes)."""
        self._dead = True
        if self._busy == 0:
            self._free()


async def one_sided(conn: "Connection", write: bool, buf: Any, rkey: RemoteKey,
                    offset: int) -> None:
    """rmx_write / rmx_read of ``buf`` at ``offset`` in the peer's memory."""
    c = conn._usable("write" if write else "read")
    if rkey._rk is None or rkey._dead:
        raise make_error(lib.RMX_EINVAL, "the remote key is released")
    keep = ffi.from_buffer("char[]", buf, require_writable=not write)
    if len(keep) == 0:
        ffi.release(keep)
        return
    iov = ffi.new("rmx_iov_t *", {"addr": keep, "len": len(keep), "mem": ffi.NULL})
    op = reg.Op(conn._ctx, "write" if write else "read", keep)
    fn = lib.rmx_write if write else lib.rmx_read
    rc = fn(c, iov, 1, rkey._rk, offset, lib._py_on_sent, reg.as_arg(op.tok))
    if rc < 0:
        op.abandon()
        raise make_error(rc, op.what)
    rkey._busy += 1
    op.refs = rkey
    conn._ctx._kick()
    await op.fut


async def lookup(conn: "Connection", name: str, timeout: Optional[float]) -> RemoteKey:
    """rmx_mem_lookup: the key to the memory the peer published as ``name``."""
    c = conn._usable("lookup")
    ms = 0 if timeout is None else max(1, int(timeout * 1000))
    op = reg.Op(conn._ctx, "lookup", None)
    rc = lib.rmx_mem_lookup(c, name.encode("ascii"), ms, lib._py_on_lookup, reg.as_arg(op.tok))
    if rc < 0:
        op.abandon()
        raise make_error(rc, "lookup")
    conn._ctx._kick()
    rk = await op.fut
    return RemoteKey(conn, None, rk)
