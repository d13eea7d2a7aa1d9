"""Supervised components (`bus.supervision`, under `bus.serve`): one that fails is started again with
backoff while the others serve, and says why it is unhealthy where operators look (its process's
metrics snapshots, which `/health` and `antler top` read), in one log line per attempt."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from bus import (
    Bus,
    Misconfigured,
    component_degraded,
    component_healthy,
    component_ready,
    component_unhealthy,
)
from bus.supervision import Backoff, Kind
from config import AppConfig
from tests.support.health import served, status_of
from tests.support.ports import free_port


@pytest.fixture
def quick_config(config_data: dict[str, Any], app_config: Callable[[], AppConfig]) -> AppConfig:
    """Short pauses between starts, snapshots twice a second."""
    config_data["bus"].update(restart_delay_seconds=0.05, restart_max_delay_seconds=0.3)
    config_data["observability"] = {"metrics_interval_seconds": 0.5}
    return app_config()


async def steady(bus: Bus, config: AppConfig) -> None:
    component_ready()
    await asyncio.Future()


async def until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # a counter of the test's own component: nothing to wait on but it
        assert time.monotonic() < deadline, "never happened"
        await asyncio.sleep(0.02)


async def test_a_component_that_cannot_reach_its_dependency_is_retried_while_the_others_serve(
    bus: Bus, quick_config: AppConfig, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    attempts = 0

    async def fetcher(bus: Bus, config: AppConfig) -> None:
        nonlocal attempts
        attempts += 1
        async with httpx.AsyncClient() as http:
            await http.get(f"http://127.0.0.1:{port}/")  # refused until the test listens there
            component_ready()
            await asyncio.Future()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()

    caplog.set_level(logging.INFO, logger="bus")
    async with served(bus, quick_config, {"fetcher": fetcher, "steady": steady}, bus) as watch:
        seen = await watch.until(
            lambda s: status_of("fetcher", "unhealthy")(s) and status_of("steady", "healthy")(s)
        )
        assert f"cannot reach 127.0.0.1:{port}: ConnectError" in seen["fetcher"].text
        assert "retrying" in seen["fetcher"].text
        await until(lambda: attempts >= 3)  # started again and again, the others serving meanwhile
        assert watch.now()["steady"].status == "healthy"

        server = await asyncio.start_server(answer, "127.0.0.1", port)  # the dependency is back
        try:
            await watch.until(status_of("fetcher", "healthy"))
        finally:
            server.close()
    failures = [r for r in caplog.records if r.name == "bus.supervision"]
    assert len(failures) >= 2
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in failures), "a line, no traceback"
    assert all("fetcher: unhealthy — cannot reach" in r.getMessage() for r in failures)
    assert any(r.getMessage() == "fetcher: healthy again" for r in caplog.records)


async def test_a_misconfigured_component_stays_down_saying_why_and_is_not_retried_soon(
    bus: Bus,
    config_data: dict[str, Any],
    app_config: Callable[[], AppConfig],
    caplog: pytest.LogCaptureFixture,
) -> None:
    config_data["bus"].update(restart_delay_seconds=0.05, restart_max_delay_seconds=2.0)
    config_data["observability"] = {"metrics_interval_seconds": 0.5}
    attempts = 0

    async def needs_a_token(bus: Bus, config: AppConfig) -> None:
        nonlocal attempts
        attempts += 1
        raise Misconfigured("channels.demo.token is not set")

    async with served(bus, app_config(), {"demo": needs_a_token, "steady": steady}, bus) as watch:
        seen = await watch.until(
            lambda s: status_of("demo", "unhealthy")(s) and status_of("steady", "healthy")(s)
        )
        assert seen["demo"].text.startswith("channels.demo.token is not set; retrying"), seen
        [report] = watch.reports("demo")
        assert report.retry_at is not None
        # Five times the longest pause (2 s here), jittered: not the quick retries of an outage.
        assert (report.retry_at - report.since).total_seconds() >= 5.0, report
        assert attempts == 1
    [line] = [r for r in caplog.records if r.name == "bus.supervision"]
    assert line.levelno == logging.ERROR
    assert line.exc_info is None
    assert "demo: down — channels.demo.token is not set; this will not fix itself" in line.getMessage()


async def test_a_component_that_raises_a_bug_is_logged_with_its_traceback_once_and_started_again(
    bus: Bus, quick_config: AppConfig, caplog: pytest.LogCaptureFixture
) -> None:
    attempts = 0

    async def buggy(bus: Bus, config: AppConfig) -> None:
        nonlocal attempts
        attempts += 1
        raise KeyError("no such setting")

    async with served(bus, quick_config, {"buggy": buggy, "steady": steady}, bus) as watch:
        seen = await watch.until(lambda s: status_of("buggy", "unhealthy")(s))
        assert seen["buggy"].text.startswith("KeyError: 'no such setting'; retrying")
        await until(lambda: attempts >= 4)  # three failures logged
        assert watch.now()["steady"].status == "healthy"
    lines = [r for r in caplog.records if r.name == "bus.supervision"]
    assert all(r.levelno == logging.ERROR for r in lines)
    assert [r.exc_info is not None for r in lines[:3]] == [True, False, False], "the traceback once"


async def test_what_a_component_says_of_its_platform_is_not_hidden_by_its_consumers_being_ready(
    bus: Bus, quick_config: AppConfig
) -> None:
    lost, back, lacking, whole = (asyncio.Event() for _ in range(4))

    async def adapter(bus: Bus, config: AppConfig) -> None:
        component_ready()
        await lost.wait()
        component_unhealthy("the connection to the platform is down; reconnecting")
        component_ready()  # its reply consumer, say, (re)starting meanwhile
        await back.wait()
        component_healthy()
        await lacking.wait()
        component_degraded("without its toolbox")
        await whole.wait()
        component_degraded(None)
        await asyncio.Future()

    async with served(bus, quick_config, {"adapter": adapter}, bus) as watch:
        await watch.until(status_of("adapter", "healthy"))
        lost.set()
        seen = await watch.until(status_of("adapter", "unhealthy"))
        assert seen["adapter"].text == "the connection to the platform is down; reconnecting"
        back.set()
        await watch.until(status_of("adapter", "healthy"))
        lacking.set()
        seen = await watch.until(status_of("adapter", "degraded"))
        assert seen["adapter"].text == "without its toolbox"
        whole.set()
        await watch.until(status_of("adapter", "healthy"))


@pytest.mark.parametrize(
    ("failures", "kind", "low", "high"),
    [
        pytest.param(1, Kind.UNREACHABLE, 0.5, 1.0, id="first"),
        pytest.param(3, Kind.UNREACHABLE, 2.0, 4.0, id="doubled"),
        pytest.param(12, Kind.FAILED, 30.0, 60.0, id="capped"),
        pytest.param(1, Kind.MISCONFIGURED, 150.0, 300.0, id="misconfigured"),
    ],
)
def test_the_pauses_double_up_to_the_longest_with_jitter(
    failures: int, kind: Kind, low: float, high: float
) -> None:
    delays = {Backoff(first=1.0, longest=60.0).delay(failures, kind) for _ in range(50)}
    assert all(low <= d <= high for d in delays), delays
    assert len(delays) > 1, "jittered, so processes that failed together do not come back together"
