"""A run's request handed out again while its first delivery is still ending it.

NATS away for longer than `ack_wait` (a restart) hands a run's request out again; the consumer gives
the first delivery up (cancels it, `bus.consumer`) when the connection is back. A first delivery that
was between the run's record (`success`) and its `end` then never publishes the `end`, and the second
delivery, which found the run still running here and waited for it, sees a finished record. Whoever
follows the run (a chat's router, an SSE stream) must still see the `end`: the fault suite lost a
chat's answer this way after an external nats-server's SIGTERM. And a first delivery given up
mid-answer keeps its thread until the request comes again, so the chat's next run waits for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, cast

import pytest
from nats.aio.msg import Msg

from agents.checkpoints import checkpointer_ready
from agents.runner.event_log import EventLog
from agents.runner.runner import Runner
from bus import Bus, Delivery
from bus.messages import MultitaskStrategy, RunStatus, ThreadRecord
from bus.records import RecordStore
from bus.runs import collect_run, submit_run
from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply, unfenced
from tests.support.eventually import eventually
from tests.support.runner import ask
from tests.support.runs import streamed_text

pytestmark = pytest.mark.asyncio


def delivery(count: int) -> Delivery:
    # The handler reads only how often and where the request came (it never settles it).
    return Delivery(cast(Msg, None), "runs.submit", {}, count, 1)


async def test_a_run_given_up_between_its_record_and_its_end_still_ends_once(
    bus: Bus,
    fake_model: FakeOpenAI,
    app_config: Callable[[], AppConfig],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake_model.script(Reply(text="Answered before the outage.", delay=0.5))
    request = ask("t-given-up-ending", "hello")
    ending = asyncio.Event()
    emit = EventLog.emit

    async def end_never_stored(self: EventLog, event: str, data: Any = None) -> None:
        if event == "end" and self.attempt == 1:  # the first delivery's `end`: NATS went away with it
            ending.set()
            await asyncio.Event().wait()
        await emit(self, event, data)

    monkeypatch.setattr(EventLog, "emit", end_never_stored)
    config = app_config()
    async with checkpointer_ready(config) as checkpointer:
        runner = await Runner.open(bus, config, checkpointer)
        try:
            first = asyncio.create_task(runner.handle(request, delivery(1)))
            await fake_model.wait_for_requests(1)  # the first delivery runs the run
            with caplog.at_level(logging.WARNING, logger="agents.runner.runner"):
                second = asyncio.create_task(runner.handle(request, delivery(2)))
                while "redelivered while still running here" not in caplog.text:
                    assert not second.done(), "the second delivery did not wait for the first"
                    await asyncio.sleep(0.01)
            await asyncio.wait_for(ending.wait(), 30)  # its record says success; its `end` is not out
            first.cancel()  # given up when the connection came back
            await asyncio.gather(first, return_exceptions=True)
            await asyncio.wait_for(second, 30)
        finally:
            await runner.tools.mcp.close()
            await runner.memory_and_prompt.close()
            await runner.calls.close()

    events = await collect_run(bus, request.run_id, timeout=10)
    assert [e.event for e in events].count("end") == 1
    assert events[-1].event == "end"
    assert events[-1].data["status"] == RunStatus.SUCCESS.value
    assert streamed_text(events) == "Answered before the outage."
    assert len(fake_model.agent_requests) == 1, "the answer was not asked for again"


async def test_a_run_given_up_mid_answer_keeps_its_thread_until_it_comes_again(
    bus: Bus, fake_model: FakeOpenAI, app_config: Callable[[], AppConfig]
) -> None:
    # A chat's run is given up mid-answer (NATS away past ack_wait); the chat's next message, sent
    # meanwhile, must not take the thread and answer first: the fault suite saw a chat's fourth
    # answer come before its third after an external nats-server's restart.
    fake_model.script(
        Reply(text="Third answer.", when="third", delay=0.5),
        Reply(text="Third answer.", when="third"),
        Reply(text="Fourth answer.", when="fourth"),
    )
    third = ask("t-given-up-mid-answer", "third", multitask_strategy=MultitaskStrategy.ENQUEUE)
    fourth = ask(
        "t-given-up-mid-answer", "fourth", multitask_strategy=MultitaskStrategy.ENQUEUE, after=third.run_id
    )
    await submit_run(bus, third)
    await submit_run(bus, fourth)
    config = app_config()
    async with checkpointer_ready(config) as checkpointer:
        runner = await Runner.open(bus, config, checkpointer)
        try:
            first = asyncio.create_task(runner.handle(third, delivery(1)))
            await fake_model.wait_for_requests(1)  # the third message's run is answering
            first.cancel()  # given up when the connection came back
            await asyncio.gather(first, return_exceptions=True)
            nxt = asyncio.create_task(runner.handle(fourth, delivery(1)))
            threads = RecordStore(await bus.kv(bus.subjects.threads_bucket), ThreadRecord)

            async def queued_or_answering() -> bool:
                record = await threads.get(third.thread_id)
                queued = record is not None and any(q.run_id == fourth.run_id for q in record.queue)
                return queued or len(fake_model.agent_requests) > 1

            await eventually(queued_or_answering, "the fourth message's run queued or answering", 30)
            assert not nxt.done(), "the fourth message's run ended without waiting"
            assert len(fake_model.agent_requests) == 1, "the fourth message's run took the thread first"
            again = asyncio.create_task(runner.handle(third, delivery(2)))  # its request comes again
            await asyncio.wait_for(asyncio.gather(again, nxt), 30)
        finally:
            await runner.tools.mcp.close()
            await runner.memory_and_prompt.close()
            await runner.calls.close()

    asked = [unfenced(str(r["messages"][-1]["content"])) for r in fake_model.agent_requests]
    assert asked == ["third", "third", "fourth"], "answered in the order the chat sent them"
    for request, answer in ((third, "Third answer."), (fourth, "Fourth answer.")):
        events = await collect_run(bus, request.run_id, timeout=10)
        assert events[-1].event == "end"
        assert events[-1].data["status"] == RunStatus.SUCCESS.value
        assert streamed_text(events).endswith(answer)
