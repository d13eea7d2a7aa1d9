"""Keeping a component running: one that fails is started again after a growing pause, and says why.

`antler up` runs many components in one process, so one whose platform or dependency cannot be
reached (at start, or later, once it gives up) must not stop the others. `supervised` runs a
component again each time it raises: after about 1 s, 2 s, 4 s ... up to
`bus.restart_max_delay_seconds` (each pause jittered, so processes that failed together do not
come back in step), and from the first pause again once it has served for a minute. Meanwhile it is
unhealthy with the reason and when it is tried next (`bus.health`), which the gateway's `/health`
and `antler top` show. A failure retrying soon cannot fix (`Misconfigured`: a setting missing, a
credential the platform refused) waits five times the longest pause between tries: the component
stays down and says why while the rest serves, and comes up on its own if the cause was elsewhere
after all.

Each failure is one log line: a warning when something could not be reached (the reason says it
all: no traceback), an error otherwise, with the traceback the first time in a row (a bug's).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any, NoReturn

from bus.errors import Misconfigured, Unreachable
from bus.health import Tracker

log = logging.getLogger(__name__)

STABLE = 60.0  # seconds of serving after which a failure starts the pauses over
MISCONFIGURED_FACTOR = 5  # a failure retrying cannot fix waits this many of the longest pauses


class Kind(Enum):
    UNREACHABLE = "unreachable"  # the network, a platform or a dependency: retrying will do
    MISCONFIGURED = "misconfigured"  # retrying soon cannot help
    FAILED = "failed"  # anything else (a bug, most likely): retried, with its traceback


@dataclass(frozen=True)
class Backoff:
    """The pauses between a failing component's starts."""

    first: float = 1.0
    longest: float = 60.0

    @classmethod
    def from_config(cls, config: Any) -> Backoff:
        bus = getattr(config, "bus", None)
        return cls(
            float(getattr(bus, "restart_delay_seconds", cls.first)),
            float(getattr(bus, "restart_max_delay_seconds", cls.longest)),
        )

    def delay(self, failures: int, kind: Kind) -> float:
        """The pause after the `failures`-th failure in a row, jittered to between half and all of it."""
        if kind is Kind.MISCONFIGURED:
            base = self.longest * MISCONFIGURED_FACTOR
        else:
            base = min(self.longest, self.first * 2 ** min(failures - 1, 30))
        return base * random.uniform(0.5, 1.0)


def _chain(error: BaseException) -> Iterator[BaseException]:
    """The error and what caused it, outermost first."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _where(error: BaseException) -> str | None:
    """The `host[:port]` an error names: httpx's request, aiohttp's connection."""
    try:
        request = getattr(error, "request", None)  # httpx: raises RuntimeError when it has none
    except RuntimeError:
        request = None
    url = getattr(request, "url", None)
    host = getattr(url, "host", None)
    if isinstance(host, str) and host:
        port = getattr(url, "port", None)
        return f"{host}:{port}" if port else host
    host, port = getattr(error, "host", None), getattr(error, "port", None)
    if isinstance(host, str) and host:
        return f"{host}:{port}" if isinstance(port, int) else host
    return None


def _named(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def explain(error: BaseException) -> tuple[str, Kind]:
    """What went wrong, for people, and what kind of failure it is."""
    chain = list(_chain(error))
    for cause in chain:
        if isinstance(cause, Misconfigured):
            return str(cause), Kind.MISCONFIGURED
        if isinstance(cause, Unreachable):
            return str(cause), Kind.UNREACHABLE
    if any(isinstance(cause, OSError) for cause in chain):  # refused, reset, unknown host, timed out
        for cause in chain:
            where = _where(cause)
            if where is not None:
                return f"cannot reach {where}: {_named(cause)}", Kind.UNREACHABLE
        return _named(error), Kind.UNREACHABLE
    return _named(error), Kind.FAILED


async def supervised(
    name: str,
    start: Callable[[], Awaitable[None]],
    tracker: Tracker,
    backoff: Backoff,
) -> NoReturn:
    """Run `start()` until cancelled, starting it again (after a pause) whenever it raises or ends.

    Only cancellation ends this; exceptions that are not `Exception` (SystemExit) pass through.
    """
    in_a_row = 0
    while True:
        try:
            await start()
            error: Exception = RuntimeError("it ended by itself; a component runs until it is stopped")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = exc
        task = asyncio.current_task()
        if task is not None and task.cancelling():  # it swallowed our cancellation on its way out
            raise asyncio.CancelledError
        if tracker.served_for() >= STABLE:
            in_a_row = 0
        in_a_row += 1
        reason, kind = explain(error)
        delay = backoff.delay(in_a_row, kind)
        tracker.set_failed(reason, datetime.now(UTC) + timedelta(seconds=delay))
        pause = f"{delay:.0f}s" if delay >= 1 else f"{delay:.1f}s"
        if kind is Kind.UNREACHABLE:
            log.warning("%s: unhealthy — %s; retrying in %s", name, reason, pause)
        elif kind is Kind.MISCONFIGURED:
            log.error("%s: down — %s; this will not fix itself (trying again in %s)", name, reason, pause)
        else:
            log.error(
                "%s failed: %s; starting it again in %s",
                name,
                reason,
                pause,
                exc_info=error if in_a_row == 1 else None,
            )
        await asyncio.sleep(delay)
