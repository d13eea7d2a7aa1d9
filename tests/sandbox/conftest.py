"""A running sandbox broker (in this process, on its own connection) and a client for one thread."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bus import Bus
from config import AppConfig
from config.loader import _build
from sandbox import SandboxClient, bwrap_works
from sandbox.broker import run as run_broker
from tests.conftest import component_bus, running_component, until_answering

BWRAP = bwrap_works()
_WITH_BWRAP = pytest.mark.skipif(
    not BWRAP, reason="bubblewrap is not installed or cannot create namespaces here"
)
# bwrap commands share one unprivileged uid and so its process limit: the fork bomb test would
# starve another worker's bwrap test; they run on one worker, one after another.
_BWRAP_GROUP = pytest.mark.xdist_group("bwrap")


def needs_bwrap(test: Any) -> Any:
    """For a test of bwrap itself: skipped without it, and never beside another bwrap test."""
    return _BWRAP_GROUP(_WITH_BWRAP(test))


PROVIDERS = [
    pytest.param("local", id="local"),
    pytest.param("bwrap", id="bwrap", marks=[_WITH_BWRAP, _BWRAP_GROUP]),
]


@pytest.fixture
def sandbox_config(tmp_path: Path, bus: Bus) -> dict[str, Any]:
    skills = tmp_path / "skills" / "public" / "demo"
    skills.mkdir(parents=True)
    (skills / "SKILL.md").write_text("---\nname: demo\ndescription: A demo skill\n---\nDo the demo.\n")
    return {
        "bus": component_bus(bus.config, tmp_path / "data"),
        "skills": {"path": str(tmp_path / "skills")},
        "sandbox": {
            "provider": "local",
            "command_timeout_seconds": 20,
            "max_output_chars": 2000,
            "max_read_chars": 3000,
            "max_write_bytes": 100_000,
            "memory_mb": 512,
            "max_processes": 64,
            "cpu_seconds": 20,
        },
    }


def running_broker(nats_url: str, config: AppConfig) -> contextlib.AbstractAsyncContextManager[Bus]:
    async def ready(bus: Bus, task: asyncio.Task[None]) -> None:
        await until_answering(bus.subjects.sandbox("list_dir"), bus, task)

    return running_component(nats_url, config, run_broker, "broker", ready)


@pytest.fixture(params=PROVIDERS)
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_config(sandbox_config: dict[str, Any]) -> Callable[..., AppConfig]:
    def build(**sandbox: Any) -> AppConfig:
        data = {**sandbox_config, "sandbox": {**sandbox_config["sandbox"], **sandbox}}
        return _build(AppConfig, data, "test config")

    return build


@pytest_asyncio.fixture
async def broker(
    nats_url: str, make_config: Callable[..., AppConfig], provider: str
) -> AsyncIterator[AppConfig]:
    config = make_config(provider=provider)
    async with running_broker(nats_url, config):
        yield config


@pytest.fixture
def client(bus: Bus) -> SandboxClient:
    return SandboxClient(bus, "ana", "t1")
