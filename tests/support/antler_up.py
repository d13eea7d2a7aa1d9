"""`antler up` as a user starts it, for whole-product and fault tests: a child process in its own directory
(`up_in` runs one for a block; `antler_in` runs another command there; `answer_to` asks its API).

Its stdout and stderr go to files in that directory (a pipe nobody reads would fill up and block
its logging; its runner children inherit the same stderr). Its console shows only its own status
lines and warnings; the whole log is `<data_dir>/antler.log`, which its children write too
(`stream="err"` reads both, `stream="console"` only what a user sees). The embedded nats-server's
log is `<data_dir>/nats-server.log` (`.log.1` once rotated): `violations()` reads the permission
refusals in it, the same tripwire the fixtures' stacks have (`tests/support/nats_users.logged_violations`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from tests.conftest import REPO
from tests.fakes.openai_server import FakeOpenAI
from tests.support.nats_users import logged_violations
from tests.support.processes import Proc, descendants


class _Follower:
    """The lines a file gains, read from where the last look stopped."""

    def __init__(self, path: Path, start: int = 0) -> None:
        self.path = path
        self.offset = start
        self.partial = ""  # the last line, not ended yet
        self._rest = b""

    def new_lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as handle:
                if os.fstat(handle.fileno()).st_size < self.offset:  # made anew: from its start
                    self.offset, self._rest = 0, b""
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return []
        self.offset += len(data)
        *complete, self._rest = (self._rest + data).split(b"\n")
        self.partial = self._rest.decode("utf-8", errors="replace")
        return [line.decode("utf-8", errors="replace").rstrip("\r") for line in complete]


class AntlerUp:
    """One `python -m antler up` child in `workdir`: with `config`, started with `--config` (its data dir
    where that says, `data_dir` here for its logs); without, as a user in a directory holding config.yaml
    (data dir `.antler` beside it). `start()` again after it exited runs a second one on the same dir."""

    def __init__(
        self,
        workdir: Path,
        config: Path | None = None,
        data_dir: Path | None = None,
        python_flags: tuple[str, ...] = (),
    ) -> None:
        self.workdir = workdir
        self.config = config
        self.python_flags = python_flags  # e.g. ("-P",): as the installed `antler` command starts
        self.data_dir = data_dir or workdir / ("data" if config else ".antler")
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0
        self._out: IO[bytes] | None = None
        self._err: IO[bytes] | None = None
        self._log_start = 0  # where this start's lines begin in the log file (earlier starts' are before)

    @property
    def out_path(self) -> Path:
        return self.workdir / f"up-{self.starts}.out"

    @property
    def err_path(self) -> Path:
        return self.workdir / f"up-{self.starts}.err"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "antler.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def start(
        self,
        runners: int = 2,
        timeout: float = 120.0,
        env: dict[str, str] | None = None,
        pass_fds: tuple[int, ...] = (),
    ) -> None:
        """Start it and wait until it is up and its `runners` runner processes are connected
        (`env`: more environment, PYTHONPATH put after this checkout's; `pass_fds`: descriptors it
        inherits, as a shell's redirections or a supervisor's log would give it)."""
        self.starts += 1
        self._open_files()
        self._log_start = self.log_path.stat().st_size if self.log_path.is_file() else 0
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *self.python_flags,
            "-m",
            "antler",
            "up",
            *(["--config", str(self.config)] if self.config else []),
            cwd=self.workdir,
            env={
                **os.environ,
                **(env or {}),
                "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), (env or {}).get("PYTHONPATH")])),
            },
            stdin=asyncio.subprocess.DEVNULL,
            stdout=self._out,
            stderr=self._err,
            pass_fds=pass_fds,
        )
        await self.wait_for_line("Antler is up", timeout, stream="err")
        if runners:  # 0: `runner.processes: 1`, the runner inside `antler up` (ready once it is up)
            await self.wait_for_line("runner: running against", timeout, stream="err", count=runners)

    async def wait_for_line(
        self, text: str, timeout: float = 30.0, *, stream: str = "out", count: int = 1
    ) -> str:
        """The first line of its stdout (`err`: its stderr or log file; `console`: its stderr only)
        containing `text`, once `count` such lines are there."""
        deadline = time.monotonic() + timeout
        # Read as the files grow, not whole again at every look (a fault scenario's log grows all along).
        files = (
            [_Follower(self.out_path)]
            if stream == "out"
            else [_Follower(self.err_path)]
            + ([_Follower(self.log_path, self._log_start)] if stream == "err" else [])
        )
        found: list[str] = []
        while True:
            for follower in files:
                found.extend(line for line in follower.new_lines() if text in line)
            unfinished = [f.partial for f in files if text in f.partial]  # a line still being written
            if len(found) + len(unfinished) >= count:
                return (found + unfinished)[0]
            if self.proc is not None and self.proc.returncode is not None:
                code = self.proc.returncode
                raise AssertionError(f"antler up exited ({code}) before {text!r}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"antler up did not print {text!r} within {timeout:g}s:\n{self.tail()}")
            # Polling a log file: there is nothing to wait on but the file growing.
            await asyncio.sleep(0.05)

    async def nats_url(self) -> str:
        return (await self.wait_for_line("NATS: ")).split()[1]

    async def gateway_url(self) -> str:
        return (await self.wait_for_line("Gateway: ")).split()[1]

    def children(self) -> list[Proc]:
        return descendants(self.pid) if self.proc is not None and self.proc.returncode is None else []

    def runners(self) -> list[Proc]:
        """The runner processes (not the one they were forked from, see antler/forkserver.py)."""
        found = [p for p in self.children() if " antler run runner" in p.cmdline]
        return [p for p in found if not any(" antler run runner" in c.cmdline for c in descendants(p.pid))]

    def runner_leader(self) -> Proc | None:
        """The process the runners were forked from, if they were (once it has forked them, it is
        antler/fork_supervisor.py)."""
        return next((p for p in self.children() if "fork_supervisor.py" in p.cmdline), None)

    def nats_servers(self) -> list[Proc]:
        return [p for p in self.children() if "nats-server" in p.cmdline.split(" ", 1)[0]]

    def send_signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    async def wait_exit(self, timeout: float) -> int | None:
        """Its exit code, or None if it is still running after `timeout`."""
        assert self.proc is not None
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            return None

    async def stop(self, timeout: float = 60.0) -> int | None:
        """SIGINT, as a user's Ctrl-C; its exit code (None: it did not exit within `timeout`)."""
        if self.proc is None or self.proc.returncode is not None:
            return self.proc.returncode if self.proc else None
        self.send_signal(signal.SIGINT)
        return await self.wait_exit(timeout)

    async def kill_all(self) -> None:
        """Teardown: SIGKILL it and everything below it, whatever state the test left them in."""
        if self.proc is not None and self.proc.returncode is None:
            for child in self.children():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
        self._close_files()

    def violations(self) -> list[str]:
        """`<user>: <kind> <subject>` for every refusal the embedded nats-server logged."""
        return logged_violations(self.data_dir)

    def tail(self, lines: int = 40) -> str:
        text = self._lines(self.err_path)[-lines:]
        logged = self._this_log()[-lines:]
        nats_log = self._lines(self.data_dir / "nats-server.log")[-10:]
        return "\n".join(
            [f"--- {self.err_path.name} (last {len(text)} lines)", *text]
            + ([f"--- antler.log (last {len(logged)} lines)", *logged] if logged else [])
            + ([f"--- nats-server.log (last {len(nats_log)} lines)", *nats_log] if nats_log else [])
        )

    def log(self) -> str:
        """Every start's stderr, in order, then the log file (every start's)."""
        return "\n".join(
            [line for n in range(1, self.starts + 1) for line in self._lines(self.workdir / f"up-{n}.err")]
            + self._lines(self.log_path)
        )

    def console(self) -> list[str]:
        """What the latest start printed on its console (stderr), as a user sees it."""
        return self._lines(self.err_path)

    def _this_log(self) -> list[str]:
        """The log file's lines of the latest start."""
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(self._log_start)
                return handle.read().decode("utf-8", errors="replace").splitlines()
        except OSError:
            return []

    @staticmethod
    def _lines(path: Path) -> list[str]:
        try:
            return path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return []

    def _open_files(self) -> None:
        self._close_files()
        self._out = open(self.out_path, "wb")
        self._err = open(self.err_path, "wb")

    def _close_files(self) -> None:
        for handle in (self._out, self._err):
            if handle is not None:
                handle.close()
        self._out = self._err = None


