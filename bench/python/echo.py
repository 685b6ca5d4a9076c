# SPDX-License-Identifier: BSD-3-Clause
"""rmx's Python API beside plain asyncio streams over tcp://127.0.0.1, in
one run: an 8 B echo round trip (and the same ping-pong through rmx's C
API, rmx-perf send_lat, for the Python layer's own cost) and 64 KiB
messages streamed one way. Two floors with no rmx in them put the round
trip in scale: an asyncio Protocol echo (the least an asyncio layer can
do: no streams, the server writes back from data_received) and plain
sockets waited on with select.epoll, no asyncio (the interpreter and the
kernel alone).

    PYTHONPATH=build/python-tcp python3 bench/python/echo.py [RUNS] [--quick]

RUNS repetitions (default 3), interleaved: each runs every measurement once
with every tool, the order of the tools rotating from one repetition to the
next. As bench/compare pins them, servers run on CPU 0 (a subprocess, this
file with `serve TOOL`) and clients on CPU 1 (this process; rmx-perf under
taskset). The tables give medians with the spread of the repetitions'
medians, the client's CPU time per round trip (user and system; rmx-perf's
whole run), and the median of the per-repetition ratios and differences
(each repetition's in brackets). RMX_BIN (default build/bin) holds
rmx-perf; without it the C column shows '-'. Every measurement is
event-driven on both sides, each sleeping in epoll between messages: the
Python ones in asyncio's loop (rmx's default progress mode, its context's
fd watched there), rmx-perf under RMX_PROGRESS=event in libuv's.
"""
import asyncio
import json
import os
import resource
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


