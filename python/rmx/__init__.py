# SPDX-License-Identifier: BSD-3-Clause
"""rmx for Python: asyncio message passing over RDMA verbs and TCP.

    import asyncio, rmx

    async def main():
        async with rmx.Context() as ctx:
            conn = await ctx.connect("tcp://127.0.0.1:7471")
            await conn.send(b"hello")
            print(await conn.recv())

docs/python.md has the whole guide: a context per event loop (and thread),
connections, messages, RPC, one-sided memory, errors, cancellation. Code
without asyncio uses ``rmx.sync`` (blocking calls, the same library).
"""
from typing import Optional

from ._conn import AcceptHandler, Connection, Listener
from ._context import Context, get_context
from ._mem import Memory, RemoteKey
from ._rmx_cffi import ffi as _ffi, lib as _lib
from ._xfer import Transfer
from .errors import (ConnectionClosed, RmxConnectionError, RmxError, RmxThreadError,
                     RmxTimeoutError)

__all__ = ["Context", "Connection", "Listener", "Memory", "RemoteKey", "Transfer", "RmxError",
           "RmxTimeoutError", "RmxConnectionError", "ConnectionClosed", "RmxThreadError",
           "connect", "listen", "get_context", "library_version", "__version__"]
__version__ = "0.1.0"


def library_version() -> str:
    """The version of the librmx this package runs with."""
    return _ffi.string(_lib.rmx_version_string()).decode()


async def connect(uri: str) -> Connection:
    """Connect with the running loop's default context (get_context())."""
    return await get_context().connect(uri)


async def listen(uri: str, on_accept: Optional[AcceptHandler] = None) -> Listener:
    """Listen with the running loop's default context (get_context())."""
    return await get_context().listen(uri, on_accept)
