"""Platform messages an adapter cannot read: acknowledged to the platform, kept in the DLQ.

Asking the platform to send such a message again would only bring it back
unreadable (and, where the platform retries at once, forever), so the adapter
confirms it and dead-letters it here, on `<prefix>.dlq.<channel>`, with the
raw payload and the reason, logging it once.
"""

from __future__ import annotations

import hashlib
import logging

from bus import Bus
from bus.dlq import dead_letter
from bus.metrics import DEAD_LETTERS

log = logging.getLogger(__name__)


async def dead_letter_unreadable(bus: Bus, channel: str, raw: bytes, reason: str, ident: str = "") -> None:
    """Dead-letter `raw` (what the platform sent) with `reason`; `ident` (the platform's id for it,
    else the payload) dedupes a copy. Never raises: a DLQ that cannot take it is logged."""
    number = int(hashlib.sha256((ident or raw.decode(errors="replace")).encode()).hexdigest()[:12], 16)
    try:  # (`dead_letter` logs it: one line per unreadable message)
        await dead_letter(
            bus,
            stream=channel,
            stream_seq=number,
            subject=bus.subjects.chat_in_channel(channel),
            data=raw,
            headers=None,
            consumer=f"{channel}-adapter",
            reason=f"unreadable {channel} message: {reason}",
            deliveries=1,
        )
        DEAD_LETTERS.labels(channel, f"{channel}-adapter", "unreadable").inc()
    except Exception:
        log.exception("%s: could not dead-letter an unreadable message", channel)
