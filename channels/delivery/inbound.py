"""Storing what a chat platform sent, patiently while the bus is briefly away.

Most platforms do not send a message again once the adapter has taken it: Telegram's next
`getUpdates` offset confirms what the library fetched before its handlers ran, Discord's gateway
and Matrix's sync token move on, a webhook answered 200 is done. A store that fails there loses
the message. NATS away for seconds — a node restarted, a stream's leader being elected, the
connection reconnecting — is ridden out here: the store is tried again with growing pauses for up
to `PATIENCE` seconds, one warning logged, before the error reaches the adapter. The server
deduplicates by the message's id, so a store that did land before its acknowledgement was lost is
not stored twice.
"""

from __future__ import annotations

import asyncio
import logging
import time

from nats.errors import (
    ConnectionReconnectingError,
    NoRespondersError,
    OutboundBufferLimitError,
    StaleConnectionError,
)
from nats.js.api import PubAck
from nats.js.errors import NoStreamResponseError

from bus import Bus
from bus.chat_partitions import publish_inbound
from bus.messages import InboundMessage

log = logging.getLogger(__name__)

PATIENCE = 120.0  # seconds: longer than a cluster's leader election or a node's restart
FIRST_PAUSE, LONGEST_PAUSE = 0.2, 5.0

# The bus's "not now": the server or the stream's leader is away, or the connection reconnects.
TRANSIENT = (
    NoStreamResponseError,
    NoRespondersError,
    TimeoutError,  # nats-py's TimeoutError is one
    ConnectionReconnectingError,
    OutboundBufferLimitError,
    StaleConnectionError,
)


async def store_inbound(
    bus: Bus, channel: str, message: InboundMessage, *, patience: float = PATIENCE
) -> PubAck:
    """Store `message` in its chat's partition stream (`bus.chat_partitions.publish_inbound`),
    trying again while the bus is away, for up to `patience` seconds.

    Raises:
        NoStreamResponseError, TimeoutError, ...: the bus was still away after `patience` seconds
            (or the error is not one that passes: a closed connection, a refused permission).
    """
    deadline = time.monotonic() + patience
    pause = FIRST_PAUSE
    waited = False
    while True:
        try:
            ack = await publish_inbound(bus, channel, message)
        except TRANSIENT as exc:
            if time.monotonic() + pause > deadline:
                log.error(
                    "%s: message %s of chat %s could not be stored for %.0fs: %r",
                    channel,
                    message.message_id,
                    message.chat_id,
                    patience,
                    exc,
                )
                raise
            if not waited:
                log.warning(
                    "%s: storing message %s of chat %s failed (%r); trying again for up to %.0fs",
                    channel,
                    message.message_id,
                    message.chat_id,
                    exc,
                    patience,
                )
                waited = True
            await asyncio.sleep(pause)
            pause = min(pause * 2, LONGEST_PAUSE)
            continue
        if waited:
            log.info(
                "%s: message %s of chat %s stored after all", channel, message.message_id, message.chat_id
            )
        return ack
