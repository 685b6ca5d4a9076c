# SPDX-License-Identifier: BSD-3-Clause
"""The package against rmx's C tools: the Python client with rmx-echo and
rmx-kv servers, the C clients with Python servers, and a peer killed in the
middle of transfers."""
import asyncio
import os
import struct
import sys

import pytest
from conftest import URI, pattern

import rmx

BIN = os.environ.get("RMXPY_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(BIN, "rmx-echo")),
                                reason="RMXPY_BIN has no rmx-echo")
KV_PUT, KV_GET, KV_DEL = 1, 2, 3


async def start(*argv, marker):
    """Start a server process; return it and the URI it printed."""
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
    while True:
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert line, "the server ended before it listened"
        if marker in line:
            return proc, line.split(marker)[1].strip()


async def stop(proc):
    if proc.returncode is None:
        proc.terminate()
    await proc.wait()


def kv_key(key: bytes) -> bytes:
    return struct.pack("<H", len(key)) + key


async def test_python_client_c_servers():
    async with rmx.Context() as ctx:
        echo, uri = await start(os.path.join(BIN, "rmx-echo"), "server", URI,
                                marker="listening on ")
        try:
            conn = await ctx.connect(uri)
            for n in (0, 64, 5000, 1 << 20, 16 << 20):
                await conn.send(pattern(n, n & 7))
                assert await conn.recv() == pattern(n, n & 7)
            await conn.close()
        finally:
            await stop(echo)
        kv, uri = await start(os.path.join(BIN, "rmx-kv"), "server", URI,
                              marker="serving on ")
        try:
            conn = await ctx.connect(uri)
            assert await conn.call(KV_PUT, kv_key(b"k") + b"from python") == b""
            assert await conn.call(KV_GET, kv_key(b"k")) == b"\x01from python"
            await conn.call(KV_DEL, kv_key(b"k"))
            with pytest.raises(rmx.RmxError) as e:
                await conn.call(KV_GET, kv_key(b"k"))
            assert e.value.name == "RMX_ENOENT"
        finally:
            await stop(kv)


async def run(*argv):
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, (argv, out)
    return out


async def test_c_clients_python_servers():
    store = {}

    def key_of(req):
        (n,) = struct.unpack_from("<H", req)
        return req[2:2 + n], req[2 + n:]

    def put(req):
        k, v = key_of(req)
        store[k] = v

    def get(req):
        k, _ = key_of(req)
        if k not in store:
            raise rmx.errors.make_error(rmx.errors.codes["RMX_ENOENT"])
        return b"\x01" + store[k]

    async def echo(conn):
        async for msg in conn:
            await conn.send(msg)
        await conn.close()

    async with rmx.Context() as ctx:
        ctx.rpc_register(KV_PUT, put)
        ctx.rpc_register(KV_GET, get)
        ctx.rpc_register(KV_DEL, lambda req: store.pop(key_of(req)[0]) and b"")
        lst = await ctx.listen(URI, echo)
        await run(os.path.join(BIN, "rmx-echo"), "client", lst.uri, "200", "64")
        await run(os.path.join(BIN, "rmx-echo"), "client", lst.uri, "3", str(16 << 20))
        kv = os.path.join(BIN, "rmx-kv")
        await run(kv, "put", lst.uri, "greeting", "hello from C")
        assert store[b"greeting"] == b"hello from C"
        assert await run(kv, "get", lst.uri, "greeting") == b"hello from C"
        await run(kv, "del", lst.uri, "greeting")
        assert not store


PEER = """
import asyncio, sys, rmx
async def main():
    async with rmx.Context() as ctx:
        async def never(req):
            await asyncio.Event().wait()
        ctx.rpc_register(1, never)
        lst = await ctx.listen(sys.argv[1])
        print("listening on", lst.uri, flush=True)
        conns = [await lst.accept()]
        await asyncio.Event().wait()
asyncio.run(main())
"""


async def test_peer_killed_fails_every_waiter():
    peer, uri = await start(sys.executable, "-c", PEER, URI, marker="listening on ")
    try:
        async with rmx.Context() as ctx:
            conn = await ctx.connect(uri)
            calls = [asyncio.ensure_future(conn.call(1, b"x")) for _ in range(50)]
            sends = [asyncio.ensure_future(conn.send(pattern(16 << 20))) for _ in range(4)]
            recv = asyncio.ensure_future(conn.recv())
            await asyncio.sleep(0.2)
            peer.kill()
            res = await asyncio.wait_for(
                asyncio.gather(*calls, *sends, recv, return_exceptions=True), 60)
            assert all(isinstance(r, rmx.RmxError) for r in res[:50] + res[54:]), res
            assert all(r is None or isinstance(r, rmx.RmxError) for r in res[50:54])
            with pytest.raises(rmx.RmxError):
                await conn.send(b"after")
            assert ctx.stats()["py_ops"] == 0
    finally:
        await stop(peer)
