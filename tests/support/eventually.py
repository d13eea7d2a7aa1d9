"""Waiting for what other processes do, with a deadline that bounds a failure and times nothing."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any


async def eventually(check: Callable[[], Any], what: str, timeout: float = 90.0) -> Any:
    """`check()`'s first truthy answer (awaited when it is awaitable), polled every 0.1 s; an
    AssertionError naming `what` once `timeout` passes without one."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if inspect.isawaitable(found):
            found = await found
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        await asyncio.sleep(0.1)
