"""Following one KV key: a task that hands every new value to a callback, for as long as it runs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)


async def follow_key(
    kv: Any, key: str, on_value: Callable[[bytes], Awaitable[None]], what: str, *, retry: float = 1.0
) -> None:
    """Call `on_value` with each value `key` takes (the current one first); deletions are skipped.

    Never returns on its own: a watch that stops (a lost connection) is started again; a callback
    that fails is logged and the next value still comes. Cancel the task to stop.
    """
    while True:
        watcher = None
        try:
            watcher = await kv.watch(key)
            async for entry in watcher:
                if entry is None or not entry.value:
                    continue
                try:
                    await on_value(entry.value)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning("%s: the new value of %s was not taken: %s", what, key, exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("%s: the watch of %s stopped (%s); starting it again", what, key, exc)
            await asyncio.sleep(retry)
        finally:
            if watcher is not None:
                with contextlib.suppress(Exception):
                    await watcher.stop()
