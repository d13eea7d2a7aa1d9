"""Components run as `antler up` and `antler run` run them (`bus.serve`: restarted when they fail,
their health published with their process's metrics), and their health read back from the bus as
the gateway's `/health` and `antler top` read it (`bus.health.summarize`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from bus import Bus, serve
from bus.health import Summary, summarize
from bus.messages import ComponentHealth
from bus.metrics_feed import MetricsBoard
from config import AppConfig
from tests.conftest import component_login

Entry = Callable[[Bus, AppConfig], Awaitable[None]]


class HealthWatch:
    """What every live process says about its components' health, heard on the bus."""

    def __init__(self, bus: Bus) -> None:
        self.board = MetricsBoard(bus)

    def now(self) -> dict[str, Summary]:
        return summarize(self.board.live())

    def reports(self, name: str) -> list[ComponentHealth]:
        """What each live process said of component `name` last."""
        return [s.health[name] for s in self.board.live() if name in s.health]

    async def until(
        self, check: Callable[[dict[str, Summary]], bool], timeout: float = 60.0
    ) -> dict[str, Summary]:
        """The components' health once `check` holds (re-checked as each snapshot arrives)."""
        deadline = time.monotonic() + timeout
        while not check(seen := self.now()):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"health never got there within {timeout:g}s; last: {seen}")
            self.board.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.board.changed.wait(), left)
        return seen


def status_of(name: str, status: str) -> Callable[[dict[str, Summary]], bool]:
    return lambda seen: name in seen and seen[name].status == status


@contextlib.asynccontextmanager
async def served(
    bus: Bus, config: AppConfig, components: Mapping[str, Entry], observer: Bus
) -> AsyncIterator[HealthWatch]:
    """`components` run by `serve` on `bus` until the block ends (then drained, as on SIGTERM);
    their health watched through `observer`'s connection."""
    watch = HealthWatch(observer)
    await watch.board.start()
    stop = asyncio.Event()
    serving = asyncio.create_task(serve(bus, config, components, stop, drain_timeout=30))
    try:
        yield watch
    finally:
        stop.set()
        try:
            await asyncio.wait_for(serving, 60)
        finally:
            await watch.board.stop()


@contextlib.asynccontextmanager
async def adapter(
    nats_url: str,
    bus: Bus,
    config_data: dict[str, Any],
    app_config: Callable[[], AppConfig],
    platform: str,
    settings: dict[str, Any],
    entry: Entry,
) -> AsyncIterator[HealthWatch]:
    """The adapter served on its own user's connection, its pauses between starts short."""
    config_data["channels"] = {platform: {"enabled": True, **settings}}
    config_data["bus"].update(restart_delay_seconds=0.2, restart_max_delay_seconds=1.0)
    config_data["observability"] = {"metrics_interval_seconds": 0.5}
    config = app_config()
    own = await component_login(config, platform).connect(nats_url, f"test-{platform}")
    try:
        async with served(own, config, {platform: entry}, bus) as watch:
            yield watch
    finally:
        await own.close()
