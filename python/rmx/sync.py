# SPDX-License-Identifier: BSD-3-Clause
"""rmx without an event loop: blocking calls for code that has no asyncio.

    import rmx.sync

    with rmx.sync.Context() as ctx:
        conn = ctx.connect("tcp://127.0.0.1:7471")
        conn.send(b"hello")
        print(conn.recv())

Each blocking call runs rmx's progress itself: in ``progress="event"``
(the default) it sleeps inside rmx's loop between events (rmx_ctx_wait;
with a time limit, on the context's wait-fd with ``select.epoll``), in
``"poll"`` it keeps polling (rmx_ctx_progress: the lowest latency, a core
busy). No loop turn, future or task stands between
a message and the caller, which is what makes this the fast path
(docs/python.md, "Without an event loop"). A context and its objects
belong to the thread that made it (RmxThreadError from any other); it may
not be used from inside asyncio's running loop, whose thread it would
block. Messages, connections and listeners only: RPC, one-sided memory and
transfers are the asyncio API's.
"""
from __future__ import annotations

import asyncio
import collections
import select
import threading
import time
from typing import Any, Callable, Mapping, Optional

from . import _registry as reg
from ._conn import _closed_error as _closed, _uri_arg, _uri_error
from ._context import new_ctx
from ._rmx_cffi import ffi, lib
from .errors import RmxThreadError, RmxTimeoutError, make_error

__all__ = ["Context", "Connection", "Listener"]

_COPIED = lib.RMX_EAGER_MSG_MIN  # sends up to this size are copied in rmx_send
_CBS = reg.conn_cbs()
_PROGRESS = {"event": "RMX_PROGRESS_EVENT", "poll": "RMX_PROGRESS_POLL"}


class _Sent:
    """A send larger than _COPIED: its buffer is rmx's until on_sent."""

    __slots__ = ("keep", "status", "tok")

    def __init__(self, keep: Any) -> None:
        self.keep = keep
        self.status: Optional[int] = None
        self.tok = reg.hold(self)

    def finish(self, status: int) -> None:
        self.status = status
        ffi.release(self.keep)


