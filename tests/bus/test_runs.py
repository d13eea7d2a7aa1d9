"""Reading a run's event log: order by seq, gaps, and readers that join late or past the end."""

from __future__ import annotations

import asyncio

import pytest

from bus import Bus, decode
from bus.messages import RunEvent, RunRecord, RunRequest, RunStatus
from bus.records import RecordStore, keys_matching
from bus.runs import follow_run, submit_run
from tests.support.runs import publish_event

pytestmark = pytest.mark.asyncio


async def store(bus: Bus, run_id: str, *seqs: int, end: int | None = None) -> None:
    for seq in seqs:
        event = "end" if seq == end else "messages"
        await publish_event(
            bus, RunEvent(run_id=run_id, thread_id="t", seq=seq, event=event, data={"n": seq})
        )


async def read(bus: Bus, run_id: str, after_seq: int = 0) -> list[int]:
    return [e.seq async for e in follow_run(bus, run_id, after_seq=after_seq, timeout=10)]


async def test_an_event_stored_late_after_a_restart_is_read_in_its_place(bus: Bus) -> None:
    await store(bus, "r1", 1, 2, 4, 5, 3, 6, end=6)
    assert await read(bus, "r1") == [1, 2, 3, 4, 5, 6]


async def test_a_gap_that_never_fills_is_skipped_not_waited_on_forever(bus: Bus) -> None:
    await store(bus, "r2", 1, 3, 4)
    reader = asyncio.create_task(read(bus, "r2"))
    await store(bus, "r2", 5, end=5)
    assert await asyncio.wait_for(reader, 10) == [1, 3, 4, 5]


async def test_a_reader_past_the_end_of_a_finished_run_gets_nothing_and_returns(bus: Bus) -> None:
    await store(bus, "r3", 1, 2, 3, end=3)
    assert await read(bus, "r3", after_seq=3) == []
    assert await read(bus, "r3", after_seq=7) == []
    assert await read(bus, "r3", after_seq=2) == [3]


def chat_run(run_id: str) -> RunRequest:
    return RunRequest(run_id=run_id, thread_id="t1", input={"messages": [{"role": "user", "content": "hi"}]})


async def submitted_requests(bus: Bus) -> list[str]:
    info = await bus.js.stream_info(bus.subjects.runs_stream)
    return [
        decode(RunRequest, (await bus.js.get_msg(bus.subjects.runs_stream, seq)).data or b"").run_id
        for seq in range(info.state.first_seq, info.state.last_seq + 1)
        if info.state.messages
    ]


async def test_a_message_turned_into_a_run_twice_submits_it_once(bus: Bus) -> None:
    assert await submit_run(bus, chat_run("run-a")) is not None
    assert await submit_run(bus, chat_run("run-a")) is not None  # still pending: the server drops the copy
    assert await submitted_requests(bus) == ["run-a"]
    index = await keys_matching(bus.js, bus.subjects.thread_runs_bucket, "t1.>")
    assert len(index) == 1, "listed once with its thread"


async def test_a_run_recorded_but_never_published_is_published_when_its_message_comes_again(
    bus: Bus,
) -> None:
    # The submitter died between recording the run and publishing its request.
    store = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    await store.create("run-b", RunRecord.pending(chat_run("run-b")))
    assert await submit_run(bus, chat_run("run-b")) is not None
    assert await submitted_requests(bus) == ["run-b"]


async def test_a_run_under_way_is_not_submitted_again(bus: Bus) -> None:
    store = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    running = RunRecord.pending(chat_run("run-c")).model_copy(update={"status": RunStatus.RUNNING})
    await store.create("run-c", running)
    assert await submit_run(bus, chat_run("run-c")) is None
    assert await submitted_requests(bus) == []
