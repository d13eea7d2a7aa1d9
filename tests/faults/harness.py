"""Real processes for the fault tests: `antler up` as a child, its process tree, an external nats-server.

`antler up` writes its stdout and stderr to files in the test's directory (a pipe
nobody reads would fill up and block its logging under load); its runner children
inherit the same stderr, so one file holds the whole installation's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

import yaml

from bus import EmbeddedServer
from bus.permissions import ADMIN, USERS_FILE, load_credentials, save_users, server_block, users_for
from bus.subjects import Subjects
from tests.conftest import REPO
from tests.faults.budget import PREFIX

if TYPE_CHECKING:
    from tests.faults.load import ChatLoad


def free_port() -> int:
    """A loopback port nobody listens on right now (for servers that must come back on the same one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Proc:
    """A process as /proc showed it: the command line tells a reused pid apart."""

    pid: int
    cmdline: str

    @property
    def alive(self) -> bool:
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
        except OSError:
            return False
        state = stat.rsplit(")", 1)[1].split()[0]
        return state != "Z" and cmdline.replace(b"\0", b" ").decode(errors="replace").strip() == self.cmdline


def descendants(root: int) -> list[Proc]:
    """Every live process below `root`, found by parent pid (the kernel here lacks /proc/*/children)."""
    parents: dict[int, int] = {}
    cmdlines: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            continue
        parents[int(entry.name)] = int(fields[1])
        cmdlines[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
    found: list[Proc] = []
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent:
                found.append(Proc(pid, cmdlines[pid]))
                frontier.append(pid)
    return found


def cpu_ticks(pid: int) -> int:
    """User plus system CPU time a process has used so far (clock ticks; 0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


async def busiest(processes: list[Proc], window: float = 1.0) -> Proc:
    """The process that used the most CPU over the next `window` seconds (the one doing the work)."""
    before = {p.pid: cpu_ticks(p.pid) for p in processes}
    await asyncio.sleep(window)
    return max(processes, key=lambda p: cpu_ticks(p.pid) - before[p.pid])


def write_config(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


class AntlerUp:
    """One `python -m antler up` child; `start()` again after it exited runs a second one on the same dir."""

    def __init__(self, workdir: Path, config: Path) -> None:
        self.workdir = workdir
        self.config = config
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0
        self._out: IO[bytes] | None = None
        self._err: IO[bytes] | None = None

    @property
    def out_path(self) -> Path:
        return self.workdir / f"up-{self.starts}.out"

    @property
    def err_path(self) -> Path:
        return self.workdir / f"up-{self.starts}.err"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def start(self, runners: int = 2, timeout: float = 60.0) -> None:
        """Start it and wait until it is up and its `runners` runner processes are connected."""
        self.starts += 1
        self._open_files()
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "antler",
            "up",
            "--config",
            str(self.config),
            cwd=self.workdir,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=self._out,
            stderr=self._err,
        )
        await self.wait_for_line("Antler is up", timeout, stream="err")
        await self.wait_for_line("runner: running against", timeout, stream="err", count=runners)

    async def wait_for_line(
        self, text: str, timeout: float = 30.0, *, stream: str = "out", count: int = 1
    ) -> str:
        """The first line of its stdout (or stderr) containing `text`, once `count` such lines are there."""
        path = self.out_path if stream == "out" else self.err_path
        deadline = time.monotonic() + timeout
        while True:
            found = [line for line in self._lines(path) if text in line]
            if len(found) >= count:
                return found[0]
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
        return [p for p in self.children() if " antler run runner" in p.cmdline]

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

    def tail(self, lines: int = 40) -> str:
        text = self._lines(self.err_path)[-lines:]
        nats_log = self._lines(self.workdir / "data" / "nats-server.log")[-10:]
        return "\n".join(
            [f"--- {self.err_path.name} (last {len(text)} lines)", *text]
            + ([f"--- nats-server.log (last {len(nats_log)} lines)", *nats_log] if nats_log else [])
        )

    def log(self) -> str:
        """Every start's stderr, in order."""
        return "\n".join(
            line for n in range(1, self.starts + 1) for line in self._lines(self.workdir / f"up-{n}.err")
        )

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


def operator_users(data_dir: Path) -> str:
    """What an operator does for their own servers (`antler creds --out <data_dir>`): the per-component
    users saved in the data dir `antler up` reads them from, and the servers' authorization block."""
    users = users_for(Subjects(PREFIX), data_dir / USERS_FILE)
    save_users(data_dir / USERS_FILE, users)
    return server_block(users)


def admin_login(data_dir: Path) -> dict[str, str]:
    """nats-py's connect options for the admin saved in `data_dir` (probes of the test's own)."""
    user, password = load_credentials(data_dir / USERS_FILE)[ADMIN]
    return {"user": user, "password": password}


class ExternalNats:
    """A nats-server the test owns (`bus.url` points at it), restartable on the same store and port,
    with the per-component users of the `antler up` whose data dir is `users_dir`."""

    def __init__(self, directory: Path, users_dir: Path) -> None:
        self.directory = directory
        self.users_dir = users_dir
        self.port = free_port()
        self._server: EmbeddedServer | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._server.pid if self._server else None

    async def start(self) -> None:
        # A fresh EmbeddedServer each time: same store dir, same fixed port.
        self._server = EmbeddedServer(
            self.directory,
            port=self.port,
            server_name="faults-external",
            authorization=operator_users(self.users_dir),
        )
        await self._server.start()

    async def stop(self, signum: int = signal.SIGTERM) -> None:
        """SIGTERM (JetStream flushes and exits) or SIGKILL (a crash), then wait until it is gone."""
        assert self._server is not None
        if signum == signal.SIGKILL and self._server.pid is not None:
            os.kill(self._server.pid, signal.SIGKILL)
        await self._server.stop()  # SIGTERM, or just reaps the killed one; releases the store's lock
        self._server = None

    async def close(self) -> None:
        if self._server is not None:
            await self._server.stop()
            self._server = None


# The fixtures' types, for the tests' signatures.
UpFactory = Callable[[Path], AntlerUp]
OpenLoad = Callable[[str], AbstractAsyncContextManager["ChatLoad"]]


class Verdict(Protocol):
    def __call__(
        self,
        load: ChatLoad,
        scenario: str,
        started: float,
        up: AntlerUp,
        problems: list[str],
        **extra: object,
    ) -> None: ...


class NatsCluster:
    """Three nats-servers clustered on loopback with JetStream; any one can be killed and started again."""

    def __init__(self, directory: Path, users_dir: Path, size: int = 3) -> None:
        self.directory = directory
        self.users_dir = users_dir  # the `antler up` data dir whose users every node knows
        self.ports = [free_port() for _ in range(size)]
        self.route_ports = [free_port() for _ in range(size)]
        self._servers: list[EmbeddedServer | None] = [None] * size

    @property
    def url(self) -> str:
        """Every server's URL, comma-separated (`bus.url`)."""
        return ",".join(f"nats://127.0.0.1:{port}" for port in self.ports)

    def pid(self, node: int) -> int | None:
        server = self._servers[node]
        return server.pid if server else None

    def _cluster_block(self, node: int) -> str:
        routes = ", ".join(f'"nats-route://127.0.0.1:{port}"' for port in self.route_ports)
        return (
            "cluster {\n"
            '  name: "antler-test"\n'
            f'  listen: "127.0.0.1:{self.route_ports[node]}"\n'
            f"  routes: [{routes}]\n"
            "}\n"
        )

    async def start(self, node: int | None = None) -> None:
        """Start one node, or all (in parallel: a node waits for its peers before it is ready)."""
        nodes = range(len(self.ports)) if node is None else [node]
        await asyncio.gather(*(self._start(n) for n in nodes))

    async def _start(self, node: int) -> None:
        server = EmbeddedServer(
            self.directory / f"n{node + 1}",
            port=self.ports[node],
            server_name=f"n{node + 1}",
            extra_config=self._cluster_block(node),
            authorization=operator_users(self.users_dir),
        )
        await server.start(timeout=60)
        self._servers[node] = server

    async def kill(self, node: int) -> None:
        """SIGKILL one node (a crash) and wait until it is gone."""
        server = self._servers[node]
        assert server is not None
        assert server.pid is not None
        os.kill(server.pid, signal.SIGKILL)
        await server.stop()
        self._servers[node] = None

    async def wait_jetstream(self, timeout: float = 60.0) -> None:
        """Until the cluster's JetStream has a meta leader and takes replicated streams."""
        import nats

        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(Exception):
                nc = await nats.connect(self.url.split(","), **admin_login(self.users_dir))
                try:
                    info = await nc.jetstream().account_info()
                    if info is not None:
                        return
                finally:
                    await nc.close()
            if time.monotonic() > deadline:
                raise TimeoutError("the cluster's JetStream did not come up")
            await asyncio.sleep(0.25)

    async def close(self) -> None:
        for node, server in enumerate(self._servers):
            if server is not None:
                await server.stop()
                self._servers[node] = None
