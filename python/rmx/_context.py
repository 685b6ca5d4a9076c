# SPDX-License-Identifier: BSD-3-Clause
"""The context: one rmx_ctx_t driven by an asyncio event loop."""
from __future__ import annotations

import asyncio
import inspect
import threading
import weakref
from typing import Any, Awaitable, Callable, Dict, Mapping, Optional, Set, Tuple, Union

from . import _registry as reg
from ._conn import AcceptHandler, Buffer, Connection, Listener, _CONNECTING, _uri_arg, _uri_error
from ._rmx_cffi import ffi, lib
from .errors import RmxError, RmxThreadError, check, make_error

RpcHandler = Callable[[bytes], Union[Buffer, Awaitable[Buffer]]]
_BURST = 64  # small sends in a row without giving the loop a turn
_PROGRESS = {"event": "RMX_PROGRESS_EVENT", "poll": "RMX_PROGRESS_POLL",
             "adaptive": "RMX_PROGRESS_ADAPTIVE"}


def new_ctx(progress: int, config: Optional[Mapping[str, int]]) -> Tuple[Any, Any]:
    """An rmx_ctx_t on a private loop and the rmx_config_t it was made with:
    progress (an RMX_PROGRESS_* value), then ``config``'s fields by name."""
    cfg = ffi.new("rmx_config_t *")
    check(lib.rmx_config_init(cfg), "config")
    cfg.progress = progress
    for key, value in (config or {}).items():
        if key in ("size", "progress") or not hasattr(cfg, key):
            raise ValueError(f"unknown rmx_config_t field {key!r}")
        setattr(cfg, key, value)
    pp = ffi.new("rmx_ctx_t **")
    check(lib.rmx_ctx_create(pp, ffi.NULL, cfg), "rmx_ctx_create")
    return pp[0], cfg


class _Handler:
    """An RPC id served by a Python function."""

    def __init__(self, ctx: "Context", fn: RpcHandler) -> None:
        self.ctx = ctx
        self.fn = fn
        self.is_coro = inspect.iscoroutinefunction(fn)
        self.tok = reg.hold(self)

    def _cb_request(self, req: Any, data: bytes) -> None:
        ctx = self.ctx
        if self.is_coro:
            ctx._serve_later(req, self.fn(data))
            return
        try:
            res = self.fn(data)
        except BaseException as e:  # noqa: B902 - any failure goes to the caller
            ctx._reply(req, None, e)
            return
        if inspect.isawaitable(res):
            ctx._serve_later(req, res)
        else:
            ctx._reply(req, res, None)


