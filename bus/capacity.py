"""Whether a process can take more work now: its event loop keeps up and its memory is in bounds.

A fixed number of handlers per process is wrong both ways for runs that mostly wait on a model:
64 runs streaming at 15 ms a token leave a core idle, while 64 instant ones saturate it. A
consumer given a `Capacity` takes new messages only while the process has room (`admits`): its
event loop runs its timers on time (a loop that is late is a process short of CPU), and its
resident memory is under a bound. What it does not take waits in the stream, in order, for this
process or another; a work queue's messages are not delivered until asked for, so waiting there
costs no redelivery and no timeout.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

log = logging.getLogger(__name__)

TICK = 0.05  # seconds between the loop's timer checks
SMOOTHING = 0.3  # weight of the newest lateness in the running figure
MEMORY_EVERY = 20  # ticks between reads of the resident memory (a second)


def _resident_mb() -> float:
    """This process's resident memory, MB (`/proc/self/statm`; 0 where there is none)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def default_memory_mb(processes: int) -> float:
    """An equal share, among `processes`, of half the machine's memory."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        return float("inf")
    return total / 2 / max(1, processes)


class Capacity:
    """Room for more work in this process, judged by event-loop lateness and resident memory.

    Args:
        max_lag: seconds the loop may run its timers late (smoothed) and still take more.
        max_memory_mb: resident memory beyond which nothing more is taken.
    """

    def __init__(self, max_lag: float, max_memory_mb: float) -> None:
        self.max_lag = max_lag
        self.max_memory_mb = max_memory_mb
        self.lag = 0.0  # seconds, smoothed
        self.memory_mb = _resident_mb()
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._ticks = 0
        self._refused = False  # someone was told no since the last tick
        self._listeners: list[Callable[[], None]] = []

    def listen(self, room: Callable[[], None]) -> None:
        """Call `room()` whenever the process has room again after it had none."""
        self._listeners.append(room)

    def start(self) -> None:
        if self._handle is not None:
            return  # shared by several consumers: one timer
        loop = asyncio.get_running_loop()
        self._due = loop.time() + TICK
        self._handle = loop.call_at(self._due, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def has_room(self) -> bool:
        """Whether the loop keeps up and the memory is in bounds."""
        return self.lag < self.max_lag and self.memory_mb < self.max_memory_mb

    def admits(self) -> bool:
        """Whether the process may start one more piece of work now (a no is remembered: the
        listeners hear when there is room again)."""
        if self.has_room():
            return True
        self._refused = True
        return False

    def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        late = max(0.0, now - self._due)
        self.lag += SMOOTHING * (late - self.lag)
        self._ticks += 1
        if self._ticks % MEMORY_EVERY == 0:
            self.memory_mb = _resident_mb()
        self._due = now + TICK
        self._handle = loop.call_at(self._due, self._tick)
        if self._refused and self.has_room():
            self._refused = False
            for room in self._listeners:
                try:
                    room()
                except Exception:  # a listener's failure must not stop the timer
                    log.exception("capacity listener failed")
