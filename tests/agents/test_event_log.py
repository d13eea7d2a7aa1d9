"""A run's event log: streamed deltas go out merged, and readers still get every character in order."""

from __future__ import annotations

import asyncio
import math
import uuid
from typing import Any

import pytest

from agents.events import jsonable, merge_deltas
from agents.runner.event_log import DELTA_WINDOW, EventLog
from bus import Bus
from bus.messages import RunEvent, RunRecord, RunStatus
from bus.records import RecordStore
from bus.run_events import run_partition
from bus.runs import collect_run, follow_run

META = {"langgraph_node": "model", "langgraph_step": 1}


def delta(message_id: str, text: str = "", reasoning: str = "") -> list[Any]:
    from langchain_core.messages import AIMessageChunk

    extra = {"reasoning_content": reasoning} if reasoning else {}
    chunk = AIMessageChunk(content=text, id=message_id, additional_kwargs=extra)
    return [jsonable(chunk), dict(META)]


def text_by_message(events: list[RunEvent]) -> dict[str, tuple[str, str]]:
    """(reasoning, answer) per AI message id, as a client concatenating deltas has them."""
    texts: dict[str, tuple[str, str]] = {}
    for event in events:
        if event.event != "messages":
            continue
        chunk = event.data[0]
        reasoning, answer = texts.get(chunk["id"], ("", ""))
        reasoning += chunk.get("additional_kwargs", {}).get("reasoning_content", "")
        answer += chunk["content"]
        texts[chunk["id"]] = (reasoning, answer)
    return texts


async def new_log(bus: Bus) -> EventLog:
    """A run's log, with the record that tells its readers where it is (a reader of a run with no
    record waits a moment for one before looking in its id's partition)."""
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    partition = await run_partition(bus, run_id, None)
    runs = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    record = RunRecord(
        run_id=run_id, thread_id="thread-1", status=RunStatus.RUNNING, events_partition=partition
    )
    await runs.put(run_id, record)
    return EventLog(bus, run_id, "thread-1", attempt=1, partition=partition)


async def test_streamed_deltas_arrive_whole_and_in_order_in_fewer_events(bus: Bus) -> None:
    log = await new_log(bus)
    await log.emit("metadata", {"run_id": log.run_id})
    thoughts = [f"t{i} " for i in range(50)]
    words = [f"w{i} " for i in range(300)]
    for piece in thoughts:
        await log.emit("messages", delta("ai-1", reasoning=piece))
    for piece in words:
        await log.emit("messages", delta("ai-1", text=piece))
    await log.emit("messages", [{"type": "tool", "content": "42", "tool_call_id": "c1", "id": "tool-1"}, {}])
    for piece in words[:40]:
        await log.emit("messages", delta("ai-2", text=piece))
    await log.emit("end", {"status": "success"})

    events = await collect_run(bus, log.run_id, timeout=10)
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), "numbered without gaps"
    assert text_by_message(events) == {
        "ai-1": ("".join(thoughts), "".join(words)),
        "tool-1": ("", "42"),
        "ai-2": ("", "".join(words[:40])),
    }
    kinds = [(e.data[0]["id"], bool(e.data[0]["content"])) for e in events if e.event == "messages"]
    first_answer = kinds.index(("ai-1", True))
    assert all(has_text for _, has_text in kinds[first_answer : kinds.index(("tool-1", True))]), (
        "all of the reasoning comes before the answer"
    )
    assert kinds.index(("tool-1", True)) < kinds.index(("ai-2", True)), "events keep their order"
    assert len(events) < 50, f"{len(events)} events for 392 deltas: they were not merged"
    assert log.published == len(events)


