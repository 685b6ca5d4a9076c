# SPDX-License-Identifier: BSD-3-Clause
"""Rails: a connection's large transfers striped over a second connection
to the same peer (its other listener), every byte checked."""
import pytest
from conftest import TRANSPORT, URI, pattern

import rmx


@pytest.mark.skipif(TRANSPORT == "shm", reason="no rails over shm yet (docs/architecture.md)")
async def test_rail_carries_part_of_a_large_write(pair):
    cli, _ = await pair.connect()
    second = await pair.srv.listen(URI)  # the peer's "other device"
    region = bytearray(8 << 20)
    mem = pair.srv.register(region)
    mem.publish("rails/region")
    rail = await cli.add_rail(second.uri)
    assert rail == 1 and cli.rails == 1
    rk = await cli.lookup("rails/region")  # after the rail: holds a key for it
    src = [bytearray(pattern(1 << 20, i)) for i in range(8)]
    xfer = cli.prepare("write", [(b, rk, (7 - i) << 20) for i, b in enumerate(src)])
    await xfer.post()
    for i, b in enumerate(src):
        assert region[(7 - i) << 20:(8 - i) << 20] == b
    lane0, lane1 = cli.rail_info(0), cli.rail_info(1)
    assert lane1["up"] and lane1["bytes"] > 0 and lane0["bytes"] > 0
    assert lane0["bytes"] + lane1["bytes"] == len(region)
    cli.close_rail(rail)
    with pytest.raises(rmx.RmxError) as e:
        cli.close_rail(rail)
    assert e.value.name == "RMX_ENOENT"
    await xfer.post()  # over the connection alone now
    xfer.release()
    rk.release()
    mem.close()
    second.close()


async def test_rail_errors(pair):
    cli, srv = await pair.connect()
    with pytest.raises(rmx.RmxError) as e:
        await srv.add_rail(pair.listener.uri)  # the accepting side opens none
    assert e.value.name == "RMX_EINVAL"
    with pytest.raises(TypeError):
        await cli.add_rail(None)  # a URI is a str
    with pytest.raises(rmx.RmxError) as e:
        cli.rail_info(3)
    assert e.value.name == "RMX_ENOENT"
    assert cli.rails == 0
