"""Long polling that confirms an update to Telegram only once the adapter has handled it.

Telegram keeps an update until a `getUpdates` call's offset passes it, and never sends it again
after. python-telegram-bot's `Updater` queues a batch and asks for the next at once, so its offset
confirms updates before any handler ran: an adapter killed meanwhile (or whose bus was away) has
lost them. Here each update is handled — stored on the bus (`channels.delivery.inbound`), or
dead-lettered — before the offset moves past it; an adapter killed before that leaves the update
to the next copy that polls, and the store is deduplicated by the message's id.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from telegram import Update
from telegram.error import RetryAfter, TelegramError
from telegram.ext import Application

log = logging.getLogger("channels.telegram")

POLL_SECONDS = 10  # Telegram holds a `getUpdates` this long when nothing is new
FIRST_PAUSE, LONGEST_PAUSE = 0.5, 30.0  # after a failed poll, or an update that could not be handled

Handle = Callable[[Update], Awaitable[None]]


async def poll(
    app: Application[Any, Any, Any, Any, Any, Any], handle: Handle, allowed_updates: Sequence[str]
) -> None:
    """Poll Telegram and `handle` each update in order, until cancelled. `handle` raising leaves
    that update (and those after it) unconfirmed: it is fetched again after a pause."""
    offset: int | None = None
    pause = FIRST_PAUSE
    try:
        while True:
            try:
                updates = await app.bot.get_updates(
                    offset=offset, timeout=POLL_SECONDS, allowed_updates=list(allowed_updates)
                )
            except RetryAfter as exc:
                await asyncio.sleep(_seconds(exc.retry_after))
                continue
            except TelegramError as exc:  # out of reach, a 5xx, another copy still polling (409)
                log.info("telegram: getUpdates failed (%s); polling again in %.1fs", exc, pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, LONGEST_PAUSE)
                continue
            pause = FIRST_PAUSE
            for update in updates:
                try:
                    await handle(update)
                except Exception:
                    log.exception(
                        "telegram: update %s not handled; it stays with Telegram and is fetched again",
                        update.update_id,
                    )
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, LONGEST_PAUSE)
                    break
                offset = update.update_id + 1
    finally:
        if offset is not None:  # confirm what was handled, so the next copy starts past it
            await asyncio.shield(_confirm(app, offset))


async def _confirm(app: Application[Any, Any, Any, Any, Any, Any], offset: int) -> None:
    with contextlib.suppress(TelegramError, TimeoutError, OSError):
        async with asyncio.timeout(5):
            await app.bot.get_updates(offset=offset, timeout=0)


def _seconds(value: Any) -> float:
    return value.total_seconds() if hasattr(value, "total_seconds") else float(value)
