"""A chat platform's whole path for tests of several packages: runner, sandbox broker, router and
the adapter under test (`adapter_stack`), and the fake Bot API, the fake Discord and the fake Teams
as fixtures (`telegram`, `discord`, `teams`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest_asyncio

from bus import Bus
from config import AppConfig
from tests.conftest import running_component
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.msteams_server import FakeTeams
from tests.fakes.telegram_server import FakeTelegram
from tests.support.chat import running_router
from tests.support.runner import running_runner
from tests.support.sandbox import running_broker


@contextlib.asynccontextmanager
async def adapter_stack(
    nats_url: str,
    config_data: dict[str, Any],
    app_config: Callable[[], AppConfig],
    platform: str,
    settings: dict[str, Any],
    entry: Callable[[Bus, AppConfig], Awaitable[None]] | None,
    channels: dict[str, Any] | None = None,
) -> AsyncIterator[AppConfig]:
    """The whole path for one platform, with fast partial updates and the local sandbox.

    With `entry` None the adapter is left to the test (to stop and start it); `channels`: more of
    the `channels` section."""
    config_data["channels"] = {
        "stream_update_seconds": 0.05,
        **(channels or {}),
        platform: {"enabled": True, **settings},
    }
    config_data["sandbox"] = {"provider": "local"}
    config = app_config()
    async with (
        running_runner(nats_url, config),
        running_broker(nats_url, config),
        running_router(nats_url, config),
        running_component(nats_url, config, entry, platform) if entry else contextlib.nullcontext(),
    ):
        yield config


@pytest_asyncio.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    """The fake Bot API the Telegram adapter talks to."""
    async with FakeTelegram() as fake:
        yield fake


@pytest_asyncio.fixture
async def discord() -> AsyncIterator[FakeDiscord]:
    """The fake Discord (REST API and Gateway) the Discord adapter talks to."""
    async with FakeDiscord() as fake:
        yield fake


@pytest_asyncio.fixture
async def teams() -> AsyncIterator[FakeTeams]:
    """The fake Teams (token service, signing keys, Bot Connector) the Teams adapter talks to."""
    async with FakeTeams() as fake:
        yield fake
