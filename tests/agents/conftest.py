"""Fixtures for runner tests: the scripted model over HTTP, a config pointing at it, a live runner."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest_asyncio

from agents.runner import run as run_runner
from bus import Bus
from bus.messages import RunRequest
from bus.runs import collect_run, submit_run
from config import AppConfig


@contextlib.asynccontextmanager
async def running_runner(nats_url: str, config: AppConfig) -> AsyncIterator[None]:
    """A runner component in this process, on its own connection, drained on exit."""
    bus = await Bus.connect(nats_url, config.bus, name="test-runner", provision=True)
    task = asyncio.create_task(run_runner(bus, config))
    try:
        # The threads service answering means the runner is fully up.
        for _ in range(200):
            if task.done():
                task.result()
            try:
                await bus.nc.request(bus.subjects.threads("state"), b'{"thread_id": "probe"}', timeout=0.5)
                break
            except Exception:
                await asyncio.sleep(0.05)
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await bus.close()


@pytest_asyncio.fixture
async def runner(nats_url: str, app_config: Callable[[], AppConfig]) -> AsyncIterator[None]:
    async with running_runner(nats_url, app_config()):
        yield


def ask(thread_id: str, text: str, **kw: Any) -> RunRequest:
    modes = kw.pop("stream_mode", ["messages-tuple", "values"])
    return RunRequest(
        thread_id=thread_id, input={"messages": [{"role": "user", "content": text}]}, stream_mode=modes, **kw
    )


async def submit_and_collect(bus: Bus, request: RunRequest, timeout: float = 30.0) -> list[Any]:
    await submit_run(bus, request)
    return await collect_run(bus, request.run_id, timeout=timeout)
