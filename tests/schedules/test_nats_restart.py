"""Schedules live in the server's store: an embedded nats-server restarted keeps firing them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from bus import Bus, EmbeddedServer, connect_and_provision
from bus.messages import ScheduledTaskRun, utcnow
from config import AppConfig
from schedules.scheduler import run as run_scheduler
from tests.conftest import until_answering
from tests.support.ports import free_port
from tests.support.schedules import create_task, firings

pytestmark = pytest.mark.asyncio


async def fired_after(bus: Bus, task_id: str, moment: datetime) -> ScheduledTaskRun:
    async with firings(bus, task_id) as lines:
        while True:
            line = await asyncio.wait_for(lines.get(), 60)
            if line.scheduled_for > moment:
                return line


async def test_a_restarted_nats_server_keeps_firing_the_schedules_it_stored(
    tmp_path: Path, app_config: Callable[[], AppConfig]
) -> None:
    config = app_config()
    bus_config = config.bus.model_copy(update={"user": None, "password": None})
    server = EmbeddedServer(tmp_path / "nats", port=free_port())
    await server.start()
    scheduler: asyncio.Task[None] | None = None
    try:
        bus = await connect_and_provision(server.url, bus_config, name="test")
        component = await Bus.connect(server.url, bus_config, name="test-scheduler")
        scheduler = asyncio.create_task(run_scheduler(component, config))
        await until_answering(bus.subjects.service_subject("schedules", "list"), bus, scheduler)
        task = await create_task(bus, prompt="tick", schedule_type="interval", schedule_spec={"every": "1s"})
        await fired_after(bus, task.id, task.created_at)
        await server.stop()
        restarted = utcnow()
        await server.start()
        line = await fired_after(bus, task.id, restarted)
        assert line.task_id == task.id
        assert line.trigger == "scheduled"
        await bus.close()
    finally:
        if scheduler is not None:
            scheduler.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await scheduler
        with contextlib.suppress(Exception):
            await component.close()
        await server.stop()
