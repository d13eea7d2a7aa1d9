"""Platform messages an adapter cannot read: acknowledged to the platform, kept in the DLQ.

The platform would only deliver such a message again (or, for Telegram's polling, ask for it
forever), so the adapter takes it off the platform and keeps it, with the reason, on
`<prefix>.dlq.<channel>` (the adapter's own NATS user may publish there; `antler dlq list`
shows it). Its DLQ sequence number is derived from the platform's own id for it, so a
redelivery the adapter sees twice is kept once (the DLQ stream drops duplicates by msg id).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from bus import Bus
from bus.dlq import dead_letter


def raw_bytes(raw: Any) -> bytes:
    """The message as the platform sent it: bytes kept as they are, text encoded, the rest as JSON."""
    if isinstance(raw, bytes):
        return raw
    if isinstance(raw, str):
        return raw.encode()
    return json.dumps(raw, ensure_ascii=False, default=str).encode()


async def keep_unreadable(
    bus: Bus, channel: str, raw: Any, platform_id: str, reason: str, consumer: str
) -> None:
    """Dead-letter one platform message on `<prefix>.dlq.<channel>`.

    Args:
        raw: the message as received (bytes, text, or a JSON value).
        platform_id: the platform's id for it (frame, update or event id); "" if it has none,
            then the payload itself tells copies apart.
        reason: why it cannot be read, for `antler dlq list`.
        consumer: who gave up on it (e.g. `telegram-updates`).

    Raises:
        Whatever the bus raises: the caller decides whether the platform should deliver it again.
    """
    data = raw_bytes(raw)
    key = platform_id or data.decode(errors="replace")
    number = int(hashlib.sha256(key.encode()).hexdigest()[:12], 16)
    await dead_letter(
        bus,
        stream=channel,
        stream_seq=number,
        subject=bus.subjects.chat_in(channel),
        data=data,
        headers=None,
        consumer=consumer,
        reason=reason,
        deliveries=1,
    )
