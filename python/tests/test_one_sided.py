# SPDX-License-Identifier: BSD-3-Clause
"""One-sided memory: buffers registered without a copy, written and read by
the peer through keys sent in messages."""
import pytest
from conftest import pattern

import rmx


async def test_bytearray_read_and_write(pair):
    cli, srv = await pair.connect()
    region = bytearray(1 << 20)
    with pair.srv.register(region) as mem:
        await srv.send(mem.pack(srv))  # a key for this peer only
        rk = cli.unpack_key(await cli.recv())
        assert rk.size == len(region)
        data = pattern(300000, 5)
        await cli.write(data, rk, 4096)
        assert region[4096:4096 + len(data)] == data  # seen in place, no copy
        with pytest.raises(BufferError):
            region.append(0)  # registered: its buffer stays exported
        region[0:5] = b"hello"
        back = bytearray(5)
        await cli.read(back, rk, 0)
        assert back == b"hello"
        with pytest.raises(rmx.RmxError):
            await cli.write(b"x" * 10, rk, len(region) - 5)  # beyond the region
        rk.release()
    region.append(0)  # released with the registration
    assert pair.srv.stats()["mem_regs"] == 0


async def test_numpy_array_written_remotely(pair):
    np = pytest.importorskip("numpy")
    cli, srv = await pair.connect()
    target = np.zeros((256, 1024), dtype=np.float64)  # 2 MiB
    mem = pair.srv.register(target, "w")
    await srv.send(mem.pack(srv))
    rk = cli.unpack_key(await cli.recv())
    src = np.arange(target.size, dtype=np.float64).reshape(target.shape)
    await cli.write(src, rk)
    assert np.array_equal(target, src)
    await cli.write(np.full(1024, -1.0), rk, 8 * 1024 * 10)  # row 10
    assert (target[10] == -1).all() and target[11, 0] == src[11, 0]
    with pytest.raises(rmx.RmxError) as e:
        await cli.read(bytearray(8), rk)  # write-only memory
    assert e.value.name == "RMX_EACCES"
    rk.release()
    mem.close()
    with pytest.raises(BufferError):
        pair.srv.register(b"read-only bytes")  # peers could write it
