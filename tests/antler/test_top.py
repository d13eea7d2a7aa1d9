"""`antler top` in a terminal: the running components and a run in flight, redrawn in place."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from bus import Bus, component_ready
from bus.metrics_feed import MetricsFeed, process_id
from bus.runs import submit_run
from config import AppConfig
from tests.conftest import REPO
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.health import served
from tests.support.ports import free_port
from tests.support.runner import ask, running_runner

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class Terminal:
    """A child on a pseudo-terminal, its screen output read as it comes."""

    def __init__(self, *args: str) -> None:
        self.args = args
        self.output = ""
        self.proc: asyncio.subprocess.Process | None = None
        self._master = -1

    async def start(self) -> None:
        self._master, slave = pty.openpty()
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "antler",
            *self.args,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "160", "LINES": "50"},
            stdin=slave,
            stdout=slave,
            stderr=slave,
        )
        os.close(slave)

    async def until(self, check: Callable[[str], bool], timeout: float = 30) -> str:
        """Read the screen until the newest frame satisfies `check`; returns that frame."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout):
            while True:
                try:
                    chunk = await loop.run_in_executor(None, os.read, self._master, 65536)
                except OSError:  # the child closed the terminal
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"antler top ended; it showed:\n{self.output[-3000:]}")
                self.output += chunk.decode(errors="replace")
                latest = self.output.rsplit("\x1b[2J", 1)[-1]
                if check(latest):
                    return ANSI.sub("", latest)

    async def stop(self) -> int:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(self.proc.wait(), 30)
        os.close(self._master)
        return code


@pytest.fixture
def top(
    config_data: dict[str, Any], config_file: Callable[[], Path], nats_url: str
) -> Callable[[], Terminal]:
    """`top()`: `antler top` on the test's stack (its config as the test has set it by then) in a
    terminal, redrawn every 0.3 s; the stack's processes publish their metrics every 0.2 s."""
    config_data["observability"] = {"metrics_interval_seconds": 0.2}
    return lambda: Terminal("top", "-c", str(config_file()), "--nats-url", nats_url, "--interval", "0.3")


async def test_top_shows_the_running_processes_their_queues_and_a_run_in_flight(
    bus: Bus,
    nats_url: str,
    fake_model: FakeOpenAI,
    app_config: Callable[[], AppConfig],
    top: Callable[[], Terminal],
) -> None:
    config = app_config()
    answer = asyncio.Event()
    fake_model.script(Reply(text="finally", hold=answer))
    async with running_runner(nats_url, config):
        # This process runs the runner, so it publishes its metrics as a runner process would.
        feed = MetricsFeed(bus, ["runner"], 0.2)
        feed.start()
        request = ask("thread-top", "take your time")
        await submit_run(bus, request)
        terminal = top()
        await terminal.start()
        try:
            mine = re.compile(rf"^{re.escape(process_id()[:28])}\s+runner\s.*\s(\d+)\s+(\d+)\s*$", re.M)

            def running(screen: str) -> bool:  # in the runs bucket, and in this process's snapshot
                found = mine.search(ANSI.sub("", screen))
                return request.run_id in screen and found is not None and found[1] == "1"

            screen = await terminal.until(running)
            runs, messages = mine.search(screen).groups()  # type: ignore[union-attr]
            assert (runs, messages) == ("1", "1"), "one run running, its request in hand"
            assert re.search(rf"{config.bus.prefix.upper()}_RUNS/runner\s+0\s+1\s+0", screen), screen
            assert "RUNS IN FLIGHT (1)" in screen
            answer.set()
            screen = await terminal.until(lambda s: "RUNS IN FLIGHT (0)" in s and request.run_id in s)
            slow = screen.split("SLOWEST RECENT TURNS", 1)[1]
            assert request.run_id in slow
            assert "success" in slow
        finally:
            code = await terminal.stop()
            await feed.stop()
    assert code == 0, terminal.output[-2000:]


async def test_top_names_a_component_that_is_not_well_and_why(
    bus: Bus, config_data: dict[str, Any], app_config: Callable[[], AppConfig], top: Callable[[], Terminal]
) -> None:
    config_data["bus"].update(restart_delay_seconds=0.2, restart_max_delay_seconds=1.0)
    port = free_port()

    async def fetcher(bus: Bus, config: AppConfig) -> None:  # its dependency never listens here
        async with httpx.AsyncClient() as http:
            await http.get(f"http://127.0.0.1:{port}/")
        component_ready()
        await asyncio.Future()

    async with served(bus, app_config(), {"fetcher": fetcher}, bus):
        terminal = top()
        await terminal.start()
        try:
            screen = await terminal.until(
                lambda s: re.search(r"fetcher\s+unhealthy", ANSI.sub("", s)) is not None
            )
        finally:
            code = await terminal.stop()
    [row] = [line for line in screen.splitlines() if line.startswith("fetcher ")]
    assert f"cannot reach 127.0.0.1:{port}: ConnectError" in row, screen
    assert "retrying" in row, screen
    assert code == 0, terminal.output[-2000:]
