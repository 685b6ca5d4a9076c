# SPDX-License-Identifier: BSD-3-Clause
"""Fixtures of the rmx package's tests: a server and a client context on the
test's event loop, joined by one connection over RMXPY_URI (tcp loopback
unless python_check.sh names rdma, or auto: then the client connects with
auto:// and, on this host, takes shm)."""
import asyncio
import os

import pytest

import rmx

URI = os.environ.get("RMXPY_URI", "tcp://127.0.0.1:0")
SCHEME = URI.split(":")[0]
# The transport a pair's connection takes: auto:// picks shm on one host.
TRANSPORT = "shm" if SCHEME == "auto" else SCHEME


def dial(uri: str) -> str:
    """The URI a client connects to for a listener's URI: under auto, the
    same address by auto:// (a listener names its first transport)."""
    return "auto://" + uri.split("://", 1)[1] if SCHEME == "auto" else uri


class Pair:
    """Two contexts on one loop, a listener on ``srv`` and, after
    ``connect()``, ``cli_conn`` with its accepted peer ``srv_conn``."""

    def __init__(self, srv: rmx.Context, cli: rmx.Context) -> None:
        self.srv, self.cli = srv, cli
        self.listener = None
        self.cli_conn = self.srv_conn = None

    async def connect(self):
        if self.listener is None:
            self.listener = await self.srv.listen(URI)
        self.cli_conn = await self.cli.connect(dial(self.listener.uri))
        self.srv_conn = await self.listener.accept()
        return self.cli_conn, self.srv_conn


@pytest.fixture(autouse=True)
async def loop_errors():
    """What reached the loop's exception handler (an exception in an rmx
    callback, a handler's failure): a test fails with any it did not take
    out of this list itself."""
    seen = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda lp, context: seen.append(context))
    yield seen
    loop.set_exception_handler(None)
    assert not seen, [c.get("exception") or c.get("message") for c in seen]


@pytest.fixture
async def pair():
    srv, cli = rmx.Context(), rmx.Context()
    p = Pair(srv, cli)
    yield p
    await cli.close()
    await srv.close()
    for ctx in (srv, cli):
        assert ctx._ops == 0 and not ctx._conns


def pattern(n: int, seed: int = 0) -> bytes:
    """n bytes that differ from any shift of themselves."""
    block = bytes((i * 131 + seed * 7 + (i >> 8)) & 0xFF for i in range(4096))
    return (block * (n // 4096 + 1))[:n]
