"""An adapter's health while its platform SDK keeps the connection: unhealthy while it is down.

Slack's Socket Mode client and Feishu's long connection reconnect by themselves when the platform
goes away (or cannot be reached at start), and tell nobody: the adapter would look healthy while
no message can arrive. They offer no event for it either, so `watch_connection` looks at the
connection every few seconds and says the adapter is unhealthy (`bus.health`) while it is down,
healthy once it is up again. (Telegram's polling and DingTalk's stream are the adapters' own
loops, which say so where they poll or connect.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from bus import component_healthy, component_unhealthy

log = logging.getLogger(__name__)

EVERY = 2.0  # seconds between looks: an attribute read each


async def watch_connection(
    name: str, connected: Callable[[], Awaitable[bool]], down: str, every: float = EVERY
) -> None:
    """Until cancelled: unhealthy with `down` while `connected()` is false."""
    was_up = True
    while True:
        await asyncio.sleep(every)  # (a connection being made at start is not down)
        try:
            up = await connected()
        except Exception as exc:  # a client in a state it cannot say: ask again next time
            log.debug("%s: could not tell whether the connection is up: %s", name, exc)
            up = was_up
        if up and not was_up:
            log.info("%s: connected again", name)
            component_healthy()
        elif was_up and not up:
            log.warning("%s: %s", name, down)
            component_unhealthy(down)
        was_up = up
