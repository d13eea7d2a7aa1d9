"""What a `Consumer` says about itself (its lifecycle status and its counts), and the way it stops a
task that may swallow a cancellation."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class ConsumerState(Enum):
    """Where a consumer is in its life; one field, so no two flags can disagree.

    NEW → (start) RUNNING → (stop) STOPPING → STOPPED → (start) RUNNING ...
    """

    NEW = "new"
    RUNNING = "running"
    STOPPING = "stopping"  # no more pulls; in-flight handlers drain, late arrivals wait to be released
    STOPPED = "stopped"


@dataclass
class ConsumerStats:
    acked: int = 0
    retried: int = 0
    dead_lettered: int = 0
    released: int = 0
    abandoned: int = 0
    deferred: int = 0
    in_flight: int = 0
    errors: list[str] = field(default_factory=list)


async def cancel_until_done(task: asyncio.Task[Any]) -> None:
    """Cancel a task, again if something it awaits swallowed the first cancellation, until it ends.

    (A task awaiting another task hands a cancellation on to it; if that one catches it and
    returns normally, the waiting task goes on as if nothing happened.)
    """
    while not task.done():
        task.cancel()
        await asyncio.wait([task], timeout=0.1)
