# SPDX-License-Identifier: BSD-3-Clause
"""rmx.sync (the blocking Python API) beside rmx's C API, in one run: an 8 B
echo round trip over tcp://127.0.0.1 in each progress mode, event (both
sides sleep between messages) and poll (both sides spin), servers on CPU 0
(a subprocess), clients on CPU 1, repetitions interleaved. The C figure is
rmx-perf's send_lat doubled under the same RMX_PROGRESS; "one end" is an
rmx.sync client against rmx-perf's (C) echo server, so the difference to
C is what Python costs one end of the round trip.

    PYTHONPATH=build/python-tcp python3 bench/python/sync_lat.py [RUNS]
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PERF = os.path.join(os.environ.get("RMX_BIN", os.path.join(HERE, "..", "..", "build", "bin")),
                    "rmx-perf")
ITERS, WARM = 20000, 2000


def pinned(cpu: int) -> list:
    return ["taskset", "-c", str(cpu)] if (os.cpu_count() or 1) > 1 else []


def serve(mode: str) -> None:
    import rmx
    import rmx.sync
    with rmx.sync.Context(progress=mode) as ctx:
        lst = ctx.listen("tcp://127.0.0.1:0")
        print(lst.uri, flush=True)
        with lst.accept() as conn:
            try:
                while True:
                    conn.send(conn.recv())
            except rmx.ConnectionClosed:
                pass


def client(mode: str, uri: str) -> float:
    import rmx.sync
    with rmx.sync.Context(progress=mode) as ctx:
        conn = ctx.connect(uri, timeout=30)
        msg, lat = bytes(8), []
        for _ in range(ITERS + WARM):
            t = time.perf_counter()
            conn.send(msg)
            conn.recv()
            lat.append(time.perf_counter() - t)
        conn.close()
    return statistics.median(lat[WARM:]) * 1e6


def run_sync(mode: str) -> float:
    srv = subprocess.Popen(pinned(0) + [sys.executable, __file__, "serve", mode],
                           stdout=subprocess.PIPE, text=True)
    try:
        return client(mode, srv.stdout.readline().strip())
    finally:
        srv.wait(30)


def run_c(mode: str, py_client: bool = False) -> float:
    env = dict(os.environ, RMX_PROGRESS=mode)
    srv = subprocess.Popen(pinned(0) + [PERF, "server", "tcp://127.0.0.1:0"], env=env,
                           stdout=subprocess.PIPE, text=True)
    try:
        uri = srv.stdout.readline().split()[-1]
        if py_client:
            return client(mode, uri)
        out = subprocess.run(pinned(1) + [PERF, "client", uri, "-t", "send_lat", "-s", "8", "-n",
                                          str(ITERS), "--json"],
                             env=env, capture_output=True, text=True, timeout=300)
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")][-1]
        return 2 * json.loads(line)["lat_us"]["p50"]
    finally:
        srv.terminate()
        srv.wait()


def main() -> None:
    if sys.argv[1:2] == ["serve"]:
        return serve(sys.argv[2])
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})
    tools = ("sync", "c", "one")
    res = {(m, t): [] for m in ("event", "poll") for t in tools}
    for rep in range(runs):
        for mode in ("event", "poll") if rep % 2 == 0 else ("poll", "event"):
            for tool in tools[rep % 3:] + tools[:rep % 3]:
                res[(mode, tool)].append(run_sync(mode) if tool == "sync" else
                                         run_c(mode, py_client=tool == "one"))
    print(f"\n{runs} repetition(s); 8 B echo round trip, median us (each repetition's)\n")
    print("| progress | rmx.sync | rmx C | rmx.sync - rmx C | one end: rmx.sync client, "
          "C server | one end - rmx C |")
    print("|---|---|---|---|---|---|")

    def diff(a: list, b: list) -> str:
        d = [x - y for x, y in zip(a, b)]
        return f"{statistics.median(d):.1f} ({' '.join(f'{x:.1f}' for x in d)})"

    for mode in ("event", "poll"):
        s, c, o = (res[(mode, t)] for t in tools)
        print(f"| {mode} | {statistics.median(s):.1f} | {statistics.median(c):.1f} | "
              f"{diff(s, c)} | {statistics.median(o):.1f} | {diff(o, c)} |")


main()
