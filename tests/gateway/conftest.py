"""The whole back end for gateway tests: runner, sandbox broker and gateway on a free port."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from bus import Bus
from config import AppConfig
from config.loader import _build
from gateway.server import run as run_gateway
from tests.conftest import running_component
from tests.memory.conftest import running_updater
from tests.sandbox.conftest import running_broker
from tests.support.runner import running_runner
from tests.support.schedules import running_scheduler


@contextlib.asynccontextmanager
async def running_gateway(nats_url: str, config: AppConfig) -> AsyncIterator[str]:
    """The gateway on a free port; yields its base URL (which it writes to the data dir when it listens)."""
    url_file = Path(config.bus.data_dir) / "gateway.url"

    async def ready(bus: Bus, task: asyncio.Task[None]) -> None:
        for _ in range(400):
            if task.done():
                task.result()
            if await asyncio.to_thread(url_file.is_file):
                return
            await asyncio.sleep(0.025)

    async with running_component(nats_url, config, run_gateway, "gateway", ready):
        yield url_file.read_text().strip()


def skills_dir(tmp_path: Path) -> Path:
    demo = tmp_path / "skills" / "public" / "deep-research"
    demo.mkdir(parents=True, exist_ok=True)
    (demo / "SKILL.md").write_text(
        "---\nname: deep-research\ndescription: Research a topic in depth\n---\nSteps.\n"
    )
    return tmp_path / "skills"


@pytest_asyncio.fixture
async def stack_config(
    config_data: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AppConfig:
    monkeypatch.setenv("ANTLER_EXTENSIONS_CONFIG_PATH", str(tmp_path / "extensions_config.json"))
    data = {
        **config_data,
        "gateway": {
            "port": 0,
            "max_upload_mb": 1,
            "tokens": [
                {"token": "tok-ana", "user_id": "ana", "admin": True},
                {"token": "tok-bob", "user_id": "bob"},
            ],
        },
        "sandbox": {"provider": "local"},
        "skills": {"path": str(skills_dir(tmp_path))},
    }
    return _build(AppConfig, data, "test config")


@pytest_asyncio.fixture
async def api_url(nats_url: str, stack_config: AppConfig) -> AsyncIterator[str]:
    async with (
        running_runner(nats_url, stack_config),
        running_broker(nats_url, stack_config),
        running_updater(nats_url, stack_config),
        running_scheduler(nats_url, stack_config),
        running_gateway(nats_url, stack_config) as base,
    ):
        yield base


@pytest_asyncio.fixture
async def http(api_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """ana's HTTP client for the API under `/api`."""
    async with httpx.AsyncClient(
        base_url=f"{api_url}/api", headers={"x-api-key": "tok-ana"}, timeout=30
    ) as client:
        yield client


@pytest_asyncio.fixture
async def client_for(api_url: str) -> AsyncIterator[Callable[[str], LangGraphClient]]:
    clients: list[LangGraphClient] = []

    def make(token: str) -> LangGraphClient:
        client = get_client(url=f"{api_url}/api", api_key=token)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.http.client.aclose()


@pytest_asyncio.fixture
async def ana(client_for: Callable[[str], LangGraphClient]) -> LangGraphClient:
    return client_for("tok-ana")
