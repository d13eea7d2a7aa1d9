"""The agent runner in a test, and the runs tests send it: used by every test package that needs
answers (gateway, channels, skills, sandbox, memory, schedules ...), not only tests/agents."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from agents.runner import run as run_runner
from bus import Bus
from bus.messages import RunRequest
from bus.runs import collect_run, submit_run
from config import AppConfig
from tests.conftest import run_antler, running_component, until_answering
from tests.fakes.openai_server import Reply

# `await kill(request, model_calls)`: tests/agents/conftest.py `runner_killed_mid_run`.
KillRunner = Callable[[RunRequest | None, int], Awaitable[None]]
# `await antler_cli(*args)`: the `antler_cli` fixture.
AntlerCli = Callable[..., Awaitable[asyncio.subprocess.Process]]
# `async with start_stack(running_runner, ...) as config:` the `start_stack` fixture.
StartStack = Callable[..., contextlib.AbstractAsyncContextManager[AppConfig]]
# `async with start_runner():` the `start_runner` fixture.
StartRunner = Callable[[], contextlib.AbstractAsyncContextManager[Bus]]


def running_runner(nats_url: str, config: AppConfig) -> contextlib.AbstractAsyncContextManager[Bus]:
    """A runner component in this process, on its own connection, drained on exit."""

    async def ready(bus: Bus, task: asyncio.Task[None]) -> None:
        await until_answering(bus.subjects.threads("state"), bus, task)

    return running_component(nats_url, config, run_runner, "runner", ready)


@pytest.fixture
def antler_cli(config_file: Callable[[], Path], nats_url: str) -> AntlerCli:
    """`await antler_cli("run", "runner")`: an `antler` command as a child process on the test's
    stack (its config.yaml as the test has set it by then, its nats-server)."""

    async def start(*args: str) -> asyncio.subprocess.Process:
        return await run_antler(*args, "-c", str(config_file()), "--nats-url", nats_url)

    return start


@pytest.fixture
def start_stack(nats_url: str, app_config: Callable[[], AppConfig]) -> StartStack:
    """`async with start_stack(running_runner, running_router) as config:` those components (each a
    `running_x(nats_url, config)`) on the test's config as the test has set it by then, stopped in
    the reverse order."""

    @contextlib.asynccontextmanager
    async def start(*components: Callable[[str, AppConfig], Any]) -> AsyncIterator[AppConfig]:
        config = app_config()
        async with contextlib.AsyncExitStack() as stack:
            for component in components:
                await stack.enter_async_context(component(nats_url, config))
            yield config

    return start


@pytest.fixture
def bash_needs_approval(config_data: dict[str, Any]) -> None:
    """Approvals on, every `bash` call asked about first: `pytest.mark.usefixtures("bash_needs_approval")`."""
    config_data["approvals"] = {"enabled": True, "rules": [{"tools": ["bash"], "action": "ask"}]}


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


async def a_slow_run(bus: Bus, fake_model: Any, thread_id: str, answer: str) -> RunRequest:
    """A run on `thread_id` whose model answers `answer` after 2 s, submitted and at work (in its
    model call) when this returns: the thread is busy."""
    fake_model.script(Reply(text=answer, delay=2))
    request = ask(thread_id, "take your time")
    await submit_run(bus, request)
    await fake_model.wait_for_requests(1)
    return request
