"""The durable consumer of an adapter's replies (`<prefix>.chat.out.<channel>`): each chat's
replies in order, chats side by side."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bus import Bus, Consumer, Delivery
from bus.messages import OutboundMessage

REPLY_CONCURRENCY = 16  # replies being sent at once (a reply waiting out a rate limit holds none)
REPLY_ACK_PENDING = 1000  # replies taken off the bus and not done yet, waiting ones included


def reply_key(out: OutboundMessage) -> str:
    """Which replies are handled one after another: a chat's, in the order sent (a platform limits
    each chat). A partial answer only replaces the newest text kept in memory (shown by a task of
    its own), so keeping it in its chat's turn costs nothing, and a partial that came after its
    run's final answer is seen after it and dropped (keyed apart, it could be shown first)."""
    return f"chat:{out.chat_id}"


def reply_consumer(
    bus: Bus, channel: str, handler: Callable[[OutboundMessage, Delivery], Awaitable[None]]
) -> Consumer[OutboundMessage]:
    """The durable consumer of `<prefix>.chat.out.<channel>`: each chat's replies in order, chats
    side by side, so a chat waiting out its rate limit holds no other chat (`reply_key`)."""
    s = bus.subjects
    return Consumer(
        bus,
        stream=s.chat_out_stream,
        durable=channel,
        filter_subjects=[s.chat_out(channel)],
        model=OutboundMessage,
        handler=handler,
        key=reply_key,
        concurrency=REPLY_CONCURRENCY,
        max_ack_pending=REPLY_ACK_PENDING,
    )
