"""Fixtures for runner tests: the scripted model over HTTP, a config pointing at it, a live runner."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agents.runner import run as run_runner
from bus import Bus
from bus.messages import RunRequest
from bus.runs import collect_run, submit_run
from config import AppConfig
from tests.conftest import finished, run_antler, running_component, until_answering
from tests.fakes.openai_server import FakeOpenAI


def running_runner(nats_url: str, config: AppConfig) -> contextlib.AbstractAsyncContextManager[Bus]:
    """A runner component in this process, on its own connection, drained on exit."""

    async def ready(bus: Bus, task: asyncio.Task[None]) -> None:
        await until_answering(bus.subjects.threads("state"), bus, task)

    return running_component(nats_url, config, run_runner, "runner", ready)


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


# `await kill(request, model_calls)`: see `runner_killed_mid_run`.
KillRunner = Callable[[RunRequest | None, int], Awaitable[None]]


@pytest.fixture
def runner_killed_mid_run(
    bus: Bus, fake_model: FakeOpenAI, config_file: Callable[[], Path], nats_url: str
) -> KillRunner:
    """`await kill(request, model_calls)`: a runner in a process of its own (`antler run runner`, on
    the config as the test has set it by then) takes `request` (submitted here; None: one already
    on the bus) and is SIGKILLed once the model has had `model_calls` requests in all, the last of
    them still unanswered. The run's request is left unacked, for the next runner."""

    async def kill(request: RunRequest | None, model_calls: int) -> None:
        doomed = await run_antler("run", "runner", "-c", str(config_file()), "--nats-url", nats_url)
        try:
            if request is not None:
                await submit_run(bus, request)
            await fake_model.wait_for_requests(model_calls, timeout=30)
        finally:
            doomed.kill()
            await finished(doomed)

    return kill
