"""Run events as Server-Sent Events, the way LangGraph SDK clients parse them.

The bridge reads the run's event log (not a live feed), so a client that
reconnects with `Last-Event-ID` gets exactly the events it missed. Event ids
are `<ms>-<seq>`; a `: heartbeat` comment goes out every few seconds of quiet.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from bus import Bus
from bus.messages import RunEvent
from bus.runs import follow_run

HEARTBEAT_SECONDS = 5.0


def event_id(event: RunEvent) -> str:
    return f"{int(event.ts.timestamp() * 1000)}-{event.seq}"


def seq_of(last_event_id: str | None) -> int:
    """The sequence number a `Last-Event-ID` names (`-1`, empty or garbage: from the start)."""
    if not last_event_id or last_event_id == "-1":
        return 0
    try:
        return int(last_event_id.rsplit("-", 1)[-1])
    except ValueError:
        return 0


def frame(event: str, data: Any, id_: str | None = None) -> bytes:
    lines = [f"event: {event}"]
    if id_ is not None:
        lines.append(f"id: {id_}")
    lines.append("data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str))
    return ("\n".join(lines) + "\n\n").encode()


async def stream_events(bus: Bus, run_id: str, after_seq: int = 0) -> AsyncIterator[bytes]:
    """SSE frames of a run's events after `after_seq`, heartbeats in between, until `end`."""
    queue: asyncio.Queue[RunEvent | None] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for event in follow_run(bus, run_id, after_seq=after_seq):
                queue.put_nowait(event)
        finally:
            queue.put_nowait(None)

    task = asyncio.create_task(pump())
    try:
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), HEARTBEAT_SECONDS)
            except TimeoutError:
                yield b": heartbeat\n\n"
                continue
            if event is None:
                if task.done() and task.exception() is not None:
                    yield frame("error", {"error": "StreamError", "message": str(task.exception())})
                return
            yield frame(event.event, event.data, event_id(event))
    finally:
        task.cancel()
