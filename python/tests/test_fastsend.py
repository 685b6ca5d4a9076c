# SPDX-License-Identifier: BSD-3-Clause
"""Small sends: copied at once, so the await ends without a turn of the
loop; a long run of them still lets the loop (and other tasks) in."""
import asyncio


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
