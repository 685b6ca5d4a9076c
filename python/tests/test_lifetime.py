# SPDX-License-Identifier: BSD-3-Clause
"""Lifetimes and threads: objects the application dropped, contexts used
from the wrong thread, closed contexts, the default context."""
import asyncio
import gc
import threading
import weakref

import pytest
from conftest import URI, dial, pattern

import rmx


async def test_dropped_connection_survives_gc(pair):
    cli, srv = await pair.connect()
    ref = weakref.ref(cli)
    del cli
    pair.cli_conn = None
    gc.collect()
    conn = ref()
    assert conn is not None  # the context keeps an open connection alive
    big = pattern(1 << 20)
    sends = [srv.send(big) for _ in range(4)]
    del conn
    gc.collect()
    await asyncio.gather(*sends)
    conn = ref()
    for _ in range(4):
        assert await conn.recv() == big
    await conn.close()
    del conn
    gc.collect()
    assert ref() is None  # let go once closed
    await srv.close()


async def test_context_close_with_everything_in_flight(pair):
    gate = asyncio.Event()

    async def never(req):
        await gate.wait()

    pair.srv.rpc_register(1, never)
    cli, srv = await pair.connect()
    calls = [asyncio.ensure_future(cli.call(1, b"x")) for _ in range(20)]
    sends = [asyncio.ensure_future(srv.send(pattern(300000))) for _ in range(5)]
    pending_recv = asyncio.ensure_future(srv.recv())
    await asyncio.sleep(0.01)
    mem = pair.srv.register(bytearray(4096))
    del cli, srv, mem
    gc.collect()
    await pair.srv.close()  # handlers cancelled, connections closed, memory released
    res = await asyncio.gather(*calls, *sends, pending_recv, return_exceptions=True)
    assert all(isinstance(r, (rmx.RmxError, type(None))) for r in res), res
    assert any(isinstance(r, rmx.RmxError) for r in res[:20])
    with pytest.raises(rmx.RmxError):
        pair.srv.stats()
    await pair.srv.close()  # again: nothing happens


async def test_other_thread_is_refused(pair):
    cli, _ = await pair.connect()
    errors = []

    def other():
        for fn in (pair.cli.stats, lambda: asyncio.run(cli.send(b"x")),
                   lambda: pair.srv.rpc_register(3, lambda r: r)):
            try:
                fn()
            except rmx.RmxThreadError as e:
                errors.append(str(e))

    t = threading.Thread(target=other)
    t.start()
    await asyncio.get_running_loop().run_in_executor(None, t.join)
    assert len(errors) == 3 and "thread" in errors[0]


async def test_default_context():
    lst = await rmx.listen(URI)
    conn = await rmx.connect(dial(lst.uri))
    peer = await lst.accept()
    await conn.send(b"hi")
    assert await peer.recv() == b"hi"
    assert rmx.get_context() is rmx.get_context()
    await rmx.get_context().close()
    assert rmx.library_version().count(".") == 2
