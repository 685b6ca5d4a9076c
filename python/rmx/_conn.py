# SPDX-License-Identifier: BSD-3-Clause
"""Connections and listeners."""
from __future__ import annotations

import asyncio
import collections
import inspect
from typing import (TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Optional, Sequence,
                    Tuple, Union)

from . import _registry as reg
from ._rmx_cffi import ffi, lib
from .errors import ConnectionClosed, RmxError, RmxValueError, make_error

if TYPE_CHECKING:
    from ._context import Context
    from ._mem import RemoteKey
    from ._xfer import Transfer

Buffer = Any  # any object of the buffer protocol (bytes, bytearray, memoryview, numpy, mmap)
_CBS = reg.conn_cbs()
_COPIED = lib.RMX_EAGER_MSG_MIN  # sends up to this size need no wait for rmx
_CONNECTING, _OPEN, _DOWN, _CLOSING, _CLOSED = range(5)


def _uri_arg(uri: Any, what: str) -> bytes:
    """A URI argument as rmx reads it: a str (TypeError for any other type)
    without NUL characters (ValueError: rmx would read up to the first)."""
    if not isinstance(uri, str):
        raise TypeError(f"{what}: the URI is a str such as 'tcp://HOST:PORT', "
                        f"not {type(uri).__name__}")
    if "\0" in uri:
        raise ValueError(f"{what}: the URI {uri!r} holds a NUL character")
    return uri.encode()


def _uri_error(rc: int, what: str) -> RmxError:
    """rmx's refusal of a URI: RMX_EINVAL (the URI is malformed: its log line
    says which part) is a ValueError too."""
    return make_error(rc, what, RmxValueError if rc == lib.RMX_EINVAL else None)


async def _sent(fut: asyncio.Future) -> None:
    """What Connection.send returns once the send has started: a coroutine,
    so that asyncio.create_task() takes it like any other."""
    await fut


async def _done() -> None:
    """What Connection.send returns for a small message already handed on."""


def _closed_error(what: str, status: int = 0) -> RmxError:
    if status < 0:
        return make_error(status, what)
    return make_error(lib.RMX_ENOTCONN, what, ConnectionClosed)


