"""A consumer of every inbound chat message (the chat-in stream's partition 0), for tests of the
consumer runtime and of what reaches a chat's stream (bus, CLI); `Texts`, a handler keeping what
it is handed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from bus import Bus, Consumer, Delivery
from bus.messages import InboundMessage


def inbound(text: str = "hi", **kw: Any) -> InboundMessage:
    """A message from chat c1 of the CLI channel (`kw`: other fields)."""
    return InboundMessage(**{"channel": "cli", "chat_id": "c1", "text": text, **kw})


def inbound_consumer(
    bus: Bus,
    handler: Callable[[InboundMessage, Delivery], Awaitable[None]],
    durable: str = "test",
    **options: Any,
) -> Consumer[InboundMessage]:
    """A `Consumer` handing `handler` each inbound message; `options`: the rest of `Consumer`'s."""
    s = bus.subjects
    return Consumer(
        bus,
        stream=s.chat_in_partition_stream(0),
        durable=durable,
        filter_subjects=[s.chat_in_all],
        model=InboundMessage,
        handler=handler,
        **options,
    )


def chat_consumer(
    bus: Bus, handler: Callable[[InboundMessage, Delivery], Awaitable[None]], **kw: Any
) -> Consumer[InboundMessage]:
    """Every inbound message, redelivered quickly after a failure (`kw`: more of `Consumer`'s options)."""
    return inbound_consumer(bus, handler, **{"backoff": (0.05,), "drain_timeout": 5.0, **kw})


class Texts:
    """A handler that keeps the text of each message it is handed, in order."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._more = asyncio.Event()

    async def __call__(self, msg: InboundMessage, delivery: Delivery) -> None:
        self.texts.append(msg.text)
        self._more.set()

    async def until(self, count: int, timeout: float = 10) -> list[str]:
        """The texts, once `count` have come (within `timeout` seconds)."""
        async with asyncio.timeout(timeout):
            while len(self.texts) < count:
                self._more.clear()
                await self._more.wait()
        return self.texts
