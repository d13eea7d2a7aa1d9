"""The runner pool of `antler up`: children restarted when they die, given up on if they keep dying,
and unhealthy, saying why, while a child cannot start."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from antler.pool import _keep_alive, process_count, process_pool
from bus import Bus
from config import AppConfig
from tests.components.needs_a_service import PORT_ENV
from tests.support.health import served, status_of
from tests.support.ports import free_port
from tests.support.processes import pid_alive

CHILD = "tests.components.needs_a_service:run"


async def test_a_child_that_dies_is_started_again(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    script = f"open({str(starts)!r}, 'a').write('x'); import time; time.sleep(0.2)"
    keeper = asyncio.create_task(_keep_alive("runner", [sys.executable, "-c", script], dict(os.environ), 0))
    for _ in range(200):
        if starts.exists() and len(starts.read_text()) >= 2:
            break
        await asyncio.sleep(0.05)
    keeper.cancel()
    with pytest.raises(asyncio.CancelledError):
        await keeper
    assert len(starts.read_text()) >= 2, "the child ran again after it exited"


async def test_a_child_that_keeps_dying_at_once_fails_loudly() -> None:
    with pytest.raises(RuntimeError, match="keeps exiting \\(code 3\\)"):
        await _keep_alive("runner", [sys.executable, "-c", "raise SystemExit(3)"], dict(os.environ), 0)


async def test_a_running_child_is_stopped_when_the_pool_stops(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    keeper = asyncio.create_task(_keep_alive("runner", [sys.executable, "-c", script], dict(os.environ), 0))
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text():
            break
        await asyncio.sleep(0.05)
    keeper.cancel()
    with pytest.raises(asyncio.CancelledError):
        await keeper
    pid = int(pid_file.read_text())
    assert not pid_alive(pid), "the child was stopped, not left behind"


def test_zero_processes_means_one_per_core_at_most_four() -> None:
    assert 1 <= process_count(0) <= 4
    assert process_count(3) == 3


async def test_a_child_failing_at_start_makes_its_pool_unhealthy_saying_why_until_it_serves(
    bus: Bus,
    nats_url: str,
    config_data: dict[str, Any],
    config_file: Callable[[], Path],
    app_config: Callable[[], AppConfig],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`antler up` waits for a pool to be ready before "Antler is up": a child that cannot start (its
    process retries by itself) must say so, or `antler up` would wait for it forever."""
    config_data["bus"].update(restart_delay_seconds=0.2, restart_max_delay_seconds=1.0)
    config_data["observability"] = {"metrics_interval_seconds": 0.5}
    port = free_port()
    monkeypatch.setenv(PORT_ENV, str(port))
    args = argparse.Namespace(config=str(config_file()), data_dir=None, prefix=None, verbose=False)
    pool = process_pool(CHILD, args, nats_url)
    async with served(bus, app_config(), {"pool": pool}, bus) as watch:
        seen = await watch.until(status_of("pool", "unhealthy"), timeout=90)
        assert re.fullmatch(
            r"process \d+: ConnectionRefusedError: .*; it retries by itself", seen["pool"].text
        ), seen
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", port)  # the service is there
        try:
            await watch.until(lambda s: status_of("pool", "healthy")(s) and status_of(CHILD, "healthy")(s))
        finally:
            server.close()
