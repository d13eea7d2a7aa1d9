"""`antler up` as a user starts it, for whole-product tests: a child process in its own directory.

Its stdout and stderr go to files in that directory (a pipe nobody reads would fill up and block
its logging; its runner children inherit the same stderr, so one file holds the whole log). The
embedded nats-server's log is `<data_dir>/nats-server.log` (`.log.1` once rotated): `violations()`
reads the permission refusals in it, the same tripwire the fixtures' stacks have
(`tests/support/nats_users.logged_violations`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import IO

from tests.conftest import REPO
from tests.support.nats_users import logged_violations


class UpProcess:
    """One `python -m antler up` in `workdir` (config.yaml there; the data dir `.antler` beside it)."""

    def __init__(self, workdir: Path, data_dir: Path | None = None) -> None:
        self.workdir = workdir
        self.data_dir = data_dir or workdir / ".antler"
        self.proc: asyncio.subprocess.Process | None = None
        self.out_path = workdir / "up.out"
        self.err_path = workdir / "up.err"
        self._files: list[IO[bytes]] = []

    async def start(self, runners: int, timeout: float = 120.0) -> None:
        """Start it; return once it said "Antler is up" and its `runners` runner processes are up."""
        out, err = self._files = [self.out_path.open("wb"), self.err_path.open("wb")]  # closed in close()
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "antler",
            "up",
            cwd=self.workdir,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )
        await self.wait_for_line("Antler is up", timeout, stream="err")
        await self.wait_for_line("runner: running against", timeout, stream="err", count=runners)

    async def wait_for_line(
        self, text: str, timeout: float = 60.0, *, stream: str = "out", count: int = 1
    ) -> str:
        """The first line of its stdout (or stderr) holding `text`, once `count` such lines are there."""
        path = self.out_path if stream == "out" else self.err_path
        deadline = time.monotonic() + timeout
        while True:
            found = [line for line in _lines(path) if text in line]
            if len(found) >= count:
                return found[0]
            if self.proc is not None and self.proc.returncode is not None:
                raise AssertionError(
                    f"antler up exited ({self.proc.returncode}) before {text!r}:\n{self.tail()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"antler up did not print {text!r} within {timeout:g}s:\n{self.tail()}")
            await asyncio.sleep(0.05)  # a log file: nothing to wait on but the file growing

    async def gateway_url(self) -> str:
        return (await self.wait_for_line("Gateway: ")).split()[1]

    async def stop(self, timeout: float = 60.0) -> int | None:
        """SIGINT, as a user's Ctrl-C: its exit code, or None if it did not exit within `timeout`."""
        if self.proc is None or self.proc.returncode is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGINT)
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            return None

    async def close(self) -> None:
        """Whatever state it is in: SIGKILL it and its children, close its log files."""
        if self.proc is not None and self.proc.returncode is None:
            for pid in _descendants(self.proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
        for handle in self._files:
            handle.close()
        self._files = []

    def violations(self) -> list[str]:
        """`<user>: <kind> <subject>` for every refusal the embedded nats-server logged."""
        return logged_violations(self.data_dir)

    def tail(self, count: int = 60) -> str:
        lines = _lines(self.err_path)[-count:]
        return "\n".join([f"--- {self.err_path.name} (last {len(lines)} lines)", *lines])


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def _descendants(root: int) -> list[int]:
    """Every live process below `root`, by parent pid."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found