class Connection:
    """A connection of a Context: messages, RPC calls, one-sided operations.

    Messages arrive as ``bytes`` objects: rmx lends a message's memory for
    the span of a C callback only, and Python code never runs inside it, so
    each message is copied once, into an object that is yours to keep.
    Close every connection once (``await conn.close()``, or ``async with``);
    the context keeps it alive until then and closes what is left in
    ``Context.close()``.
    """

    def __init__(self, ctx: "Context", c: Any, state: int) -> None:
        self._ctx = ctx
        self._c = c
        self._state = state
        self._tok = reg.hold(self)
        self._queue: collections.deque = collections.deque()
        self._waiters: collections.deque = collections.deque()
        self._down: Optional[int] = None
        self._connected: Optional[asyncio.Future] = None
        self._closed: Optional[asyncio.Future] = None
        self._inflight = 0
        self._slot_waiters: collections.deque = collections.deque()
        self._notify_waiters: collections.deque = collections.deque()
        self.transport = ""
        ctx._conns[self._tok] = self

    # -- callbacks, from the context's progress -------------------------
    def _set_cbs(self) -> None:
        lib.rmx_conn_set_cbs(self._c, _CBS, reg.as_arg(self._tok))

    def _established(self) -> None:
        self._state = _OPEN
        self.transport = ffi.string(lib.rmx_conn_transport(self._c)).decode()

    def _cb_connected(self, status: int) -> None:
        fut = self._connected
        if status == 0 and self._state == _CONNECTING:
            self._established()
            if fut is not None and not fut.done():
                fut.set_result(self)
            return
        if fut is not None and not fut.done():
            fut.set_exception(make_error(status or lib.RMX_ECANCELED, "connect"))
        if self._state == _CONNECTING:
            self._state = _DOWN
            self._start_close()

    def _cb_recv(self, data: bytes) -> None:
        while self._waiters:
            w = self._waiters.popleft()
            if not w.done():
                w.set_result(data)
                return
        self._queue.append(data)

    def _fail_waiters(self, status: int) -> None:
        for waiters in (self._waiters, self._slot_waiters):
            while waiters:
                w = waiters.popleft()
                if not w.done():
                    w.set_exception(_closed_error("connection", status))

    def _cb_disconnect(self, status: int) -> None:
        if self._state in (_OPEN, _CONNECTING):
            self._state = _DOWN
        self._down = status
        self._fail_waiters(status)
        self._ctx._cancel_requests(self._c)

    def _cb_closed(self) -> None:
        self._state = _CLOSED
        self._c = None
        self._ctx._conns.pop(self._tok, None)
        self._fail_waiters(0)
        self._poll_notifications()
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    def _slot_free(self) -> None:
        self._inflight -= 1
        while self._slot_waiters:
            w = self._slot_waiters.popleft()
            if not w.done():
                w.set_result(None)
                return

    # -- the application's calls ----------------------------------------
    def _usable(self, what: str) -> Any:
        self._ctx._check()
        if self._state >= _CLOSING or self._c is None:
            raise _closed_error(what)
        if self._state == _DOWN:
            raise _closed_error(what, self._down or 0)
        return self._c

    def _start_close(self) -> None:
        if self._closed is not None or self._c is None:
            return
        self._closed = self._ctx._loop.create_future()
        self._state = _CLOSING
        self._ctx._cancel_requests(self._c)
        rc = lib.rmx_conn_close(self._c, lib._py_on_closed, reg.as_arg(self._tok))
        if rc < 0:  # cannot happen for a handle closed once; never leave a waiter
            self._closed.set_result(None)
        self._fail_waiters(0)
        self._ctx._kick()

    def send(self, data: Buffer) -> Awaitable[None]:
        """Send one message (0 bytes up to max_msg_size); await the result to
        wait until rmx is done with ``data``. The send starts in the call,
        not at the await. A message of up to RMX_EAGER_MSG_MIN (248) bytes
        is copied in the call and its await ends without waiting for the
        loop; a failure after that is the connection's (recv() raises it). A
        larger one goes zero-copy: ``data`` is borrowed (its buffer stays
        exported, so a bytearray cannot be resized) until the send
        completes, whether or not the awaiting task is cancelled, and a
        failure raises at the await. A refused send (a closed connection, a
        bad size) raises in the call. Cancelling the await does not cancel
        the send."""
        c = self._usable("send")
        n, ptr, keep = reg.buffer_of(data)
        if n <= _COPIED:  # copied before rmx_send returns: nothing is borrowed
            rc = lib.rmx_send(c, ptr, n, ffi.NULL, ffi.NULL)
            if keep is not None:
                ffi.release(keep)
            if rc < 0:
                raise make_error(rc, "send")
            if self._ctx._flush():
                return _done()
            return asyncio.sleep(0)  # many in a row: the loop's turn first
        op = reg.Op(self._ctx, "send", keep)
        rc = lib.rmx_send(c, ptr, n, lib._py_on_sent, reg.as_arg(op.tok))
        if rc < 0:
            op.abandon()
            raise make_error(rc, "send")
        self._ctx._kick()
        return _sent(op.fut)

    async def recv(self) -> bytes:
        """The next message. Raises ConnectionClosed after the last message
        once the connection is closed (by either side on purpose), or the
        RmxError of its loss."""
        self._ctx._check()
        if self._queue:
            return self._queue.popleft()
        if self._state != _OPEN:
            raise _closed_error("recv", self._down or 0)
        fut = self._ctx._loop.create_future()
        self._waiters.append(fut)
        return await fut

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self.recv()
        except ConnectionClosed:
            raise StopAsyncIteration from None

    async def call(self, rpc_id: int, payload: Buffer = b"",
                   timeout: Optional[float] = None) -> bytes:
        """Call RPC ``rpc_id`` on the peer and return its reply.

        ``timeout`` in seconds (None: no limit) ends the call with
        RmxTimeoutError. More calls than rpc_max_inflight wait here for a
        free slot. Cancelling the awaiting task cancels the call in rmx
        (rmx_rpc_cancel); the peer's handler may still have run."""
        c = self._usable("call")
        tmo = 0 if timeout is None else max(1, int(timeout * 1000 + 0.5))
        if tmo > 0xFFFFFFFF:
            raise ValueError("timeout too large")
        while self._inflight >= self._ctx._max_inflight:
            await self._wait_slot()
            c = self._usable("call")
        n, ptr, keep = reg.buffer_of(payload)
        op = reg.Op(self._ctx, "call", keep, self)
        self._inflight += 1
        cid = ffi.new("uint64_t *")
        rc = lib.rmx_rpc_call(c, rpc_id, ptr, n, tmo, lib._py_on_reply, reg.as_arg(op.tok), cid)
        if rc < 0:
            op.abandon()
            raise make_error(rc, "call")
        op.call = cid[0]
        self._ctx._kick()
        try:
            return await op.fut
        except asyncio.CancelledError:
            if not op.ended and self._c is not None:
                lib.rmx_rpc_cancel(self._c, op.call)
                self._ctx._kick()
            raise

    async def _wait_slot(self) -> None:
        fut = self._ctx._loop.create_future()
        self._slot_waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._inflight += 1  # pass the slot this task was given on
                self._slot_free()
            raise

    async def close(self) -> None:
        """Close the connection and wait until rmx has let it go. Messages
        already sent are delivered first; operations still pending fail with
        RMX_ECANCELED. Safe to call again, and on a connection that is down."""
        if self._closed is None:
            if self._c is None:
                return
            self._ctx._check()
            self._start_close()
        await asyncio.shield(self._closed)

    @property
    def closed(self) -> bool:
        """True once close() was called or rmx let the connection go."""
        return self._state >= _CLOSING

    def stats(self) -> dict:
        """rmx_conn_stats(): the connection's counters."""
        c = self._usable("stats")
        st = ffi.new("rmx_conn_stats_t *")
        lib.rmx_conn_stats(c, st)
        return {f: getattr(st, f) for f, _ in ffi.typeof("rmx_conn_stats_t").fields}

    # -- transfer requests and notifications ------------------------------
    def prepare(self, op: str, entries: Sequence[Tuple[Buffer, "RemoteKey", int]]) -> "Transfer":
        """A transfer request: ``op`` ``"write"`` or ``"read"``, ``entries``
        (local buffer, the peer's key, offset) tuples; see rmx.Transfer."""
        from ._xfer import Transfer
        return Transfer(self, op, entries)

    def take_notification(self) -> Optional[bytes]:
        """The oldest notification of the peer's transfers waiting here, or
        None. Until taken, each holds one of this side's receive credits
        (the peer cannot queue more than this side has receive buffers)."""
        self._ctx._check()
        if self._c is None:
            raise _closed_error("notification")
        from ._xfer import take_notification
        return take_notification(self)

    async def notification(self) -> bytes:
        """Wait for the next notification of the peer's transfers: its bytes
        come once every byte of that post is in place here. Raises as
        recv() does once the connection is down and none is left."""
        msg = self.take_notification()
        if msg is not None:
            return msg
        if self._state != _OPEN:
            raise _closed_error("notification", self._down or 0)
        fut = self._ctx._loop.create_future()
        self._notify_waiters.append(fut)
        self._ctx._notify_conns.add(self)
        return await fut

    def _poll_notifications(self) -> None:
        """After progress: hand waiting notifications to waiting tasks."""
        waiters = self._notify_waiters
        while waiters and self._c is not None:
            if waiters[0].done():
                waiters.popleft()
                continue
            msg = self.take_notification()
            if msg is None:
                break
            waiters.popleft().set_result(msg)
        if self._state != _OPEN:
            while waiters:
                w = waiters.popleft()
                if not w.done():
                    w.set_exception(_closed_error("notification", self._down or 0))
        if not waiters:
            self._ctx._notify_conns.discard(self)

    # -- one-sided ---------------------------------------------------------
    def unpack_key(self, blob: Buffer) -> "RemoteKey":
        """The peer's memory from the key it packed (Memory.pack), usable on
        this connection; ``release()`` it when done."""
        from ._mem import RemoteKey
        return RemoteKey(self, blob)

    async def lookup(self, name: str, timeout: Optional[float] = None) -> "RemoteKey":
        """The key to the memory the peer published as ``name``
        (Memory.publish), for this connection alone: one round trip, then
        from a cache until the peer withdraws the name. Raises RmxError:
        RMX_ENOENT (no such name), RMX_ETIMEDOUT, or the connection's end."""
        from ._mem import lookup
        return await lookup(self, name, timeout)

    async def add_rail(self, uri: str) -> int:
        """rmx_rail_add: another connection to the same peer at ``uri`` (its
        address on another device) that carries parts of this connection's
        large transfers; returns the rail's number. Keys found or unpacked
        before it holds none for it: look the memory up again."""
        c = self._usable("add_rail")
        curi = _uri_arg(uri, "add_rail")
        op = reg.Op(self._ctx, "add_rail", None)
        rc = lib.rmx_rail_add(c, curi, lib._py_on_rail, reg.as_arg(op.tok))
        if rc < 0:
            op.abandon()
            raise make_error(rc, "add_rail")
        self._ctx._kick()
        return int(await op.fut)

    @property
    def rails(self) -> int:
        """Rails up now (rmx_conn_rails)."""
        return int(lib.rmx_conn_rails(self._c)) if self._c is not None else 0

    def rail_info(self, rail: int) -> dict:
        """What rail ``rail`` (0: this connection) carried (rmx_rail_info)."""
        if self._c is None:
            raise _closed_error("rail_info")
        out = ffi.new("rmx_rail_info_t *")
        rc = lib.rmx_rail_info(self._c, rail, out)
        if rc < 0:
            raise make_error(rc, "rail_info")
        return {"up": bool(out.up), "parts": int(out.parts), "bytes": int(out.bytes)}

    def close_rail(self, rail: int) -> None:
        """rmx_rail_close: its parts in flight complete, the rest go elsewhere."""
        rc = lib.rmx_rail_close(self._usable("close_rail"), rail)
        if rc < 0:
            raise make_error(rc, "close_rail")

    async def read(self, dst: Buffer, rkey: "RemoteKey", offset: int = 0) -> None:
        """Read len(dst) bytes at ``offset`` of the peer's memory into the
        writable buffer ``dst`` (borrowed until the read completes)."""
        from ._mem import one_sided
        await one_sided(self, False, dst, rkey, offset)

    async def write(self, src: Buffer, rkey: "RemoteKey", offset: int = 0) -> None:
        """Write ``src`` at ``offset`` of the peer's memory (``src`` is
        borrowed until the write completes, whether or not the awaiting task
        is cancelled)."""
        from ._mem import one_sided
        await one_sided(self, True, src, rkey, offset)

    async def __aenter__(self) -> "Connection":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        states = ("connecting", "open", "down", "closing", "closed")
        return f"<rmx.Connection {self.transport or '?'} {states[self._state]}>"