async def test_a_held_delta_reaches_readers_without_waiting_for_another_event(bus: Bus) -> None:
    log = await new_log(bus)
    seen: list[str] = []
    got_both = asyncio.Event()

    async def read() -> None:
        async for event in follow_run(bus, log.run_id, timeout=10):
            if event.event == "messages":
                seen.append(event.data[0]["content"])
                if "".join(seen) == "Hello, world":
                    got_both.set()

    reader = asyncio.create_task(read())
    await log.emit("messages", delta("ai-1", text="Hello"))
    await log.emit("messages", delta("ai-1", text=", world"))  # within the window: held back
    await asyncio.wait_for(got_both.wait(), 10)  # nothing else is emitted: the timer sends it
    await log.emit("end", {"status": "success"})
    await asyncio.wait_for(reader, 10)
    assert "".join(seen) == "Hello, world"


async def test_a_closed_log_sends_nothing_it_held(bus: Bus) -> None:
    log = await new_log(bus)
    await log.emit("messages", delta("ai-1", text="kept"))
    await log.emit("messages", delta("ai-1", text=" dropped"))
    log.close()  # the run is left to another delivery, which streams its messages again
    again = EventLog(bus, log.run_id, log.thread_id, attempt=2, start_seq=log.seq, partition=log.partition)
    await again.emit("end", {"status": "success"})
    events = await collect_run(bus, log.run_id, timeout=10)
    assert [e.data[0]["content"] for e in events if e.event == "messages"] == ["kept"]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(delta("a", text="x"), delta("b", text="y"), id="other-message"),
        pytest.param(delta("a", reasoning="x"), delta("a", text="y"), id="reasoning-then-answer"),
        pytest.param(delta("a", text="x"), [delta("a", text="y")[0], {"langgraph_step": 2}], id="other-meta"),
        pytest.param(
            delta("a", text="x"),
            [
                {**delta("a")[0], "tool_call_chunks": [{"name": "f", "args": "{}", "id": "c", "index": 0}]},
                META,
            ],
            id="tool-call-piece",
        ),
        pytest.param(delta("a", text="x"), [{"type": "ai", "id": "a", "content": "y"}, META], id="whole"),
    ],
)
def test_deltas_that_must_stay_apart_are_not_merged(first: Any, second: Any) -> None:
    assert merge_deltas(first, second) is None


def test_merged_deltas_read_as_the_two_in_a_row() -> None:
    merged = merge_deltas(delta("a", text="Hel"), delta("a", text="lo"))
    assert merged is not None
    assert merged[0]["content"] == "Hello"
    assert merged[0]["id"] == "a"
    assert merged[1] == META


# ---------------------------------------------------------------- live deltas


async def read_live(bus: Bus, run_id: str, **kw: Any) -> list[RunEvent]:
    return [event async for event in follow_run(bus, run_id, timeout=10, live=True, **kw)]


async def reading(bus: Bus, log: EventLog, *, publish: bool = True) -> asyncio.Task[list[RunEvent]]:
    """A live reader of `log`'s run, once it is subscribed: it has read the run's first stored event
    (`metadata`, which this publishes; with `publish` False, one the log stored already)."""
    first = asyncio.Event()

    async def read() -> list[RunEvent]:
        events = []
        async for event in follow_run(bus, log.run_id, timeout=10, live=True):
            events.append(event)
            first.set()
        return events

    task = asyncio.create_task(read())
    if publish:
        await log.emit("metadata", {"run_id": log.run_id})
    await asyncio.wait_for(first.wait(), 10)
    return task


def answer_of(events: list[RunEvent]) -> str:
    return "".join(e.data[0]["content"] for e in events if e.event == "messages")


