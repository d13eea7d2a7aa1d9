"""Reading a run's events as a client would, and every event its log holds."""

from __future__ import annotations

import asyncio
from typing import Any

from nats.js.api import DeliverPolicy

from bus import Bus, decode
from bus.messages import RunEvent


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
    info = await bus.js.stream_info(s.run_events_stream, subjects_filter=s.run_events(run_id))
    count = sum((info.state.subjects or {}).values())
    seen: asyncio.Queue[RunEvent] = asyncio.Queue()

    async def on_msg(msg: Any) -> None:
        seen.put_nowait(decode(RunEvent, msg.data))

    sub = await bus.js.subscribe(
        s.run_events(run_id), ordered_consumer=True, deliver_policy=DeliverPolicy.ALL, cb=on_msg
    )
    try:
        return [await asyncio.wait_for(seen.get(), 10) for _ in range(count)]
    finally:
        await sub.unsubscribe()
