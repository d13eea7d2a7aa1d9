"""Windows that end on a process-wide grid, so that concurrent streams do their work together.

A runner streams dozens of answers at once. If each answer's window (the model stream's chunk
window, the event log's stored-delta window) ran from its own last chunk, every answer would wake
the process on its own schedule: each wake-up reads its own socket, publishes its own live delta
and its own stored event, and writes each to the bus in a system call of its own. Ending every
window on a shared grid (multiples of the window, in event-loop time) instead makes the answers
under way wake in the same loop iteration: one wake-up, and their publications leave in one write.

A window still never lasts longer than its length (it may be shorter: the first after a chunk ends
at the next grid point), so a reader sees new text at least as often as before.
"""

from __future__ import annotations

import math


def window_end(since: float, window: float) -> float:
    """The first grid point of `window` seconds strictly after `since` (event-loop time)."""
    return (math.floor(since / window) + 1) * window
