"""The threads service: state, history, update and delete over NATS request/reply."""

from __future__ import annotations

import pytest

from bus import Bus
from bus.messages import (
    ThreadDeleteReply,
    ThreadDeleteRequest,
    ThreadHistoryReply,
    ThreadHistoryRequest,
    ThreadStateReply,
    ThreadStateRequest,
    ThreadUpdateStateReply,
    ThreadUpdateStateRequest,
)
from tests.agents.conftest import ask, submit_and_collect
from tests.fakes.openai_server import FakeOpenAI, Reply

pytestmark = pytest.mark.asyncio


async def state(bus: Bus, thread_id: str, user_id: str = "default") -> ThreadStateReply:
    return await bus.request(
        bus.subjects.threads("state"),
        ThreadStateRequest(thread_id=thread_id, user_id=user_id),
        ThreadStateReply,
    )


async def test_state_history_update_and_delete_of_a_thread(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    fake_model.script(Reply(text="Hello Ana."))
    await submit_and_collect(bus, ask("t-svc", "Hi, I am Ana", user_id="ana"))

    reply = await state(bus, "t-svc", "ana")
    assert reply.ok
    assert reply.state is not None
    assert [m["type"] for m in reply.state.values["messages"]] == ["human", "ai"]
    assert reply.state.values["title"]
    assert reply.state.next == []
    assert reply.state.checkpoint["thread_id"] == "t-svc"
    assert reply.state.checkpoint["checkpoint_id"]

    history = await bus.request(
        bus.subjects.threads("history"),
        ThreadHistoryRequest(thread_id="t-svc", user_id="ana"),
        ThreadHistoryReply,
    )
    assert len(history.states) >= 2
    assert history.states[0].checkpoint == reply.state.checkpoint, "newest first"
    assert len(history.states[0].values["messages"]) > len(history.states[-1].values.get("messages", []))

    updated = await bus.request(
        bus.subjects.threads("update_state"),
        ThreadUpdateStateRequest(thread_id="t-svc", user_id="ana", values={"title": "Renamed"}),
        ThreadUpdateStateReply,
    )
    assert updated.checkpoint["checkpoint_id"] != reply.state.checkpoint["checkpoint_id"]
    after = await state(bus, "t-svc", "ana")
    assert after.state is not None
    assert after.state.values["title"] == "Renamed"

    deleted = await bus.request(
        bus.subjects.threads("delete"),
        ThreadDeleteRequest(thread_id="t-svc", user_id="ana"),
        ThreadDeleteReply,
    )
    assert deleted.deleted
    gone = await state(bus, "t-svc", "ana")
    assert gone.state is not None
    assert gone.state.values == {}


async def test_another_users_thread_is_not_found(bus: Bus, fake_model: FakeOpenAI, runner: None) -> None:
    await submit_and_collect(bus, ask("t-private", "secret plans", user_id="ana"))
    reply = await state(bus, "t-private", "bob")
    assert reply.error is not None
    assert reply.error.code == "not_found"
    assert reply.state is None


async def test_a_malformed_request_gets_an_error_reply(bus: Bus, runner: None) -> None:
    raw = await bus.nc.request(bus.subjects.threads("state"), b"{not json", timeout=5)
    assert b'"code":"invalid"' in raw.data
    assert b"ThreadStateRequest" in raw.data


async def test_the_service_is_discoverable(bus: Bus, runner: None) -> None:
    import json

    reply = await bus.nc.request("$SRV.INFO." + bus.subjects.service_name("threads"), b"", timeout=5)
    info = json.loads(reply.data)
    assert {e["name"] for e in info["endpoints"]} == {"state", "history", "update_state", "delete"}


async def test_an_update_the_state_refuses_is_the_callers_mistake_not_an_internal_error(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    await submit_and_collect(bus, ask("t-bad-update", "hello", user_id="ana"))
    bad = {"messages": [{"type": "remove", "id": "no-such-message"}]}
    reply = await bus.request(
        bus.subjects.threads("update_state"),
        ThreadUpdateStateRequest(thread_id="t-bad-update", user_id="ana", values=bad),
        ThreadUpdateStateReply,
    )
    assert reply.error is not None
    assert reply.error.code == "invalid"
    assert "no-such-message" in reply.error.message
