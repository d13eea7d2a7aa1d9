"""Fixtures for runner tests: a live runner, and a runner killed mid-run (the helpers they use, shared
with other test packages, are in tests/support/runner.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bus import Bus
from bus.messages import RunRequest
from bus.runs import submit_run
from tests.conftest import finished
from tests.fakes.openai_server import FakeOpenAI
from tests.support.runner import (  # noqa: F401  (antler_cli, bash_needs_approval, start_runner, start_stack: fixtures)
    AntlerCli,
    KillRunner,
    StartRunner,
    antler_cli,
    bash_needs_approval,
    start_runner,
    start_stack,
)


@pytest_asyncio.fixture
async def runner(start_runner: StartRunner) -> AsyncIterator[None]:  # noqa: F811
    async with start_runner():
        yield


@pytest.fixture
def counted_calls(
    config_data: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[[], list[str]]:
    """The agent's one tool is `count_calls` (tests/components/tools.py), which writes each call's
    note to a file, from whichever runner process runs it; `counted_calls()`: the notes so far."""
    calls = tmp_path / "calls.txt"
    monkeypatch.setenv("ANTLER_TEST_CALLS_FILE", str(calls))
    config_data["tools"] = [{"name": "count_calls", "use": "tests.components.tools:count_calls"}]
    return lambda: calls.read_text().splitlines()


@pytest.fixture
def runner_killed_mid_run(
    bus: Bus,
    fake_model: FakeOpenAI,
    antler_cli: AntlerCli,  # noqa: F811
) -> KillRunner:
    """`await kill(request, model_calls)`: a runner in a process of its own (`antler run runner`, on
    the config as the test has set it by then) takes `request` (submitted here; None: one already
    on the bus) and is SIGKILLed once the model has had `model_calls` requests in all, the last of
    them still unanswered. The run's request is left unacked, for the next runner."""

    async def kill(request: RunRequest | None, model_calls: int) -> None:
        doomed = await antler_cli("run", "runner")
        try:
            if request is not None:
                await submit_run(bus, request)
            await fake_model.wait_for_requests(model_calls, timeout=30)
        finally:
            doomed.kill()
            await finished(doomed)

    return kill
