"""How often a run's model streams pass text up (`llm.streaming`): its pace, set per run.

Light on purpose (no LangChain, no SDK): the runner sets a run's pace before anything is imported
for a model call.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["QUIET_WINDOW", "STREAM_WINDOW", "Pace", "pace_now", "pace_streams"]

# Seconds between the chunks passed on: what arrives within it goes up as one (LangChain message,
# callback, LangGraph stream part, run event). Within the 100 ms in which live readers must see
# new text (docs/performance.md); the run's event log adds no wait beyond it (DELTA_WINDOW). Windows
# end on a grid shared by the process's streams (`bus.ticks`): the answers under way wake together.
STREAM_WINDOW = 0.1
# A run nobody follows live (a chat's: its router reads the stored log) takes its text up at the
# cadence its deltas are stored (`ActiveRun.quiet_window`: at least this), until a reader follows.
QUIET_WINDOW = 0.25


@dataclass
class Pace:
    """How often the model streams of a run pass text up: `window` seconds. One per run, set in its
    task (`pace_streams`); changed while the run streams when a reader starts following it live."""

    window: float = STREAM_WINDOW


_PACE: ContextVar[Pace | None] = ContextVar("antler_stream_pace", default=None)


def pace_streams(pace: Pace) -> None:
    """The model streams started from here on (this task and those it starts) follow `pace`."""
    _PACE.set(pace)


def pace_now() -> Pace | None:
    """The pace of the run this task works for (None: outside a run, the stream's own window)."""
    return _PACE.get()
