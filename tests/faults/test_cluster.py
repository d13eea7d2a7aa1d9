"""A three-node NATS cluster under load: one node SIGKILLed and brought back.

`bus.url` lists the three servers and `bus.replicas` is 3, so every stream, KV
bucket and the object store has a copy on each node. The components' connections
are spread over the servers (each client picks one at random). The node leading
the runs work queue is killed mid-load and started again on its store: every
accepted message is answered exactly once, no component is restarted, and runs
whose runner lost its connection finish (resumed where needed).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bus import Bus
from config import BusConfig
from tests.faults.budget import ONE_AT_A_TIME, PREFIX, SIZE, TIMEOUT
from tests.faults.harness import NatsCluster, OpenLoad, UpFactory, Verdict, admin_login
from tests.faults.scenario import through_a_fault
from tests.faults.stopping import OUTAGE, stopped_cleanly

pytestmark = [pytest.mark.asyncio, TIMEOUT, ONE_AT_A_TIME]


async def runs_leader(url: str, data_dir: Path) -> int:
    """The node (0-based) leading the runs work queue's stream."""
    bus = await Bus.connect(url, BusConfig(prefix=PREFIX, **admin_login(data_dir)), name="faults-probe")
    try:
        info = await bus.js.stream_info(bus.subjects.runs_stream)
    finally:
        await bus.close()
    assert info.cluster is not None
    assert info.cluster.leader, "the runs stream has no leader"
    assert len(info.cluster.replicas or []) == 2, "three copies: the leader and two replicas"
    return int(info.cluster.leader.removeprefix("n")) - 1


async def test_a_cluster_node_killed_under_load_loses_and_repeats_no_answer(
    tmp_path: Path,
    fault_config: Callable[..., Path],
    antler_up: UpFactory,
    chat_load: OpenLoad,
    verdict: Verdict,
    cluster: NatsCluster,
) -> None:
    up = antler_up(fault_config(url=cluster.url, replicas=3))
    await up.start()
    started = time.monotonic()
    deadline = started + SIZE.budget
    async with chat_load(cluster.url) as load:
        victim: list[int] = []

        async def kill_the_runs_leader() -> None:
            # Clients of the dead node reconnect to another; the rest is published meanwhile.
            victim.append(await runs_leader(cluster.url, tmp_path / "data"))
            await cluster.kill(victim[0])

        async def outage() -> None:
            await asyncio.sleep(OUTAGE)
            await cluster.start(victim[0])

        redelivered = await through_a_fault(up, load, deadline, kill_the_runs_leader, outage)
        problems = [
            line.strip()
            for line in up.log().splitlines()
            if "exited with code" in line or "starting it again" in line
        ]  # no component, no runner process needed a restart
        problems += await stopped_cleanly(up)
        verdict(load, "cluster-node-sigkill", started, up, problems, redelivered_runs=redelivered)
