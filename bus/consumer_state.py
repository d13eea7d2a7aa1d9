"""What a `Consumer` says about itself: its lifecycle status and its counts."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


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
