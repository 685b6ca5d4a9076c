# SPDX-License-Identifier: BSD-3-Clause
"""RPC: 10,000 concurrent calls checked, handlers that raise, timeouts."""
import asyncio
import pickle
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
            raise rmx.RmxError("RMX_EACCES", "handler")
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


def lib_code(name):
    return rmx.errors.codes[name]


def test_rmx_error_of_a_code():
    code = lib_code("RMX_EACCES")
    e = rmx.RmxError(code, "open")
    assert (e.code, e.name, e.what) == (code, "RMX_EACCES", "open")
    assert e.text == rmx.errors.strerror(code) and str(e) == f"open: RMX_EACCES ({code}): {e.text}"
    assert rmx.RmxError("RMX_EACCES").code == code and rmx.RmxError(-7777).code == -7777
    again = pickle.loads(pickle.dumps(rmx.errors.make_error(lib_code("RMX_ETIMEDOUT"), "call")))
    assert isinstance(again, rmx.RmxTimeoutError) and again.name == "RMX_ETIMEDOUT"
    for bad in (None, 1.5, "RMX_ENOSUCH", True):
        with pytest.raises(TypeError):
            rmx.RmxError(bad)
    with pytest.raises(ValueError):
        rmx.RmxError(0)


async def test_handler_raises_rmx_error_of_a_code(pair, loop_errors):
    async def refuse(req):
        raise rmx.RmxError(int(req))

    def refuse_at_once(req):
        raise rmx.RmxError("RMX_EACCES")

    pair.srv.rpc_register(1, refuse)
    pair.srv.rpc_register(2, refuse_at_once)
    cli, _ = await pair.connect()
    for code in (lib_code("RMX_EACCES"), lib_code("RMX_ENOENT"), -7777):
        with pytest.raises(rmx.RmxError) as e:
            await cli.call(1, b"%d" % code)
        assert e.value.code == code
    with pytest.raises(rmx.RmxError) as e:
        await cli.call(2)
    assert e.value.name == "RMX_EACCES"
    assert not loop_errors  # an RmxError is the caller's answer, not a failure to log


async def _stuck_handlers(pair, n):
    """RPC 4 waits for ever; n calls to it are being served when this returns
    (the calls' tasks, what the handlers saw)."""
    never = asyncio.get_running_loop().create_future()
    seen = {"started": 0, "cancelled": []}
    started = asyncio.Event()

    async def stuck(req):
        seen["started"] += 1
        if seen["started"] == n:
            started.set()
        try:
            await never
        except asyncio.CancelledError:
            seen["cancelled"].append(req)
            raise

    pair.srv.rpc_register(4, stuck)
    cli, srv = await pair.connect()
    calls = [asyncio.ensure_future(cli.call(4, b"%d" % i)) for i in range(n)]
    await started.wait()
    return calls, seen


@pytest.mark.parametrize("closer", ["caller", "server"])
async def test_handlers_of_a_closed_connection_are_cancelled(pair, closer):
    calls, seen = await _stuck_handlers(pair, 3)
    if closer == "caller":
        await pair.cli_conn.close()
    # the server's close is not held back by handlers whose replies can go
    # nowhere: they are cancelled (the wait_for only guards against a hang)
    await asyncio.wait_for(pair.srv_conn.close(), 60)
    for call in calls:
        with pytest.raises(rmx.RmxError):
            await call
    assert sorted(seen["cancelled"]) == [b"0", b"1", b"2"]
    assert pair.srv.stats()["py_requests"] == 0


async def test_request_and_close_in_one_pass(pair):
    """The request and the close arrive together: the handler's task is
    created and cancelled in the same progress pass, and still answers."""
    async def stuck(req):
        await asyncio.get_running_loop().create_future()

    pair.srv.rpc_register(4, stuck)
    cli, srv = await pair.connect()
    for i in range(20):
        call = asyncio.ensure_future(cli.call(4, b"%d" % i))
        await asyncio.sleep(0)  # the call is posted; the close goes out with it
        await cli.close()
        with pytest.raises(rmx.RmxError):
            await call
        await asyncio.wait_for(srv.close(), 60)
        assert pair.srv.stats()["py_requests"] == 0
        cli, srv = await pair.connect()
