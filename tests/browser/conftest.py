"""Fixtures for the browser's tests: a website on loopback, the browser component, a runner."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from agents.runner import run as run_runner
from browser.service import run as run_browser
from bus import Bus
from bus.messages import RunRequest
from config import AppConfig
from tests.conftest import running_component, until_answering
from tests.fakes.openai_server import FakeOpenAI, unfenced
from tests.fakes.web_pages import WebPages
from tests.support.browser import CHROMIUM, browser_ready
from tests.support.fakes import fake_fixture
from tests.support.runner import antler_cli  # noqa: F401  (a fixture)


@pytest.fixture
def chromium() -> str:
    if not shutil.which(CHROMIUM):
        pytest.fail(
            f"the browser tests need Chromium at {CHROMIUM}: `make install` (apt-get install chromium)"
        )
    return CHROMIUM


site = fake_fixture(WebPages, "The test website on loopback (a parcel tracker).")


@pytest.fixture
def browser_config(config_data: dict[str, Any], chromium: str) -> dict[str, Any]:
    """The browser on, allowed onto loopback (the test's website) as an operator would allow it."""
    config_data["browser"] = {"enabled": True, "chromium": chromium, "allow_private_networks": True}
    return config_data["browser"]


@pytest_asyncio.fixture
async def browser_component(
    nats_url: str, app_config: Callable[[], AppConfig], browser_config: dict[str, Any]
) -> AsyncIterator[Bus]:
    async with running_component(nats_url, app_config(), run_browser, "browser", browser_ready) as bus:
        yield bus


@pytest_asyncio.fixture
async def runner(
    nats_url: str, app_config: Callable[[], AppConfig], browser_config: dict[str, Any]
) -> AsyncIterator[None]:
    async def ready(bus: Bus, task: asyncio.Task[None]) -> None:
        await until_answering(bus.subjects.threads("state"), bus, task)

    async with running_component(nats_url, app_config(), run_runner, "runner", ready):
        yield


def ask(thread: str, text: str) -> RunRequest:
    return RunRequest(
        thread_id=thread, input={"messages": [{"role": "user", "content": text}]}, stream_mode=["values"]
    )


def tool_results(fake: FakeOpenAI) -> list[str]:
    """The tool results the model was sent last, read inside their untrusted-content fences."""
    return [unfenced(str(m["content"])) for m in fake.agent_requests[-1]["messages"] if m["role"] == "tool"]
