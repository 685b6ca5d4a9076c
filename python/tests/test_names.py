# SPDX-License-Identifier: BSD-3-Clause
"""Memory by name: a registration published in one context, looked up by
its peer over a connection, withdrawn and refused."""
import asyncio

import pytest
from conftest import pattern

import rmx


async def test_lookup_write_withdraw(pair):
    cli, srv = await pair.connect()
    region = bytearray(1 << 16)
    mem = pair.srv.register(region)
    mem.publish("kv/layer0")
    rk = await cli.lookup("kv/layer0", timeout=5)
    assert rk.size == len(region)
    data = pattern(5000, 3)
    await cli.write(data, rk, 100)
    assert region[100:5100] == data
    again = await cli.lookup("kv/layer0")  # from the cache: a key of its own
    back = bytearray(5000)
    await cli.read(back, again, 100)
    assert back == data
    again.release()
    with pytest.raises(rmx.RmxError) as e:
        mem.publish("other")  # one name per registration
    assert e.value.name == "RMX_EALREADY"
    mem.unpublish()
    await srv.send(b"sync")  # the peer's FORGET went before this
    assert await cli.recv() == b"sync"
    with pytest.raises(rmx.RmxError) as e:
        await cli.lookup("kv/layer0")
    assert e.value.name == "RMX_ENOENT"
    rk.release()
    mem.close()


async def test_unknown_bad_and_cancelled(pair):
    cli, _ = await pair.connect()
    with pytest.raises(rmx.RmxError) as e:
        await cli.lookup("nobody/here")
    assert e.value.name == "RMX_ENOENT"
    with pytest.raises(rmx.RmxError) as e:
        await cli.lookup("")  # refused here, before any round trip
    assert e.value.name == "RMX_EINVAL"
    mem = pair.srv.register(bytearray(4096))
    mem.publish("late")
    task = asyncio.ensure_future(cli.lookup("late"))
    await asyncio.sleep(0)
    task.cancel()  # the key that still comes is released, not leaked
    with pytest.raises(asyncio.CancelledError):
        await task
    rk = await cli.lookup("late")  # and the connection goes on
    rk.release()
    mem.close()