AcceptHandler = Callable[[Connection], Union[None, Awaitable[None]]]


class Listener:
    """A listening endpoint. Without an ``on_accept`` handler, connections
    queue up for ``await listener.accept()`` or ``async for conn in
    listener``; with one, each is handed to it (a coroutine function runs as
    a task of the context, cancelled by Context.close())."""

    def __init__(self, ctx: "Context", uri: str, on_accept: Optional[AcceptHandler]) -> None:
        curi = _uri_arg(uri, "listen")
        self._ctx = ctx
        self._on_accept = on_accept
        self._queue: collections.deque = collections.deque()
        self._waiters: collections.deque = collections.deque()
        self._tok = reg.hold(self)
        lp = ffi.new("rmx_listener_t **")
        rc = lib.rmx_listen(ctx._ctx, curi, lib._py_on_accept, reg.as_arg(self._tok), lp)
        if rc < 0:
            reg.release(self._tok)
            raise _uri_error(rc, f"listen {uri}")
        self._l = lp[0]
        buf = ffi.new("char[128]")  # always enough (rmx.h)
        rc = lib.rmx_listener_uri(self._l, buf, 128)
        if rc < 0:  # the transport cannot say where it listens: not a listener to hand out
            lib.rmx_listener_close(self._l)
            reg.release(self._tok)
            raise make_error(rc, f"listen {uri}")
        self.uri: str = ffi.string(buf).decode()
        ctx._listeners.add(self)
        ctx._kick()

    def _cb_accept(self, c: Any) -> None:
        conn = Connection(self._ctx, c, _OPEN)
        conn._set_cbs()
        conn._established()
        if self._on_accept is not None:
            res = self._on_accept(conn)
            if inspect.isawaitable(res):
                self._ctx._spawn(res)
            return
        while self._waiters:
            w = self._waiters.popleft()
            if not w.done():
                w.set_result(conn)
                return
        self._queue.append(conn)

    async def accept(self) -> Connection:
        """The next connection. Raises ConnectionClosed once the listener is closed."""
        self._ctx._check()
        if self._queue:
            return self._queue.popleft()
        if self._l is None:
            raise _closed_error("accept")
        fut = self._ctx._loop.create_future()
        self._waiters.append(fut)
        return await fut

    def __aiter__(self) -> AsyncIterator[Connection]:
        return self

    async def __anext__(self) -> Connection:
        try:
            return await self.accept()
        except ConnectionClosed:
            raise StopAsyncIteration from None

    def close(self) -> None:
        """Stop accepting; established connections stay open."""
        if self._l is None:
            return
        self._ctx._check()
        lib.rmx_listener_close(self._l)
        self._l = None
        reg.release(self._tok)
        self._ctx._listeners.discard(self)
        while self._waiters:
            w = self._waiters.popleft()
            if not w.done():
                w.set_exception(_closed_error("accept"))
        self._ctx._kick()

    async def __aenter__(self) -> "Listener":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<rmx.Listener {self.uri}{'' if self._l is not None else ' closed'}>"

