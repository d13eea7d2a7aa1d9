"""Real processes for the fault tests besides `antler up` (`tests.support.antler_up.AntlerUp`): an
external nats-server, a three-node cluster, the users an operator would give them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import yaml

from bus import Bus, EmbeddedServer
from bus.permissions import ADMIN, USERS_FILE, load_credentials, save_users, server_block, users_for
from bus.subjects import Subjects
from config import BusConfig
from tests.faults.budget import PREFIX
from tests.support.antler_up import AntlerUp
from tests.support.ports import free_port

if TYPE_CHECKING:
    from tests.faults.load import ChatLoad


def write_config(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


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


async def admin_bus(url: str, data_dir: Path, name: str = "faults-test") -> Bus:
    """The test's own connection to an `antler up`'s bus, as the admin it generated for its embedded
    server (if it did: an external server of the test's may have no users)."""
    admin = load_credentials(data_dir / USERS_FILE).get(ADMIN)
    user, password = admin if admin else (None, None)
    return await Bus.connect(url, BusConfig(prefix=PREFIX, user=user, password=password), name=name)


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
OpenLoad = Callable[..., AbstractAsyncContextManager["ChatLoad"]]  # (nats_url, size=SIZE)


class Judged(Protocol):
    """What the verdict reads of a stack: an `AntlerUp`, or components run one process each
    (`tests.faults.copies.Stack`): the directory holding its nats-server logs, its logs' tail."""

    @property
    def workdir(self) -> Path: ...

    def tail(self) -> str: ...


class Verdict(Protocol):
    def __call__(
        self,
        load: ChatLoad,
        scenario: str,
        started: float,
        up: Judged,
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
        self.monitor_ports = [free_port() for _ in range(size)]  # each node's /healthz
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
            f'http: "127.0.0.1:{self.monitor_ports[node]}"\n'
            "cluster {\n"
            '  name: "antler-test"\n'
            f'  listen: "127.0.0.1:{self.route_ports[node]}"\n'
            f"  routes: [{routes}]\n"
            "}\n"
            # Lame duck (`stop(lame_duck=True)`): hand the node's raft leaderships over, then close its
            # clients over 30 s (nats-server's least; its default spreads them over two minutes). After
            # the blocks: the server's own config (the JetStream block) comes after this text.
            'lame_duck_duration: "30s"\n'
            'lame_duck_grace_period: "1s"\n'
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

    async def stop(self, node: int, *, lame_duck: bool = False) -> None:
        """Stop one node gracefully and wait until it is gone: SIGTERM, as an orchestrator does, or
        lame duck mode first (SIGUSR2, `nats-server --signal ldm`, what NATS's Helm chart does
        before a pod stops), after which the node exits by itself."""
        server = self._servers[node]
        assert server is not None
        if lame_duck and server.pid is not None:
            start = server.log_path.stat().st_size if server.log_path.exists() else 0
            os.kill(server.pid, signal.SIGUSR2)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if b"Server Exiting" in server.log_since(start):
                    break
                await asyncio.sleep(0.1)  # polling its log: nothing else says it is done
        await server.stop(timeout=30)  # reaps it (or SIGTERM, if lame duck took too long)
        self._servers[node] = None

    async def wait_healthy(self, timeout: float = 60.0) -> None:
        """Until every node's `/healthz` says ok and every stream and consumer has a leader and all
        its copies current, so stopping another node next leaves each a quorum of current copies.

        `/healthz` alone is not enough: a node just started answers ok before it has heard from the
        meta leader (it knows of no stream yet), and stopping the next node then left every stream
        with one current copy, no quorum, for 7-10 s (the first rolling-restart runs showed it).
        """
        import httpx
        import nats

        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=2.0) as client:
            for port in self.monitor_ports:
                while True:
                    with contextlib.suppress(httpx.HTTPError):
                        answer = await client.get(f"http://127.0.0.1:{port}/healthz")
                        if answer.status_code == 200:
                            break
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"node on port {port} not healthy: /healthz never said ok")
                    await asyncio.sleep(0.25)  # polling the probe: it has nothing to wait on
        lagging: list[str] = ["(not asked yet)"]
        while lagging:
            with contextlib.suppress(Exception):
                nc = await nats.connect(self.url.split(","), **admin_login(self.users_dir))
                try:
                    lagging = await self._lagging(nc.jetstream())
                finally:
                    await nc.close()
            if not lagging:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"JetStream copies not current after a node restart: {lagging[:5]}")
            await asyncio.sleep(0.25)  # the servers announce nothing when a copy catches up

    async def _lagging(self, js: Any) -> list[str]:
        """The streams and consumers without a leader or with a copy not current (or offline)."""
        found = []
        for stream in await js.streams_info():
            name = stream.config.name
            # Every stream has a copy on each node (`bus.replicas: 3`); consumers may have one
            # (ephemeral watchers and readers: R1), so theirs are only checked as far as they go.
            infos = [(name, stream.cluster, len(self.ports) - 1)]
            infos += [(f"{name}>{c.name}", c.cluster, 0) for c in await js.consumers_info(name)]
            for what, cluster, others in infos:
                copies = (cluster.replicas or []) if cluster else []
                if cluster is None or not cluster.leader or len(copies) < others:
                    found.append(f"{what}: no leader or a copy missing")
                elif any(not c.current or c.offline for c in copies):
                    found.append(f"{what}: a copy not current")
        return found

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
