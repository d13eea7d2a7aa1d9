"""Scheduled tasks on a three-node cluster: the node leading the SCHEDULES stream is SIGKILLed.

The definitions are replicated with the stream (`bus.replicas` 3), so the new leader fires them:
firings go on while the node is down, and none is recorded twice.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime
from pathlib import Path

import pytest

from bus import Bus, connect_and_provision
from bus.messages import ScheduleAction, ScheduledRunList, ScheduledTaskRun, utcnow
from bus.service import call
from config import AppConfig, BusConfig
from schedules.scheduler import run as run_scheduler
from tests.conftest import until_answering
from tests.faults.budget import ONE_AT_A_TIME, PREFIX, TIMEOUT
from tests.faults.harness import NatsCluster, admin_login
from tests.support.schedules import create_task, firings

pytestmark = [pytest.mark.asyncio, TIMEOUT, ONE_AT_A_TIME]


async def lines_after(bus: Bus, task_id: str, moment: datetime, count: int) -> list[ScheduledTaskRun]:
    """The first `count` firings of the task recorded for moments after `moment`."""
    found: list[ScheduledTaskRun] = []
    async with firings(bus, task_id) as lines:
        while len(found) < count:
            line = await asyncio.wait_for(lines.get(), 60)
            if line.scheduled_for > moment:
                found.append(line)
    return found


async def test_killing_the_node_that_leads_the_schedules_stream_neither_stops_nor_doubles_firings(
    tmp_path: Path, cluster: NatsCluster
) -> None:
    scheduler: asyncio.Task[None] | None = None
    buses: list[Bus] = []
    try:
        config = BusConfig(prefix=PREFIX, replicas=3, **admin_login(tmp_path / "data"))
        bus = await connect_and_provision(cluster.url, config, name="faults-probe")
        buses.append(bus)
        component = await Bus.connect(cluster.url, config, name="faults-scheduler")
        buses.append(component)
        scheduler = asyncio.create_task(run_scheduler(component, AppConfig(bus=config)))
        await until_answering(bus.subjects.service_subject("schedules", "list"), bus, scheduler)
        task = await create_task(bus, prompt="tick", schedule_type="interval", schedule_spec={"every": "1s"})
        await lines_after(bus, task.id, task.created_at, 2)
        info = await bus.js.stream_info(bus.subjects.schedules_stream)
        assert info.cluster is not None
        assert info.cluster.leader
        victim = int(info.cluster.leader.removeprefix("n")) - 1
        await cluster.kill(victim)
        killed = utcnow()
        after = await lines_after(bus, task.id, killed, 3)
        assert all(line.trigger == "scheduled" for line in after)
        await cluster.start(victim)
        request = ScheduleAction(user_id="alice", task_id=task.id, limit=200)
        history = (await call(bus, "schedules", "runs", request, ScheduledRunList, timeout=30)).runs
        firing_ids = [line.id for line in history]  # named after the occurrence the server fired
        assert len(firing_ids) == len(set(firing_ids)), "no firing recorded twice"
        assert len(history) >= 5
        runs = [line.run_id for line in history if line.run_id]
        assert len(runs) == len(set(runs)), "no run started twice"
    finally:
        if scheduler is not None:
            scheduler.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await scheduler
        for connection in buses:
            with contextlib.suppress(Exception):
                await connection.close()
