# SPDX-License-Identifier: BSD-3-Clause
"""rmx's Python API beside plain asyncio streams over tcp://127.0.0.1, in
one run: an 8 B echo round trip (and the same ping-pong through rmx's C
API, rmx-perf send_lat, for the Python layer's own cost) and 64 KiB
messages streamed one way.

    PYTHONPATH=build/python-tcp python3 bench/python/echo.py [RUNS] [--quick]

RUNS repetitions (default 3), interleaved: each runs every measurement once
with every tool, the order of the tools rotating from one repetition to the
next. As bench/compare pins them, servers run on CPU 0 (a subprocess, this
file with `serve TOOL`) and clients on CPU 1 (this process; rmx-perf under
taskset). Each row gives the medians and the median of the per-repetition
ratios. RMX_BIN (default build/bin) holds rmx-perf; without it the C column
shows '-'. Both sides of the Python measurements are event-driven (the
default progress mode), as rmx-perf's RMX_PROGRESS=event.
"""
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SMALL, BIG, WINDOW = 8, 65536, 64
SERVER_CPU, CLIENT_CPU = 0, 1


# ---------------------------------------------------------------- servers
async def serve_rmx() -> None:
    import rmx

    async def echo(conn) -> None:
        # 8 B messages come back; a stream of big ones is counted and ends
        # with one 8 B acknowledgement when the client's 8 B "done" arrives
        async with conn:
            async for msg in conn:
                if len(msg) == SMALL:
                    await conn.send(msg)

    async with rmx.Context() as ctx:
        lst = await ctx.listen("tcp://127.0.0.1:0", echo)
        print(lst.uri, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


async def serve_streams() -> None:
    async def echo(reader, writer) -> None:
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:  # a 4-byte length, then the message
                n = int.from_bytes(await reader.readexactly(4), "little")
                msg = await reader.readexactly(n)
                if n == SMALL:
                    writer.write(n.to_bytes(4, "little") + msg)
        except asyncio.IncompleteReadError:
            writer.close()

    srv = await asyncio.start_server(echo, "127.0.0.1", 0)
    print(srv.sockets[0].getsockname()[1], flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


# ---------------------------------------------------------------- clients
async def rmx_client(addr: str, iters: int, nbig: int) -> tuple:
    import rmx
    async with rmx.Context() as ctx:
        async with await ctx.connect(addr) as conn:
            msg, lat = bytes(SMALL), []
            for i in range(iters + iters // 10):
                t = time.perf_counter()
                await conn.send(msg)
                assert len(await conn.recv()) == SMALL
                lat.append(time.perf_counter() - t)
            big = bytes(BIG)
            t = time.perf_counter()
            for i in range(0, nbig, WINDOW):
                await asyncio.gather(*(conn.send(big) for _ in range(min(WINDOW, nbig - i))))
            await conn.send(msg)
            await conn.recv()
            bw = nbig * BIG / (time.perf_counter() - t) / 2**20
    return lat[iters // 10:], bw


async def streams_client(port: str, iters: int, nbig: int) -> tuple:
    reader, writer = await asyncio.open_connection("127.0.0.1", int(port))
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg, lat = SMALL.to_bytes(4, "little") + bytes(SMALL), []
    for i in range(iters + iters // 10):
        t = time.perf_counter()
        writer.write(msg)
        assert len(await reader.readexactly(4 + SMALL)) == 4 + SMALL
        lat.append(time.perf_counter() - t)
    big = BIG.to_bytes(4, "little") + bytes(BIG)
    t = time.perf_counter()
    for i in range(0, nbig, WINDOW):
        for _ in range(min(WINDOW, nbig - i)):
            writer.write(big)
        await writer.drain()
    writer.write(msg)
    await reader.readexactly(4 + SMALL)
    bw = nbig * BIG / (time.perf_counter() - t) / 2**20
    writer.close()
    return lat[iters // 10:], bw


def pinned(cpu: int) -> list:
    return ["taskset", "-c", str(cpu)] if os.cpu_count() and os.cpu_count() > 1 else []


def run_python(tool: str, iters: int, nbig: int) -> tuple:
    """(median round trip in us, MiB/s) of one Python tool."""
    srv = subprocess.Popen(pinned(SERVER_CPU) + [sys.executable, __file__, "serve", tool],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        addr = srv.stdout.readline().strip()
        client = rmx_client if tool == "rmx" else streams_client
        lat, bw = asyncio.run(client(addr, iters, nbig))
    finally:
        srv.stdin.close()
        srv.wait()
    return statistics.median(lat) * 1e6, bw


def run_c(iters: int) -> float:
    """rmx-perf's 8 B send_lat (half the round trip) times 2, event-driven."""
    perf = os.path.join(os.environ.get("RMX_BIN", os.path.join(ROOT, "build", "bin")), "rmx-perf")
    if not os.access(perf, os.X_OK):
        return float("nan")
    env = dict(os.environ, RMX_PROGRESS="event")
    srv = subprocess.Popen(pinned(SERVER_CPU) + [perf, "server", "tcp://127.0.0.1:0"], env=env,
                           stdout=subprocess.PIPE, text=True)
    try:
        uri = srv.stdout.readline().split()[-1]
        out = subprocess.run(pinned(CLIENT_CPU) + [perf, "client", uri, "-t", "send_lat", "-s",
                                                   str(SMALL), "-n", str(iters), "--json",
                                                   "--progress-ms", "0"],
                             env=env, capture_output=True, text=True, timeout=120)
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")][-1]
        return 2 * json.loads(line)["lat_us"]["p50"]
    except (IndexError, ValueError, KeyError, subprocess.TimeoutExpired):
        print(f"echo: rmx-perf failed: {out.stderr.strip()[-200:]}", file=sys.stderr)
        return float("nan")
    finally:
        srv.terminate()
        srv.wait()


def fmt(v: float) -> str:
    return "-" if v != v else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def ratio(a: list, b: list) -> str:
    rs = [x / y for x, y in zip(a, b) if x == x and y == y and y > 0]
    if not rs:
        return "-"
    return f"{statistics.median(rs):.2f} ({' '.join(f'{r:.2f}' for r in rs)})"


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["serve"]:
        return asyncio.run(serve_rmx() if args[1] == "rmx" else serve_streams())
    quick = "--quick" in args
    runs = int(next((a for a in args if a.isdigit()), os.environ.get("RUNS", "3")))
    iters, nbig = (300, 200) if quick else (20000, 20000)
    if pinned(CLIENT_CPU):
        os.sched_setaffinity(0, {CLIENT_CPU})
    tools = ["rmx", "streams", "c"]
    res = {t: ([], []) for t in tools}
    for rep in range(runs):
        order = tools[rep % 3:] + tools[:rep % 3]
        print(f"echo: repetition {rep + 1} of {runs}, order: {' '.join(order)}", file=sys.stderr)
        for t in order:
            lat, bw = (run_c(iters), float("nan")) if t == "c" else run_python(t, iters, nbig)
            res[t][0].append(lat)
            res[t][1].append(bw)
    med = {t: (statistics.median(res[t][0]), statistics.median(res[t][1])) for t in tools}
    over = [p - c for p, c in zip(res["rmx"][0], res["c"][0])]
    print(f"\n{runs} repetition(s){', quick' if quick else ''}; server on CPU {SERVER_CPU}, "
          f"client on CPU {CLIENT_CPU}\n")
    print("| measure | rmx Python | asyncio streams | rmx C | rmx Python / asyncio: "
          "median of ratios (per repetition) | rmx Python - rmx C |")
    print("|---|---|---|---|---|---|")
    print(f"| 8 B echo round trip, median (us) | {fmt(med['rmx'][0])} | {fmt(med['streams'][0])} | "
          f"{fmt(med['c'][0])} | {ratio(res['rmx'][0], res['streams'][0])} | "
          f"{fmt(statistics.median(over))} us |")
    print(f"| 64 KiB messages streamed one way (MiB/s) | {fmt(med['rmx'][1])} | "
          f"{fmt(med['streams'][1])} | - | {ratio(res['rmx'][1], res['streams'][1])} | - |")


main()
