"""The power goes out under load: `antler up` and its nats-server die at once, and whatever the
JetStream store had written but not fsynced is gone (tests.support.lazyfs). Power back, `antler up`
again on the same data dir: every message whose publish was acknowledged is answered exactly once,
in its chat's order.

SIGKILL alone cannot show this (the page cache survives the process); on nats-server's own
`sync_interval` (2 minutes) this scenario loses acknowledged messages, on ours (`always`) it may not.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from nats.js.errors import NotFoundError

from tests.faults.budget import ONE_AT_A_TIME, SIZE, TIMEOUT, Size
from tests.faults.harness import ExternalNats, OpenLoad, UpFactory, Verdict, free_port
from tests.faults.load import COLLECTOR, ChatLoad
from tests.faults.scenario import through_faults
from tests.faults.stopping import OUTAGE, stopped_cleanly
from tests.support import lazyfs
from tests.support.antler_up import AntlerUp
from tests.support.processes import descendants

pytestmark = [pytest.mark.asyncio, TIMEOUT, ONE_AT_A_TIME]

# Two cuts on one stack: a third of the load before each, and one after; `antler up` starts three
# times, so the budget allows for two more starts.
TWO_CUTS = Size(chats=SIZE.chats, per_chat=SIZE.per_chat * 3 // 2, budget=SIZE.budget * 2)


def running(pids: list[int]) -> list[int]:
    """Those of `pids` that still run (a zombie no longer writes anything)."""
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.append(pid)
        except FileNotFoundError:
            pass
    return alive


async def gone(pids: list[int], timeout: float = 30.0) -> None:
    """Until none of `pids` runs."""
    deadline = time.monotonic() + timeout
    while alive := running(pids):
        if time.monotonic() > deadline:
            raise AssertionError(f"processes {alive} still running {timeout:g}s after SIGKILL")
        await asyncio.sleep(0.02)


def signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


async def power_cut(up: AntlerUp, disk: lazyfs.LazyFS) -> lazyfs.CutReport:
    """Every process of `antler up` stopped at once, then killed; then the unsynced data dropped.

    Stopped first, so that none of them sees another die and reacts (`antler up` starts a dead
    nats-server again at once) before the power is out for all."""
    everyone = [up.pid]
    while True:  # a process started while the others were being stopped is stopped too
        signal_all(everyone, signal.SIGSTOP)
        found = [up.pid] + [p.pid for p in descendants(up.pid)]
        if set(found) <= set(everyone):
            break
        everyone = sorted(set(everyone) | set(found))
    signal_all(everyone, signal.SIGKILL)
    await up.kill_all()
    await gone(everyone)
    return await disk.cut()


async def collecting(load: ChatLoad, timeout: float = 30.0) -> None:
    """Until the test's reader of CHAT_OUT has its durable consumer."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(NotFoundError):
            await load.bus.js.consumer_info(load.bus.subjects.chat_out_stream, COLLECTOR)
            return
        if time.monotonic() > deadline:
            raise AssertionError("the test's reader of CHAT_OUT has no consumer")
        await asyncio.sleep(0.05)


@dataclass
class Moments:
    """When the power goes: a random moment per cut, from a seed the counts line prints."""

    seed: int = field(default_factory=lambda: random.randrange(1 << 30))

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    async def wait(self) -> None:
        await asyncio.sleep(self._random.uniform(0.0, 1.0))  # somewhere in the middle of some run


@pytest.fixture
def moments() -> Moments:
    reason = lazyfs.unavailable()
    if reason:
        pytest.skip(f"no power-loss layer on this machine: {reason}")
    return Moments()


Faults = list[tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]]


async def judged(
    up: AntlerUp, load: ChatLoad, disk: lazyfs.LazyFS, faults: Faults, verdict: Verdict, name: str, seed: int
) -> None:
    """Two power cuts under the load, then `antler up` stopped and everything counted."""
    started = time.monotonic()
    redelivered = await through_faults(up, load, started + TWO_CUTS.budget, faults)
    verdict(
        load,
        name,
        started,
        up,
        await stopped_cleanly(up),
        redelivered_runs=redelivered,
        unsynced_bytes_dropped="+".join(str(report.bytes_dropped) for report in disk.cuts),
        seed=seed,
    )


async def test_power_cut_under_load_loses_no_acknowledged_message(
    tmp_path: Path,
    fault_config: Callable[..., Path],
    antler_up: UpFactory,
    chat_load: OpenLoad,
    verdict: Verdict,
    moments: Moments,
) -> None:
    # A fixed port: after the power is back, clients reconnect where they were.
    config = fault_config(embedded={"port": free_port()})
    async with lazyfs.LazyFS(tmp_path / "disk", tmp_path / "data" / "jetstream") as disk:
        up = antler_up(config)
        await up.start()
        async with chat_load(await up.nats_url(), TWO_CUTS) as load:
            await collecting(load)
            # What start-up made (streams, buckets, consumers: nats-server does not fsync their
            # metadata) is old news by the first cut: the kernel has written it back long since.
            await disk.writeback()

            async def cut() -> None:
                await moments.wait()
                await power_cut(up, disk)

            async def power_back() -> None:
                await up.start()

            faults = [(cut, power_back), (cut, power_back)]
            await judged(up, load, disk, faults, verdict, "power-cut", moments.seed)


async def test_the_bus_machine_losing_power_loses_no_acknowledged_message(
    tmp_path: Path,
    fault_config: Callable[..., Path],
    antler_up: UpFactory,
    chat_load: OpenLoad,
    verdict: Verdict,
    moments: Moments,
) -> None:
    """Only the machine of an external nats-server (`bus.url`) loses power, twice: the components,
    elsewhere, keep running and reconnect when it is back on what it had fsynced."""
    nats = ExternalNats(tmp_path / "external-nats", users_dir=tmp_path / "data")
    async with lazyfs.LazyFS(tmp_path / "disk", tmp_path / "external-nats" / "jetstream") as disk:
        await nats.start()
        try:
            up = antler_up(fault_config(url=nats.url))
            await up.start()
            async with chat_load(nats.url, TWO_CUTS) as load:
                await collecting(load)
                await disk.writeback()

                async def cut() -> None:
                    await moments.wait()
                    await nats.stop(signal.SIGKILL)  # reaped: nothing writes to the store any more
                    await disk.cut()

                async def power_back() -> None:
                    await asyncio.sleep(OUTAGE)  # the publisher retries until the server is back
                    await nats.start()

                faults = [(cut, power_back), (cut, power_back)]
                await judged(up, load, disk, faults, verdict, "bus-power-cut", moments.seed)
        finally:
            await nats.close()
