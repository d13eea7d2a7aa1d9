"""Reading a run's event log: order by seq, gaps, and readers that join late or past the end."""

from __future__ import annotations

import asyncio

import pytest

from bus import Bus
from bus.messages import RunEvent
from bus.runs import follow_run

pytestmark = pytest.mark.asyncio


async def store(bus: Bus, run_id: str, *seqs: int, end: int | None = None) -> None:
    for seq in seqs:
        event = "end" if seq == end else "messages"
        await bus.publish(
            bus.subjects.run_events(run_id),
            RunEvent(run_id=run_id, thread_id="t", seq=seq, event=event, data={"n": seq}),
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
