"""The tripwire every test stack runs under: a component refused by nats-server fails the test.

The fixtures (tests/conftest.py `stack_users`, `fail_on_violations`) give each stack the users
`antler up` generates; these tests show that a refusal logged for one of them is caught and named,
that another stack's refusals are not blamed on this one, and that a test may declare it expects one.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import nats
import pytest

from bus.permissions import inbox_prefix
from bus.subjects import Subjects
from tests.conftest import fail_on_violations
from tests.support.nats_users import SecuredServer, StackUsers


async def refused_publish(server: SecuredServer, users: StackUsers, component: str, subject: str) -> None:
    """Publish as `component` where its rights do not reach, and wait for the server's refusal."""
    refused = asyncio.Event()

    async def on_error(exc: Exception) -> None:
        if "permissions violation" in str(exc).lower():
            refused.set()

    user = users.user(component)
    nc = await nats.connect(
        server.url,
        user=user.user,
        password=user.password,
        inbox_prefix=inbox_prefix(Subjects(users.prefix), component),
        error_cb=on_error,
    )
    try:
        await nc.publish(subject, b"x")
        await asyncio.wait_for(refused.wait(), 10)
    finally:
        await nc.close()


async def logged(users: StackUsers) -> list[str]:
    """The stack's refusals, once the server has written them (a moment after it told the client)."""
    for _ in range(200):
        if found := users.violations():
            return found
        await asyncio.sleep(0.01)
    return []


def marked(request: pytest.FixtureRequest) -> pytest.Item:
    """This test's item, as a test marked `permission_violations` would be."""
    request.node.add_marker(pytest.mark.permission_violations("the tripwire's own test"))
    return request.node


async def test_a_component_refused_by_the_server_fails_the_test(
    nats_server: SecuredServer, tmp_path: Path
) -> None:
    users = nats_server.open_stack(f"t{uuid.uuid4().hex[:10]}", tmp_path / "data")
    try:
        forbidden = f"{users.prefix}.chat.out.telegram"  # the runner never replies in chats
        await refused_publish(nats_server, users, "runner", forbidden)
        assert await logged(users)
        with pytest.raises(pytest.fail.Exception) as failed:
            fail_on_violations(users, None)
        assert f"{users.prefix}-runner: Publish {forbidden}" in str(failed.value)
    finally:
        users.close()


async def test_refusals_of_another_stack_are_not_this_tests(
    nats_server: SecuredServer, tmp_path: Path
) -> None:
    mine = nats_server.open_stack(f"t{uuid.uuid4().hex[:10]}", tmp_path / "mine")
    other = nats_server.open_stack(f"t{uuid.uuid4().hex[:10]}", tmp_path / "other")
    try:
        await refused_publish(nats_server, other, "sandbox", f"{other.prefix}.runs.submit")
        assert await logged(other), "the other stack's refusal was logged"
        assert mine.violations() == []
        fail_on_violations(mine, None)  # does not fail
    finally:
        other.close()
        mine.close()


async def test_a_test_may_expect_refusals(
    nats_server: SecuredServer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    users = nats_server.open_stack(f"t{uuid.uuid4().hex[:10]}", tmp_path / "data")
    try:
        await refused_publish(nats_server, users, "gateway", f"{users.prefix}.chat.out.slack")
        assert await logged(users)
        fail_on_violations(users, marked(request))  # expected: does not fail
    finally:
        users.close()


async def test_a_stacks_users_are_saved_where_antler_up_saves_them(
    nats_server: SecuredServer, tmp_path: Path
) -> None:
    """Components started from a config file (`antler run`, `antler send`) find their users there."""
    from bus.permissions import USERS_FILE, load_credentials

    users = nats_server.open_stack(f"t{uuid.uuid4().hex[:10]}", tmp_path / "data")
    try:
        saved = load_credentials(tmp_path / "data" / USERS_FILE)
        assert saved["runner"] == (users.user("runner").user, users.user("runner").password)
        assert (tmp_path / "data" / "nats.url").read_text().strip() == nats_server.url
        # No credentials: refused, as in production.
        with pytest.raises(Exception, match=r"(?i)authorization"):
            await nats.connect(nats_server.url, max_reconnect_attempts=0, allow_reconnect=False)
    finally:
        users.close()
