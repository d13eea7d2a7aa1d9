"""Subagents: the lead agent's task tool, and the subagent executor as a consumer of its own."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from agents.subagents import EXECUTOR_DURABLE
from bus import Bus, list_dead_letters
from bus.messages import RunStatus, SubagentResult, ThreadRecord
from bus.records import RecordStore
from bus.runs import cancel_run, collect_run, submit_run
from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.runner import running_runner
from tests.support.subagents import delegate, running_executor, task_call, task_events, tool_results

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def stack(
    nats_url: str, config_data: dict[str, Any], app_config: Callable[[], AppConfig]
) -> AsyncIterator[AppConfig]:
    config_data["subagents"]["timeout_seconds"] = 60
    config = app_config()
    async with running_runner(nats_url, config), running_executor(nats_url, config):
        yield config


async def test_two_tasks_run_side_by_side_and_the_lead_combines_their_results(
    bus: Bus, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    both_asked = asyncio.Event()
    fake_model.script(
        Reply(tool_calls=[task_call("call_a", "Find fact A"), task_call("call_b", "Find fact B")]),
        Reply(text="A is 1", when="Find fact A", hold=both_asked),
        Reply(text="B is 2", when="Find fact B", hold=both_asked),
        Reply(text="Together: A is 1 and B is 2.", when="B is 2"),
    )
    request = delegate("t-two", "Compare A and B")
    await submit_run(bus, request)
    await fake_model.wait_for_requests(3)  # the lead, then both subagents, neither answered yet
    both_asked.set()
    events = await collect_run(bus, request.run_id)

    final = next(e.data for e in reversed(events) if e.event == "values")["messages"][-1]
    assert final["content"] == "Together: A is 1 and B is 2."
    for call_id, answer in (("call_a", "A is 1"), ("call_b", "B is 2")):
        assert task_events(events, call_id) == ["task_started", "task_running", "task_completed"]
        result = tool_results(events)[call_id]
        assert answer in result["content"]
        assert result["additional_kwargs"]["subagent_status"] == "completed"
        assert result["additional_kwargs"]["subagent_result_brief"] == answer
    subagent_prompts = [r["messages"][-1]["content"] for r in fake_model.agent_requests[1:3]]
    assert sorted(subagent_prompts) == ["Find fact A", "Find fact B"]
    # The run's tokens are the lead's own plus its subagents'.
    messages = next(e.data for e in reversed(events) if e.event == "values")["messages"]
    lead = sum((m.get("usage_metadata") or {}).get("total_tokens", 0) for m in messages if m["type"] == "ai")
    completed = [e.data for e in events if e.event == "custom" and e.data["type"] == "task_completed"]
    subagents = sum(c["usage"]["total_tokens"] for c in completed)
    assert subagents > 0
    assert events[-1].event == "end"
    assert events[-1].data["usage"]["total_tokens"] == lead + subagents
    thread = await RecordStore(await bus.kv(bus.subjects.threads_bucket), ThreadRecord).get("t-two")
    assert thread is not None
    assert thread.subagent_tokens == subagents, "the thread's token usage tells who used what"


async def test_only_three_tasks_of_one_turn_run_the_fourth_is_told_why(
    bus: Bus, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    calls = [task_call(f"call_{n}", f"Part {n} of the job") for n in range(4)]
    fake_model.script(Reply(tool_calls=calls), *[Reply(text=f"done {n}", when=f"Part {n}") for n in range(3)])
    request = delegate("t-four", "Do four parts")
    await submit_run(bus, request)
    events = await collect_run(bus, request.run_id)
    results = tool_results(events)
    for n in range(3):
        assert results[f"call_{n}"]["additional_kwargs"]["subagent_status"] == "completed"
    refused = results["call_3"]
    assert refused["status"] == "error"
    assert "at most 3 subagents run per turn" in refused["content"]
    asked = [r["messages"][-1]["content"] for r in fake_model.agent_requests]
    assert "Part 3 of the job" not in asked, "the fourth subagent never started"


async def test_a_subagent_past_its_time_limit_is_stopped_and_the_lead_still_answers(
    bus: Bus, fake_model: FakeOpenAI, nats_url: str, config_data: dict[str, Any], app_config: Any
) -> None:
    config_data["subagents"]["timeout_seconds"] = 1
    config = app_config()
    never = asyncio.Event()
    fake_model.script(
        Reply(tool_calls=[task_call("call_slow", "A very slow job")]),
        Reply(text="never", when="A very slow job", hold=never),
        Reply(text="The helper ran out of time, so here is what I know.", when="timed out"),
    )
    async with running_runner(nats_url, config), running_executor(nats_url, config):
        request = delegate("t-slow", "Do the slow job")
        await submit_run(bus, request)
        events = await collect_run(bus, request.run_id)
    never.set()
    assert task_events(events, "call_slow") == ["task_started", "task_timed_out"]
    result = tool_results(events)["call_slow"]
    assert result["additional_kwargs"]["subagent_status"] == "timed_out"
    final = next(e.data for e in reversed(events) if e.event == "values")["messages"][-1]
    assert final["content"] == "The helper ran out of time, so here is what I know."


async def test_cancelling_the_parent_cancels_its_subagent(
    bus: Bus, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    never = asyncio.Event()
    fake_model.script(
        Reply(tool_calls=[task_call("call_long", "A long job")]),
        Reply(text="never", when="A long job", hold=never),
    )
    request = delegate("t-cancel", "Do the long job")
    await submit_run(bus, request)
    await fake_model.wait_for_requests(2)  # the subagent is at work
    await cancel_run(bus, request.run_id)
    events = await collect_run(bus, request.run_id)
    assert events[-1].data["status"] == RunStatus.INTERRUPTED.value
    results = await bus.kv(bus.subjects.subagent_results_bucket)
    key = SubagentResult.key(request.run_id, "call_long-t1")  # the task of the call of the first turn
    for _ in range(200):  # the subagent's outcome is stored as soon as it stops
        with contextlib.suppress(Exception):
            entry = await results.get(key)
            if entry.value:
                break
        await asyncio.sleep(0.05)
    outcome = SubagentResult.model_validate_json(entry.value or b"{}")
    assert outcome.status == "cancelled"
    never.set()


async def test_a_malformed_task_is_dead_lettered_and_the_executor_keeps_serving(
    bus: Bus, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    await bus.js.publish(bus.subjects.subagents_submit, b'{"prompt": 5}')
    fake_model.script(
        Reply(tool_calls=[task_call("call_ok", "A small job")]),
        Reply(text="small job done", when="A small job"),
        Reply(text="All done.", when="small job done"),
    )
    request = delegate("t-after-bad", "Do the small job")
    await submit_run(bus, request)
    events = await collect_run(bus, request.run_id)
    assert tool_results(events)["call_ok"]["additional_kwargs"]["subagent_status"] == "completed"
    letters = await list_dead_letters(bus)
    reasons = [d.reason for d in letters if d.consumer == EXECUTOR_DURABLE]
    assert len(reasons) == 1
    assert "invalid SubagentTask" in reasons[0]


async def test_an_executor_stopping_gracefully_leaves_its_task_to_the_next_one(
    bus: Bus, fake_model: FakeOpenAI, nats_url: str, config_data: dict[str, Any], app_config: Any
) -> None:
    """A stopping process is not a cancel: the task comes back to the next executor and completes."""
    config_data["subagents"]["timeout_seconds"] = 120
    config = app_config()
    never = asyncio.Event()
    fake_model.script(
        Reply(tool_calls=[task_call("call_g", "Tidy the workspace")]),
        Reply(text="first try", when="Tidy the workspace", hold=never),
        Reply(text="workspace tidied", when="Tidy the workspace"),
        Reply(text="Done tidying.", when="workspace tidied"),
    )
    async with running_runner(nats_url, config):
        async with running_executor(nats_url, config):
            request = delegate("t-graceful", "Tidy up please")
            await submit_run(bus, request)
            await fake_model.wait_for_requests(2)
        async with running_executor(nats_url, config):
            events = await collect_run(bus, request.run_id, timeout=90)
    never.set()
    assert tool_results(events)["call_g"]["additional_kwargs"]["subagent_status"] == "completed"
    assert task_events(events, "call_g") == ["task_started", "task_running", "task_completed"]


async def test_without_an_executor_the_task_tool_says_so_at_once(
    bus: Bus, fake_model: FakeOpenAI, nats_url: str, config_data: dict[str, Any], app_config: Any
) -> None:
    config = app_config()
    async with running_executor(nats_url, config):
        pass  # it ran once (its durable consumer stays), and is gone now
    fake_model.script(
        Reply(tool_calls=[task_call("call_x", "Count to ten")]),
        Reply(text="I will count myself: 1 to 10.", when="no subagent executor"),
    )
    async with running_runner(nats_url, config):
        request = delegate("t-noexec", "Count to ten for me")
        await submit_run(bus, request)
        events = await collect_run(bus, request.run_id)
    result = tool_results(events)["call_x"]
    assert result["status"] == "error"
    assert "no subagent executor is running" in result["content"]
    assert task_events(events, "call_x") == [], "no task card that never ends"
    final = next(e.data for e in reversed(events) if e.event == "values")["messages"][-1]
    assert final["content"] == "I will count myself: 1 to 10."


async def test_deleting_a_thread_deletes_its_subagents_threads_too(
    bus: Bus, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    from agents.checkpoints import checkpointer_ready
    from bus.messages import ThreadDeleteReply, ThreadDeleteRequest
    from bus.service import call

    fake_model.script(
        Reply(tool_calls=[task_call("call_d", "Summarize notes.txt")]),
        Reply(text="the notes say hello", when="Summarize notes.txt"),
        Reply(text="They say hello."),
    )
    request = delegate("t-delete-kids", "Summarize my notes")
    await submit_run(bus, request)
    await collect_run(bus, request.run_id)
    child = {"configurable": {"thread_id": f"{request.run_id}:call_d-t1", "checkpoint_ns": ""}}
    async with checkpointer_ready(stack) as checkpoints:
        kept = await checkpoints.aget_tuple(child)
        assert kept is not None
        assert [m.content for m in kept.checkpoint["channel_values"]["messages"]][-1] == "the notes say hello"
        delete = ThreadDeleteRequest(thread_id="t-delete-kids")
        await call(bus, "threads", "delete", delete, ThreadDeleteReply, timeout=10)
        assert await checkpoints.aget_tuple(child) is None, "the subagent's thread went with its parent's"


async def test_a_configured_type_gets_its_own_prompt_tools_and_turn_limit(
    bus: Bus, fake_model: FakeOpenAI, nats_url: str, config_data: dict[str, Any], app_config: Any
) -> None:
    config_data["subagents"] = {
        "agents": {
            "auditor": {
                "description": "Checks files for secrets",
                "system_prompt": "You audit files for leaked secrets.",
                "tools": ["read_file", "grep"],
                "max_turns": 1,
            }
        }
    }
    config = app_config()
    fake_model.script(
        Reply(tool_calls=[task_call("call_a", "Audit the config", subagent_type="auditor")]),
        Reply(tool_calls=[ToolCall("grep", {"pattern": "password"})], when="Audit the config"),
        Reply(text="The audit stopped early."),
    )
    async with running_runner(nats_url, config), running_executor(nats_url, config):
        request = delegate("t-audit", "Audit my config")
        await submit_run(bus, request)
        events = await collect_run(bus, request.run_id)
    lead, auditor = fake_model.agent_requests[0], fake_model.agent_requests[1]
    task_tool = next(t for t in lead["tools"] if t["function"]["name"] == "task")
    assert "- auditor: Checks files for secrets" in task_tool["function"]["description"]
    assert auditor["messages"][0] == {"role": "system", "content": "You audit files for leaked secrets."}
    assert sorted(t["function"]["name"] for t in auditor["tools"]) == ["grep", "read_file"]
    result = tool_results(events)["call_a"]["additional_kwargs"]
    assert result["subagent_stop_reason"] == "turn_capped", "one turn, and it wanted a second"
    assert result["subagent_status"] == "failed", "capped without an answer"


async def test_a_subagent_whose_model_is_rate_limited_retries_and_the_parent_hears_of_it(
    bus: Bus, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    fake_model.script(
        Reply(tool_calls=[task_call("call_busy", "Find fact C")]),
        Reply(text="C is 3", when="Find fact C"),
        Reply(text="C is 3, says the subagent.", when="C is 3"),
    )
    request = delegate("t-busy", "What is C?")
    await submit_run(bus, request)
    await fake_model.wait_for_requests(1)  # the lead asked; the subagent's first tries are refused
    fake_model.refuse(2)
    events = await collect_run(bus, request.run_id)

    assert events[-1].data["status"] == "success"
    running = [
        e.data["message"]["content"]
        for e in events
        if e.event == "custom"
        and e.data.get("type") == "task_running"
        and e.data.get("task_id") == "call_busy"
    ]
    assert "The model is busy; retrying (2/5)…" in running
    assert "The model is busy; retrying (3/5)…" in running
    assert tool_results(events)["call_busy"]["additional_kwargs"]["subagent_status"] == "completed"
