# SPDX-License-Identifier: BSD-3-Clause
"""Cancellation: an awaiting task cancelled in a call or a send; every
callback runs once, and memory and counters come back to where they were."""
import asyncio
import gc
import tracemalloc

import pytest
from conftest import pattern

import rmx
from rmx import _registry


async def settle(*ctxs, rounds=200):
    """Let the loop run until no operation is in flight."""
    for _ in range(rounds):
        if all(c.stats()["py_ops"] == 0 and c.stats()["py_requests"] == 0 for c in ctxs):
            return
        await asyncio.sleep(0.002)
    raise AssertionError([c.stats() for c in ctxs])


async def test_cancelled_call(pair):
    gate = asyncio.Event()
    served = []

    async def slow(req):
        await gate.wait()
        served.append(req)
        return req

    pair.srv.rpc_register(1, slow)
    cli, _ = await pair.connect()
    task = asyncio.ensure_future(cli.call(1, b"a"))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await settle(pair.cli)  # cancelled in rmx: over before the handler answers
    assert pair.srv.stats()["py_requests"] == 1
    gate.set()
    assert await cli.call(1, b"b") == b"b"  # the connection carries on
    await settle(pair.cli, pair.srv)
    assert served == [b"a", b"b"]  # the cancelled request still reached its handler
    assert _registry.stray == 0


async def test_cancelled_send_still_completes(pair):
    cli, srv = await pair.connect()
    big = pattern(16 << 20, 3)
    task = asyncio.ensure_future(cli.send(big))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    del big, task
    gc.collect()  # the send holds its buffer, not the task
    assert await srv.recv() == pattern(16 << 20, 3)
    await settle(pair.cli)
    assert cli.stats()["msgs_sent"] == 1 and cli.stats()["errors"] == 0


async def test_no_leak_over_many_cancellations(pair):
    gate = asyncio.Event()

    async def never(req):
        await gate.wait()
        return b""

    pair.srv.rpc_register(1, never)
    pair.srv.rpc_register(2, lambda r: r)
    cli, srv = await pair.connect()

    async def round_():
        tasks = [asyncio.ensure_future(cli.call(1, bytes(300))) for _ in range(50)]
        tasks += [asyncio.ensure_future(cli.send(bytes(20000))) for _ in range(10)]
        tasks += [asyncio.ensure_future(cli.call(2, b"q")) for _ in range(10)]
        await asyncio.sleep(0.001)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        gate.set()
        await settle(pair.cli, pair.srv)
        gate.clear()
        while srv._queue:
            await srv.recv()

    await round_()  # warm up pools and caches
    base_c, base_s = pair.cli.stats(), pair.srv.stats()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for _ in range(20):
        await round_()
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename")
                if "rmx" in str(s.traceback) or "asyncio" in str(s.traceback))
    assert grown < 64 * 1024, grown
    for ctx, base in ((pair.cli, base_c), (pair.srv, base_s)):
        now = ctx.stats()
        for key in ("py_ops", "py_conns", "py_requests", "conns", "pool_bytes", "mem_regs"):
            assert now[key] == base[key], (key, base, now)
    assert _registry.stray == 0 and len(_registry._objs) < 20


async def test_cancelled_connect_closes(pair):
    lst = await pair.srv.listen("tcp://127.0.0.1:0")
    task = asyncio.ensure_future(pair.cli.connect(lst.uri))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(200):
        if pair.cli.stats()["py_conns"] == 0:
            break
        await asyncio.sleep(0.005)
    assert pair.cli.stats()["py_conns"] == 0
