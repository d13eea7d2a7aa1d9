"""The sandbox's toolbox when `antler up` starts: used as it is, or built while everything starts.

`antler up` normally finds the toolbox `make install` built, shared by every data dir of the
installation (`sandbox.toolbox`), and says which it uses. When it is missing or was built for
another package list, a child process builds it (`antler sandbox install`, minutes of pip) while
the rest starts and serves: the sandbox serves meanwhile, its commands getting the bare system
python3, and says so (degraded, in `/health` and `antler top`); once the toolbox is in, the next
command has it (the broker checks per command) and the sandbox is healthy. A build that fails
leaves it degraded, with the reason in the log; Ctrl-C stops a build under way.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from typing import Any

from antler._common import status
from antler.pool import child_environment, die_with_parent
from bus import Bus, ComponentEntry, component_degraded
from bus.tasks import cancel_and_wait, wait_for
from config import AppConfig
from sandbox.toolbox import Toolbox

log = logging.getLogger("antler.up")

STOP_GRACE = 10.0  # seconds a build gets to clean up its half-built venv after SIGINT


class ToolboxBuild:
    """`antler sandbox install` in a child process, started at once."""

    def __init__(self, toolbox: Toolbox, args: argparse.Namespace) -> None:
        self.toolbox = toolbox
        command = [sys.executable, "-P", "-m", "antler", "sandbox", "install"]
        for flag, value in (
            ("--config", args.config),
            ("--data-dir", args.data_dir),
            ("--prefix", args.prefix),
        ):
            if value:
                command += [flag, str(value)]
        self._command = command
        # pip's minutes of output belong in the log file with the rest, unless -v asks for everything.
        self._output: str | None = None if args.verbose else getattr(args, "log_file", None)
        self._child: asyncio.subprocess.Process | None = None
        self._stopping = False
        self.finished: asyncio.Task[int] = asyncio.create_task(self._run(), name="toolbox-build")

    async def _run(self) -> int:
        # Its own session: a Ctrl-C reaches only `antler up`, which stops it (`stop`).
        output = await asyncio.to_thread(open, self._output, "ab") if self._output else None
        try:
            self._child = await asyncio.create_subprocess_exec(
                *self._command,
                env=child_environment(),
                start_new_session=True,
                preexec_fn=die_with_parent,
                stdout=output,
                stderr=output,
            )
        except OSError as exc:
            log.warning("the sandbox toolbox could not be built: %s; sandboxes get the bare python3", exc)
            return 127
        finally:
            if output is not None:
                output.close()  # the child has its own copy
        code = await self._child.wait()
        if self._stopping:
            return code
        if code == 0:
            status(
                f"sandbox toolbox: built; sandboxed commands get it from now on ({self.toolbox.python_dir})"
            )
        else:
            log.warning(
                "the sandbox toolbox could not be built (exit %d, its output is in the log); sandboxes get "
                "the bare python3",
                code,
            )
        return code

    def lacking(self) -> str | None:
        """What the sandbox lacks because of this build (None: nothing, it is built)."""
        if not self.finished.done():
            return (
                f"building the toolbox ({', '.join(self.toolbox.packages) or 'no packages'}) in "
                f"{self.toolbox.python_dir}: until it is done sandboxed python3 has only its standard library"
            )
        if self.finished.cancelled() or self.finished.exception() is not None or self.finished.result() != 0:
            return (
                "the toolbox could not be built (see antler up's log): sandboxed python3 has only its "
                "standard library"
            )
        return None

    async def stop(self) -> None:
        """Interrupt a build under way (it removes its half-built venv), killing it if it lingers."""
        self._stopping = True
        child = self._child
        if child is not None and child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGINT)
            try:
                await wait_for(child.wait(), STOP_GRACE)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
                await child.wait()
        await cancel_and_wait(self.finished)


def toolbox_at_start(config: AppConfig, args: argparse.Namespace) -> ToolboxBuild | None:
    """Say which toolbox the sandbox gets; start building it if it is not current (None: nothing
    to build)."""
    toolbox = Toolbox.from_config(config)
    if not toolbox.enabled:
        log.info("sandbox toolbox: off (sandbox.toolbox.enabled is false)")
        return None
    where = "shared by this installation" if toolbox.shared else "sandbox.toolbox.path / $ANTLER_TOOLBOX_PATH"
    if toolbox.current():
        log.info("sandbox toolbox: %s (up to date; %s)", toolbox.python_dir, where)
        return None
    status(
        f"sandbox toolbox: none current at {toolbox.python_dir} ({where}); building it while Antler "
        "starts (`make install` or `antler sandbox install` builds it beforehand)"
    )
    return ToolboxBuild(toolbox, args)


def with_toolbox(entry: ComponentEntry, build: ToolboxBuild) -> ComponentEntry:
    """The sandbox's entry, degraded (`bus.health`) while `build` runs, or if it failed."""

    async def run(bus: Bus, config: Any) -> None:
        async def follow() -> None:
            component_degraded(build.lacking())
            with contextlib.suppress(Exception):
                await asyncio.shield(build.finished)
            component_degraded(build.lacking())

        following = asyncio.create_task(follow(), name="toolbox-health")
        try:
            await entry(bus, config)
        finally:
            await cancel_and_wait(following)

    return run
