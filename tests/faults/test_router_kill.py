"""Three routers share the chat partitions; one is SIGKILLed mid-flood and a new one starts: every
message is still answered exactly once, with its own answer, and each chat's answers in send order."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.faults.budget import LONG, ONE_AT_A_TIME, STOP_TIMEOUT, TIMEOUT, Size
from tests.faults.harness import OpenLoad, UpFactory, Verdict, write_config
from tests.faults.scenario import through_a_fault
from tests.support.antler_up import AntlerUp
from tests.support.processes import Proc

pytestmark = [pytest.mark.asyncio, TIMEOUT, ONE_AT_A_TIME]

ROUTERS = 3
# 60 messages over 20 chats (3 each) by default: the router killed holds about a third of the
# 16 partitions, so some 7 chats with messages in flight, and each chat has answers before and
# after the kill to keep in order (that it holds none of the 20 chats is a chance of about 1 in
# 3000). `ANTLER_FAULTS_LONG=1`: 1000 over 50, more than the 300 over 50 issue #36 asked for.
FLOOD = Size(chats=50, per_chat=20, budget=600.0) if LONG else Size(chats=20, per_chat=3, budget=90.0)
LEASE_SECONDS = 3  # a dead router's partitions are taken over within about this


def routers(up: AntlerUp) -> list[Proc]:
    return [p for p in up.children() if " antler run router" in p.cmdline]


async def test_a_router_killed_mid_flood_loses_repeats_and_reorders_no_answer(
    fault_config: Callable[..., Path], antler_up: UpFactory, chat_load: OpenLoad, verdict: Verdict
) -> None:
    path = fault_config(lease_seconds=LEASE_SECONDS)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["channels"]["router_processes"] = ROUTERS
    up = antler_up(write_config(path, data))
    await up.start()
    assert len(routers(up)) == ROUTERS, up.tail()
    started = time.monotonic()
    deadline = started + FLOOD.budget
    killed: list[int] = []
    async with chat_load(await up.nats_url(), FLOOD) as load:

        async def kill_a_router() -> None:
            # Answers are streaming and most messages are still to come: a router holding about a
            # third of the partitions dies with its chats' messages and replies in flight.
            victim = routers(up)[0]
            os.kill(victim.pid, signal.SIGKILL)
            killed.append(victim.pid)

        # `antler up` starts a new router in its place at once: it joins while the dead one's
        # leases have not lapsed yet, and takes its share once they have.
        await through_a_fault(up, load, deadline, kill_a_router, mid_publish=True)
        problems = []
        now = routers(up)
        if len(now) != ROUTERS or any(p.pid in killed for p in now):
            problems.append(f"routers after the kill: {[p.pid for p in now]} (killed {killed})")
        if "took partition" not in up.log():
            problems.append("no router logged taking a partition")
        code = await up.stop(STOP_TIMEOUT)
        if code != 0:
            problems.append(f"antler up exited with {code} after SIGINT (None: still running)")
        verdict(load, "router-sigkill", started, up, problems, routers=ROUTERS)