async def serve_proto() -> None:
    class Echo(asyncio.Protocol):
        def connection_made(self, transport) -> None:
            self.transport = transport
            transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP,
                                                          socket.TCP_NODELAY, 1)

        def data_received(self, data: bytes) -> None:
            self.transport.write(data)  # a byte stream: what comes goes back

    srv = await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", 0)
    print(srv.sockets[0].getsockname()[1], flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


def serve_sync() -> None:
    import threading
    import rmx.sync
    with rmx.sync.Context() as ctx:
        lst = ctx.listen("tcp://127.0.0.1:0")
        print(lst.uri, flush=True)
        gone = threading.Event()
        threading.Thread(target=lambda: (sys.stdin.read(), gone.set()), daemon=True).start()
        with lst.accept() as conn:
            while not gone.is_set():
                try:
                    msg = conn.recv(timeout=0.5)
                except rmx.RmxTimeoutError:
                    continue
                except rmx.ConnectionClosed:
                    return
                conn.send(msg)


def serve_epoll() -> None:
    import select
    import threading
    ls = socket.create_server(("127.0.0.1", 0))
    print(ls.getsockname()[1], flush=True)
    c, _ = ls.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.setblocking(False)
    ep = select.epoll()
    ep.register(c.fileno(), select.EPOLLIN)
    threading.Thread(target=lambda: (sys.stdin.read(), c.shutdown(socket.SHUT_RDWR)),
                     daemon=True).start()
    while True:
        ep.poll()
        data = c.recv(4096)
        if not data:
            return
        c.sendall(data)


# ---------------------------------------------------------------- clients
async def rmx_client(addr: str, iters: int, nbig: int) -> tuple:
    import rmx
    async with rmx.Context() as ctx:
        async with await ctx.connect(addr) as conn:
            msg, lat = bytes(SMALL), []
            cpu = time.process_time()
            for i in range(iters + iters // 10):
                t = time.perf_counter()
                await conn.send(msg)
                assert len(await conn.recv()) == SMALL
                lat.append(time.perf_counter() - t)
            cpu = (time.process_time() - cpu) / (iters + iters // 10) * 1e6
            big = bytes(BIG)
            t = time.perf_counter()
            for i in range(0, nbig, WINDOW):
                await asyncio.gather(*(conn.send(big) for _ in range(min(WINDOW, nbig - i))))
            await conn.send(msg)
            await conn.recv()
            bw = nbig * BIG / (time.perf_counter() - t) / 2**20
    return lat[iters // 10:], bw, cpu


async def streams_client(port: str, iters: int, nbig: int) -> tuple:
    reader, writer = await asyncio.open_connection("127.0.0.1", int(port))
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg, lat = SMALL.to_bytes(4, "little") + bytes(SMALL), []
    cpu = time.process_time()
    for i in range(iters + iters // 10):
        t = time.perf_counter()
        writer.write(msg)
        assert len(await reader.readexactly(4 + SMALL)) == 4 + SMALL
        lat.append(time.perf_counter() - t)
    cpu = (time.process_time() - cpu) / (iters + iters // 10) * 1e6
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
    return lat[iters // 10:], bw, cpu


async def proto_client(port: str, iters: int) -> list:
    loop = asyncio.get_running_loop()

    class Counter(asyncio.Protocol):
        waiter, have = None, 0

        def data_received(self, data: bytes) -> None:
            self.have += len(data)
            if self.have >= SMALL:
                self.have -= SMALL
                self.waiter.set_result(None)

    transport, proto = await loop.create_connection(Counter, "127.0.0.1", int(port))
    transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg, lat = bytes(SMALL), []
    cpu = time.process_time()
    for i in range(iters + iters // 10):
        t = time.perf_counter()
        proto.waiter = loop.create_future()
        transport.write(msg)
        await proto.waiter
        lat.append(time.perf_counter() - t)
    cpu = (time.process_time() - cpu) / (iters + iters // 10) * 1e6
    transport.close()
    return lat[iters // 10:], cpu


def sync_client(addr: str, iters: int) -> tuple:
    import rmx.sync
    with rmx.sync.Context() as ctx:
        conn = ctx.connect(addr)
        msg, lat = bytes(SMALL), []
        cpu = time.process_time()
        for i in range(iters + iters // 10):
            t = time.perf_counter()
            conn.send(msg)
            assert len(conn.recv()) == SMALL
            lat.append(time.perf_counter() - t)
        cpu = (time.process_time() - cpu) / (iters + iters // 10) * 1e6
        conn.close()
    return lat[iters // 10:], cpu


def epoll_client(port: str, iters: int) -> list:
    import select
    s = socket.create_connection(("127.0.0.1", int(port)))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.setblocking(False)
    ep = select.epoll()
    ep.register(s.fileno(), select.EPOLLIN)
    msg, lat = bytes(SMALL), []
    cpu = time.process_time()
    for i in range(iters + iters // 10):
        t = time.perf_counter()
        s.sendall(msg)
        have = 0
        while have < SMALL:
            ep.poll()
            have += len(s.recv(4096))
        lat.append(time.perf_counter() - t)
    cpu = (time.process_time() - cpu) / (iters + iters // 10) * 1e6
    s.close()
    return lat[iters // 10:], cpu


def pinned(cpu: int) -> list:
    return ["taskset", "-c", str(cpu)] if os.cpu_count() and os.cpu_count() > 1 else []


def run_python(tool: str, iters: int, nbig: int) -> tuple:
    """(median round trip in us, MiB/s) of one Python tool."""
    srv = subprocess.Popen(pinned(SERVER_CPU) + [sys.executable, __file__, "serve", tool],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        addr = srv.stdout.readline().strip()
        if tool == "proto":
            (lat, cpu), bw = asyncio.run(proto_client(addr, iters)), float("nan")
        elif tool == "epoll":
            (lat, cpu), bw = epoll_client(addr, iters), float("nan")
        elif tool == "sync":
            (lat, cpu), bw = sync_client(addr, iters), float("nan")
        else:
            client = rmx_client if tool == "rmx" else streams_client
            lat, bw, cpu = asyncio.run(client(addr, iters, nbig))
    finally:
        srv.stdin.close()
        srv.wait()
    return statistics.median(lat) * 1e6, bw, cpu


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_c(iters: int) -> tuple:
    """rmx-perf's 8 B send_lat (half the round trip) times 2, event-driven;
    its client's CPU time (the whole run, set-up included) per round trip."""
    perf = os.path.join(os.environ.get("RMX_BIN", os.path.join(ROOT, "build", "bin")), "rmx-perf")
    nan = float("nan")
    if not os.access(perf, os.X_OK):
        return nan, nan, nan
    env = dict(os.environ, RMX_PROGRESS="event")
    srv = subprocess.Popen(pinned(SERVER_CPU) + [perf, "server", "tcp://127.0.0.1:0"], env=env,
                           stdout=subprocess.PIPE, text=True)
    try:
        uri = srv.stdout.readline().split()[-1]
        cpu = children_cpu()
        out = subprocess.run(pinned(CLIENT_CPU) + [perf, "client", uri, "-t", "send_lat", "-s",
                                                   str(SMALL), "-n", str(iters), "--json",
                                                   "--progress-ms", "0"],
                             env=env, capture_output=True, text=True, timeout=120)
        cpu = (children_cpu() - cpu) / (iters + max(iters // 10, 100)) * 1e6  # its warm-up too
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")][-1]
        return 2 * json.loads(line)["lat_us"]["p50"], nan, cpu
    except (IndexError, ValueError, KeyError, subprocess.TimeoutExpired):
        print(f"echo: rmx-perf failed: {out.stderr.strip()[-200:]}", file=sys.stderr)
        return nan, nan, nan
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


def minus(a: list, b: list) -> str:
    ds = [x - y for x, y in zip(a, b) if x == x and y == y]
    if not ds:
        return "-"
    return f"{statistics.median(ds):.1f} us ({' '.join(f'{d:.0f}' for d in ds)})"


def spread(v: list) -> str:
    v = [x for x in v if x == x]
    return f"{min(v):.0f}-{max(v):.0f}" if v else "-"


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["serve"]:
        if args[1] == "epoll":
            return serve_epoll()
        if args[1] == "sync":
            return serve_sync()
        servers = {"rmx": serve_rmx, "streams": serve_streams, "proto": serve_proto}
        return asyncio.run(servers[args[1]]())
    quick = "--quick" in args
    runs = int(next((a for a in args if a.isdigit()), os.environ.get("RUNS", "3")))
    iters, nbig = (300, 200) if quick else (20000, 20000)
    if pinned(CLIENT_CPU):
        os.sched_setaffinity(0, {CLIENT_CPU})
    tools = ["rmx", "streams", "c", "proto", "epoll", "sync"]
    res = {t: ([], [], []) for t in tools}
    for rep in range(runs):
        order = tools[rep % len(tools):] + tools[:rep % len(tools)]
        print(f"echo: repetition {rep + 1} of {runs}, order: {' '.join(order)}", file=sys.stderr)
        for t in order:
            lat, bw, cpu = run_c(iters) if t == "c" else run_python(t, iters, nbig)
            res[t][0].append(lat)
            res[t][1].append(bw)
            res[t][2].append(cpu)
    med = {t: (statistics.median(res[t][0]), statistics.median(res[t][1])) for t in tools}
    lat = {t: res[t][0] for t in tools}
    print(f"\n{runs} repetition(s){', quick' if quick else ''}; server on CPU {SERVER_CPU}, "
          f"client on CPU {CLIENT_CPU}; medians, the spread of the repetitions' medians "
          "in brackets\n")
    print("| 8 B echo round trip (us) | rmx Python | asyncio streams | rmx C | "
          "asyncio Protocol | Python epoll, no asyncio | rmx.sync |")
    print("|---|---|---|---|---|---|---|")
    print("| median | " + " | ".join(f"{fmt(med[t][0])} ({spread(lat[t])})" for t in tools) + " |")
    print("| client's CPU time per round trip | " +
          " | ".join(f"{fmt(statistics.median(res[t][2]))} ({spread(res[t][2])})" for t in tools) +
          " |")
    print("\n| compared (median of the repetitions' own, each in brackets) | |")
    print("|---|---|")
    print(f"| rmx Python / asyncio streams | {ratio(lat['rmx'], lat['streams'])} |")
    print(f"| rmx Python - rmx C | {minus(lat['rmx'], lat['c'])} |")
    print(f"| the same in the client's CPU time | {minus(res['rmx'][2], res['c'][2])} |")
    print(f"| asyncio Protocol - rmx C (asyncio's own share) | {minus(lat['proto'], lat['c'])} |")
    print(f"| rmx Python - asyncio Protocol (rmx's Python layer) | "
          f"{minus(lat['rmx'], lat['proto'])} |")
    print(f"| Python epoll - rmx C (the interpreter's share) | {minus(lat['epoll'], lat['c'])} |")
    print(f"| rmx.sync - rmx C (the blocking API's own cost) | {minus(lat['sync'], lat['c'])} |")
    print(f"| rmx.sync / asyncio streams | {ratio(lat['sync'], lat['streams'])} |")
    print("\n| 64 KiB messages streamed one way (MiB/s) | rmx Python | asyncio streams | "
          "rmx Python / asyncio |")
    print("|---|---|---|---|")
    print(f"| median | {fmt(med['rmx'][1])} | {fmt(med['streams'][1])} | "
          f"{ratio(res['rmx'][1], res['streams'][1])} |")

main()
