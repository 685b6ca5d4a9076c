# SPDX-License-Identifier: BSD-3-Clause
"""Listening where another listener or socket already does: ctx.listen
raises rmx.RmxError RMX_EADDRINUSE instead of handing back a listener that
serves some other port; a port of 0 still gets a free one each time."""
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
