"""Reading a run's event log: order by seq, gaps, and readers that join late or past the end."""

from __future__ import annotations

import asyncio

import pytest
from nats.js.errors import NotFoundError

from bus import Bus, decode
from bus.messages import RunEvent, RunRecord, RunRequest, RunStatus
from bus.provision import provision
from bus.records import RecordStore, keys_matching
from bus.run_events import has_unsplit_stream
from bus.runs import follow_run, submit_run
from config import BusConfig
from tests.support.runs import publish_event, record_run
from tests.support.unsplit import earlier_runners_subject, make_unsplit_run_events

pytestmark = pytest.mark.asyncio


async def store(bus: Bus, run_id: str, *seqs: int, end: int | None = None) -> None:
    await record_run(bus, run_id)  # as its submitter would have (kept if it is there)
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


async def test_run_events_from_before_the_split_stay_readable_and_earlier_runners_go_on_during_the_upgrade(
    nats_url: str, bus_config: BusConfig
) -> None:
    """An installation whose run events are in the single RUN_EVENTS of earlier versions is
    provisioned anew: the partition streams are made beside it, a finished run's events are still
    read from it, a run an earlier runner started there and a new runner finishes (a rolling
    upgrade) is read whole and in order from both, and `antler provision` removes the old stream
    once its events have expired."""
    config = bus_config.model_copy(update={"prefix": f"{bus_config.prefix}u"})
    old = await make_unsplit_run_events(nats_url, config)
    s = old.subjects
    runs = RecordStore(await old.kv(s.runs_bucket), RunRecord)
    try:
        # A run finished before the upgrade (its record says no partition).
        await runs.create("before", RunRecord(run_id="before", thread_id="t", status=RunStatus.SUCCESS))
        for seq, name in enumerate(["metadata", "messages", "end"], start=1):
            event = RunEvent(run_id="before", thread_id="t", seq=seq, event=name, data={"n": seq})
            await old.publish(earlier_runners_subject(old, "before", ("cli", "c")), event)
        await provision(old)
        legacy = (await old.js.stream_info(s.unsplit_run_events_stream)).config
        assert legacy.subjects == s.unsplit_run_events, "only what earlier runners publish"
        assert all([await old.js.stream_info(s.run_events_partition_stream(k)) for k in range(4)])
        assert await read(old, "before") == [1, 2, 3]

        # Submitted by an upgraded gateway, started by an earlier runner, resumed by an upgraded one.
        record = await submit_run(old, RunRequest(run_id="during", thread_id="t2", input={"messages": []}))
        assert record is not None
        assert record.events_partition is not None
        first = RunEvent(run_id="during", thread_id="t2", seq=1, event="metadata")
        await old.publish(earlier_runners_subject(old, "during", None), first)
        rest = [
            RunEvent(run_id="during", thread_id="t2", seq=2, event="messages", attempt=2),
            RunEvent(run_id="during", thread_id="t2", seq=3, event="end", attempt=2),
        ]
        for event in rest:
            await old.publish(s.run_events_for("during", None, record.events_partition), event)
        assert await read(old, "during") == [1, 2, 3]

        await provision(old, retire=True)
        assert await has_unsplit_stream(old), "kept while it holds events"
        await old.js.purge_stream(s.unsplit_run_events_stream)  # as its max_age does
        await provision(old, retire=True)
        with pytest.raises(NotFoundError):
            await old.js.stream_info(s.unsplit_run_events_stream)
    finally:
        await old.close()
