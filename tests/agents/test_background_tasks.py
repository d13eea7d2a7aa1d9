"""Background tasks: the lead starts a subagent task without waiting, lists and cancels it with its
tools, and the task's outcome comes back to the thread as a run of its own once the turn has ended."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from agents.subagents.background import report_run_id
from bus import Bus
from bus.messages import (
    RunRecord,
    SubagentResult,
    SubagentTask,
    ThreadDeleteReply,
    ThreadDeleteRequest,
    ThreadRecord,
)
from bus.records import RecordStore
from bus.runs import collect_run, submit_run
from bus.service import call
from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.runner import StartStack, running_runner
from tests.support.subagents import delegate, running_executor, task_call, tool_results

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def stack(config_data: dict[str, Any], start_stack: StartStack) -> AsyncIterator[AppConfig]:
    config_data["subagents"]["timeout_seconds"] = 120
    async with start_stack(running_runner, running_executor) as config:
        yield config


def report_of(parent_run_id: str, call_id: str, thread_id: str) -> str:
    """The id of the run that reports the background task of `call_id` (made in the first turn)."""
    task = SubagentTask(task_id=f"{call_id}-t1", parent_run_id=parent_run_id, thread_id=thread_id, prompt="")
    return report_run_id(task)


def final_text(events: list[Any]) -> str:
    return str(next(e.data for e in reversed(events) if e.event == "values")["messages"][-1]["content"])


async def test_background_tasks_are_listed_cancelled_and_report_back_after_the_turn(
    bus: Bus, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    stars_may_answer, never = asyncio.Event(), asyncio.Event()
    background = {"run_in_background": True}
    fake_model.script(
        Reply(
            tool_calls=[
                task_call("call_stars", "Count the stars", **background),
                task_call("call_moon", "Measure the moon", **background),
            ],
            when="Start two jobs",
        ),
        Reply(text="stars: 42", when="Count the stars", hold=stars_may_answer),
        Reply(text="never", when="Measure the moon", hold=never),
        Reply(text="Both jobs are running.", when="Started background task"),
        Reply(tool_calls=[ToolCall("list_background_tasks", {}, id="call_list")], when="What is running?"),
        Reply(tool_calls=[ToolCall("cancel_background_task", {"task": "do call_moon"}, id="call_stop")]),
        Reply(text="I stopped the moon job.", when="Cancellation requested"),
        Reply(text="The stars: 42.", when="stars: 42"),
    )
    thread = "t-background"
    first = delegate(thread, "Start two jobs")
    await submit_run(bus, first)
    events = await collect_run(bus, first.run_id)
    # The turn ends while both subagents are still at work (their model calls are held).
    assert final_text(events) == "Both jobs are running."
    assert "Started background task call_stars-t1" in tool_results(events)["call_stars"]["content"]
    await fake_model.wait_until(lambda: fake_model.holding == 2)

    second = delegate(thread, "What is running?")
    await submit_run(bus, second)
    events = await collect_run(bus, second.run_id)
    listed = json.loads(tool_results(events)["call_list"]["content"])
    assert listed["count"] == 2
    assert {t["description"]: t["status"] for t in listed["tasks"]} == {
        "do call_stars": "running",
        "do call_moon": "running",
    }
    stopped = json.loads(tool_results(events)["call_stop"]["content"])
    assert stopped["cancelled"] is True
    assert stopped["task"]["task_id"] == "call_moon-t1"
    assert final_text(events) == "I stopped the moon job."

    stars_may_answer.set()  # the stars job ends: its outcome comes back as a run of its own
    report = await collect_run(bus, report_of(first.run_id, "call_stars", thread), timeout=60)
    assert final_text(report) == "The stars: 42."
    asked = fake_model.agent_requests[-1]["messages"]
    assert "stars: 42" in asked[-1]["content"], "the agent reads the task's result"
    assert any(m.get("content") == "I stopped the moon job." for m in asked), "in the thread's conversation"

    # The cancelled job is not reported back, and shows as cancelled.
    runs = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    assert await runs.get(report_of(first.run_id, "call_moon", thread)) is None
    fake_model.script(
        Reply(tool_calls=[ToolCall("list_background_tasks", {}, id="call_again")], when="And now?"),
        Reply(text="Listed.", when='"count": 2'),
    )
    third = delegate(thread, "And now?")
    await submit_run(bus, third)
    events = await collect_run(bus, third.run_id)
    listed = json.loads(tool_results(events)["call_again"]["content"])
    assert {t["description"]: t["status"] for t in listed["tasks"]} == {
        "do call_stars": "completed",
        "do call_moon": "cancelled",
    }
    never.set()


async def test_a_background_task_outlives_a_restart_of_its_executor_and_runner(
    bus: Bus, fake_model: FakeOpenAI, nats_url: str, config_data: dict[str, Any], app_config: Any
) -> None:
    """The task goes back to its stream when its executor stops, and its report waits in the runs
    stream for a runner: nothing of it is held in a process."""
    config_data["subagents"]["timeout_seconds"] = 120
    config = app_config()
    never = asyncio.Event()
    fake_model.script(
        Reply(tool_calls=[task_call("call_late", "Sum 2 and 2", run_in_background=True)], when="Add up"),
        Reply(text="Started; I will tell you.", when="Started background task"),
        Reply(text="first try", when="Sum 2 and 2", hold=never),
        Reply(text="2 + 2 = 4", when="Sum 2 and 2"),
        Reply(text="The sum came back: 4.", when="2 + 2 = 4"),
    )
    first = delegate("t-late", "Add up")
    async with running_runner(nats_url, config), running_executor(nats_url, config):
        await submit_run(bus, first)
        assert final_text(await collect_run(bus, first.run_id)) == "Started; I will tell you."
        await fake_model.wait_until(lambda: fake_model.holding == 1)  # the subagent is at work
    async with running_executor(nats_url, config), running_runner(nats_url, config):
        report = await collect_run(bus, report_of(first.run_id, "call_late", "t-late"), timeout=90)
    never.set()
    assert final_text(report) == "The sum came back: 4."


async def test_deleting_the_thread_stops_its_background_task_and_nothing_reports_into_it(
    bus: Bus, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    never = asyncio.Event()
    fake_model.script(
        Reply(tool_calls=[task_call("call_gone", "Index the archive", run_in_background=True)], when="Index"),
        Reply(text="Indexing in the background.", when="Started background task"),
        Reply(text="never", when="Index the archive", hold=never),
    )
    first = delegate("t-bg-deleted", "Index everything")
    await submit_run(bus, first)
    assert final_text(await collect_run(bus, first.run_id)) == "Indexing in the background."
    await fake_model.wait_until(lambda: fake_model.holding == 1)
    gone = await call(
        bus, "threads", "delete", ThreadDeleteRequest(thread_id="t-bg-deleted"), ThreadDeleteReply, timeout=15
    )
    assert gone.deleted
    # The subagent stops at once (its model call still held), and its outcome says why.
    results = await bus.kv(bus.subjects.subagent_results_bucket)
    key = SubagentResult.key(first.run_id, "call_gone-t1")
    async with asyncio.timeout(20):
        while True:
            with contextlib.suppress(Exception):
                entry = await results.get(key)
                if entry.value:
                    break
            await asyncio.sleep(0.05)  # polling the results bucket for the outcome
    outcome = SubagentResult.model_validate_json(entry.value or b"{}")
    assert (outcome.status, outcome.error) == ("cancelled", "its thread was deleted")
    runs = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    assert await runs.get(report_of(first.run_id, "call_gone", "t-bg-deleted")) is None
    threads = RecordStore(await bus.kv(bus.subjects.threads_bucket), ThreadRecord)
    assert await threads.get("t-bg-deleted") is None, "no report brought the thread back"
    never.set()
