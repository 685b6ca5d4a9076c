# SPDX-License-Identifier: BSD-3-Clause
"""What links rmx's C callbacks to Python objects.

Every C callback gets a `void *arg`; here it is a small integer token that
names a Python object in `_objs`, never a pointer to one. A token is
released when the callback that ends its object has run, so a callback that
came twice, or for an object already gone, finds nothing: it is counted in
`stray` (the tests keep it at 0) and does nothing else, never touching
freed memory.
"""
from __future__ import annotations

import asyncio
import itertools
from typing import Any, Optional, Tuple

from ._rmx_cffi import ffi, lib
from .errors import make_error

_objs: dict = {}
_next = itertools.count(1)
stray = 0  # callbacks that found no object: a double or late callback


def hold(obj: Any) -> int:
    """Give ``obj`` a token its C callbacks will carry."""
    tok = next(_next)
    _objs[tok] = obj
    return tok


def release(tok: int) -> None:
    _objs.pop(tok, None)


def as_arg(tok: int):
    return ffi.cast("void *", tok)


def _find(arg, take: bool = False):
    global stray
    tok = int(ffi.cast("uintptr_t", arg))
    obj = _objs.pop(tok, None) if take else _objs.get(tok)
    if obj is None:
        stray += 1
    return obj


def report(exc: BaseException, message: str) -> None:
    """Hand an exception no caller can receive to the loop's exception handler."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise exc from None
    loop.call_exception_handler({"message": message, "exception": exc})


def _onerror(exc_type, exc, tb) -> None:
    report(exc, "exception in an rmx callback")


def buffer_of(data: Any) -> Tuple[int, Any, Any]:
    """(length, pointer, keep) of any contiguous buffer-protocol object.

    ``keep`` holds the object's buffer exported (a bytearray cannot be resized
    meanwhile: BufferError) until ``ffi.release(keep)``; None for 0 bytes."""
    if data is None:
        return 0, ffi.NULL, None
    keep = ffi.from_buffer("char[]", data)
    n = len(keep)
    if n == 0:
        ffi.release(keep)
        return 0, ffi.NULL, None
    return n, keep, keep


class Op:
    """One operation in flight: a send, a call, a one-sided read or write.

    Its token lives until rmx's callback for it; the awaiting task may be
    gone by then (cancelled), and the callback still ends the operation, once:
    the borrowed buffer is released and the context's count goes down."""

    __slots__ = ("ctx", "fut", "keep", "what", "conn", "call", "ended", "tok", "refs")

    def __init__(self, ctx, what: str, keep: Any, conn: Any = None) -> None:
        self.ctx = ctx
        self.fut = ctx._loop.create_future()
        self.keep = keep
        self.what = what
        self.conn = conn
        self.call = 0
        self.ended = False
        self.refs: Any = None  # more objects to keep alive until the callback
        self.tok = hold(self)
        ctx._ops += 1

    def abandon(self) -> None:
        """The C call was refused: its callback will never run."""
        release(self.tok)
        self._end()

    def _end(self) -> None:
        self.ended = True
        self.ctx._ops -= 1
        if self.keep is not None:
            ffi.release(self.keep)
            self.keep = None
        if self.what == "call":
            self.conn._slot_free()
        if self.refs is not None:
            self.refs._op_done()
            self.refs = None

    def finish(self, status: int, result: Any = None) -> None:
        self._end()
        fut = self.fut
        if fut.done():  # the awaiting task was cancelled
            return
        if status < 0:
            err = make_error(status, self.what)
            if self.what == "transfer":
                err.failed = result
            fut.set_exception(err)
        else:
            fut.set_result(result)


def _bytes(data, n: int) -> bytes:
    return ffi.buffer(data, n)[:] if n else b""


@ffi.def_extern(onerror=_onerror)
def _py_on_accept(listener, c, arg):
    lst = _find(arg)
    if lst is not None:
        lst._cb_accept(c)


@ffi.def_extern(onerror=_onerror)
def _py_on_connected(c, status, arg):
    conn = _find(arg)
    if conn is not None:
        conn._cb_connected(status)


@ffi.def_extern(onerror=_onerror)
def _py_on_recv(c, data, n, arg):
    """Every message comes through here: _find and _bytes written out, two
    Python calls fewer a message."""
    global stray
    conn = _objs.get(int(ffi.cast("uintptr_t", arg)))
    if conn is None:
        stray += 1
        return
    conn._cb_recv(ffi.buffer(data, n)[:] if n else b"")


@ffi.def_extern(onerror=_onerror)
def _py_on_disconnect(c, status, arg):
    conn = _find(arg)
    if conn is not None:
        conn._cb_disconnect(status)


@ffi.def_extern(onerror=_onerror)
def _py_on_closed(c, arg):
    conn = _find(arg, take=True)
    if conn is not None:
        conn._cb_closed()


@ffi.def_extern(onerror=_onerror)
def _py_on_sent(c, status, arg):
    """A send's or a one-sided operation's end (rmx_send_cb, rmx_op_cb)."""
    op = _find(arg, take=True)
    if op is not None:
        op.finish(status)


@ffi.def_extern(onerror=_onerror)
def _py_on_reply(c, status, data, n, arg):
    op = _find(arg, take=True)
    if op is not None:
        op.finish(status, _bytes(data, n) if status == 0 else None)


@ffi.def_extern(onerror=_onerror)
def _py_on_xfer(x, status, failed, arg):
    op = _find(arg, take=True)
    if op is not None:
        op.finish(status, None if failed == lib.RMX_XFER_NO_ENTRY else failed)


@ffi.def_extern(onerror=_onerror)
def _py_on_lookup(c, status, rk, arg):
    """rmx_mem_lookup's end: the key is handed to the waiting task, or
    released when nobody waits any more (cancelled)."""
    op = _find(arg, take=True)
    if op is None or op.fut.done():
        if rk != ffi.NULL:
            lib.rmx_rkey_release(rk)
        if op is not None:
            op.finish(status)
        return
    op.finish(status, rk if status == 0 else None)


@ffi.def_extern(onerror=_onerror)
def _py_on_rail(c, status, rail, arg):
    op = _find(arg, take=True)
    if op is not None:
        op.finish(status, rail)


@ffi.def_extern(onerror=_onerror)
def _py_on_rpc(req, data, n, arg):
    handler = _find(arg)
    if handler is not None:
        handler._cb_request(req, _bytes(data, n))
    else:  # no handler object: answer, so the request is released
        lib.rmx_rpc_reply_error(req, lib.RMX_ENOHANDLER)


def conn_cbs() -> Optional[Any]:
    """The callbacks every connection gets (rmx copies them)."""
    cbs = ffi.new("rmx_conn_cbs_t *")
    cbs.on_recv = lib._py_on_recv
    cbs.on_disconnect = lib._py_on_disconnect
    return cbs
