"""What every sandbox provider is: a command's `Outcome`, the `Provider` base that runs one in a
thread's directories (its limits, its environment, its temporary directory), and the configured
environment commands get (`sandbox.providers` has the two providers and picks one)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from bus.messages import EgressPolicy
from bus.tasks import wait_for
from config import MissingEnvError, SandboxConfig, resolve_value
from sandbox import spawn
from sandbox.limits import CommandGroup, Limits, make_limits
from sandbox.memwatch import TreeWatch
from sandbox.output import Collector
from sandbox.paths import Mount, ThreadFS
from sandbox.toolbox import Toolbox

log = logging.getLogger("sandbox.providers")  # its log lines keep the name they had in sandbox.providers


def configured_environment(config: SandboxConfig) -> dict[str, str]:
    """`sandbox.environment` with its `$NAME` values read now; a variable that is not set is left
    out (and logged), so the skill that needs it says what to configure instead of the broker failing."""
    env: dict[str, str] = {}
    for name, value in config.environment.items():
        try:
            env[name] = str(resolve_value(value, f"sandbox.environment.{name}", config.source))
        except MissingEnvError as exc:
            log.warning("sandbox.environment: %s is left out of commands: %s", name, exc)
    return env


@dataclass
class Outcome:
    exit_code: int | None
    output: str
    truncated_chars: int
    timed_out: bool
    out_of_memory: bool = False  # its processes together passed the memory limit: all were killed
    peak_memory: int | None = None  # bytes its processes held together at most, where that is known
    notes: list[str] = field(default_factory=list)  # for the model: connections the egress proxy refused


class Provider:
    name = "base"
    isolated = False
    tmpfs: tuple[str, ...] = ()  # paths inside a command on a filesystem in memory

    def __init__(self, config: SandboxConfig, toolbox: Toolbox | None = None) -> None:
        self.config = config
        self.toolbox = toolbox
        self.limits: Limits = make_limits(
            config.command_limits, config.memory_mb, config.max_processes, config.cpu_cores, tmpfs=self.tmpfs
        )
        self.environment = configured_environment(config)

    @property
    def owner(self) -> tuple[int, int] | None:
        """Who owns the thread's files (the sandbox uid when we are root), or None for 'us'."""
        return None

    @property
    def python(self) -> str | None:
        """The Python a sandboxed command can run (the grep tool's search), or None if there is none."""
        return sys.executable

    def root_of(self, mount: Mount) -> str:
        """Where a command sees `mount`: its virtual path when isolated, its host path otherwise."""
        return str(mount.host)

    async def run(
        self,
        fs: ThreadFS,
        command: str,
        timeout: float,
        *,
        output_limit: int | None = None,
        grow_files: bool = True,
        egress: EgressPolicy | None = None,
        run_id: str | None = None,
    ) -> Outcome:
        """Run `command` in the thread's sandbox; `output_limit` overrides `max_output_chars`;
        without `grow_files` (a thread over its disk quota) no file may grow (bwrap only); `egress`
        is the network the command may reach (bwrap only; None: `sandbox.allow_network`'s), and
        `run_id` the run its refused connections are logged with."""
        raise NotImplementedError

    def egress_of(self, egress: EgressPolicy | None) -> EgressPolicy:
        """`egress`, or for a caller naming none (the grep tool) what `sandbox.allow_network` says."""
        if egress is not None:
            return egress
        return EgressPolicy(
            mode="all" if self.config.allow_network else "none", source="sandbox.allow_network"
        )

    @contextlib.asynccontextmanager
    async def command_tmp(self, fs: ThreadFS) -> AsyncIterator[Path]:
        """A /tmp of the command's own on the thread's disk (counted in its quota, never RAM), removed
        after the command."""
        tmp = fs.base.parent / "tmp" / secrets.token_hex(8)

        def make() -> None:
            tmp.mkdir(parents=True, mode=0o700)
            if self.owner is not None:
                os.chown(tmp, *self.owner)

        await asyncio.to_thread(make)
        try:
            yield tmp
        finally:
            await asyncio.to_thread(shutil.rmtree, tmp, ignore_errors=True)

    def _group(self) -> CommandGroup:
        try:
            return self.limits.create()
        except OSError as exc:  # the cgroup filesystem refused: the watcher still holds the command
            log.warning("sandbox: a command's cgroup could not be made (%s); its memory is watched", exc)
            return TreeWatch(self.config.memory_mb, self.config.max_processes, 1, tmpfs=self.tmpfs).create()

    async def _spawn(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        timeout: float,
        pass_fds: tuple[int, ...] = (),
        output_limit: int | None = None,
    ) -> Outcome:
        """Run `argv` in a group of its own, with nothing of ours but `pass_fds` (`sandbox.spawn`)."""
        group = await asyncio.to_thread(self._group)
        watcher = self.limits.watcher
        try:
            started = await spawn.start(group.wrap(argv), cwd=str(cwd), env=env, pass_fds=pass_fds)
            group.started(started.pid)
            watcher.add(group)
            try:
                outcome = await self._wait(started, timeout, output_limit)
            finally:
                started.close()
        finally:
            watcher.discard(group)
            await asyncio.to_thread(group.close)
        outcome.out_of_memory = group.over_memory
        outcome.peak_memory = group.peak_bytes
        return outcome

    async def _wait(self, started: spawn.Started, timeout: float, output_limit: int | None) -> Outcome:
        collector = Collector(output_limit or self.config.max_output_chars)
        reader = asyncio.create_task(collector.read(started.output))
        timed_out = False
        try:
            code = await wait_for(started.wait(), timeout)
        except TimeoutError:
            timed_out = True
            started.kill()
            code = await started.wait()
        except asyncio.CancelledError:
            started.kill()
            reader.cancel()
            raise
        try:
            await wait_for(reader, 2)
        except TimeoutError:  # a background child kept the pipe open: what we have is enough
            reader.cancel()
        text, cut = collector.text()
        if code < 0:  # killed by a signal: the status a shell reports (137 for SIGKILL)
            code = 128 - code
        return Outcome(None if timed_out else code, text, cut, timed_out)

    def toolbox_env(self, path: str) -> dict[str, str]:
        """PATH (the toolbox first) and library settings for a command (`Toolbox.env`)."""
        return self.toolbox.env(path, isolated=self.isolated) if self.toolbox is not None else {"PATH": path}
