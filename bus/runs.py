"""Reading a run's event log: every event from the first (or after a given one) until `end`.

Reads the RUN_EVENTS stream with an ordered consumer, so nothing is missed even
when the reader starts late or reconnects: that is what SSE resume, `join` and
chat replies are built on.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from nats.js.api import DeliverPolicy

from bus.connection import Bus
from bus.messages import RunEvent, decode

END = "end"


async def follow_run(
    bus: Bus, run_id: str, *, after_seq: int = 0, timeout: float | None = None
) -> AsyncIterator[RunEvent]:
    """Yield the run's events in order, from `after_seq + 1`, ending after the `end` event.

    Raises:
        TimeoutError: `timeout` seconds passed without the next event.
    """
    queue: asyncio.Queue[RunEvent] = asyncio.Queue()

    async def on_msg(msg: object) -> None:
        queue.put_nowait(decode(RunEvent, msg.data))  # type: ignore[attr-defined]

    sub = await bus.js.subscribe(
        bus.subjects.run_events(run_id),
        ordered_consumer=True,
        deliver_policy=DeliverPolicy.ALL,
        cb=on_msg,
    )
    try:
        while True:
            event = await asyncio.wait_for(queue.get(), timeout)
            if event.seq <= after_seq:
                continue
            yield event
            if event.event == END:
                return
    finally:
        await sub.unsubscribe()


async def collect_run(bus: Bus, run_id: str, *, timeout: float = 30.0) -> list[RunEvent]:
    """All of a run's events up to and including `end`."""
    return [event async for event in follow_run(bus, run_id, timeout=timeout)]
