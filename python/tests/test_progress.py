# SPDX-License-Identifier: BSD-3-Clause
"""Poll and adaptive progress: the loop spins on rmx_ctx_progress while
traffic flows (rmx_ctx_timeout at 0), with the same results as event mode."""
import asyncio

import pytest
from conftest import TRANSPORT, URI, dial, pattern

import rmx


@pytest.mark.parametrize("mode", ["poll", "adaptive"])
async def test_echo_and_calls(mode):
    async with rmx.Context(progress=mode) as srv, rmx.Context(progress=mode) as cli:
        srv.rpc_register(1, lambda req: req[::-1])
        gate = asyncio.Event()

        async def never(req):
            await gate.wait()

        srv.rpc_register(2, never)
        lst = await srv.listen(URI)
        conn = await cli.connect(dial(lst.uri))
        assert conn.transport == TRANSPORT
        peer = await lst.accept()
        for n in (0, 100, 100000, 4 << 20):
            await conn.send(pattern(n))
            assert await peer.recv() == pattern(n)
        replies = await asyncio.gather(*(conn.call(1, b"%d" % i) for i in range(2000)))
        assert replies == [(b"%d" % i)[::-1] for i in range(2000)]
        with pytest.raises(rmx.RmxTimeoutError):  # rmx's timers run while spinning too
            await conn.call(2, timeout=0.05)
        assert srv.progress_mode == mode


async def test_bad_settings():
    with pytest.raises(ValueError):
        rmx.Context(progress="sometimes")
    with pytest.raises(ValueError):
        rmx.Context(config={"no_such_field": 1})
    with pytest.raises(rmx.RmxError) as e:
        rmx.Context(config={"rx_depth": 0})
    assert e.value.name == "RMX_EINVAL"
    async with rmx.Context(config={"rpc_max_inflight": 4, "max_msg_size": 1 << 20}) as ctx:
        assert ctx.max_msg_size == 1 << 20 and ctx._max_inflight == 4
