"""Fixtures for runner tests: a live runner, and a runner killed mid-run (the helpers they use, shared
with other test packages, are in tests/support/runner.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from bus import Bus
from bus.messages import RunRequest
from bus.runs import submit_run
from tests.conftest import finished, run_antler
from tests.fakes.openai_server import FakeOpenAI
from tests.support.runner import KillRunner, StartRunner, start_runner  # noqa: F401  (start_runner: a fixture)


@pytest_asyncio.fixture
async def runner(start_runner: StartRunner) -> AsyncIterator[None]:  # noqa: F811
    async with start_runner():
        yield


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
