# SPDX-License-Identifier: BSD-3-Clause
"""The bulk transfer engine: transfer requests prepared once and posted
many times, and the notifications that come with them."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence, Tuple

from . import _registry as reg
from ._rmx_cffi import ffi, lib
from .errors import make_error

if TYPE_CHECKING:
    from ._conn import Connection
    from ._mem import RemoteKey

Entry = Tuple[Any, "RemoteKey", int]  # (local buffer, the peer's key, offset in its region)
_OPS = {"write": "RMX_XFER_WRITE", "read": "RMX_XFER_READ"}


class Transfer:
    """A transfer request of one connection (Connection.prepare): every
    entry's local buffer to (``"write"``) or from (``"read"``) the peer's
    memory at its key and offset. Post it with ``await xfer.post()`` as often
    as needed, one post at a time; each ends once, with every byte in place
    or an RmxError whose ``failed`` names the first entry that failed.
    The local buffers are borrowed (held exported) until ``release()``."""

    def __init__(self, conn: "Connection", op: str, entries: Sequence[Entry]) -> None:
        if op not in _OPS:
            raise ValueError("op is 'write' or 'read'")
        if not entries:
            raise ValueError("a transfer request needs at least one entry")
        c = conn._usable("prepare")
        self._ctx = conn._ctx
        self.op = op
        arr = ffi.new("rmx_xfer_entry_t[]", len(entries))
        self._keeps = []
        try:
            for i, (buf, rkey, offset) in enumerate(entries):
                keep = ffi.from_buffer("char[]", buf, require_writable=(op == "read"))
                self._keeps.append(keep)
                if rkey._rk is None or rkey._dead:
                    raise make_error(lib.RMX_EINVAL, f"entry {i}: the remote key is released")
                arr[i].addr, arr[i].len = keep, len(keep)
                arr[i].mem, arr[i].rkey, arr[i].offset = ffi.NULL, rkey._rk, offset
            px = ffi.new("rmx_xfer_t **")
            rc = lib.rmx_xfer_prep(c, getattr(lib, _OPS[op]), arr, len(entries), px)
            if rc < 0:
                raise make_error(rc, "prepare")
        except BaseException:
            self._drop_keeps()
            raise
        self._x = px[0]
        self._busy = False
        self._dead = False
        self.entries = len(entries)
        self._ctx._xfers.add(self)

    def _drop_keeps(self) -> None:
        for keep in self._keeps:
            ffi.release(keep)
        self._keeps = []

    async def post(self, notify: Optional[Any] = None) -> None:
        """Start the request and wait for its end. ``notify`` (write
        requests; 1 byte up to the connection's eager size; empty or None: no
        notification) reaches the peer once
        every byte of this post is in place there (Connection.notification).
        Cancelling the await does not stop the post: it ends once underneath,
        and the request may be posted again after that."""
        self._ctx._check()
        if self._x is None or self._dead:
            raise make_error(lib.RMX_EINVAL, "post: the request is released")
        if self._busy:
            raise make_error(lib.RMX_EBUSY, "post: still posted")
        n, ptr, keep = reg.buffer_of(notify)  # empty: none (as rmx has it)
        op = reg.Op(self._ctx, "transfer", None)
        rc = lib.rmx_xfer_post(self._x, ptr, n, lib._py_on_xfer, reg.as_arg(op.tok))
        if keep is not None:
            ffi.release(keep)  # rmx copied it
        if rc < 0:
            op.abandon()
            raise make_error(rc, "post")
        self._busy = True
        op.refs = self
        self._ctx._kick()
        await op.fut

    def _op_done(self) -> None:
        self._busy = False
        if self._dead:
            self._free()

    @property
    def posted(self) -> bool:
        """True while a post is under way."""
        return self._busy

    def _free(self) -> None:
        if self._x is not None:
            lib.rmx_xfer_release(self._x)
            self._x = None
            self._drop_keeps()
            self._ctx._xfers.discard(self)

    def release(self) -> None:
        """Release the request and lend its buffers back: at once, or when
        the post under way ends. Context.close() releases those left."""
        self._dead = True
        if not self._busy:
            self._free()


def take_notification(conn: "Connection") -> Optional[bytes]:
    """rmx_notify_take(): the oldest notification waiting, or None."""
    ctx = conn._ctx
    n = ffi.new("size_t *")
    while True:
        rc = lib.rmx_notify_take(conn._c, ctx._nbuf, len(ctx._nbuf), n)
        if rc != lib.RMX_EMSGSIZE:
            break
        ctx._nbuf = ffi.new("char[]", n[0])
    if rc == lib.RMX_EAGAIN:
        return None
    if rc < 0:
        raise make_error(rc, "notification")
    ctx._kick()  # its receive credit goes back to the peer
    return ffi.buffer(ctx._nbuf, n[0])[:]
