"""Custom agents (`/api/agents`), the runs that use them, and reasoning models."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from bus import Bus
from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.chat import Chat, running_router
from tests.support.runner import ask, running_runner, submit_and_collect

pytestmark = pytest.mark.asyncio


def system_prompt(request: dict[str, Any]) -> str:
    return next(str(m["content"]) for m in request["messages"] if m["role"] == "system")


def tool_names(request: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or []}


@pytest.fixture
def two_models(config_data: dict[str, Any], fake_model: FakeOpenAI) -> None:
    base = config_data["models"][0]
    config_data["models"] = [
        base,
        {**base, "name": "thinker", "model": "thinker-1", "supports_thinking": True,
         "supports_reasoning_effort": True, "when_thinking_enabled": {"extra_body": {"thinking": "on"}},
         "when_thinking_disabled": {"extra_body": {"thinking": "off"}}},
    ]  # fmt: skip


async def test_an_agent_made_through_the_api_gives_its_runs_its_soul_model_and_tools(
    two_models: None, bus: Bus, http: httpx.AsyncClient, api_url: str, fake_model: FakeOpenAI
) -> None:
    soul = "You are Quill, a terse copy editor. Never use exclamation marks."
    body = {"name": "Quill", "description": "Edits copy", "model": "thinker", "soul": soul,
            "tool_groups": ["file:read"], "skills": []}  # fmt: skip
    created = await http.post("/agents", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["name"] == "quill"
    assert (await http.get("/agents/check", params={"name": "QUILL"})).json() == {
        "available": False,
        "name": "quill",
    }
    assert (await http.post("/agents", json=body)).status_code == 409
    assert (await http.get("/agents/check", params={"name": "../etc"})).status_code == 422
    assert (await http.post("/agents", json={**body, "name": "a/b"})).status_code == 422
    assert (await http.post("/agents", json={**body, "name": "x", "model": "gpt-9"})).status_code == 422

    events = await submit_and_collect(
        bus, ask("ag-1", "fix: its great!!", context={"agent_name": "quill"}, user_id="ana")
    )
    assert events[-1].data["status"] == "success"
    used = fake_model.agent_requests[-1]
    assert used["model"] == "thinker-1", "the agent's model"
    assert soul in system_prompt(used)
    assert "deep-research" not in system_prompt(used), "skills: [] lists none"
    tools = tool_names(used)
    assert {"read_file", "ls"} <= tools
    assert not tools & {"bash", "write_file", "str_replace"}, "only its tool groups"
    assert "update_agent" in tools
    assert "setup_agent" not in tools

    async with httpx.AsyncClient(base_url=f"{api_url}/api", headers={"x-api-key": "tok-bob"}) as bob:
        assert (await bob.get("/agents")).json() == {"agents": []}
        assert (await bob.get("/agents/quill")).status_code == 404
        assert (await bob.get("/agents/check", params={"name": "quill"})).json()["available"] is True
    theirs = await submit_and_collect(
        bus, ask("ag-bob", "hi", context={"agent_name": "quill"}, user_id="bob")
    )
    assert theirs[-1].data["status"] == "error", "bob cannot use ana's agent"
    assert "no agent named 'quill'" in next(e.data for e in theirs if e.event == "error")["message"]

    updated = await http.put("/agents/quill", json={"description": "Edits copy gently"})
    assert updated.json()["soul"] == soul, "an update keeps what it does not name"
    assert updated.json()["description"] == "Edits copy gently"
    listed = (await http.get("/agents")).json()["agents"]
    assert [a["name"] for a in listed] == ["quill"]
    assert (await http.delete("/agents/quill")).status_code == 204
    assert (await http.get("/agents/quill")).status_code == 404


async def test_an_unknown_agent_name_fails_the_run_with_a_clear_error(
    bus: Bus, http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    events = await submit_and_collect(bus, ask("ag-none", "hi", context={"agent_name": "ghost"}))
    error = next(e.data for e in events if e.event == "error")
    assert "no agent named 'ghost'" in error["message"]
    assert fake_model.agent_requests == []


async def test_a_bootstrap_run_creates_the_agent_and_the_agent_updates_itself(
    bus: Bus, http: httpx.AsyncClient, fake_model: FakeOpenAI
) -> None:
    soul = "You are Sprout, a gardening coach. Ask about the climate first."
    fake_model.script(
        Reply(tool_calls=[ToolCall("setup_agent", {"soul": soul, "description": "Gardening coach"})]),
        Reply(text="Sprout is ready."),
    )
    boot = ask(
        "ag-boot",
        "make me a gardening agent",
        context={"agent_name": "sprout", "is_bootstrap": True},
        user_id="ana",
    )
    assert (await submit_and_collect(bus, boot))[-1].data["status"] == "success"
    first = fake_model.agent_requests[0]
    assert '<new_agent name="sprout">' in system_prompt(first)
    assert "setup_agent" in tool_names(first)
    agent = (await http.get("/agents/sprout")).json()
    assert agent["soul"] == soul
    assert agent["description"] == "Gardening coach"

    fake_model.script(
        Reply(tool_calls=[ToolCall("update_agent", {"description": "Gardening and compost coach"})]),
        Reply(text="Updated."),
    )
    run = ask("ag-use", "also cover compost", context={"agent_name": "sprout"}, user_id="ana")
    assert (await submit_and_collect(bus, run))[-1].data["status"] == "success"
    assert soul in system_prompt(fake_model.agent_requests[-1])
    assert (await http.get("/agents/sprout")).json()["description"] == "Gardening and compost coach"


async def test_reasoning_streams_before_the_answer_and_stays_out_of_chat_replies(
    two_models: None, bus: Bus, nats_url: str, fake_model: FakeOpenAI, stack_config: AppConfig
) -> None:
    async with running_runner(nats_url, stack_config), running_router(nats_url, stack_config):
        fake_model.script(Reply(reasoning="First, 17 is odd. So not even.", text="17 is odd."))
        request = ask(
            "rs-1",
            "is 17 even?",
            context={"model_name": "thinker", "thinking_enabled": True, "reasoning_effort": "high"},
        )
        events = await submit_and_collect(bus, request)
        sent = fake_model.agent_requests[-1]
        assert sent["reasoning_effort"] == "high"
        assert sent["thinking"] == "on", "when_thinking_enabled reached the request"
        chunks = [
            e.data[0] for e in events if e.event == "messages" and e.data[0]["type"] == "AIMessageChunk"
        ]
        reasoning = "".join(c["additional_kwargs"].get("reasoning_content", "") for c in chunks)
        assert reasoning == "First, 17 is odd. So not even."
        first_answer = next(i for i, c in enumerate(chunks) if c["content"])
        last_thought = max(i for i, c in enumerate(chunks) if c["additional_kwargs"].get("reasoning_content"))
        assert last_thought < first_answer, "the reasoning streams before the answer"
        final = next(e.data for e in reversed(events) if e.event == "values")["messages"][-1]
        assert final["additional_kwargs"]["reasoning_content"] == "First, 17 is odd. So not even."

        fake_model.script(Reply(reasoning="no thoughts", text="Hi there."))
        await submit_and_collect(bus, ask("rs-2", "hi", context={"model_name": "thinker"}))
        assert fake_model.agent_requests[-1]["thinking"] == "off", "when_thinking_disabled"
        assert "reasoning_effort" not in fake_model.agent_requests[-1]

        async with Chat(bus) as chat:
            fake_model.script(Reply(reasoning="secret musing about the user", text="Done."))
            await chat.say("please do it")
            reply = await chat.final()
            assert reply.text == "Done."
            assert "musing" not in reply.text