@contextlib.asynccontextmanager
async def up_in(workdir: Path, env: dict[str, str] | None = None) -> AsyncIterator[AntlerUp]:
    """`antler up` in `workdir` (which holds its config.yaml) as the installed command starts it
    (`-P`: the directory's own packages are not first on its sys.path), with two runners; stopped
    with Ctrl-C after the block: it must exit cleanly, and nats-server must have refused none of it."""
    up = AntlerUp(workdir, python_flags=("-P",))
    try:
        await up.start(runners=2, env=env)
        yield up
        code = await up.stop(60)  # Ctrl-C
        assert code == 0, f"antler up did not stop cleanly on SIGINT ({code}):\n{up.tail()}"
    finally:
        await up.kill_all()
    assert up.violations() == []


@dataclass
class UpStack:
    """A module's `antler up`, its scripted model and its gateway's URL."""

    up: AntlerUp
    model: FakeOpenAI
    gateway: str


async def antler_in(cwd: Path, *args: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    """`antler ...` in `cwd` as the installed command starts (`-P`), stdout and stderr piped."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-P", "-m", "antler", *args,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def answer_to(http: httpx.AsyncClient, text: str) -> str:
    """What a run of `text` (on no thread) answers through the API's `/runs/wait`."""
    reply = await http.post(
        "/runs/wait",
        json={"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": text}]}},
    )
    return str(reply.json()["messages"][-1]["content"])
