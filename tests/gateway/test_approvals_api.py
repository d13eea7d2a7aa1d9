"""Approvals and LangGraph's interrupts through the LangGraph API, as the SDK sends them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph_sdk.client import LangGraphClient

from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall, echo_and_answer

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("bash_needs_approval")]


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def tool_messages(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in values["messages"] if m["type"] == "tool"]


async def test_a_bash_call_is_approved_with_the_sdks_command_resume(
    ana: LangGraphClient, fake_model: FakeOpenAI
) -> None:
    fake_model.script(*echo_and_answer("via-http", "Done: it printed via-http.", when="run it over http"))
    thread = await ana.threads.create()
    parts = [
        p async for p in ana.runs.stream(thread["thread_id"], "lead_agent", input=said("run it over http"))
    ]
    [asked] = [p.data for p in parts if p.event == "approval"]
    assert asked["description"] == "bash: echo via-http"
    state = await ana.threads.get_state(thread["thread_id"])
    [waiting] = state["interrupts"]
    assert waiting["value"]["approval_id"] == asked["approval_id"]  # what a web UI shows with its buttons
    assert (await ana.threads.get(thread["thread_id"]))["status"] == "interrupted"

    values: Any = await ana.runs.wait(
        thread["thread_id"], "lead_agent", command={"resume": {"decision": "approve"}}
    )
    [ran] = tool_messages(values)
    assert "via-http" in ran["content"]
    assert ran.get("status") != "error"
    assert values["messages"][-1]["content"] == "Done: it printed via-http."
    assert not (await ana.threads.get_state(thread["thread_id"]))["interrupts"]
    assert (await ana.threads.get(thread["thread_id"]))["status"] == "idle"


async def test_interrupt_before_stops_at_the_node_and_a_run_without_input_continues(
    ana: LangGraphClient, fake_model: FakeOpenAI
) -> None:
    fake_model.script(
        Reply(tool_calls=[ToolCall("read_file", {"path": "/mnt/user-data/uploads"})], when="stop first"),
        Reply(text="Continued after the stop.", when="uploads"),
    )
    thread = await ana.threads.create()
    stopped: Any = await ana.runs.wait(
        thread["thread_id"], "lead_agent", input=said("stop first"), interrupt_before=["tools"]
    )
    assert stopped["messages"][-1]["tool_calls"]  # the model asked; the tool has not run
    assert (await ana.threads.get_state(thread["thread_id"]))["next"] == ["tools"]

    values: Any = await ana.runs.wait(thread["thread_id"], "lead_agent", input=None)
    assert len(tool_messages(values)) == 1
    assert values["messages"][-1]["content"] == "Continued after the stop."


async def test_a_run_sent_with_the_steer_strategy_joins_the_running_run(
    ana: LangGraphClient, fake_model: FakeOpenAI
) -> None:
    gate = asyncio.Event()
    fake_model.script(
        Reply(text="Counting to three.", hold=gate, when="count for me"),
        Reply(text="Counting to five instead.", when="make it five"),
    )
    thread = await ana.threads.create()
    running = await ana.runs.create(thread["thread_id"], "lead_agent", input=said("count for me"))
    await fake_model.wait_until(lambda: fake_model.holding == 1)
    steer = await ana.runs.create(
        thread["thread_id"],
        "lead_agent",
        input=said("make it five"),
        multitask_strategy="steer",  # type: ignore[arg-type]  (the SDK's Literal predates it)
    )
    await ana.runs.join(thread["thread_id"], steer["run_id"])
    assert (await ana.runs.get(thread["thread_id"], steer["run_id"]))["status"] == "success"
    gate.set()
    values: Any = await ana.runs.join(thread["thread_id"], running["run_id"])
    assert [m["content"] for m in values["messages"]] == [
        "count for me",
        "Counting to three.",
        "make it five",
        "Counting to five instead.",
    ]
