"""LangSmith and Langfuse, switched on by their usual environment, trace each run with its thread and
user: a runner process as `antler run runner` starts it, the services faked on loopback
(`tests/fakes/tracing_services.py`, their SDKs' own wire formats)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bus import Bus
from tests.agents.conftest import ask, submit_and_collect
from tests.conftest import finished, run_antler
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.fakes.tracing_services import FakeTracingServices

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def services() -> AsyncIterator[FakeTracingServices]:
    async with FakeTracingServices() as fake:
        yield fake


def environment(url: str, **more: str) -> dict[str, str]:
    return {
        "LANGSMITH_TRACING": "true",
        "LANGSMITH_API_KEY": "lsv2-test-key",
        "LANGSMITH_ENDPOINT": url,
        "LANGSMITH_PROJECT": "antler-tests",
        "LANGFUSE_TRACING": "true",
        "LANGFUSE_PUBLIC_KEY": "pk-lf-test",
        "LANGFUSE_SECRET_KEY": "sk-lf-test",
        "LANGFUSE_BASE_URL": url,
        "LANGFUSE_FLUSH_INTERVAL": "0.2",
        **more,
    }


async def answered_by_a_runner(
    bus: Bus, config: Path, nats_url: str, env: dict[str, str], thread: str, user: str
) -> asyncio.subprocess.Process:
    runner = await run_antler("run", "runner", "-c", str(config), "--nats-url", nats_url, env=env)
    events = await submit_and_collect(bus, ask(thread, "hello", user_id=user), timeout=90)
    assert events[-1].data["status"] == "success", events[-1].data
    return runner


async def test_each_run_is_traced_in_langsmith_and_langfuse_with_its_thread_and_user(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_file: Callable[[], Path],
    nats_url: str,
    services: FakeTracingServices,
) -> None:
    fake_model.script(Reply(text="Traced."))
    runner = await answered_by_a_runner(
        bus, config_file(), nats_url, environment(services.url), "t-traced", "ana"
    )
    try:

        def in_langsmith() -> list[dict[str, Any]]:
            return [r for r in services.runs if r["extra"]["metadata"].get("thread_id") == "t-traced"]

        def in_langfuse() -> list[dict[str, Any]]:
            return [s for s in services.spans if s.get("session.id") == "t-traced"]

        try:
            await services.wait(lambda: bool(in_langsmith()) and bool(in_langfuse()), timeout=30)
        except TimeoutError:
            print("DEBUG", services.parts[:12], [{k: v for k, v in sp.items() if "input" not in k and "output" not in k} for sp in services.spans], services.auth)
            raise
    finally:
        runner.terminate()
        await finished(runner)
    run = in_langsmith()[0]
    assert run["extra"]["metadata"]["user_id"] == "ana"
    assert run["session_name"] == "antler-tests", "the project LANGSMITH_PROJECT names"
    span = in_langfuse()[0]
    assert span["user.id"] == "ana"
    assert "lsv2-test-key" in services.auth, "LangSmith was called with its key"
    assert any(a.startswith("Basic ") for a in services.auth), "Langfuse with its key pair"


async def test_a_service_switched_on_without_its_key_is_said_once_and_the_run_still_answers(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_file: Callable[[], Path],
    nats_url: str,
    services: FakeTracingServices,
) -> None:
    fake_model.script(Reply(text="Answered all the same."), Reply(text="And again."))
    env = environment(services.url, LANGSMITH_API_KEY="", LANGCHAIN_API_KEY="", LANGFUSE_TRACING="false")
    runner = await answered_by_a_runner(bus, config_file(), nats_url, env, "t-no-key", "ana")
    events = await submit_and_collect(bus, ask("t-no-key", "and again", user_id="ana"), timeout=60)
    assert events[-1].data["status"] == "success"
    runner.terminate()
    _, _, err = await finished(runner)
    assert err.count("LangSmith tracing is on but LANGSMITH_API_KEY is not set") == 1, err
    assert services.runs == []
    assert services.spans == []
