# SPDX-License-Identifier: BSD-3-Clause
"""A numpy array moved by RDMA write from Python, in MiB/s, beside the C
figure of the same machine (rmx-perf client URI -t write_bw -s 64M).

    PYTHONPATH=build/python-rdma python3 bench/python/write_bw.py rdma://ADDR:0 [MiB] [REPS]

A receiver process registers an array of MiB mebibytes (1024: 1 GiB; a
whole number) and
sends its key; this process writes its own array there REPS times, as one
conn.write() and as a transfer request of 64 MiB entries posted once per
pass, and prints the best pass of each. The receiver checks every byte of
the last pass.
"""
import asyncio
import subprocess
import sys
import time

import numpy as np

import rmx

CHUNK = 64 << 20


BLOCK = (np.arange(1 << 20, dtype=np.uint64) * 2654435761 >> 7).astype(np.uint8)


def source(n: int) -> np.ndarray:
    """n bytes of a 1 MiB pattern (n a multiple of 1 MiB), made in place."""
    return np.tile(BLOCK, n >> 20)


def intact(target: np.ndarray) -> bool:
    """Every byte of the pattern, checked 64 MiB at a time."""
    rows = target.reshape(-1, BLOCK.size)
    return all((rows[i:i + 64] == BLOCK).all() for i in range(0, len(rows), 64))


async def receive(uri: str, n: int) -> None:
    async with rmx.Context() as ctx:
        lst = await ctx.listen(uri)
        print(lst.uri, flush=True)
        conn = await lst.accept()
        target = np.zeros(n, dtype=np.uint8)
        with ctx.register(target, "w") as mem:
            await conn.send(mem.pack(conn))
            await conn.recv()  # "done"
            ok = intact(target)
        await conn.send(b"ok" if ok else b"bad")
        await conn.close()


async def send(uri: str, n: int, reps: int) -> None:
    src = source(n)
    async with rmx.Context() as ctx:
        conn = await ctx.connect(uri)
        key = conn.unpack_key(await conn.recv())
        best = {}
        xfer = conn.prepare("write", [(src[o:o + CHUNK], key, o) for o in range(0, n, CHUNK)])
        for name, run in (("conn.write", lambda: conn.write(src, key)), ("transfer", xfer.post)):
            for _ in range(reps):
                t = time.perf_counter()
                await run()
                best[name] = max(best.get(name, 0), n / (time.perf_counter() - t) / 2**20)
        xfer.release()
        await conn.send(b"done")
        verdict = (await conn.recv()).decode()
        for name, mibs in best.items():
            print(f"{name:<11} {n >> 20} MiB over {conn.transport}: {mibs:9.1f} MiB/s "
                  f"(best of {reps}; receiver: {verdict})")


def main() -> None:
    if sys.argv[1] == "receive":
        return asyncio.run(receive(sys.argv[2], int(sys.argv[3])))
    uri = sys.argv[1]
    n = (int(sys.argv[2]) if len(sys.argv) > 2 else 1024) << 20
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    rcv = subprocess.Popen([sys.executable, __file__, "receive", uri, str(n)],
                           stdout=subprocess.PIPE, text=True)
    try:
        asyncio.run(send(rcv.stdout.readline().strip(), n, reps))
    finally:
        rcv.wait()


main()
