"""Per-component NATS users: a component stepping outside its subjects is refused, and nothing arrives.

A nats-server runs with the users `antler up` would generate; each test connects as one
component's user and tries something that is another component's business.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import nats
import pytest
import pytest_asyncio
from nats.aio.client import Client
from nats.js.api import AckPolicy, ConsumerConfig

from bus import Bus, EmbeddedServer, connect_and_provision
from bus.permissions import NatsUser, generate_users, inbox_prefix, server_block
from bus.subjects import Subjects
from config import BusConfig

pytestmark = pytest.mark.asyncio

PREFIX = "perm"
S = Subjects(PREFIX)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def secured(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[str, list[NatsUser]]]:
    users = generate_users(S)
    server = EmbeddedServer(tmp_path_factory.mktemp("nats-users"), authorization=server_block(users))
    await server.start()
    try:
        yield server.url, users
    finally:
        await server.stop()


class Violations:
    """The permission errors the server sent one connection."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.arrived = asyncio.Event()

    async def on_error(self, exc: Exception) -> None:
        if "permissions violation" in str(exc).lower():
            self.seen.append(str(exc).lower())  # nats-py lowercases the server's message
            self.arrived.set()


@contextlib.asynccontextmanager
async def connected(
    url: str, users: list[NatsUser], component: str
) -> AsyncIterator[tuple[Client, Violations]]:
    user = next(u for u in users if u.component == component)
    violations = Violations()
    options: dict[str, object] = {
        "user": user.user,
        "password": user.password,
        "error_cb": violations.on_error,
    }
    if component != "admin":
        options["inbox_prefix"] = inbox_prefix(S, component)
    nc = await nats.connect(url, **options)  # type: ignore[arg-type]
    try:
        yield nc, violations
    finally:
        await nc.close()


@pytest_asyncio.fixture
async def admin(secured: tuple[str, list[NatsUser]]) -> AsyncIterator[Bus]:
    url, users = secured
    user = users[0]
    config = BusConfig(prefix=PREFIX, user=user.user, password=user.password)
    bus = await connect_and_provision(url, config, name="test-admin")
    try:
        yield bus
    finally:
        await bus.close()


@pytest.mark.parametrize(
    ("component", "forbidden", "allowed"),
    [
        pytest.param("router", "sandbox.exec", "chat.out.web", id="router-cannot-ask-the-sandbox"),
        pytest.param("runner", "chat.out.telegram", "runs.ctl.r1", id="runner-cannot-reply-in-chats"),
        pytest.param(
            "subagents", "chat.out.telegram", "subagents.progress.r1", id="subagents-cannot-reply-in-chats"
        ),
        pytest.param("memory", "runs.ctl.r1", f"dlq.{S.memory_stream}", id="memory-cannot-cancel-runs"),
        pytest.param(
            "sandbox", "memory.get", f"$O.{S.files_store}.C.marker", id="sandbox-cannot-ask-for-memory"
        ),
        pytest.param("gateway", "chat.out.slack", "runs.ctl.r1", id="gateway-cannot-post-in-chats"),
        pytest.param(
            "telegram",
            "chat.in.slack.slack-c1",
            "chat.in.telegram.telegram-c1",
            id="adapter-only-its-own-channel",
        ),
    ],
)
async def test_a_component_publishing_outside_its_subjects_is_refused_and_nothing_is_delivered(
    secured: tuple[str, list[NatsUser]], admin: Bus, component: str, forbidden: str, allowed: str
) -> None:
    url, users = secured
    forbidden, allowed = S.full(forbidden), S.full(allowed)
    received: list[str] = []
    marker_seen = asyncio.Event()

    async def watch(msg: nats.aio.msg.Msg) -> None:
        received.append(msg.subject)
        if msg.subject == allowed:
            marker_seen.set()

    await admin.nc.subscribe(forbidden, cb=watch)
    await admin.nc.subscribe(allowed, cb=watch)
    await admin.nc.flush()
    async with connected(url, users, component) as (nc, violations):
        await nc.publish(forbidden, b"not yours")
        # The server takes one connection's messages in order: had it passed the first, the watcher
        # would get it before this one.
        await nc.publish(allowed, b"marker")
        await nc.flush()
        await asyncio.wait_for(violations.arrived.wait(), 10)
        await asyncio.wait_for(marker_seen.wait(), 10)
    assert received == [allowed], "only the allowed message was delivered"
    assert forbidden.lower() in violations.seen[0]


