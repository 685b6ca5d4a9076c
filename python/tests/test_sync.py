# SPDX-License-Identifier: BSD-3-Clause
"""rmx.sync, the blocking API: every byte of every size both ways, the
close after the last message, timeouts that lose nothing, errors for bad
use, and no callback left over (the registry's stray count stays 0)."""
import asyncio
import threading

import pytest
from conftest import TRANSPORT, URI, dial, pattern

import rmx
import rmx.sync
from rmx import _registry as reg

SIZES = [0, 1, 247, 248, 249, 4096, 65536, 1 << 20]


def serve(lst: rmx.sync.Listener, n: int, ready: threading.Event, errors: list) -> None:
    """Echo n messages on the next connection, then close it."""
    try:
        ready.set()
        with lst.accept(timeout=30) as conn:
            for _ in range(n):
                conn.send(conn.recv(timeout=30))
    except BaseException as e:  # noqa: B902 - reported to the test
        errors.append(e)


def server(n: int):
    """A listener in a thread of its own (its own context): its URI, the
    thread, and the errors it met."""
    box, errors, ready = {}, [], threading.Event()

    def run():
        with rmx.sync.Context() as ctx:
            lst = ctx.listen(URI)
            box["uri"] = lst.uri
            serve(lst, n, ready, errors)

    t = threading.Thread(target=run)
    t.start()
    assert ready.wait(30), errors
    return dial(box["uri"]), t, errors


def test_echo_every_size_both_ways():
    stray = reg.stray
    uri, t, errors = server(len(SIZES) * 2)
    with rmx.sync.Context() as ctx:
        conn = ctx.connect(uri, timeout=30)
        assert conn.transport == TRANSPORT
        for rep in range(2):
            for i, n in enumerate(SIZES):
                data = pattern(n, seed=i + rep)
                conn.send(bytearray(data) if rep else data)
                assert conn.recv(timeout=30) == data
        # the server closed after its last echo: then ConnectionClosed, again
        for _ in range(2):
            with pytest.raises(rmx.ConnectionClosed):
                conn.recv(timeout=30)
        with pytest.raises(rmx.ConnectionClosed):
            conn.send(b"x")
        conn.close()
        conn.close()  # a second close does nothing
    t.join(30)
    assert not errors, errors
    assert reg.stray == stray


def test_messages_wait_for_a_late_recv_and_a_timeout_loses_none():
    uri, t, errors = server(3)
    with rmx.sync.Context() as ctx:
        conn = ctx.connect(uri, timeout=30)
        with pytest.raises(rmx.RmxTimeoutError):
            conn.recv(timeout=0.05)  # nothing sent yet
        for i in range(3):
            conn.send(b"m%d" % i)
        assert [conn.recv(timeout=30) for _ in range(3)] == [b"m0", b"m1", b"m2"]
        conn.close()
    t.join(30)
    assert not errors, errors


def test_poll_mode_echo():
    uri, t, errors = server(100)
    with rmx.sync.Context(progress="poll") as ctx:
        conn = ctx.connect(uri, timeout=30)
        for i in range(100):
            conn.send(b"%d" % i)
            assert conn.recv(timeout=30) == b"%d" % i
    t.join(30)
    assert not errors, errors


def test_refused_connect_and_bad_arguments():
    with rmx.sync.Context() as ctx:
        lst = ctx.listen(URI)
        uri = lst.uri
        lst.close()
        with pytest.raises(rmx.RmxError):
            ctx.connect(uri, timeout=30)  # nobody listens there now
        held = len(reg._objs)
        with pytest.raises(TypeError):
            ctx.connect(7000)
        with pytest.raises(TypeError):
            ctx.listen(b"tcp://127.0.0.1:0")
        with pytest.raises(ValueError):
            ctx.listen("")
        assert len(reg._objs) == held and not ctx._conns  # a refused call holds nothing
        with pytest.raises(rmx.RmxError) as e:
            ctx.listen("nonsense")
        assert e.value.code == rmx._lib.RMX_EINVAL
    with pytest.raises(ValueError):
        rmx.sync.Context(progress="sometimes")


def test_other_threads_and_running_loops_are_refused():
    uri, t, errors = server(1)
    with rmx.sync.Context() as ctx:
        conn = ctx.connect(uri, timeout=30)
        seen = []
        other = threading.Thread(target=lambda: seen.append(
            pytest.raises(rmx.RmxThreadError, conn.send, b"x")))
        other.start()
        other.join(30)
        assert len(seen) == 1
        conn.send(b"still mine")
        assert conn.recv(timeout=30) == b"still mine"

    async def inside():
        rmx.sync.Context()

    with pytest.raises(RuntimeError, match="asyncio"):
        asyncio.run(inside())
    t.join(30)
    assert not errors, errors
