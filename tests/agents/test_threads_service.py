"""The threads service: state, history, update, delete and suggestions over NATS request/reply."""

from __future__ import annotations

import asyncio

import pytest

from bus import Bus
from bus.messages import (
    ThreadDeleteReply,
    ThreadDeleteRequest,
    ThreadHistoryReply,
    ThreadHistoryRequest,
    ThreadStateReply,
    ThreadStateRequest,
    ThreadSuggestionsReply,
    ThreadSuggestionsRequest,
    ThreadUpdateStateReply,
    ThreadUpdateStateRequest,
)
from tests.conftest import both_checkpointers
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.runner import ask, submit_and_collect

pytestmark = pytest.mark.asyncio


async def state(bus: Bus, thread_id: str, user_id: str = "default") -> ThreadStateReply:
    return await bus.request(
        bus.subjects.threads("state"),
        ThreadStateRequest(thread_id=thread_id, user_id=user_id),
        ThreadStateReply,
    )


@both_checkpointers
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
    assert {e["name"] for e in info["endpoints"]} == {
        "create",
        "patch",
        "state",
        "history",
        "run_starts",
        "update_state",
        "delete",
        "suggestions",
        "goal",
        "compact",
        "assistant_graph",
        "check_run",
    }


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


@pytest.mark.parametrize(
    ("values", "as_node", "named"),
    [
        pytest.param({"title": 5}, None, "values.title:", id="title-not-text"),
        pytest.param({"artifacts": 5}, None, "values.artifacts:", id="artifacts-not-a-list"),
        pytest.param({"messages": [{"foo": 1}]}, None, "values.messages:", id="message-without-role"),
        pytest.param([1, 2], None, "values:", id="list-values"),
        pytest.param({"title": "x"}, "nosuch", "as_node:", id="unknown-node"),
    ],
)
async def test_an_update_that_does_not_fit_the_state_is_invalid_naming_the_field(
    bus: Bus, runner: None, values: object, as_node: str | None, named: str
) -> None:
    reply = await bus.request(
        bus.subjects.threads("update_state"),
        ThreadUpdateStateRequest(thread_id="t-misfit", user_id="ana", values=values, as_node=as_node),
        ThreadUpdateStateReply,
    )
    assert reply.error is not None
    assert (reply.error.code, reply.error.message.split(" ", 1)[0]) == ("invalid", named)
    after = await state(bus, "t-misfit", "ana")
    assert after.state is not None
    assert "title" not in after.state.values, "nothing was applied"


async def suggestions(bus: Bus, request: ThreadSuggestionsRequest) -> ThreadSuggestionsReply:
    return await bus.request(bus.subjects.threads("suggestions"), request, ThreadSuggestionsReply, timeout=30)


async def test_suggestions_are_written_from_the_threads_own_messages(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    fake_model.script(Reply(text="Trains are fast."))
    await submit_and_collect(bus, ask("t-suggest", "Tell me about trains", user_id="ana"))
    fake_model.script(Reply(text='Sure:\n```json\n["How fast?", "", "How much?", "Where to?"]\n```'))

    reply = await suggestions(bus, ThreadSuggestionsRequest(thread_id="t-suggest", user_id="ana", n=2))

    assert (reply.error, reply.suggestions) == (None, ["How fast?", "How much?"])
    prompt = fake_model.agent_requests[-1]["messages"][0]["content"]
    assert "human: Tell me about trains" in prompt
    assert "ai: Trains are fast." in prompt


async def test_suggestions_for_an_empty_conversation_ask_no_model(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    reply = await suggestions(bus, ThreadSuggestionsRequest(thread_id="t-empty", user_id="ana"))
    assert (reply.error, reply.suggestions) == (None, [])
    assert fake_model.agent_requests == []


async def test_suggestions_that_cannot_be_made_say_why(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    turns = [{"role": "user", "content": "hi"}]
    unknown = await suggestions(
        bus, ThreadSuggestionsRequest(thread_id="t-x", user_id="ana", messages=turns, model_name="nope")
    )
    assert unknown.error is not None
    assert (unknown.error.code, unknown.error.message) == (
        "invalid",
        "model_name: no model named 'nope' (configured: fake)",
    )

    fake_model.script(Reply(text="quota exceeded", status=400))
    failed = await suggestions(bus, ThreadSuggestionsRequest(thread_id="t-x", user_id="ana", messages=turns))
    assert failed.error is not None
    assert failed.error.code == "model_failed"

    await submit_and_collect(bus, ask("t-theirs", "private", user_id="ana"))
    theirs = ThreadSuggestionsRequest(thread_id="t-theirs", user_id="bob", messages=turns)
    other = await suggestions(bus, theirs)
    assert other.error is not None
    assert other.error.code == "not_found"


async def test_a_slow_model_does_not_hold_up_other_suggestions(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    fake_model.script(Reply(text='["slow?"]', when="a slow topic", delay=5), Reply(text='["quick?"]'))
    slow = asyncio.create_task(
        suggestions(
            bus,
            ThreadSuggestionsRequest(
                thread_id="t-slow", messages=[{"role": "user", "content": "a slow topic"}]
            ),
        )
    )
    await fake_model.wait_for_requests(1)
    quick = await suggestions(
        bus, ThreadSuggestionsRequest(thread_id="t-quick", messages=[{"role": "user", "content": "hi"}])
    )
    assert quick.suggestions == ["quick?"]
    assert not slow.done(), "the quick request was answered while the slow model was still thinking"
    assert (await slow).suggestions == ["slow?"]
