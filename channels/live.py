"""What every adapter's reply side shares: its consumer, and the message it is editing.

Adapters edit one message (Telegram, Slack), patch one card (Feishu) or stream
into one AI card (DingTalk) per run. Keeping that message's id only in memory
would make an adapter restarted mid-answer post the final text as a second
message; keeping it in KV `<prefix>_replies` (entries expire after a day) lets
the restarted adapter finish the message it started.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from nats.js.errors import KeyNotFoundError

from bus import Bus, Consumer, Delivery
from bus.messages import OutboundMessage


def reply_consumer(
    bus: Bus, channel: str, handler: Callable[[OutboundMessage, Delivery], Awaitable[None]]
) -> Consumer[OutboundMessage]:
    """The durable consumer of `<prefix>.chat.out.<channel>`, one reply at a time so they stay in order."""
    s = bus.subjects
    return Consumer(
        bus,
        stream=s.chat_out_stream,
        durable=channel,
        filter_subjects=[s.chat_out(channel)],
        model=OutboundMessage,
        handler=handler,
        concurrency=1,
        max_ack_pending=1,
    )


class LiveReplies:
    def __init__(self, bus: Bus, channel: str) -> None:
        self.bus = bus
        self.channel = channel
        self._known: dict[str, dict[str, Any]] = {}

    def _key(self, run_id: str) -> str:
        return f"{self.channel}.{run_id}"

    async def get(self, run_id: str) -> dict[str, Any] | None:
        """The reference stored for the run's reply, or None if none was started."""
        if run_id in self._known:
            return self._known[run_id]
        kv = await self.bus.kv(self.bus.subjects.replies_bucket)
        try:
            entry = await kv.get(self._key(run_id))
        except KeyNotFoundError:
            return None
        if not entry.value:
            return None
        ref = json.loads(entry.value)
        self._known[run_id] = ref
        return ref

    async def put(self, run_id: str, **ref: Any) -> None:
        self._known[run_id] = ref
        kv = await self.bus.kv(self.bus.subjects.replies_bucket)
        await kv.put(self._key(run_id), json.dumps(ref).encode())

    async def drop(self, run_id: str) -> None:
        """The answer is final: forget the reference (here and on the bus)."""
        self._known.pop(run_id, None)
        kv = await self.bus.kv(self.bus.subjects.replies_bucket)
        await kv.purge(self._key(run_id))
