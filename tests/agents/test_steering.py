"""Steering: a message sent with the `steer` strategy while a run works joins that run's turn."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bus import Bus
from bus.messages import MultitaskStrategy
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.runner import StartRunner, ask, submit_and_collect

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
