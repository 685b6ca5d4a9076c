# SPDX-License-Identifier: BSD-3-Clause
"""Listening where another listener or socket already does: ctx.listen
raises rmx.RmxError RMX_EADDRINUSE instead of handing back a listener that
serves some other port; a port of 0 still gets a free one each time."""
import pathlib
import socket

import pytest
from conftest import URI

import rmx


async def test_taken_address_raises():
    ctx = rmx.Context()
    try:
        first = await ctx.listen(URI)
        other = await ctx.listen(URI)  # port 0: a port of its own
        assert first.uri and other.uri and first.uri != other.uri
        with pytest.raises(rmx.RmxError) as e:
            await ctx.listen(first.uri)
        assert e.value.name == "RMX_EADDRINUSE"
        assert first.uri in str(e.value)
        if first.uri.startswith("tcp://"):
            with socket.socket() as s:  # someone else's socket
                s.bind(("127.0.0.1", 0))
                s.listen()
                uri = "tcp://127.0.0.1:%d" % s.getsockname()[1]
                with pytest.raises(rmx.RmxError) as e:
                    await ctx.listen(uri)
                assert e.value.name == "RMX_EADDRINUSE"
        first.close()
        other.close()
    finally:
        await ctx.close()


async def test_uri_arguments(pair):
    """A URI is a str: any other type is a TypeError; one rmx cannot parse
    is a ValueError (rmx's RMX_EINVAL), for connect and listen alike, and
    nothing is left behind."""
    ctx = pair.cli
    for bad in (None, 7000, b"tcp://127.0.0.1:7000", pathlib.PurePath("tcp://127.0.0.1")):
        for call in (ctx.connect, ctx.listen, rmx.connect, rmx.listen):
            with pytest.raises(TypeError):
                await call(bad)
    for bad in ("", "127.0.0.1:7000", "nope://x", "tcp://", "tcp://127.0.0.1:99999"):
        for call in (ctx.connect, ctx.listen):
            with pytest.raises(ValueError) as e:
                await call(bad)
            assert isinstance(e.value, rmx.RmxError) and e.value.name == "RMX_EINVAL"
    for call in (ctx.connect, ctx.listen):  # rmx would read up to the NUL
        with pytest.raises(ValueError):
            await call("tcp://127.0.0.1:7000\0junk")
    assert ctx.stats()["py_conns"] == 0 and not ctx._listeners
    await rmx.get_context().close()
