"""Fixtures of the fault tests: a slow echoing model, config.yaml, `antler up` children, a nats-server
or a cluster of three the test owns, the counts report."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.conftest import FAULT_COUNTS as COUNTS
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.faults.budget import ACK_WAIT, CHUNK_DELAY, PREFIX, SIZE, Size
from tests.faults.harness import (
    ExternalNats,
    Judged,
    NatsCluster,
    OpenLoad,
    UpFactory,
    Verdict,
    admin_bus,
    write_config,
)
from tests.faults.load import ChatLoad
from tests.support.antler_up import AntlerUp
from tests.support.nats_users import logged_violations


class SlowEcho(FakeOpenAI):
    """The scripted fake model whose unscripted echo streams word by word with a delay.

    (The fake has no default delay for its echo; its reply chooser is the one place to add it.)
    """

    def _choose(self, body: dict[str, Any]) -> Reply:
        reply = super()._choose(body)
        reply.chunk_delay = reply.chunk_delay or CHUNK_DELAY
        return reply


@pytest.fixture
def verdict(record_property: Callable[[str, object], None]) -> Verdict:
    """Count, report the counts (terminal summary and stdout), then assert the scenario went perfectly.

    `problems` are the scenario's own findings besides the counts (a server not restarted,
    a process left behind, a slow stop); they fail the test too, after the counts are reported.
    """

    def judge(
        load: ChatLoad,
        scenario: str,
        started: float,
        up: Judged,
        problems: list[str],
        **extra: object,
    ) -> None:
        counts = load.counts()
        # The tripwire of every stack: no component refused by its nats-server(s).
        problems = problems + [f"permissions violation: {v}" for v in logged_violations(up.workdir)]
        line = counts.line(scenario, time.monotonic() - started, **extra)
        print(line, flush=True)
        record_property(COUNTS, line)
        # Late answers within the bound are only reported (the line says how many, how late).
        passed = counts.acceptable(load.late_bound)
        findings = ([] if passed else [load.problems()]) + [f"  {p}" for p in problems]
        assert not findings, "\n".join([line, *findings, up.tail()])

    return judge


@pytest_asyncio.fixture
async def echo_model() -> AsyncIterator[SlowEcho]:
    async with SlowEcho(api_key="sk-test") as model:
        yield model


@pytest.fixture
def fault_config(tmp_path: Path, echo_model: SlowEcho) -> Callable[..., Path]:
    """Write config.yaml: the slow echo model, 2 runner processes, quick redelivery; `bus` keys override."""

    def write(**bus: Any) -> Path:
        data = {
            "bus": {
                "prefix": PREFIX,
                "data_dir": str(tmp_path / "data"),
                "ack_wait_seconds": ACK_WAIT,
                **bus,
            },
            "runner": {"processes": 2},
            "models": [
                {
                    "name": "fake",
                    "model": "fake-1",
                    "api_key": "sk-test",
                    "base_url": echo_model.base_url,
                    "max_retries": 0,
                }
            ],
            "gateway": {"port": 0},
            "sandbox": {"provider": "local"},
            # Each chat message its own answer (the loads count them), not steered into the one before.
            "channels": {"multitask_strategy": "enqueue"},
        }
        return write_config(tmp_path / "config.yaml", data)

    return write


@pytest_asyncio.fixture
async def antler_up(tmp_path: Path) -> AsyncIterator[UpFactory]:
    """`antler_up(config)`: an `AntlerUp` (not started yet); whatever is left of it is killed at the end."""
    started: list[AntlerUp] = []

    def make(config: Path) -> AntlerUp:
        up = AntlerUp(tmp_path, config)
        started.append(up)
        return up

    try:
        yield make
    finally:
        for up in started:
            await up.kill_all()


@pytest.fixture
def chat_load(tmp_path: Path) -> OpenLoad:
    """`async with chat_load(nats_url) as load`: the test's own connection, collecting replies meanwhile
    (as the admin `antler up` generated for its embedded server, if it did)."""

    @contextlib.asynccontextmanager
    async def open_load(url: str, size: Size = SIZE) -> AsyncIterator[ChatLoad]:
        bus = await admin_bus(url, tmp_path / "data")
        load = ChatLoad(bus, size.chats, size.per_chat, grace=size.grace, late_bound=size.late_bound)
        await load.start_collecting()
        try:
            yield load
        finally:
            await load.stop_collecting()
            # Not drained: nothing of the test's is worth waiting for, and its server may be gone.
            with contextlib.suppress(Exception):
                await bus.nc.close()

    return open_load


@pytest_asyncio.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[NatsCluster]:
    """A three-node nats-server cluster of the test's own (the users of the `antler up` whose data
    dir is `<tmp_path>/data`), JetStream up on it; closed after the test."""
    nodes = NatsCluster(tmp_path / "cluster", users_dir=tmp_path / "data")
    await nodes.start()
    try:
        await nodes.wait_jetstream()
        yield nodes
    finally:
        await nodes.close()


@pytest_asyncio.fixture
async def external_nats(tmp_path: Path) -> AsyncIterator[ExternalNats]:
    """A nats-server of the test's own, started (`antler up` is pointed at it), closed after the test."""
    nats = ExternalNats(tmp_path / "external-nats", users_dir=tmp_path / "data")
    await nats.start()
    try:
        yield nats
    finally:
        await nats.close()
