"""Steering: a message sent with the `steer` strategy while a run works joins that run's turn."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bus import Bus
from bus.messages import MultitaskStrategy, RunCommand, RunRequest, ThreadRecord
from bus.records import RecordStore
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.runner import StartRunner, StartStack, ask, running_runner, submit_and_collect
from tests.support.sandbox import running_broker

pytestmark = pytest.mark.asyncio


def final_text(events: list[Any]) -> str:
    return str(next(e.data for e in reversed(events) if e.event == "values")["messages"][-1]["content"])


async def test_a_steering_message_reaches_the_next_model_call_of_the_running_run(
    bus: Bus, fake_model: FakeOpenAI, start_runner: StartRunner
) -> None:
    gate = asyncio.Event()
    fake_model.script(
        Reply(text="Here is a shell script.", hold=gate, when="write me a script"),
        Reply(text="Rewritten in Python, as you asked.", when="use Python instead"),
    )
    first = ask("t-steer", "write me a script")
    async with start_runner():
        running = asyncio.create_task(submit_and_collect(bus, first))
        await fake_model.wait_until(lambda: fake_model.holding == 1)  # the run is in its model call

        steer = ask("t-steer", "use Python instead", multitask_strategy=MultitaskStrategy.STEER)
        steered = await submit_and_collect(bus, steer)
        assert [e.data for e in steered if e.event == "steered"] == [{"run_id": first.run_id}]
        assert steered[-1].data["status"] == "success"

        gate.set()
        events = await running
    assert events[-1].data["status"] == "success"
    assert final_text(events) == "Rewritten in Python, as you asked."
    # The model's next request, in the same run, has the steering message after its first answer.
    [_, second] = fake_model.agent_requests
    said = [(m["role"], m["content"]) for m in second["messages"] if m["role"] != "system"]
    assert said[-3:] == [
        ("user", "write me a script"),
        ("assistant", "Here is a shell script."),
        ("user", "use Python instead"),
    ]


async def test_a_steering_message_to_an_idle_thread_is_answered_as_its_own_run(
    bus: Bus, fake_model: FakeOpenAI, start_runner: StartRunner
) -> None:
    fake_model.script(Reply(text="Nothing was running; here you go.", when="steer nobody"))
    async with start_runner():
        events = await submit_and_collect(
            bus, ask("t-steer-idle", "steer nobody", multitask_strategy=MultitaskStrategy.STEER)
        )
    assert not [e for e in events if e.event == "steered"]
    assert final_text(events) == "Nothing was running; here you go."


async def test_a_steering_message_sent_during_a_tool_step_comes_after_its_result(
    bus: Bus, fake_model: FakeOpenAI, start_runner: StartRunner
) -> None:
    gate = asyncio.Event()
    fake_model.script(
        Reply(tool_calls=[ToolCall("no_such_tool", {})], hold=gate, when="look it up"),
        Reply(text="Looked it up, in French.", when="answer in French"),
    )
    first = ask("t-steer-tool", "look it up")
    async with start_runner():
        running = asyncio.create_task(submit_and_collect(bus, first))
        await fake_model.wait_until(lambda: fake_model.holding == 1)
        steer = ask("t-steer-tool", "answer in French", multitask_strategy=MultitaskStrategy.STEER)
        steered = await submit_and_collect(bus, steer)
        assert [e.data for e in steered if e.event == "steered"] == [{"run_id": first.run_id}]
        gate.set()
        events = await running
    assert final_text(events) == "Looked it up, in French."
    [_, second] = fake_model.agent_requests
    roles = [m["role"] for m in second["messages"] if m["role"] != "system"]
    assert roles[-4:] == ["user", "assistant", "tool", "user"]
    assert second["messages"][-1]["content"] == "answer in French"


@pytest.mark.usefixtures("bash_needs_approval")
async def test_a_steering_message_sent_while_an_approval_waits_joins_the_run_once_it_is_answered(
    bus: Bus, fake_model: FakeOpenAI, start_stack: StartStack
) -> None:
    fake_model.script(
        Reply(tool_calls=[ToolCall("bash", {"command": "echo from-the-approved-call"})], when="run it"),
        Reply(text="It ran; and here is the weather too.", when="the weather"),
    )
    async with start_stack(running_broker, running_runner):
        first = ask("t-steer-wait", "run it")
        asked = await submit_and_collect(bus, first)
        assert [e for e in asked if e.event == "approval"], "the run waits for a yes"
        steer = ask("t-steer-wait", "also tell me the weather", multitask_strategy=MultitaskStrategy.STEER)
        steered = await submit_and_collect(bus, steer)
        answer = RunRequest(
            thread_id="t-steer-wait", command=RunCommand(resume="approve"), stream_mode=["values"]
        )
        events = await submit_and_collect(bus, answer)
    # The steer run ran nothing: its message waits with the request (running it then would have
    # thrown the request away, and the answer with it).
    assert [e.data for e in steered if e.event == "steered"] == [{"run_id": first.run_id, "waiting": True}]
    assert steered[-1].data["status"] == "success"
    assert len(fake_model.agent_requests) == 2, "the steering message made no model call of its own"
    assert final_text(events) == "It ran; and here is the weather too."
    last = fake_model.agent_requests[-1]["messages"]
    said = [(m["role"], str(m["content"])) for m in last if m["role"] != "system"]
    assert said[0] == ("user", "run it")
    assert said[-2][0] == "tool"
    assert "from-the-approved-call" in said[-2][1], "the approved call ran"
    assert said[-1] == ("user", "also tell me the weather"), "then the message sent meanwhile"
    thread = await RecordStore(await bus.kv(bus.subjects.threads_bucket), ThreadRecord).get("t-steer-wait")
    assert thread is not None
    assert thread.steering == [], "taken in once: no later run adds it again"
