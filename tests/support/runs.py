"""Reading a run's events as a client would, and every event its log holds."""

from __future__ import annotations

import asyncio
from typing import Any

from nats.js.api import DeliverPolicy

from bus import Bus, decode
from bus.messages import RunEvent, RunRecord
from bus.records import RecordStore
from bus.run_events import events_streams, run_partition


async def run_events_place(bus: Bus, run_id: str, chat: tuple[str, str] | None = None) -> tuple[str, str]:
    """(subject, stream) of a run's events when nothing decided their partition (a run with no
    record): where a runner publishes them and readers look."""
    partition = await run_partition(bus, run_id, chat)
    return bus.subjects.run_events_for(run_id, chat, partition), bus.subjects.run_events_partition_stream(
        partition
    )


async def publish_event(bus: Bus, event: RunEvent, chat: tuple[str, str] | None = None, **kw: Any) -> None:
    """Store a run's event where its runner would (a run with no record: its chat's partition, else
    its id's)."""
    partition = await run_partition(bus, event.run_id, chat)
    await bus.publish(bus.subjects.run_events_for(event.run_id, chat, partition), event, **kw)


async def record_run(
    bus: Bus, run_id: str, thread_id: str = "t", chat: tuple[str, str] | None = None
) -> None:
    """The run's record as a submitter makes it (its events' partition included), for a test that
    publishes the run's events itself: readers find them at once."""
    record = RunRecord(
        run_id=run_id, thread_id=thread_id, events_partition=await run_partition(bus, run_id, chat)
    )
    await RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord).create(run_id, record)


def streamed_text(events: list[RunEvent], message_id: str | None = None) -> str:
    text = ""
    for e in events:
        if e.event == "messages":
            chunk = e.data[0]
            if chunk["type"] == "AIMessageChunk" and (message_id is None or chunk["id"] == message_id):
                text += chunk["content"] if isinstance(chunk["content"], str) else ""
    return text


async def stored_events(bus: Bus, run_id: str) -> list[RunEvent]:
    """Every event stored for the run, in stream order: also any after its first `end`, which
    readers of the run (`bus.runs.follow_run`) never get to see."""
    s = bus.subjects
    events: list[RunEvent] = []
    for stream in await events_streams(bus, run_id):
        info = await bus.js.stream_info(stream, subjects_filter=s.run_events(run_id))
        count = sum((info.state.subjects or {}).values())
        seen: asyncio.Queue[RunEvent] = asyncio.Queue()

        async def on_msg(msg: Any, seen: asyncio.Queue[RunEvent] = seen) -> None:
            seen.put_nowait(decode(RunEvent, msg.data))

        sub = await bus.js.subscribe(
            s.run_events(run_id),
            stream=stream,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.ALL,
            cb=on_msg,
        )
        try:
            events += [await asyncio.wait_for(seen.get(), 10) for _ in range(count)]
        finally:
            await sub.unsubscribe()
    return events
