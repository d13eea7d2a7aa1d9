"""Components run the way an operator runs them on several machines: each copy its own `antler run
<name>` process against the cluster, logging in as the component's own user, stopped with SIGTERM
and started again as an orchestrator does in a rolling restart."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tests.conftest import REPO
from tests.support.nats_users import logged_violations


@dataclass
class Copy:
    """One copy of one component: `antler run <name> -c <config>`, its stderr in a file per start."""

    name: str
    number: int
    config: Path
    logs: Path
    starts: int = 0
    proc: asyncio.subprocess.Process | None = None
    _err: IO[bytes] | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        return f"{self.name}#{self.number}"

    @property
    def err_path(self) -> Path:
        return self.logs / f"{self.name}-{self.number}-{self.starts}.err"

    async def start(self, timeout: float = 120.0) -> float:
        """Start it and wait until it says it is ready (`<name>: ready`, which `antler run` prints
        once its consumers take work, the sandbox's service answers, the gateway listens); the
        seconds that took."""
        began = time.monotonic()
        self.starts += 1
        self._close()
        self._err = self.err_path.open("wb")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "antler",
            "run",
            self.name,
            "-c",
            str(self.config),
            cwd=self.logs,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=self._err,
            stderr=self._err,
        )
        await self.wait_for_line(f"{self.name}: ready", timeout)
        return time.monotonic() - began

    async def wait_for_line(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log(self.starts):
            if self.proc is not None and self.proc.returncode is not None:
                code = self.proc.returncode
                raise AssertionError(f"{self.label} exited ({code}) before {text!r}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.label} not {text!r} within {timeout:g}s:\n{self.tail()}")
            await asyncio.sleep(0.1)  # polling a log file: nothing to wait on but the file growing

    async def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM (a graceful stop: it drains) and wait until it has exited; its exit code (None: it
        was still running after `timeout` and was killed)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            code: int | None = await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            code = None
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
        self._close()
        return code

    async def kill(self) -> None:
        """Teardown: whatever state the test left it in."""
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
        self._close()

    def log(self, start: int | None = None) -> str:
        """One start's stderr, or every start's in order."""
        starts = [start] if start else range(1, self.starts + 1)
        return "\n".join(
            (self.logs / f"{self.name}-{self.number}-{n}.err").read_text(encoding="utf-8", errors="replace")
            for n in starts
            if (self.logs / f"{self.name}-{self.number}-{n}.err").exists()
        )

    def tail(self, lines: int = 15) -> str:
        text = self.log(self.starts).splitlines()[-lines:]
        return "\n".join([f"--- {self.err_path.name} (last {len(text)} lines)", *text])

    def _close(self) -> None:
        if self._err is not None:
            self._err.close()
            self._err = None


@dataclass
class Stack:
    """Every copy of every component, each its own process; what the verdict needs of a stack (its
    directory, whose nats-server logs it reads for refusals, and the tail of its logs)."""

    workdir: Path
    copies: list[Copy]

    def by_name(self, name: str) -> list[Copy]:
        return [c for c in self.copies if c.name == name]

    def log(self) -> str:
        return "\n".join(c.log() for c in self.copies)

    def violations(self) -> list[str]:
        return logged_violations(self.workdir)

    def tail(self, lines: int = 15) -> str:
        return "\n".join(c.tail(lines) for c in self.copies)

    async def start(self) -> None:
        # One at a time: on two cores, fourteen Python processes importing at once only take longer.
        for copy in self.copies:
            await copy.start()

    async def kill(self) -> None:
        for copy in self.copies:
            await copy.kill()