class Context:
    """An rmx context bound to the running asyncio loop (its thread).

    Progress is driven from the loop: ``loop.add_reader`` on the context's
    wait-fd (rmx_ctx_fd) and a timer for rmx_ctx_timeout. ``progress``:
    ``"event"`` sleeps in the loop between events; ``"poll"`` has rmx ask to
    be called on every turn of the loop (the loop spins, lowest latency, a
    core busy); ``"adaptive"`` spins while traffic flows, then sleeps.
    ``config`` sets rmx_config_t fields by name (``max_msg_size``,
    ``rpc_max_inflight``, ``eager_size``, ``rx_depth``, ``connect_timeout_ms``,
    ``close_timeout_ms``, ...). Every call must come from the loop's thread
    (RmxThreadError otherwise); ``await ctx.close()`` at the end.
    """

    def __init__(self, *, progress: str = "event", config: Optional[Mapping[str, int]] = None,
                 loop: Optional[asyncio.AbstractEventLoop] = None) -> None:
        self._loop = loop or asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._ctx = None
        if progress not in _PROGRESS:
            raise ValueError(f"progress must be one of {sorted(_PROGRESS)}")
        self._ctx, cfg = new_ctx(getattr(lib, _PROGRESS[progress]), config)
        self.progress_mode = progress
        self._max_inflight = max(1, cfg.rpc_max_inflight)
        self.max_msg_size: int = cfg.max_msg_size
        self._fd = lib.rmx_ctx_fd(self._ctx)
        self._soon: Optional[asyncio.Handle] = None
        self._timer: Optional[asyncio.TimerHandle] = None
        self._conns: Dict[int, Connection] = {}
        self._listeners: Set[Listener] = set()
        self._handlers: Dict[int, _Handler] = {}
        self._reqs: Dict[int, asyncio.Task] = {}
        self._tasks: Set[asyncio.Task] = set()
        self._mems: Set[Any] = set()
        self._rkeys: Set[Any] = set()
        self._xfers: Set[Any] = set()
        self._notify_conns: Set[Connection] = set()
        self._nbuf = ffi.new("char[]", max(256, cfg.eager_size))
        self._ops = 0
        self._burst = 0  # small sends flushed since the loop last had control
        self._closing: Optional[asyncio.Future] = None
        self._loop.add_reader(self._fd, self._on_turn)
        self._kick()

    # -- driving rmx from the loop -------------------------------------
    def _progress(self) -> None:
        if self._ctx is None:
            return
        rc = lib.rmx_ctx_progress(self._ctx)
        if rc < 0:
            reg.report(make_error(rc, "rmx_ctx_progress"), "rmx progress failed")
        if self._notify_conns:
            for conn in list(self._notify_conns):
                conn._poll_notifications()
        if self._ctx is not None:
            self._rearm()

    def _on_turn(self) -> None:
        """Progress from the loop (the wait-fd, a call_soon, the timer)."""
        self._burst = 0
        self._progress()

    def _on_soon(self) -> None:
        self._soon = None
        self._on_turn()

    def _on_timer(self) -> None:
        self._timer = None
        self._on_turn()

    def _kick(self) -> None:
        """Progress at the loop's next turn: calls made outside progress are
        handed to the socket or device there (several in one write)."""
        if self._soon is None and self._ctx is not None:
            self._soon = self._loop.call_soon(self._on_soon)

    def _flush(self) -> bool:
        """After a small send: hand it to the socket now when no progress is
        already due this turn (one write and no turn of the loop in between,
        as a stream's write), else with the rest at the end of the turn.
        rmx_ctx_flush writes and does nothing else: what is ready to be
        read is the loop's to find (the fd wakes it), so a send costs no
        read that finds nothing and no poll of the backend. False once this
        many have gone out since the loop last ran: the caller then waits
        for the loop, so a sending loop cannot starve it."""
        self._burst += 1
        if self._soon is None:
            rc = lib.rmx_ctx_flush(self._ctx)
            if rc < 0:
                reg.report(make_error(rc, "rmx_ctx_flush"), "rmx flush failed")
            self._rearm()
        return self._burst < _BURST

    def _rearm(self) -> None:
        ms = lib.rmx_ctx_timeout(self._ctx)
        if ms == 0:
            self._kick()
        elif ms > 0:
            when = self._loop.time() + ms / 1000.0
            if self._timer is not None:
                if self._timer.when() <= when + 0.001:
                    return
                self._timer.cancel()
            self._timer = self._loop.call_at(when, self._on_timer)

    def _check(self) -> None:
        tid = threading.get_ident()
        if getattr(self._loop, "_thread_id", None) == tid and self._ctx is not None:
            return  # this thread is running our loop: the common case, checked cheaply
        if tid != self._thread:
            raise RmxThreadError("an rmx context belongs to the thread of its event loop; "
                                 "it was used from another thread")
        running = asyncio._get_running_loop()
        if running is not None and running is not self._loop:
            raise RmxThreadError("an rmx context belongs to the event loop it was created on; "
                                 "it was used from another loop")
        if self._ctx is None:
            raise make_error(lib.RMX_EINVAL, "the context is closed")

    def _spawn(self, aw: Awaitable[Any]) -> None:
        task = self._loop.create_task(self._guard(aw))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guard(self, aw: Awaitable[Any]) -> None:
        try:
            await aw
        except asyncio.CancelledError:
            pass
        except Exception as e:  # an accept handler failed: tell the loop
            reg.report(e, "exception in an rmx accept handler")

    # -- RPC serving ------------------------------------------------------
    def _serve_later(self, req: Any, aw: Awaitable[Any]) -> None:
        key = int(ffi.cast("uintptr_t", req))
        self._reqs[key] = self._loop.create_task(self._serve(req, key, aw))

    async def _serve(self, req: Any, key: int, aw: Awaitable[Any]) -> None:
        res, err = None, None
        try:
            res = await aw
        except BaseException as e:  # noqa: B902 - cancellation answers too
            err = e
        self._reqs.pop(key, None)
        if self._ctx is not None:
            self._reply(req, res, err)

    def _cancel_requests(self, c: Any) -> None:
        """Cancel the handler tasks serving requests that came on connection
        ``c``, which is closing or down: their replies can go nowhere, and rmx
        holds the connection's close back until each request is answered
        (the cancelled handler answers RMX_ECANCELED, which releases it).
        The cancel waits for the loop's next turn: a task created in this
        progress pass has not started, and one cancelled before its first
        step would end without answering."""
        for key, task in list(self._reqs.items()):
            if lib.rmx_rpc_req_conn(ffi.cast("rmx_rpc_req_t *", key)) == c:
                self._loop.call_soon(task.cancel)

    def _reply(self, req: Any, res: Any, err: Optional[BaseException]) -> None:
        if err is None:
            try:
                n, ptr, keep = reg.buffer_of(res)
            except TypeError as e:
                err = TypeError(f"an RPC handler returned {type(res).__name__}, "
                                f"not a bytes-like object: {e}")
            else:
                lib.rmx_rpc_reply(req, ptr, n)
                if keep is not None:
                    ffi.release(keep)
        if err is not None:
            if isinstance(err, RmxError) and err.code < 0:
                status = err.code
            elif isinstance(err, asyncio.CancelledError):
                status = lib.RMX_ECANCELED
            else:
                status = lib.RMX_EUNKNOWN
                reg.report(err, "exception in an rmx RPC handler (the caller gets RMX_EUNKNOWN)")
            lib.rmx_rpc_reply_error(req, status)
        self._kick()

    def rpc_register(self, rpc_id: int, handler: RpcHandler) -> None:
        """Serve RPC ``rpc_id`` on every connection of this context.

        ``handler(request: bytes)`` returns the reply, any bytes-like object
        (None: an empty reply); a coroutine function runs as a task, others
        run at once. An exception becomes the caller's RmxError: an
        RmxError's own code, else RMX_EUNKNOWN (and the loop's exception
        handler gets the exception). Handlers live as long as the context."""
        self._check()
        if not callable(handler):
            raise TypeError("handler must be callable")
        h = _Handler(self, handler)
        rc = lib.rmx_rpc_register(self._ctx, rpc_id, lib._py_on_rpc, reg.as_arg(h.tok))
        if rc < 0:
            reg.release(h.tok)
            raise make_error(rc, f"rpc_register {rpc_id}")
        self._handlers[rpc_id] = h

    # -- connections ------------------------------------------------------
    async def connect(self, uri: str) -> Connection:
        """Open a connection (``tcp://``, ``rdma://`` or ``auto://HOST:PORT``)
        and wait until it is established. Cancelling the wait closes it."""
        self._check()
        curi = _uri_arg(uri, "connect")
        pc = ffi.new("rmx_conn_t **")
        conn = Connection(self, None, _CONNECTING)
        conn._connected = self._loop.create_future()
        rc = lib.rmx_connect(self._ctx, curi, lib._py_on_connected, reg.as_arg(conn._tok), pc)
        if rc < 0:
            reg.release(conn._tok)
            self._conns.pop(conn._tok, None)
            raise _uri_error(rc, f"connect {uri}")
        conn._c = pc[0]
        conn._set_cbs()
        self._kick()
        try:
            return await conn._connected
        except asyncio.CancelledError:
            conn._start_close()
            raise
        except RmxError:  # the handle is let go before the error is raised
            if conn._closed is not None:
                await asyncio.shield(conn._closed)
            raise

    async def listen(self, uri: str, on_accept: Optional[AcceptHandler] = None) -> Listener:
        """Listen on ``uri`` (port 0: a free one; ``listener.uri`` has it)."""
        self._check()
        return Listener(self, uri, on_accept)

    def register(self, obj: Buffer, access: str = "rw") -> Any:
        """Register a writable buffer-protocol object for one-sided access
        (see rmx.Memory)."""
        self._check()
        from ._mem import Memory
        return Memory(self, obj, access)

    def stats(self) -> Dict[str, int]:
        """rmx_ctx_stats_get()'s counters, and the package's own:
        ``py_ops`` (operations in flight), ``py_conns`` (connections not yet
        let go), ``py_requests`` (RPC requests being served),
        ``py_stray_callbacks`` (callbacks that found no object; always 0)."""
        self._check()
        st = ffi.new("rmx_ctx_stats_t *")
        check(lib.rmx_ctx_stats_get(self._ctx, st, ffi.sizeof("rmx_ctx_stats_t")), "stats")
        out = {f: getattr(st, f) for f, _ in ffi.typeof("rmx_ctx_stats_t").fields}
        out.update(py_ops=self._ops, py_conns=len(self._conns), py_requests=len(self._reqs),
                   py_stray_callbacks=reg.stray)
        return out

    @property
    def closed(self) -> bool:
        return self._ctx is None

    async def close(self) -> None:
        """Close everything the context holds (listeners, tasks of handlers,
        connections, registrations), then destroy it. Safe to call again."""
        if self._ctx is None:
            return
        self._check()
        if self._closing is not None:
            await asyncio.shield(self._closing)
            return
        self._closing = self._loop.create_future()
        for lst in list(self._listeners):
            lst.close()
        tasks = list(self._reqs.values()) + list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*(c.close() for c in list(self._conns.values())),
                             return_exceptions=True)
        for x in list(self._xfers):
            x._free()
        for m in list(self._mems):
            m.close()
        for k in list(self._rkeys):
            k._free()
        rc = lib.rmx_ctx_destroy(self._ctx)
        self._loop.remove_reader(self._fd)
        for h in (self._soon, self._timer):
            if h is not None:
                h.cancel()
        for h in self._handlers.values():
            reg.release(h.tok)
        self._ctx = None
        self._closing.set_result(None)
        check(rc, "rmx_ctx_destroy")

    async def __aenter__(self) -> "Context":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "closed" if self._ctx is None else f"{len(self._conns)} connections"
        return f"<rmx.Context {self.progress_mode}, {state}>"


_defaults: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Context]" = \
    weakref.WeakKeyDictionary()


def get_context() -> Context:
    """The running loop's default context (created on first use), which the
    module-level connect() and listen() use."""
    loop = asyncio.get_running_loop()
    ctx = _defaults.get(loop)
    if ctx is None or ctx.closed:
        ctx = _defaults[loop] = Context()
    return ctx
