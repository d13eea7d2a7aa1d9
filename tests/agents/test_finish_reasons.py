"""Answers the model left empty, cut at its output limit or had filtered reach a chat in words a
user reads, and each is a run event. Chat → router → runner → scripted model over real HTTP."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from agents.graph.middleware.finish_reasons import EMPTY_TEXT, LENGTH_NOTE, SAFETY_NOTE, SAFETY_TEXT
from bus import Bus
from bus.runs import collect_run
from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.chat import answer_in_chat, running_router
from tests.support.runner import running_runner

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def stack(
    nats_url: str, config_data: dict[str, Any], app_config: Callable[[], AppConfig]
) -> AsyncIterator[None]:
    config_data["title"] = {"enabled": False}
    config = app_config()
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(running_runner(nats_url, config))
        await stack.enter_async_context(running_router(nats_url, config))
        yield


async def finish_events(bus: Bus, run_id: str) -> list[dict[str, Any]]:
    events = await collect_run(bus, run_id, timeout=30)
    return [e.data for e in events if e.event == "custom" and e.data.get("type") == "model_finish"]


async def test_an_empty_answer_is_asked_again_once_and_the_second_answer_reaches_the_chat(
    bus: Bus, fake_model: FakeOpenAI, stack: None
) -> None:
    fake_model.script(Reply(text=""), Reply(text="Sorry, here it is: 42."))
    reply = await answer_in_chat(bus, "what is the answer?")
    assert (reply.kind, reply.text) == ("final", "Sorry, here it is: 42.")
    nudged = fake_model.agent_requests[1]["messages"][-1]
    assert nudged["role"] == "user"
    assert "last reply was empty" in nudged["content"]
    assert [e["reason"] for e in await finish_events(bus, reply.run_id or "")] == ["empty"]


async def test_an_answer_empty_twice_becomes_a_readable_message(
    bus: Bus, fake_model: FakeOpenAI, stack: None
) -> None:
    fake_model.script(Reply(text=""), Reply(text=""))
    reply = await answer_in_chat(bus, "hello?")
    assert (reply.kind, reply.text) == ("final", EMPTY_TEXT)
    assert len(fake_model.agent_requests) == 2, "asked again once, not more"
    assert [e["reason"] for e in await finish_events(bus, reply.run_id or "")] == ["empty", "empty"]


async def test_an_answer_cut_at_the_output_limit_tells_the_user_so(
    bus: Bus, fake_model: FakeOpenAI, stack: None
) -> None:
    fake_model.script(Reply(text="The first three steps are: one, two,", finish_reason="length"))
    reply = await answer_in_chat(bus, "list the steps")
    assert reply.kind == "final"
    assert reply.text == f"The first three steps are: one, two,\n\n{LENGTH_NOTE}"
    events = await finish_events(bus, reply.run_id or "")
    assert [e["reason"] for e in events] == ["length"]


async def test_a_tool_call_cut_at_the_output_limit_is_not_run_and_the_user_is_told(
    bus: Bus, fake_model: FakeOpenAI, stack: None
) -> None:
    fake_model.script(
        Reply(tool_calls=[ToolCall("present_files", {"filepaths": []})], finish_reason="length")
    )
    reply = await answer_in_chat(bus, "write the report")
    assert reply.kind == "final"
    assert "output limit" in reply.text
    assert len(fake_model.agent_requests) == 1, "the cut tool call was not run (no second model turn)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("", SAFETY_TEXT, id="nothing-shown"),
        pytest.param("Here is how you", f"Here is how you\n\n{SAFETY_NOTE}", id="partly-shown"),
    ],
)
async def test_a_content_filtered_answer_reaches_the_chat_as_a_readable_message(
    bus: Bus, fake_model: FakeOpenAI, stack: None, text: str, expected: str
) -> None:
    fake_model.script(Reply(text=text, finish_reason="content_filter"))
    reply = await answer_in_chat(bus, "something the provider filters")
    assert (reply.kind, reply.text) == ("final", expected)
    assert len(fake_model.agent_requests) == 1, "a filtered answer is not asked again"
    assert [e["reason"] for e in await finish_events(bus, reply.run_id or "")] == ["content_filter"]
