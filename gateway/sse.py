"""Run events as Server-Sent Events, the way LangGraph SDK clients parse them.

The bridge reads the run's event log (not a live feed), so a client that
reconnects with `Last-Event-ID` gets exactly the events it missed. Event ids
are `<ms>-<seq>`; a `: heartbeat` comment goes out every few seconds of quiet.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

from bus import Bus
from bus.messages import RunEvent, RunEventName
from bus.runs import follow_run

HEARTBEAT_SECONDS = 5.0


def event_id(event: RunEvent) -> str:
    return f"{int(event.ts.timestamp() * 1000)}-{event.seq}"


_EVENT_ID = re.compile(r"[0-9]{1,20}-([0-9]{1,20})")


class InvalidLastEventId(ValueError):
    """A `Last-Event-ID` that is neither `-1` nor one of our `<ms>-<seq>` event ids."""

    def __init__(self, value: str) -> None:
        super().__init__(
            f"Last-Event-ID {value[:80]!r} is not an event id of this stream: send the `id` of the last "
            "event you received (`<ms>-<seq>`), or -1 (or no header) for the whole stream"
        )
        self.value = value


def seq_of(last_event_id: str | None) -> int:
    """The sequence number a `Last-Event-ID` names; 0 (the whole stream) for none, empty or `-1`.

    Raises:
        InvalidLastEventId: anything else that is not `<ms>-<seq>`. Replaying everything for a
            garbled id would hand the client events it already has, twice.
    """
    value = (last_event_id or "").strip()
    if value in ("", "-1"):
        return 0
    match = _EVENT_ID.fullmatch(value)
    if match is None:
        raise InvalidLastEventId(value)
    return int(match.group(1))


def frame(event: str, data: Any, id_: str | None = None) -> bytes:
    lines = [f"event: {event}"]
    if id_ is not None:
        lines.append(f"id: {id_}")
    lines.append("data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str))
    return ("\n".join(lines) + "\n\n").encode()


async def stream_events(bus: Bus, run_id: str, after_seq: int = 0) -> AsyncIterator[bytes]:
    """SSE frames of a run's events after `after_seq`, heartbeats in between, until `end`.

    The log is read from its start even when resuming, so that an `end` at or before `after_seq`
    (a client that already saw the whole run, or names an id past it) closes the stream at once
    instead of waiting for an event that will never come.
    """
    queue: asyncio.Queue[RunEvent | None] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for event in follow_run(bus, run_id):
                if event.seq > after_seq:
                    queue.put_nowait(event)
                elif event.event == RunEventName.END:
                    return
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
