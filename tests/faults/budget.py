"""Sizes and time budgets of the fault scenarios.

40 messages over 10 chats by default, so each scenario stays well under a minute
on two cores; `ANTLER_FAULTS_LONG=1` runs 500 over 50 (an environment variable
rather than a pytest option: an option declared in tests/faults/conftest.py would
be unknown when pytest starts from the repository root).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

LONG = os.environ.get("ANTLER_FAULTS_LONG", "") not in ("", "0")
PREFIX = "faults"
ACK_WAIT = 2.0  # seconds before a dead runner's request goes to another runner
CHUNK_DELAY = 0.05  # seconds between streamed words: a run takes a little time, so faults land mid-run
# After the last answer: long enough for a request redelivered after ACK_WAIT to have run again,
# so a second reply to one message would be counted.
QUIET = ACK_WAIT + 2.0
STOP_TIMEOUT = 60.0  # seconds `antler up` may take to exit after SIGINT


@dataclass(frozen=True)
class Size:
    chats: int
    per_chat: int
    budget: float  # seconds for every answer to arrive, faults included

    @property
    def messages(self) -> int:
        return self.chats * self.per_chat

    @property
    def grace(self) -> float:
        """Seconds an answer still missing at the budget is waited for: one that comes meanwhile is
        late, not lost. As long again: a run stuck behind a lapsed wait (an earlier run's final waits
        at most 30 s, a run whose predecessor never started 60 s) still shows up, with its figure."""
        return self.budget

    @property
    def late_bound(self) -> float:
        """Seconds past the budget an answer may come and the scenario still pass (generous: the
        budget is already some ten times what a run takes under its fault)."""
        return self.budget / 2


SIZE = Size(chats=50, per_chat=10, budget=400.0) if LONG else Size(chats=10, per_chat=4, budget=40.0)
# More than the suite's per-test timeout (pytest-timeout's own marker): a scenario whose answers are
# missing waits its grace past the budget, and must still get to report its counts.
TIMEOUT = pytest.mark.timeout(2400 if LONG else 300)
# Under pytest-xdist (`make test`), the scenarios run one after another on one worker: each keeps
# two cores busy on its own, and two at once would blur their timing.
ONE_AT_A_TIME = pytest.mark.xdist_group("faults")
