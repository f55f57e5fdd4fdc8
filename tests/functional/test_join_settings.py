"""A process that joins a network run with other settings is refused at join, over real HTTP,
with one line naming each difference (such processes used to run to the end,
with only failed sends and refusals to hint at it)."""

from __future__ import annotations

import pytest

from p2pnode.runners.real import MismatchError, NodeProcess, ProcessSpec, StartupError
from tests.functional.helpers import free_ports
from tests.functional.test_http_nodes import cfg

pytestmark = pytest.mark.functional


async def test_a_process_with_other_network_settings_is_refused_at_join_naming_each() -> None:
    a_addr, b_addr = (f"127.0.0.1:{p}" for p in free_ports(2))
    config = cfg(nodes=12, rounds=1000, sampling="cyclon")  # A alone starts an open network
    a = NodeProcess(config, ProcessSpec(tuple(range(6)), "127.0.0.1", int(a_addr.split(":")[1]), ()))
    await a.start()
    try:
        other = config.replace(sampling="peerswap", seed=5)
        port = int(b_addr.split(":")[1])
        b = NodeProcess(other, ProcessSpec(tuple(range(6, 12)), "127.0.0.1", port, (a_addr,)))
        with pytest.raises(StartupError) as refused:
            await b.start()
        line = str(refused.value)
        assert "\n" not in line and line.startswith(f"{a_addr} runs another network")
        assert "sampling 'cyclon' there, 'peerswap' here" in line and "seed 2 there, 5 here" in line
        assert "nodes" not in line and "protocol" not in line  # only what differs
        await b.shutdown()
        # the same settings join
        same = NodeProcess(config, ProcessSpec(tuple(range(6, 12)), "127.0.0.1", port, (a_addr,)))
        await same.start()
        await same.shutdown()
    finally:
        await a.shutdown()


async def test_two_open_processes_started_with_overlapping_users_refuse_to_run_both() -> None:
    a_addr, b_addr = (f"127.0.0.1:{p}" for p in free_ports(2))
    config = cfg(nodes=12, rounds=1000, sampling="cyclon")
    a = NodeProcess(config, ProcessSpec(tuple(range(8)), "127.0.0.1", int(a_addr.split(":")[1]), ()))
    await a.start()
    try:
        port = int(b_addr.split(":")[1])
        b = NodeProcess(config, ProcessSpec(tuple(range(5, 12)), "127.0.0.1", port, (a_addr,)))
        # both used to run, each hosting nodes 5-7, with one WARNING line to show for it
        with pytest.raises(MismatchError) as refused:
            await b.start()
        line = str(refused.value)
        assert line.startswith(f"3 node(s) are hosted both here and by {a_addr} (first: [5, 6, 7])")
        assert refused.value.exit_status == 2  # the user's mistake, as for a bad flag
        await b.shutdown()
    finally:
        await a.shutdown()
