# SPDX-License-Identifier: BSD-3-Clause
"""Transfer requests and notifications: prepared once, posted many times,
one completion each, notifications after the bytes, failures named."""
import asyncio

import pytest
from conftest import pattern

import rmx


async def shared_region(pair, size, access="rw"):
    """A bytearray of the server's, and the client's key to it."""
    cli, srv = await pair.connect()
    region = bytearray(size)
    mem = pair.srv.register(region, access)
    await srv.send(mem.pack(srv))
    return cli, srv, region, mem, cli.unpack_key(await cli.recv())


async def test_write_request_posted_again_with_notifications(pair):
    cli, srv, region, mem, rk = await shared_region(pair, 1 << 20)
    blocks = [bytearray(pattern(4096 + i, i)) for i in range(64)]
    xfer = cli.prepare("write", [(b, rk, i * 16384) for i, b in enumerate(blocks)])
    assert xfer.entries == 64
    for round_ in range(3):
        for i, b in enumerate(blocks):
            b[:] = pattern(len(b), i + 100 * round_)  # same size: in place
        await xfer.post(b"round %d" % round_)
        assert await srv.notification() == b"round %d" % round_
        for i, b in enumerate(blocks):  # the bytes were there before the notification
            assert region[i * 16384:i * 16384 + len(b)] == b
    with pytest.raises(BufferError):
        blocks[0].append(1)  # borrowed by the prepared request
    xfer.release()
    blocks[0].append(1)
    with pytest.raises(rmx.RmxError):
        await xfer.post()
    rk.release()
    mem.close()


async def test_read_request_and_held_notifications(pair):
    cli, srv, region, mem, rk = await shared_region(pair, 256 * 1024)
    region[:] = pattern(len(region), 9)
    dst = [bytearray(1000) for _ in range(10)]
    xfer = cli.prepare("read", [(d, rk, 20000 * i + 7) for i, d in enumerate(dst)])
    await xfer.post()
    for i, d in enumerate(dst):
        assert d == region[20000 * i + 7:20000 * i + 1007]
    with pytest.raises(rmx.RmxError) as e:
        await xfer.post(b"notifications go with writes only")
    assert e.value.name == "RMX_EINVAL"
    xfer.release()
    # notifications nobody waits for stay with rmx until taken, in order
    w = cli.prepare("write", [(b"abc", rk, 0)])
    assert srv.take_notification() is None
    for i in range(3):
        await w.post(b"n%d" % i)
    await w.post(b"")  # empty: no notification
    await asyncio.sleep(0.05)
    assert [srv.take_notification() for _ in range(4)] == [b"n0", b"n1", b"n2", None]
    w.release()
    with pytest.raises(BufferError):
        cli.prepare("read", [(b"read-only", rk, 0)])
    with pytest.raises(rmx.RmxError) as e:
        cli.prepare("write", [(bytes(100), rk, len(region) - 10)])
    assert e.value.name == "RMX_EACCES"


async def test_cancelled_post_ends_once_and_release_waits(pair):
    cli, srv, region, mem, rk = await shared_region(pair, 8 << 20)
    src = pattern(8 << 20, 4)
    xfer = cli.prepare("write", [(src, rk, 0)])
    task = asyncio.ensure_future(xfer.post(b"done"))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    if xfer.posted:  # still under way (over TCP always; RDMA may be done)
        with pytest.raises(rmx.RmxError) as e:
            await xfer.post()
        assert e.value.name == "RMX_EBUSY"
    xfer.release()  # deferred until the post ends
    assert await srv.notification() == b"done"
    assert region == src
    for _ in range(100):
        if pair.cli.stats()["py_ops"] == 0:
            break
        await asyncio.sleep(0.01)
    assert pair.cli.stats()["py_ops"] == 0 and not pair.cli._xfers


async def test_lost_peer_fails_post_and_notification_waiter(pair):
    cli, srv, region, mem, rk = await shared_region(pair, 4 << 20)
    waiter = asyncio.ensure_future(srv.notification())
    xfer = cli.prepare("write", [(pattern(4 << 20), rk, 0)])
    post = asyncio.ensure_future(xfer.post(b"x"))
    await asyncio.sleep(0)
    await srv.close()
    with pytest.raises(rmx.ConnectionClosed):
        await waiter
    with pytest.raises(rmx.RmxError) as e:
        for _ in range(50):
            await post
            await xfer.post()  # one of these meets the closed connection
    assert e.value.failed is None or e.value.failed == 0
    xfer.release()
