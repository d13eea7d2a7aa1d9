"""An Antler of the client's own: `antler up` as a child process, for as long as the client is open.

It is the very `antler up` users start (`python -P -m antler up --config ...`, in the directory of
its config.yaml): the embedded nats-server with its per-component users, the sandbox broker and the
runners in their processes, every other component; so nothing of LangChain or the model provider is
loaded into the caller's process. Started on the client's first call, ready when it prints "Antler
is up"; stopped by `close()` with SIGTERM (it drains: work in flight finishes or goes back to the
bus), and, should the caller's process exit without closing, at its exit.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from antler.client.errors import AntlerNotRunning, InvalidRequest
from bus.tasks import wait_for

READY_LINE = "Antler is up"
URL_LINE = "NATS: "
START_TIMEOUT = 300.0  # a first start may build the sandbox's toolbox in the background; not waited on
STOP_TIMEOUT = 60.0

_running: set[asyncio.subprocess.Process] = set()


@atexit.register
def _stop_left_running() -> None:
    """A client never closed: its Antler stops with this process (SIGTERM: it drains by itself)."""
    for proc in list(_running):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)


class EmbeddedAntler:
    """One `antler up` child: `start()` returns its NATS URL; `stop()` drains and ends it."""

    def __init__(self, config: str | os.PathLike[str] | Mapping[str, Any] | None) -> None:
        self._tempdir: Path | None = None
        if config is None or isinstance(config, Mapping):
            self._tempdir = Path(tempfile.mkdtemp(prefix="antler-embedded-"))
            settings = dict(config or {})
            # The default port (2026) may be another Antler's: take a free one unless one is asked for.
            gateway = dict(settings.get("gateway") or {})
            gateway.setdefault("port", 0)
            settings["gateway"] = gateway
            self.config_path = self._tempdir / "config.yaml"
            self.config_path.write_text(yaml.safe_dump(settings), encoding="utf-8")
        elif isinstance(config, str | os.PathLike):
            self.config_path = Path(config).expanduser().resolve()
            if not self.config_path.is_file():
                raise InvalidRequest(f"config: no file at {self.config_path}")
        else:
            raise InvalidRequest(
                f"config: a path to config.yaml or a dict of its settings, not {type(config).__name__}"
            )
        self.workdir = self.config_path.parent
        self.proc: asyncio.subprocess.Process | None = None
        self.output: collections.deque[str] = collections.deque(maxlen=40)  # its console's last lines
        self._reader: asyncio.Task[None] | None = None

    def discard(self) -> None:
        """Never started after all (its config was refused): its temporary directory goes."""
        if self._tempdir is not None:
            shutil.rmtree(self._tempdir, ignore_errors=True)
            self._tempdir = None

    async def start(self, timeout: float = START_TIMEOUT) -> str:
        """Start it and wait until it is up.

        Raises:
            AntlerNotRunning: it exited first, or was not up within `timeout` (its last lines say why).
        """
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-P",  # the working directory never shadows Antler's packages
            "-m",
            "antler",
            "up",
            "--config",
            str(self.config_path),
            cwd=self.workdir,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # the caller's Ctrl-C is the caller's: close() stops it in order
        )
        _running.add(self.proc)
        url: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read(self.proc, url))
        try:
            return await wait_for(asyncio.shield(url), timeout)
        except TimeoutError:
            await self.stop()
            raise AntlerNotRunning(
                f"the embedded Antler was not up within {timeout:g}s:\n{self.tail()}"
            ) from None
        except AntlerNotRunning:
            await self.stop()
            raise

    async def _read(self, proc: asyncio.subprocess.Process, ready: asyncio.Future[str]) -> None:
        """Its console, kept (the last lines) and drained (a full pipe would block its logging)."""
        assert proc.stdout is not None
        url = None
        async for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip()
            self.output.append(line)
            if line.startswith(URL_LINE):
                url = line.split()[1]
            if READY_LINE in line and url is not None and not ready.done():
                ready.set_result(url)
        code = await proc.wait()
        if not ready.done():
            ready.set_exception(
                AntlerNotRunning(
                    f"the embedded Antler stopped before it was up (exit {code}):\n{self.tail()}"
                )
            )

    def tail(self) -> str:
        return "\n".join(f"  {line}" for line in self.output)

    async def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM, then SIGKILL after `timeout`; its temporary directory removed. Idempotent."""
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
                try:
                    await wait_for(proc.wait(), timeout)
                except TimeoutError:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    await proc.wait()
            _running.discard(proc)
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await wait_for(self._reader, 5)
            self._reader = None
        if self._tempdir is not None:
            await asyncio.to_thread(shutil.rmtree, self._tempdir, True)
            self._tempdir = None