async def test_text_held_for_the_record_reaches_live_readers_at_once_and_once(bus: Bus) -> None:
    log = await new_log(bus)
    log.delta_window = 60.0  # nothing is stored by the timer: what the reader sees came live
    words = [f"w{i} " for i in range(12)]
    reader = await reading(bus, log)
    seen_live = asyncio.Event()
    got: list[str] = []

    async def watch() -> None:  # a second live reader, to see the text before anything is stored
        async for event in follow_run(bus, log.run_id, timeout=10, live=True):
            if event.event == "metadata":
                watching.set()
            if event.event == "messages":
                got.append(event.data[0]["content"])
                if "".join(got) == "".join(words):
                    seen_live.set()

    watching = asyncio.Event()
    watcher = asyncio.create_task(watch())
    await asyncio.wait_for(watching.wait(), 10)  # subscribed: it has read the stored metadata
    for word in words:
        await log.emit("messages", delta("ai-1", text=word))
    await asyncio.wait_for(seen_live.wait(), 10)
    assert log.published == 2, "only the metadata and the first words were stored; the rest came live"
    assert log.published_live == len(words) - 1
    await log.emit("end", {"status": "success"})
    events = await asyncio.wait_for(reader, 10)
    await asyncio.wait_for(watcher, 10)

    assert answer_of(events) == "".join(words), "every word once, in order"
    assert [e.part for e in events if e.event == "messages"] == [None, *range(len(words) - 1)]
    stored = await collect_run(bus, log.run_id, timeout=10)
    assert answer_of(stored) == "".join(words), "the record alone has the same text"
    assert [e.event for e in stored] == ["metadata", "messages", "messages", "end"]
    assert stored[2].parts is not None
    assert len(stored[2].parts) == len(words) - 1


async def test_a_reader_that_missed_live_parts_gets_them_from_the_record_in_order(bus: Bus) -> None:
    log = await new_log(bus)
    log.delta_window = 60.0
    await log.emit("messages", delta("ai-1", text="Stored at once. "))
    await log.emit("messages", delta("ai-1", text="Missed live. "))  # nobody was listening
    reader = await reading(bus, log, publish=False)  # it has read the first words: subscribed
    await log.emit("messages", delta("ai-1", text="Seen live? "))  # part 1: part 0 never came
    await log.emit("messages", delta("ai-1", text="The end."))
    await log.emit("end", {"status": "success"})
    events = await asyncio.wait_for(reader, 10)
    assert answer_of(events) == "Stored at once. Missed live. Seen live? The end."
    assert all(e.part is None for e in events), "after a missing part, the rest waits for the record"


async def test_a_reader_resuming_after_some_live_parts_gets_only_the_rest(bus: Bus) -> None:
    log = await new_log(bus)
    log.delta_window = 60.0
    for word in ("one ", "two ", "three ", "four ", "five"):
        await log.emit("messages", delta("ai-1", text=word))
    await log.emit("end", {"status": "success"})
    # It had the stored first event (seq 1) and the first two live parts of the next (seq 2).
    events = await read_live(bus, log.run_id, after_seq=1, shown_parts=2)
    assert answer_of(events) == "four five"
    assert [e.event for e in events] == ["messages", "end"]
    everything = await read_live(bus, log.run_id, after_seq=1, shown_parts=4)
    assert [e.event for e in everything] == ["end"], "nothing left of a stored event it had all of"


async def test_a_paced_answer_is_stored_about_four_times_a_second_and_sent_live_as_it_comes(
    bus: Bus,
) -> None:
    log = await new_log(bus)
    reader = await reading(bus, log)
    words = [f"w{i} " for i in range(40)]
    for word in words:  # 40 deltas 30 ms apart: 1.2 s of streaming
        await log.emit("messages", delta("ai-1", text=word))
        await asyncio.sleep(0.03)
    await log.emit("end", {"status": "success"})
    events = await asyncio.wait_for(reader, 10)
    assert answer_of(events) == "".join(words)
    stored = await collect_run(bus, log.run_id, timeout=10)
    assert answer_of(stored) == "".join(words)
    # One stored per DELTA_WINDOW of streaming at most (the windows end on a grid, so the first may
    # be short), the first words and the end besides; a slow loop only makes fewer.
    streamed = sum(1 for e in stored if e.event == "messages")
    assert streamed <= 1 + math.ceil(1.2 / DELTA_WINDOW) + 2, [len(e.parts or []) for e in stored]
    assert log.published_live == len(words) - 1, "every delta after the first words went out live at once"
