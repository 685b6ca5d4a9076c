# SPDX-License-Identifier: BSD-3-Clause
"""64 B RPC round trip from Python over tcp:// loopback: rmx (event and
poll progress) beside the same ping-pong over plain asyncio streams.

    PYTHONPATH=build/python-tcp python3 bench/python/rpc_lat.py [ITERS]

Server and client are separate processes (the server is this file with
`serve-rmx MODE` or `serve-streams`); one call at a time; prints the
median and the 99th percentile in microseconds. Compare with the C figure
of the same machine: rmx-perf server & rmx-perf client URI -t rpc_lat -s 64.
"""
import asyncio
import statistics
import subprocess
import sys
import time

SIZE = 64


async def serve_rmx(mode: str) -> None:
    import rmx
    async with rmx.Context(progress=mode) as ctx:
        ctx.rpc_register(1, lambda req: req)
        lst = await ctx.listen("tcp://127.0.0.1:0")
        print(lst.uri, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


async def serve_streams() -> None:
    async def echo(reader, writer):
        try:
            while True:
                writer.write(await reader.readexactly(SIZE))
        except asyncio.IncompleteReadError:
            writer.close()

    srv = await asyncio.start_server(echo, "127.0.0.1", 0)
    print(srv.sockets[0].getsockname()[1], flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


async def client_rmx(mode: str, addr: str, iters: int) -> list:
    import rmx
    async with rmx.Context(progress=mode) as ctx:
        conn = await ctx.connect(addr)
        req, out = bytes(SIZE), []
        for i in range(iters + iters // 10):
            t = time.perf_counter()
            assert len(await conn.call(1, req)) == SIZE
            out.append(time.perf_counter() - t)
        await conn.close()
        return out[iters // 10:]


async def client_streams(port: str, iters: int) -> list:
    import socket
    reader, writer = await asyncio.open_connection("127.0.0.1", int(port))
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    req, out = bytes(SIZE), []
    for i in range(iters + iters // 10):
        t = time.perf_counter()
        writer.write(req)
        assert len(await reader.readexactly(SIZE)) == SIZE
        out.append(time.perf_counter() - t)
    writer.close()
    return out[iters // 10:]


def measure(name: str, server_args: list, client) -> None:
    srv = subprocess.Popen([sys.executable, __file__] + server_args, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    addr = srv.stdout.readline().strip()
    try:
        lat = sorted(asyncio.run(client(addr)))
    finally:
        srv.stdin.close()
        srv.wait()
    us = [x * 1e6 for x in lat]
    print(f"{name:<22} median {statistics.median(us):7.1f} us   "
          f"p99 {us[int(len(us) * 0.99)]:7.1f} us   ({len(us)} calls)")


def main() -> None:
    if sys.argv[1:2] == ["serve-rmx"]:
        return asyncio.run(serve_rmx(sys.argv[2]))
    if sys.argv[1:2] == ["serve-streams"]:
        return asyncio.run(serve_streams())
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    measure("asyncio streams", ["serve-streams"], lambda a: client_streams(a, iters))
    for mode in ("event", "poll"):
        measure(f"rmx {mode}", ["serve-rmx", mode], lambda a: client_rmx(mode, a, iters))


main()
