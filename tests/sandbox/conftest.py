"""A running sandbox broker (in this process, on its own connection) and a client for one thread
(the broker itself and the bubblewrap marks are in tests/support/sandbox.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bus import Bus
from config import AppConfig
from config.loader import _build
from sandbox import SandboxClient
from tests.conftest import component_bus
from tests.support.sandbox import PROVIDERS, running_broker


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
