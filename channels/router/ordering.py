"""Where a chat run's replies go and in which order its thread's finals go out, as this router
process submitted the runs.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import time

from bus.messages import ChatOrigin

log = logging.getLogger(__name__)

FINAL_ORDER_WAIT = 30.0  # seconds a final waits for the finals of its thread's earlier runs
FINISHED_KEPT = 10_000  # runs whose final went out, remembered so their late events send nothing


class RecentOrigins:
    """The chats of the runs this router process submitted lately, by run id: its projection finds
    where to reply without reading the run's record (a bus round trip per run)."""

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._origins: dict[str, ChatOrigin] = {}

    def remember(self, run_id: str, origin: ChatOrigin) -> None:
        self._origins[run_id] = origin
        while len(self._origins) > self.size:  # the oldest go first
            self._origins.pop(next(iter(self._origins)))

    def pop(self, run_id: str) -> ChatOrigin | None:
        return self._origins.pop(run_id, None)


class FinalsInOrder:
    """The final replies of one thread's runs go out in the order this router submitted the runs.

    A thread's runs run one after another, but the runner frees the thread just before it
    publishes the run's `end`: on a stalled machine the next run's `end` could be stored first. Its
    final is deferred (the message given back for a moment, so the thread's later events, the
    earlier `end` among them, go on) until the finals of the thread's earlier runs from here are
    out, for at most `wait` seconds in case an earlier run's end never comes.
    """

    def __init__(self, wait: float = FINAL_ORDER_WAIT, size: int = 100) -> None:
        self.wait = wait
        self.size = size  # runs remembered per thread
        self._runs: dict[str, list[str]] = {}  # thread id -> runs submitted here, final not yet sent
        self._asked: dict[str, float] = {}  # run id -> when its final stops waiting (time.monotonic)
        # Runs whose final went out from here lately: a chat taken over names its last run as due
        # (`partitions.continue_chat`) while that run's `end` may already have come and gone.
        self._out: collections.OrderedDict[str, None] = collections.OrderedDict()

    def submitted(self, thread_id: str, run_id: str) -> None:
        if run_id in self._out:
            return
        runs = self._runs.setdefault(thread_id, [])
        if run_id not in runs:
            runs.append(run_id)
            del runs[: -self.size]

    def must_wait(self, thread_id: str, run_id: str) -> bool:
        """Whether an earlier run of the thread submitted here still has no final (for at most
        `wait` seconds from the first time this run asked)."""
        runs = self._runs.get(thread_id)
        if not runs or run_id not in runs or runs[0] == run_id:
            self._asked.pop(run_id, None)
            return False
        now = time.monotonic()
        deadline = self._asked.setdefault(run_id, now + self.wait)
        if now < deadline:
            return True
        log.warning("run %s: its final goes out before run %s's, which has not ended", run_id, runs[0])
        self._asked.pop(run_id, None)
        # Given up on: the thread's later finals must not each wait as long again for the same runs.
        del runs[: runs.index(run_id)]
        return False

    def sent(self, thread_id: str, run_id: str) -> None:
        self._out[run_id] = None
        while len(self._out) > FINISHED_KEPT:
            self._out.popitem(last=False)
        runs = self._runs.get(thread_id)
        if runs is None:
            return
        with contextlib.suppress(ValueError):
            runs.remove(run_id)
        if not runs:
            del self._runs[thread_id]
