# SPDX-License-Identifier: BSD-3-Clause
"""RPC: 10,000 concurrent calls checked, handlers that raise, timeouts."""
import asyncio
import struct

import pytest

import rmx


async def test_ten_thousand_concurrent_calls(pair):
    async def square(req):
        (x,) = struct.unpack("<Q", req)
        if x % 3 == 0:
            await asyncio.sleep(0)  # some answer later, out of order
        return struct.pack("<QQ", x, x * x)

    pair.srv.rpc_register(7, square)
    pair.srv.rpc_register(8, lambda req: req[::-1])  # a plain function answers at once
    cli, _ = await pair.connect()

    async def one(x):
        if x % 2:
            return struct.unpack("<QQ", await cli.call(7, struct.pack("<Q", x)))
        return struct.unpack("<QQ", (await cli.call(8, struct.pack("<QQ", x * x, x)[::-1])))[::-1]

    n = 10_000  # over rpc_max_inflight (1024): the rest wait for slots
    results = await asyncio.gather(*(one(x) for x in range(n)))
    assert results == [(x, x * x) for x in range(n)]
    assert pair.cli.stats()["py_ops"] == 0 and cli._inflight == 0


async def test_raising_handler_and_server_keeps_serving(pair, loop_errors):
    async def bad(req):
        if req == b"rmx":
            raise rmx.errors.make_error(rmx.errors.codes["RMX_EACCES"], "handler")
        raise ValueError("the handler failed")

    pair.srv.rpc_register(1, bad)
    pair.srv.rpc_register(2, lambda req: 42)  # not bytes: an error for the caller
    pair.srv.rpc_register(3, lambda req: b"ok:" + req)
    cli, _ = await pair.connect()
    for _ in range(3):
        with pytest.raises(rmx.RmxError) as e:
            await cli.call(1, b"x")
        assert e.value.name == "RMX_EUNKNOWN"
        with pytest.raises(rmx.RmxError) as e:
            await cli.call(1, b"rmx")
        assert e.value.name == "RMX_EACCES"
        with pytest.raises(rmx.RmxError):
            await cli.call(2)
        assert await cli.call(3, b"y") == b"ok:y"
    # the server's loop was told of each failure that was not an RmxError
    told = [str(c["exception"]) for c in loop_errors]
    assert told.count("the handler failed") == 3 and len(told) == 6, told
    loop_errors.clear()
    with pytest.raises(rmx.RmxError) as e:
        await cli.call(99)
    assert e.value.name == "RMX_ENOHANDLER"


async def test_timeout(pair):
    gate = asyncio.Event()

    async def stuck(req):
        await gate.wait()
        return b"late"

    pair.srv.rpc_register(5, stuck)
    cli, _ = await pair.connect()
    with pytest.raises(rmx.RmxTimeoutError) as e:
        await cli.call(5, timeout=0.05)
    assert isinstance(e.value, TimeoutError) and e.value.name == "RMX_ETIMEDOUT"
    gate.set()
    assert await cli.call(5, timeout=5) == b"late"
    assert await cli.call(5, b"z" * 100_000) == b"late"  # a large request, zero-copy
