"""The agent runner in a test, and the runs tests send it: used by every test package that needs
answers (gateway, channels, skills, sandbox, memory, schedules ...), not only tests/agents."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agents.runner import run as run_runner
from bus import Bus
from bus.messages import RunRequest
from bus.runs import collect_run, submit_run
from config import AppConfig
from tests.conftest import running_component, until_answering

# `await kill(request, model_calls)`: tests/agents/conftest.py `runner_killed_mid_run`.
KillRunner = Callable[[RunRequest | None, int], Awaitable[None]]
# `async with start_runner():` the `start_runner` fixture.
StartRunner = Callable[[], contextlib.AbstractAsyncContextManager[Bus]]


def running_runner(nats_url: str, config: AppConfig) -> contextlib.AbstractAsyncContextManager[Bus]:
    """A runner component in this process, on its own connection, drained on exit."""

    async def ready(bus: Bus, task: asyncio.Task[None]) -> None:
        await until_answering(bus.subjects.threads("state"), bus, task)

    return running_component(nats_url, config, run_runner, "runner", ready)


@pytest.fixture
def start_runner(nats_url: str, app_config: Callable[[], AppConfig]) -> StartRunner:
    """`async with start_runner():` a runner on the test's config as the test has set it by then."""
    return lambda: running_runner(nats_url, app_config())


def ask(thread_id: str, text: str, **kw: Any) -> RunRequest:
    modes = kw.pop("stream_mode", ["messages-tuple", "values"])
    return RunRequest(
        thread_id=thread_id, input={"messages": [{"role": "user", "content": text}]}, stream_mode=modes, **kw
    )


async def submit_and_collect(bus: Bus, request: RunRequest, timeout: float = 30.0) -> list[Any]:
    await submit_run(bus, request)
    return await collect_run(bus, request.run_id, timeout=timeout)
