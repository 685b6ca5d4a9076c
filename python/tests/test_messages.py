# SPDX-License-Identifier: BSD-3-Clause
"""Messages: echo of 0 B .. 16 MiB both ways, order, closes, misuse."""
import asyncio

import pytest
from conftest import TRANSPORT, URI, pattern

import rmx

SIZES = [0, 1, 247, 248, 249, 4096, 8183, 8184, 8185, 65536, 1 << 20, 4 << 20, 16 << 20]


async def test_echo_both_ways(pair):
    cli, srv = await pair.connect()
    assert cli.transport == TRANSPORT == srv.transport

    async def echo(conn):
        async for msg in conn:
            await conn.send(msg)

    server = asyncio.ensure_future(echo(srv))
    for i, n in enumerate(SIZES):  # client -> server -> client
        data = pattern(n, i)
        await cli.send(data)
        got = await cli.recv()
        assert len(got) == n and got == data, n
    server.cancel()
    for i, n in enumerate(SIZES):  # server -> client, buffers of every kind
        data = bytearray(pattern(n, i + 50))
        await srv.send(memoryview(data))
        assert await cli.recv() == data
    st = cli.stats()
    assert st["msgs_sent"] == len(SIZES) and st["msgs_recv"] == 2 * len(SIZES)


async def test_many_in_order(pair):
    cli, srv = await pair.connect()
    sends = [cli.send(pattern(100 + (i % 7) * 5000, i)) for i in range(500)]
    await asyncio.gather(*sends)
    for i in range(500):
        assert await srv.recv() == pattern(100 + (i % 7) * 5000, i)


async def test_orderly_close_ends_iteration(pair):
    cli, srv = await pair.connect()
    await cli.send(b"last")
    await cli.close()
    got = [m async for m in srv]  # ends once the peer's close is seen
    assert got == [b"last"]
    with pytest.raises(rmx.ConnectionClosed):
        await srv.recv()
    with pytest.raises(rmx.ConnectionClosed) as e:
        await cli.send(b"x")
    assert e.value.code == rmx.errors.codes["RMX_ENOTCONN"]
    await cli.close()  # again: nothing happens


async def test_local_close_wakes_receivers(pair):
    cli, _ = await pair.connect()
    waiter = asyncio.ensure_future(cli.recv())
    await asyncio.sleep(0)
    await cli.close()
    with pytest.raises(rmx.ConnectionClosed):
        await waiter


async def test_refused_connect_is_an_error(pair):
    lst = await pair.srv.listen(URI)
    uri = lst.uri
    lst.close()
    with pytest.raises(rmx.RmxConnectionError) as e:
        await pair.cli.connect(uri)
    assert e.value.code == rmx.errors.codes["RMX_ECONNREFUSED"]
    assert e.value.name == "RMX_ECONNREFUSED" and e.value.text
    assert pair.cli.stats()["py_conns"] == 0  # the failed handle was closed


async def test_bad_uri_and_sizes(pair):
    with pytest.raises(rmx.RmxError) as e:
        await pair.cli.connect("nope://x")
    assert e.value.code == rmx.errors.codes["RMX_EINVAL"]
    cli, _ = await pair.connect()
    with pytest.raises(TypeError):
        await cli.send("text is not bytes")
    with pytest.raises(rmx.RmxError) as e:
        await cli.send(bytes(pair.cli.max_msg_size + 1))
    assert e.value.name == "RMX_EMSGSIZE"


async def test_send_takes_the_bytes_at_the_call(pair):
    """conn.send() starts the send in the call: a small message is copied
    then, so what the buffer holds at the await does not count."""
    cli, srv = await pair.connect()
    buf = bytearray(b"at the call!")
    sending = cli.send(buf)
    buf[:] = b"at the await"
    await sending
    assert await srv.recv() == b"at the call!"
    with pytest.raises(rmx.RmxError) as e:  # refused in the call, before any await
        cli.send(bytes(pair.cli.max_msg_size + 1))
    assert e.value.name == "RMX_EMSGSIZE"


async def test_borrowed_buffer_cannot_be_resized(pair):
    cli, srv = await pair.connect()
    data = bytearray(pattern(1 << 20))
    task = asyncio.ensure_future(cli.send(data))
    await asyncio.sleep(0)  # the send is posted and borrows data
    with pytest.raises(BufferError):
        data.extend(b"more")
    await task
    data.extend(b"more")  # lent back once the send completed
    assert await srv.recv() == pattern(1 << 20)
