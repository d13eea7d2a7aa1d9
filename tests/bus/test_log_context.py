"""A run's log lines name the run, whichever module logs them (bus.log_context)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from bus import Bus
from bus.log_context import LogIds
from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.runner import ask, running_runner, submit_and_collect


async def test_a_model_retry_logged_during_a_run_carries_the_run_id(
    bus: Bus,
    fake_model: FakeOpenAI,
    app_config: Callable[[], AppConfig],
    nats_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.handler.addFilter(LogIds())  # as `antler run` / `antler up` install it on their handler
    caplog.set_level(logging.INFO, logger="llm.guard")
    fake_model.script(Reply(text="busy", status=503), Reply(text="fine now"))
    request = ask("thread-logs", "hello")
    async with running_runner(nats_url, app_config()):
        await submit_and_collect(bus, request)
    [retry] = [r for r in caplog.records if r.name == "llm.guard" and "try 1 of" in r.getMessage()]
    assert retry.antler_ids == f" run={request.run_id}"  # type: ignore[attr-defined]
    outside = logging.LogRecord("x", logging.INFO, __file__, 1, "not in a run", None, None)
    LogIds().filter(outside)
    assert outside.antler_ids == ""  # type: ignore[attr-defined]
