# SPDX-License-Identifier: BSD-3-Clause
"""Small sends: copied at once, so the await ends without a turn of the
loop; a long run of them still lets the loop (and other tasks) in."""
import asyncio
import threading

import rmx
from conftest import URI


async def test_small_send_needs_no_loop_turn(pair):
    cli, srv = await pair.connect()
    ran = []
    asyncio.get_running_loop().call_soon(ran.append, 1)
    await cli.send(b"x" * 248)
    assert ran == []  # the await did not wait for the loop
    assert await srv.recv() == b"x" * 248


async def test_many_small_sends_yield_to_the_loop(pair):
    cli, srv = await pair.connect()
    seen = []
    asyncio.get_running_loop().call_soon(lambda: seen.append(len(sent)))
    sent = []
    for i in range(1000):
        await cli.send(b"%d" % i)
        sent.append(i)
    assert seen and seen[0] <= 64  # the loop had a turn within 64 sends
    for i in range(1000):
        assert await srv.recv() == b"%d" % i


async def test_small_send_is_on_the_wire_before_the_loop_runs_again():
    """The send is written in the call: a peer on another thread's loop
    gets it while this loop is held (it never turns until the peer says
    so), and the sender's context has nothing left for its loop to do."""
    got, ready, stop, uri = threading.Event(), threading.Event(), threading.Event(), []

    def peer():
        async def main():
            async with rmx.Context() as ctx:
                lst = await ctx.listen(URI)
                uri.append(lst.uri)
                ready.set()
                conn = await lst.accept()
                assert await conn.recv() == b"now"
                got.set()
                await asyncio.get_running_loop().run_in_executor(None, stop.wait)
                await conn.close()
        asyncio.run(main())

    t = threading.Thread(target=peer)
    t.start()
    try:
        assert ready.wait(10)
        async with rmx.Context() as ctx:
            conn = await ctx.connect(uri[0])
            await asyncio.sleep(0.05)  # the handshake's own traffic settles
            await conn.send(b"now")
            assert ctx._soon is None  # no progress was left for the loop's turn
            assert got.wait(10)  # this loop is held here: the send went out in the call
            stop.set()
            await conn.close()
    finally:
        stop.set()
        t.join(10)
