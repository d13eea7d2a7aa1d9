"""Run events as Server-Sent Events, the way LangGraph SDK clients parse them.

The bridge reads the run's event log, so a client that reconnects with
`Last-Event-ID` gets exactly the events it missed, and the run's live text
(`bus.runs.follow_run(live=True)`) as it comes. Event ids are `<ms>-<seq>` for
a stored event and `<ms>-<seq>.<part>` for a live delta (the `part`-th of the
text the stored event `seq` will bring): a client resuming after one gets
only the rest of that text. A `: heartbeat` comment goes out every few seconds
of quiet.

Events the log no longer holds (kept `bus.run_events_max_age_hours`) are
announced with an id-less `gap` event (DeerFlow's `stream_replay_gap`: reload
the thread's state) before what is still there; a finished run whose events
are all gone gets its `gap`, then an `end` from its record: never a stream
that waits forever.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator
from typing import Any, NamedTuple

from nats.js.errors import NotFoundError

from bus import Bus, decode
from bus.messages import RunEvent, RunRecord
from bus.records import RecordStore
from bus.run_events import events_streams
from bus.runs import follow_run_with_keepalives

HEARTBEAT_SECONDS = 5.0


class Resume(NamedTuple):
    """Where a stream resumes: after the stored event `seq`, with the first `parts` live deltas of
    the next one already shown."""

    seq: int = 0
    parts: int = 0


START = Resume()  # the whole stream


def event_id(event: RunEvent) -> str:
    ms = int(event.ts.timestamp() * 1000)
    return f"{ms}-{event.seq}" if event.part is None else f"{ms}-{event.seq}.{event.part}"


_EVENT_ID = re.compile(r"[0-9]{1,20}-([0-9]{1,20})(?:\.([0-9]{1,9}))?")


class InvalidLastEventId(ValueError):
    """A `Last-Event-ID` that is neither `-1` nor one of our event ids."""

    def __init__(self, value: str) -> None:
        super().__init__(
            f"Last-Event-ID {value[:80]!r} is not an event id of this stream: send the `id` of the last "
            "event you received (`<ms>-<seq>` or `<ms>-<seq>.<part>`), or -1 (or no header) for the "
            "whole stream"
        )
        self.value = value


def seq_of(last_event_id: str | None) -> Resume:
    """Where a `Last-Event-ID` resumes; the whole stream for none, empty or `-1`.

    Raises:
        InvalidLastEventId: anything else that is not one of our ids. Replaying everything for a
            garbled id would hand the client events it already has, twice.
    """
    value = (last_event_id or "").strip()
    if value in ("", "-1"):
        return START
    match = _EVENT_ID.fullmatch(value)
    if match is None:
        raise InvalidLastEventId(value)
    seq, part = int(match.group(1)), match.group(2)
    return Resume(seq) if part is None else Resume(max(seq - 1, 0), int(part) + 1)


def frame(event: str, data: Any, id_: str | None = None) -> bytes:
    lines = [f"event: {event}"]
    if id_ is not None:
        lines.append(f"id: {id_}")
    lines.append("data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str))
    return ("\n".join(lines) + "\n\n").encode()


async def _kept(bus: Bus, run_id: str, newest: bool = False) -> RunEvent | None:
    """The oldest (or newest) event of the run the log still holds."""
    s = bus.subjects
    kept = []
    for stream in await events_streams(bus, run_id):  # its partition's (and the unsplit one's, in an upgrade)
        try:
            if newest:
                raw = await bus.js.get_last_msg(stream, s.run_events(run_id))
            else:
                raw = await bus.js.get_msg(stream, seq=1, subject=s.run_events(run_id), next=True)
        except NotFoundError:
            continue
        kept.append(decode(RunEvent, raw.data or b"{}"))
    if not kept:
        return None
    return max(kept, key=lambda e: e.seq) if newest else min(kept, key=lambda e: e.seq)


async def _gap(bus: Bus, run_id: str, after_seq: int, oldest: RunEvent | None) -> bytes:
    newest = await _kept(bus, run_id, newest=True) if oldest is not None else None
    return frame(
        "gap",
        {
            "code": "stream_replay_gap",
            "run_id": run_id,
            "requested_after_seq": after_seq,
            "earliest_available_event_id": event_id(oldest) if oldest else None,
            "latest_available_event_id": event_id(newest) if newest else None,
            "recovery": "reload_durable_state",
        },
    )


async def stream_events(bus: Bus, run_id: str, after: Resume = START) -> AsyncGenerator[bytes, None]:
    """SSE frames of a run's events after `after`, live text as it comes, heartbeats in between,
    until `end`.

    The log is read from its start even when resuming, so that an `end` at or before `after`
    (a client that already saw the whole run, or names an id past it) closes the stream at once
    instead of waiting for an event that will never come.
    """
    oldest = await _kept(bus, run_id)
    if oldest is None:
        record = await RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord).get(run_id)
        if record is not None and record.status.finished and record.started_at is not None:
            yield await _gap(bus, run_id, after.seq, None)  # it ran, and its events are gone
            yield frame("end", {"status": record.status.value, "usage": record.usage.model_dump()})
            return
    elif oldest.seq > after.seq + 1:
        yield await _gap(bus, run_id, after.seq, oldest)  # some of what the client asks for is gone
    events = follow_run_with_keepalives(
        bus, run_id, HEARTBEAT_SECONDS, after_seq=after.seq, live=True, shown_parts=after.parts
    )
    try:
        async for event in events:
            if event is None:
                yield b": heartbeat\n\n"
            else:
                yield frame(event.event, event.data, event_id(event))
    except Exception as exc:  # the log could not be read: the client hears why instead of a silent end
        yield frame("error", {"error": "StreamError", "message": str(exc)})
    finally:
        await events.aclose()
