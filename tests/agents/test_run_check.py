"""Malformed runs published straight on the bus (a script, another producer) end as failed runs:
an `error` event naming the field, `end` with status error, the run's record in error, and the
model never called. None of them ends `success` with an empty turn, and the thread still works.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any

import pytest

from bus import Bus
from bus.messages import RunEvent, RunRecord, RunStatus
from bus.records import RecordStore, keys_matching
from bus.runs import collect_run
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.bad_runs import EMPTY_THREAD, MALFORMED, UNKNOWN_ASSISTANT
from tests.support.runner import ask, submit_and_collect

pytestmark = pytest.mark.asyncio


async def publish_raw(bus: Bus, thread_id: str, body: dict[str, Any]) -> str:
    """A RunRequest as a script writes it: JSON, no pending record, no gateway in between."""
    run_id = str(uuid.uuid4())
    payload = {"run_id": run_id, "thread_id": thread_id, "user_id": "ana", **body}
    await bus.publish(bus.subjects.runs_submit, json.dumps(payload).encode(), msg_id=run_id)
    return run_id


def how_it_ended(case_id: str, field: str, events: list[RunEvent], record: RunRecord | None) -> str | None:
    """None if the run failed as it must: an `error` naming the field, `end` in error, its record too."""
    errors = [e.data for e in events if e.event == "error"]
    named = re.compile(rf"(^|: ){re.escape(field)}[.:]")  # the field, or one of its own
    if not errors or not named.search(errors[0].get("message", "")):
        return f"{case_id}: error events {errors}"
    if events[-1].event != "end" or events[-1].data.get("status") != "error":
        return f"{case_id}: ended {events[-1].event} {events[-1].data}"
    if record is None or record.status != RunStatus.ERROR:
        return f"{case_id}: record {record and record.status}"
    return None


async def failures(bus: Bus, thread_id: str, cases: list[Any]) -> list[str]:
    runs = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    published = [(case.id, *case.values, await publish_raw(bus, thread_id, case.values[0])) for case in cases]
    ended = await asyncio.gather(*(collect_run(bus, run_id, timeout=60) for *_, run_id in published))
    wrong = []
    for (case_id, _body, field, run_id), events in zip(published, ended, strict=True):
        problem = how_it_ended(case_id, field, events, await runs.get(run_id))
        if problem:
            wrong.append(problem)
    return wrong


async def test_malformed_runs_published_directly_end_as_failed_runs_naming_the_field(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    fake_model.script(Reply(text="First answer."))
    await submit_and_collect(bus, ask("t-bad-runs", "hello", user_id="ana"))
    calls = len(fake_model.agent_requests)

    assert await failures(bus, "t-bad-runs", [*MALFORMED, UNKNOWN_ASSISTANT]) == []
    assert len(fake_model.agent_requests) == calls, "no malformed run reached the model"

    fake_model.script(Reply(text="Still here."))
    events = await submit_and_collect(bus, ask("t-bad-runs", "still there?", user_id="ana"))
    assert events[-1].data["status"] == "success", "the thread still takes good runs"
    assert [e.data for e in events if e.event == "values"][-1]["title"] == "Chat about hello"


async def test_runs_with_nothing_to_answer_on_a_new_thread_end_as_failed_runs(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    assert await failures(bus, "t-bad-empty", EMPTY_THREAD) == []
    assert fake_model.agent_requests == []


async def test_a_request_whose_command_is_no_command_is_dead_lettered_with_the_field(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    """Not a RunRequest at all: dead-lettered at once with its reason, and its run still ends failed."""
    dead: asyncio.Queue[Any] = asyncio.Queue()

    async def on_dlq(msg: Any) -> None:
        dead.put_nowait(msg)

    await bus.nc.subscribe(bus.subjects.dlq_all, cb=on_dlq)
    run_id = await publish_raw(bus, "t-bad-dlq", {"command": {"goto": {"input": {}}}})
    events = await collect_run(bus, run_id, timeout=30)
    runs = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    assert how_it_ended("goto-without-node", "command.goto", events, await runs.get(run_id)) is None
    letter = await asyncio.wait_for(dead.get(), 30)
    assert letter.headers["Antler-Dlq-Reason"].startswith("bad input: invalid RunRequest: command.goto:")
    assert letter.headers["Antler-Dlq-Deliveries"] == "1", "refused at once, never retried"
    listed = await keys_matching(bus.js, bus.subjects.thread_runs_bucket, "t-bad-dlq.>")
    assert [key.rsplit(".", 1)[1] for key in listed] == [run_id], "the failed run is listed with its thread"