class Context:
    """An rmx context driven by the blocking calls of its thread."""

    def __init__(self, *, progress: str = "event",
                 config: Optional[Mapping[str, int]] = None) -> None:
        if progress not in _PROGRESS:
            raise ValueError(f"progress must be one of {sorted(_PROGRESS)}")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("rmx.sync blocks its thread, so not inside a running asyncio "
                               "loop: use rmx.Context there")
        self._ctx = None
        self._thread = threading.get_ident()
        self._ctx, _ = new_ctx(getattr(lib, _PROGRESS[progress]), config)
        self._spin = progress == "poll"
        self._ep = select.epoll()
        self._ep.register(lib.rmx_ctx_fd(self._ctx), select.EPOLLIN)
        self._conns: dict = {}
        self._listeners: set = set()

    def _check(self) -> Any:
        if threading.get_ident() != self._thread:
            raise RmxThreadError("an rmx.sync object is used from another thread than its context's")
        if self._ctx is None:
            raise _closed("context")
        return self._ctx

    def wait(self, done: Callable[[], bool], timeout: Optional[float] = None) -> bool:
        """Run progress until ``done()`` is true (True) or ``timeout`` seconds
        have passed (False; None: no limit)."""
        ctx = self._check()
        if timeout is None:
            # Spinning: progress, the tightest loop (no clock, no sleep).
            # Sleeping: rmx_ctx_wait sleeps in rmx's own loop, its poll
            # alone, as rmx_ctx_run does.
            step, what = ((lib.rmx_ctx_progress, "rmx_ctx_progress") if self._spin
                          else (lib.rmx_ctx_wait, "rmx_ctx_wait"))
            while not done():
                rc = step(ctx)
                if rc < 0:
                    raise make_error(rc, what)
            return True
        end = time.monotonic() + timeout
        # With a limit: sleep first, progress after. A message already there
        # makes the fd readable, so the wait returns at once, and the turn
        # that would find nothing (a system call, a crossing into C) is saved.
        while not done():
            left = end - time.monotonic()
            if left <= 0:
                return False
            if not self._spin:
                ms = lib.rmx_ctx_timeout(ctx)
                if ms != 0:
                    self._ep.poll(left if ms < 0 else min(ms / 1000.0, left), 1)
            rc = lib.rmx_ctx_progress(ctx)
            if rc < 0:
                raise make_error(rc, "rmx_ctx_progress")
        return True

    def connect(self, uri: str, timeout: Optional[float] = None) -> "Connection":
        """Connect and wait until it is established (RmxTimeoutError after
        ``timeout`` seconds, the connection closed)."""
        ctx = self._check()
        curi = _uri_arg(uri, "connect")  # before anything is held
        conn = Connection(self, None)
        pc = ffi.new("rmx_conn_t **")
        rc = lib.rmx_connect(ctx, curi, lib._py_on_connected, reg.as_arg(conn._tok), pc)
        if rc < 0:
            conn._forget()
            raise _uri_error(rc, f"connect to {uri}")
        conn._c = pc[0]
        if not self.wait(lambda: conn._up is not None, timeout):
            conn.close()
            raise make_error(lib.RMX_ETIMEDOUT, f"connect to {uri}", RmxTimeoutError)
        if conn._up != 0:
            status = conn._up
            conn.close()
            raise make_error(status, f"connect to {uri}")
        return conn

    def listen(self, uri: str) -> "Listener":
        return Listener(self, uri)

    def close(self) -> None:
        """Close every connection and listener left, then the context."""
        if self._ctx is None:
            return
        self._check()
        for lst in list(self._listeners):
            lst.close()
        for conn in list(self._conns.values()):
            conn.close()
        rc = lib.rmx_ctx_destroy(self._ctx)
        if rc < 0:
            raise make_error(rc, "rmx_ctx_destroy")
        self._ctx = None
        self._ep.close()

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Connection:
    """A connection of an rmx.sync Context: messages either way."""

    def __init__(self, ctx: Context, c: Any) -> None:
        self._ctx = ctx
        self._c = c
        self._tok = reg.hold(self)
        self._queue: collections.deque = collections.deque()
        self._up: Optional[int] = None    # connect's status
        self._down: Optional[int] = None  # on_disconnect's status
        self._closing = False
        self._closed = False
        self.transport = ""
        ctx._conns[self._tok] = self

    def _forget(self) -> None:
        reg.release(self._tok)
        self._ctx._conns.pop(self._tok, None)

    def _open(self) -> None:
        lib.rmx_conn_set_cbs(self._c, _CBS, reg.as_arg(self._tok))
        self.transport = ffi.string(lib.rmx_conn_transport(self._c)).decode()

    # -- callbacks, from the context's progress --
    def _cb_connected(self, status: int) -> None:
        self._up = status
        if status == 0:
            self._open()

    def _cb_recv(self, data: bytes) -> None:
        self._queue.append(data)

    def _cb_disconnect(self, status: int) -> None:
        self._down = status

    def _cb_closed(self) -> None:
        self._closed = True
        self._c = None
        self._ctx._conns.pop(self._tok, None)

    # -- the application's calls --
    def _usable(self, what: str) -> Any:
        self._ctx._check()
        if self._closing or self._c is None:
            raise _closed(what)
        if self._down is not None:
            raise _closed(what, self._down)
        return self._c

    def send(self, data: Any, timeout: Optional[float] = None) -> None:
        """Send one message; returns once rmx is done with ``data``: at once
        for up to RMX_EAGER_MSG_MIN (248) bytes (copied and written in the
        call), else when the send completes (its failure raises here)."""
        c = self._usable("send")
        if type(data) is bytes and len(data) <= _COPIED:  # cffi lends its bytes for the call
            rc = lib.rmx_send(c, data, len(data), ffi.NULL, ffi.NULL)
            if rc < 0:
                raise make_error(rc, "send")
            lib.rmx_ctx_flush(self._ctx._ctx)
            return
        n, ptr, keep = reg.buffer_of(data)
        if n <= _COPIED:
            rc = lib.rmx_send(c, ptr, n, ffi.NULL, ffi.NULL)
            if keep is not None:
                ffi.release(keep)
            if rc < 0:
                raise make_error(rc, "send")
            lib.rmx_ctx_flush(self._ctx._ctx)
            return
        op = _Sent(keep)
        rc = lib.rmx_send(c, ptr, n, lib._py_on_sent, reg.as_arg(op.tok))
        if rc < 0:
            reg.release(op.tok)
            ffi.release(keep)
            raise make_error(rc, "send")
        # the buffer stays borrowed until on_sent, also past a timeout here
        if not self._ctx.wait(lambda: op.status is not None, timeout):
            raise make_error(lib.RMX_ETIMEDOUT, "send", RmxTimeoutError)
        if op.status < 0:
            raise make_error(op.status, "send")

    def recv(self, timeout: Optional[float] = None) -> bytes:
        """The next message. ConnectionClosed once the connection is closed
        (by either side on purpose) and every message taken; the loss's
        error if it was lost; RmxTimeoutError after ``timeout`` seconds."""
        q = self._queue
        if q and self._ctx._thread == threading.get_ident():
            return q.popleft()
        ctx = self._ctx
        c = ctx._check()
        if not q and ctx._spin and timeout is None:  # wait()'s spin, inline: the hot path
            progress = lib.rmx_ctx_progress
            while not q and self._down is None and self._c is not None:
                rc = progress(c)
                if rc < 0:
                    raise make_error(rc, "rmx_ctx_progress")
        if not q and not ctx.wait(
                lambda: bool(q) or self._down is not None or self._c is None, timeout):
            raise make_error(lib.RMX_ETIMEDOUT, "recv", RmxTimeoutError)
        if q:
            return q.popleft()
        raise _closed("recv", self._down or 0)

    def close(self) -> None:
        """Close, and wait for the close to complete (on_closed)."""
        if self._closing or self._closed:
            return
        self._ctx._check()
        self._closing = True
        if self._c is None:
            self._forget()
            return
        rc = lib.rmx_conn_close(self._c, lib._py_on_closed, reg.as_arg(self._tok))
        if rc < 0:
            raise make_error(rc, "close")
        self._ctx.wait(lambda: self._closed)

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Listener:
    """A listener of an rmx.sync Context."""

    def __init__(self, ctx: Context, uri: str) -> None:
        c = ctx._check()
        curi = _uri_arg(uri, "listen")  # before anything is held
        self._ctx = ctx
        self._queue: collections.deque = collections.deque()
        lp = ffi.new("rmx_listener_t **")
        self._tok = reg.hold(self)
        rc = lib.rmx_listen(c, curi, lib._py_on_accept, reg.as_arg(self._tok), lp)
        if rc < 0:
            reg.release(self._tok)
            raise _uri_error(rc, f"listen on {uri}")
        self._l = lp[0]
        buf = ffi.new("char[]", 128)
        rc = lib.rmx_listener_uri(self._l, buf, 128)
        if rc < 0:
            self.close()
            raise make_error(rc, f"listen on {uri}: its address")
        self.uri = ffi.string(buf).decode()
        ctx._listeners.add(self)

    def _cb_accept(self, c: Any) -> None:
        conn = Connection(self._ctx, c)
        conn._up = 0
        conn._open()
        self._queue.append(conn)

    def accept(self, timeout: Optional[float] = None) -> Connection:
        """The next connection (RmxTimeoutError after ``timeout`` seconds)."""
        self._ctx._check()
        if self._l is None:
            raise _closed("accept")
        q = self._queue
        if not q and not self._ctx.wait(lambda: bool(q), timeout):
            raise make_error(lib.RMX_ETIMEDOUT, "accept", RmxTimeoutError)
        return q.popleft()

    def close(self) -> None:
        if self._l is None:
            return
        self._ctx._check()
        lib.rmx_listener_close(self._l)
        self._l = None
        reg.release(self._tok)
        self._ctx._listeners.discard(self)
        for conn in self._queue:  # accepted, never taken: closed with it
            conn.close()
        self._queue.clear()

    def __enter__(self) -> "Listener":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
