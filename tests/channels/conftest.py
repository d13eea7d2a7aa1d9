"""What the adapter tests share: copies of an adapter as processes, the Telegram stack as a fixture
(the whole path for one platform is `tests.support.adapters.adapter_stack`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest_asyncio

from bus import Bus, decode
from bus.messages import ComponentReady
from channels.telegram import run as run_telegram
from config import AppConfig
from tests.conftest import REPO
from tests.fakes.openai_server import Reply, ToolCall
from tests.fakes.telegram_server import FakeTelegram
from tests.support.adapters import adapter_stack, telegram  # noqa: F401  (telegram: the fake Bot API fixture)


@contextlib.asynccontextmanager
async def adapter_processes(
    config: Path, nats_url: str, logs: Path, count: int, platform: str = "telegram"
) -> AsyncIterator[list[asyncio.subprocess.Process]]:
    """`count` `antler run <platform>` processes (stderr to files: a pipe nobody reads would fill up)."""
    procs = []
    try:
        for n in range(count):
            with (logs / f"{platform}-{n}.log").open("wb") as log:
                procs.append(
                    await asyncio.create_subprocess_exec(
                        sys.executable,
                        "-m",
                        "antler",
                        "run",
                        platform,
                        "-c",
                        str(config),
                        "--nats-url",
                        nats_url,
                        cwd=REPO,
                        env={**os.environ, "PYTHONPATH": str(REPO)},
                        stdout=asyncio.subprocess.DEVNULL,
                        stderr=log,
                    )
                )
        yield procs
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.terminate()
        await asyncio.gather(*(asyncio.wait_for(p.wait(), 30) for p in procs), return_exceptions=True)
        for proc in procs:
            if proc.returncode is None:
                proc.kill()


@pytest_asyncio.fixture
async def telegram_stack(
    nats_url: str,
    telegram: FakeTelegram,  # noqa: F811  (the fixture imported above)
    config_data: dict[str, Any],
    app_config: Callable[[], AppConfig],
) -> AsyncIterator[AppConfig]:
    """A runner, a router and the Telegram adapter polling the fake, up and answering."""
    settings = {"bot_token": telegram.token, "base_url": telegram.base_url}
    async with adapter_stack(nats_url, config_data, app_config, "telegram", settings, run_telegram) as config:
        await telegram.wait_for("getMe")
        yield config


def writes_and_presents(path: str, content: str, answer: str) -> list[Reply]:
    """A model's script that writes a file in the thread's outputs, presents it, then answers."""
    return [
        Reply(tool_calls=[ToolCall("write_file", {"path": path, "content": content})]),
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": [path]})]),
        Reply(text=answer),
    ]


@contextlib.asynccontextmanager
async def copies_ready(
    bus: Bus, platform: str
) -> AsyncIterator[Callable[[list[asyncio.subprocess.Process]], Awaitable[None]]]:
    """Inside: `await all_ready(procs)` waits until each of the adapter processes said it is ready (the
    active copy serving, the others standing by) and checks that they are those processes."""
    ready: asyncio.Queue[int] = asyncio.Queue()

    async def on_ready(msg: Any) -> None:
        ready.put_nowait(decode(ComponentReady, msg.data).pid)

    subscription = await bus.nc.subscribe(bus.subjects.component_ready(platform), cb=on_ready)

    async def all_ready(procs: list[asyncio.subprocess.Process]) -> None:
        pids = {await asyncio.wait_for(ready.get(), 90) for _ in procs}
        assert pids == {p.pid for p in procs}, "one copy active, the others standing by"

    try:
        yield all_ready
    finally:
        await subscription.unsubscribe()
