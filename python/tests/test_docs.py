# SPDX-License-Identifier: BSD-3-Clause
"""docs/python.md's programs, run as printed: the server and the client,
and the numpy array moved by RDMA write."""
import asyncio
import os
import re
import signal
import sys

import pytest
from conftest import URI

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")


@pytest.fixture
def programs(tmp_path):
    text = open(DOC).read()
    found = re.findall(r"<!-- file: (\S+) -->\n```python\n(.*?)```", text, re.S)
    assert {name for name, _ in found} == {"server.py", "client.py", "numpy_write.py"}
    for name, code in found:
        (tmp_path / name).write_text(code)
    return tmp_path


async def start(path, *args):
    proc = await asyncio.create_subprocess_exec(sys.executable, str(path), *args,
                                                stdout=asyncio.subprocess.PIPE)
    line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
    assert line.startswith("listening on "), line
    return proc, line.split()[-1]


async def run(path, *args):
    proc = await asyncio.create_subprocess_exec(sys.executable, str(path), *args,
                                                stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, out
    return out.decode()


async def test_server_and_client(programs):
    server, uri = await start(programs / "server.py", URI)
    try:
        out = await run(programs / "client.py", uri)
        assert out.splitlines() == [
            "echo: b'hello'", "rpc: b'CALL 7'",
            "error: RMX_ENOHANDLER -4005 no RPC handler registered for that id at the peer"]
    finally:
        server.send_signal(signal.SIGTERM)
        rest = (await asyncio.wait_for(server.communicate(), 60))[0].decode()
    assert server.returncode == 0 and rest == "server: done\n"


async def test_numpy_write(programs):
    pytest.importorskip("numpy")
    receiver, uri = await start(programs / "numpy_write.py", "receive", URI)
    await run(programs / "numpy_write.py", "send", uri)
    out = (await asyncio.wait_for(receiver.communicate(), 60))[0].decode()
    n = 1024 * 1024
    assert receiver.returncode == 0
    assert out == f"receiver: sum {float(n * (n - 1) // 2)} corner {float(n - 1)}\n"
