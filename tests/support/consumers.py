"""A consumer of every inbound chat message (the chat-in stream's partition 0), for tests of the
consumer runtime and of what reaches a chat's stream (bus, CLI)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from bus import Bus, Consumer, Delivery
from bus.messages import InboundMessage


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
