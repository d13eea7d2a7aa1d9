"""What every adapter test runs: runner, sandbox broker, router and the adapter under test."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest_asyncio

from bus import Bus
from channels.telegram import run as run_telegram
from config import AppConfig
from tests.conftest import REPO, running_component
from tests.fakes.telegram_server import FakeTelegram
from tests.sandbox.conftest import running_broker
from tests.support.runner import running_runner


@contextlib.asynccontextmanager
async def adapter_stack(
    nats_url: str,
    config_data: dict[str, Any],
    app_config: Callable[[], AppConfig],
    platform: str,
    settings: dict[str, Any],
    entry: Callable[[Bus, AppConfig], Awaitable[None]] | None,
) -> AsyncIterator[AppConfig]:
    """The whole path for one platform, with fast partial updates and the local sandbox.

    With `entry` None the adapter is left to the test (to stop and start it)."""
    from tests.support.chat import running_router

    config_data["channels"] = {"stream_update_seconds": 0.05, platform: {"enabled": True, **settings}}
    config_data["sandbox"] = {"provider": "local"}
    config = app_config()
    async with (
        running_runner(nats_url, config),
        running_broker(nats_url, config),
        running_router(nats_url, config),
        running_component(nats_url, config, entry, platform) if entry else contextlib.nullcontext(),
    ):
        yield config


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
async def telegram() -> AsyncIterator[FakeTelegram]:
    """The fake Bot API the Telegram adapter talks to."""
    async with FakeTelegram() as fake:
        yield fake


@pytest_asyncio.fixture
async def telegram_stack(
    nats_url: str, telegram: FakeTelegram, config_data: dict[str, Any], app_config: Callable[[], AppConfig]
) -> AsyncIterator[AppConfig]:
    """A runner, a router and the Telegram adapter polling the fake, up and answering."""
    settings = {"bot_token": telegram.token, "base_url": telegram.base_url}
    async with adapter_stack(nats_url, config_data, app_config, "telegram", settings, run_telegram) as config:
        await telegram.wait_for("getMe")
        yield config
