"""Stopping a background task for sure, on Python 3.11.

Python 3.11's `asyncio.wait_for` returns a result that arrives together with a cancellation and
drops the cancellation (python/cpython#86296, fixed in 3.12). nats-py wraps every request in it, so
a worker loop cancelled while one of its requests is answered goes on as if nothing happened, and
whoever awaits it after `cancel()` waits forever (a component's shutdown hung this way under load).
`cancel_and_wait` cancels again until the task has ended, and our own code waits with `wait_for`
here, built on `asyncio.timeout`, which never drops a cancellation (ruff bans `asyncio.wait_for`
outside the tests).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


async def wait_for(awaitable: Awaitable[T], timeout: float | None) -> T:
    """`asyncio.wait_for` without 3.11's lost cancellation: `awaitable`'s result, or TimeoutError
    after `timeout` seconds (None: no limit), with `awaitable` cancelled. A cancellation of the
    caller that comes as `awaitable` finishes still cancels the caller."""
    async with asyncio.timeout(timeout):
        return await awaitable


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None, every: float = 1.0) -> None:
    """Cancel `tasks` (None and finished ones are skipped) and return once each has ended; a task
    still running `every` seconds later is cancelled again. Their results and errors are dropped."""
    pending = {task for task in tasks if task is not None and not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=every)
    for ended in tasks:
        if ended is not None and ended.done() and not ended.cancelled():
            ended.exception()  # retrieved: no "exception was never retrieved" at exit


async def until_cancelled() -> None:
    """Wait until the current task is cancelled: a component's "serve until stopped". A cancellation
    that came while it was starting and that a nats-py request dropped (above) counts: it raises at
    once instead of waiting forever for a second one (a SIGTERM during a component's start took the
    drain's whole timeout this way)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
    await asyncio.Future()