async def pending_for(admin: Bus, stream: str, durable: str) -> int:
    info = await admin.js.consumer_info(stream, durable)
    return info.num_pending + info.num_ack_pending


async def fetch_denied(nc: Client, violations: Violations, stream: str, durable: str) -> None:
    sub = await nc.jetstream().pull_subscribe_bind(durable, stream)
    with contextlib.suppress(nats.errors.TimeoutError):
        await sub.fetch(1, timeout=1)
    await asyncio.wait_for(violations.arrived.wait(), 10)


@pytest.mark.parametrize(
    ("component", "stream", "durable", "subject"),
    [
        pytest.param("gateway", S.runs_stream, "runner", S.runs_submit, id="gateway-takes-no-runs"),
        pytest.param(
            "telegram", S.chat_out_stream, "slack", S.chat_out("slack"), id="adapter-takes-no-other-replies"
        ),
        pytest.param(
            "runner",
            S.run_events_partition_stream(0),
            "router-ev-0",
            S.run_events_for("r1", None, 0),
            id="a-reader-drains-no-ones-durable",
        ),
    ],
)
async def test_a_component_cannot_take_messages_from_another_components_consumer(
    secured: tuple[str, list[NatsUser]], admin: Bus, component: str, stream: str, durable: str, subject: str
) -> None:
    url, users = secured
    await admin.js.add_consumer(
        stream, ConsumerConfig(durable_name=durable, ack_policy=AckPolicy.EXPLICIT, filter_subject=subject)
    )
    before = await pending_for(admin, stream, durable)
    await admin.publish(subject, b'{"for": "its owner"}', msg_id=uuid.uuid4().hex)
    async with connected(url, users, component) as (nc, violations):
        await fetch_denied(nc, violations, stream, durable)
    assert f"consumer.msg.next.{stream}.{durable}".lower() in violations.seen[0]
    assert await pending_for(admin, stream, durable) == before + 1, "the message still waits for its owner"


@pytest.mark.parametrize(
    ("component", "attempt"),
    [
        pytest.param("sandbox", lambda js: js.key_value(S.memory_bucket), id="sandbox-reads-no-memory"),
        pytest.param("router", lambda js: js.key_value(S.agents_bucket), id="router-reads-no-agents"),
        pytest.param("memory", lambda js: js.object_store(S.files_store), id="memory-opens-no-files"),
    ],
)
async def test_a_component_cannot_open_a_bucket_it_has_no_business_with(
    secured: tuple[str, list[NatsUser]],
    admin: Bus,
    component: str,
    attempt: Callable[[object], Awaitable[object]],
) -> None:
    url, users = secured
    async with connected(url, users, component) as (nc, violations):
        with pytest.raises(nats.errors.TimeoutError):
            await attempt(nc.jetstream(timeout=1))
        await asyncio.wait_for(violations.arrived.wait(), 10)
    assert "stream.info" in violations.seen[0]


async def test_the_users_file_is_private_and_the_server_config_names_every_component(tmp_path: Path) -> None:
    from bus.permissions import RIGHTS, save_users, users_for

    users = users_for(S, tmp_path / "users.json")
    save_users(tmp_path / "users.json", users)
    assert (tmp_path / "users.json").stat().st_mode & 0o077 == 0
    again = users_for(S, tmp_path / "users.json")
    assert [u.password for u in again] == [u.password for u in users], "kept across restarts"
    block = server_block(users)
    for component in RIGHTS:
        assert f'"user": "{PREFIX}-{component}"' in block


def test_the_operators_docs_show_every_components_rights_as_granted() -> None:
    """docs/operating.md's table is the permissions table itself (regenerate it with
    `bus.permissions.rights_table()` when RIGHTS changes)."""
    from bus.permissions import rights_table
    from tests.conftest import REPO

    text = (REPO / "docs" / "operating.md").read_text(encoding="utf-8")
    start = text.index("-->\n", text.index("<!-- rights-table")) + len("-->\n")
    end = text.index("<!-- /rights-table -->")
    assert text[start:end] == rights_table()
