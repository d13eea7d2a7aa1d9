"""The memory updater as a component in the test's process."""

from __future__ import annotations

import asyncio
import contextlib

from bus import Bus
from config import AppConfig
from memory.updater import run as run_updater
from tests.conftest import running_component, until_answering


def running_updater(nats_url: str, config: AppConfig) -> contextlib.AbstractAsyncContextManager[Bus]:
    """The memory updater on its own connection, up once its `memory` service answers."""

    async def ready(bus: Bus, task: asyncio.Task[None]) -> None:
        await until_answering(bus.subjects.service_subject("memory", "get"), bus, task)

    return running_component(nats_url, config, run_updater, "memory", ready)
