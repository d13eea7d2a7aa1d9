"""The gateway in a test's process, its settings and the stack config the gateway tests (and the
access tests) share: tokens tok-ana (an admin) and tok-bob; and reading its SSE streams."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from bus import Bus
from config import AppConfig
from config.loader import _build
from gateway.server import run as run_gateway
from tests.conftest import running_component


def with_gateway(config: AppConfig, **changes: Any) -> AppConfig:
    data = config.model_dump(mode="json")
    data["gateway"] = {**data["gateway"], **changes}
    return _build(AppConfig, data, "test config")


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


async def sse_frames(response: httpx.Response) -> AsyncIterator[tuple[str | None, str, Any]]:
    """(id or None, event name, data) of each event of an SSE response, as they come."""
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if not line:
            if "event" in fields:
                yield fields.get("id"), fields["event"], json.loads(fields.get("data", "null"))
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            fields[name] = value


def streamed_answer(frames: list[tuple[str | None, str, Any]]) -> str:
    """The AI text of `messages` events, concatenated as a client does."""
    return "".join(
        data[0].get("content") or ""
        for _, name, data in frames
        if name == "messages" and isinstance(data, list) and data[0].get("type") == "AIMessageChunk"
    )


def id_order(event_id: str) -> tuple[int, float]:
    """Where an event id stands in its stream: a live delta's `<ms>-<seq>.<part>` before the stored
    event `seq` it is part of (`<ms>-<seq>`)."""
    seq, _, part = event_id.rsplit("-", 1)[1].partition(".")
    return int(seq), float(part) if part else float("inf")


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """(id, event name) of each event of an SSE response that has an id, as they come."""
    event_id = event = None
    async for line in response.aiter_lines():
        if line.startswith("id: "):
            event_id = line[4:]
        elif line.startswith("event: "):
            event = line[7:]
        elif line == "":
            if event_id:
                yield event_id, event or ""
            event_id = event = None
