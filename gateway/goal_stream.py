"""A run's SSE stream that goes on through its goal continuations (DeerFlow's semantics).

DeerFlow continues a goal inside the run the client streams: its worker judges the turn, adds a
hidden continuation message and runs the graph again, all in one run and one stream. Antler's
runner starts each continuation as a run of its own (listed with the thread's runs; the `end` of
the run before names it in `data.goal.next_run_id`). DeerFlow's web UI follows no other run, so
on its path (`/api/langgraph`) the stream of a run carries on with each continuation's events, as
one run: a continuation's `metadata` event and every `end` but the last are left out. The last
`end` is the one that says how the goal ended (`done`, stopped, ...). Antler's own API (`/api`)
keeps one run per stream: its clients follow `next_run_id` themselves.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable

from bus import Bus
from gateway.sse import START, Resume, stream_events

_END = b"event: end\n"
_METADATA = b"event: metadata\n"


def next_run_of(end_frame: bytes) -> str | None:
    """The continuation run an `end` frame names (`data.goal.next_run_id`), or None."""
    for line in end_frame.decode(errors="replace").splitlines():
        if line.startswith("data: "):
            try:
                data = json.loads(line[len("data: ") :])
            except ValueError:
                return None
            goal = data.get("goal") if isinstance(data, dict) else None
            next_run = goal.get("next_run_id") if isinstance(goal, dict) else None
            return next_run if isinstance(next_run, str) and next_run else None
    return None


async def stream_with_continuations(
    bus: Bus, run_id: str, after: Resume = START, on_run: Callable[[str], None] | None = None
) -> AsyncIterator[bytes]:
    """`stream_events` of `run_id`, then of each goal continuation it starts, ending with the last
    `end`. `on_run` is told each continuation run's id as the stream moves on to it (so that a
    disconnect cancels the run then running). `after` applies to the first run only."""
    current, position = run_id, after
    while True:
        following: str | None = None
        async with contextlib.aclosing(stream_events(bus, current, position)) as frames:
            async for chunk in frames:
                if chunk.startswith(_END):
                    following = next_run_of(chunk)
                    if following is not None:
                        break
                elif current != run_id and chunk.startswith(_METADATA):
                    continue
                yield chunk
        if following is None:
            return
        current, position = following, START
        if on_run is not None:
            on_run(current)
