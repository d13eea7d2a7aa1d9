"""What every adapter's reply side shares: its consumer, the message it is editing, and how it streams.

Adapters edit one message (Telegram, Slack), patch one card (Feishu) or stream
into one AI card (DingTalk) per run. Keeping that message's id only in memory
would make an adapter restarted mid-answer post the final text as a second
message; keeping it in KV `<prefix>_replies` (entries expire after a day) lets
the restarted adapter finish the message it started.

`ReplyStream` is the edit-in-place algorithm, written once: a platform says
only how to post, edit and attach (`Surface`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from nats.js.errors import KeyNotFoundError

from bus import Bus, Consumer, Delivery, Retry
from bus.messages import FileRef, OutboundMessage

log = logging.getLogger(__name__)

# How long one delivery of a final answer waits out a platform's rate limit before it is
# handed back to the bus for later (a rate limit is never a reason to lose an answer).
MAX_RATE_WAIT = 300.0


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


def chunks(text: str, limit: int) -> list[str]:
    """`text` cut every `limit` characters (one piece when it fits, even when empty)."""
    return [text[i : i + limit] for i in range(0, len(text), limit)] or [text]


class RateLimited(Exception):
    """A platform asked to wait `delay` seconds before the next call."""

    def __init__(self, delay: float, detail: str = "rate limited") -> None:
        self.delay = max(0.0, delay)
        super().__init__(f"{detail} (wait {self.delay:g}s)")


class Surface(Protocol):
    """How one platform shows a reply. Each raises `RateLimited` when the platform asks to wait."""

    def split(self, text: str) -> list[str]:
        """The text in pieces that each fit one message (at least one piece)."""
        ...

    async def post(self, out: OutboundMessage, text: str) -> dict[str, Any]:
        """Send a new message answering `out`; what `edit` needs to change it later (JSON-able)."""
        ...

    async def edit(self, ref: dict[str, Any], text: str) -> None:
        """Replace the text of a message `post` sent (unchanged text is not an error)."""
        ...

    async def send_file(self, out: OutboundMessage, file: FileRef) -> None: ...


class ReplyStream:
    """Edit-in-place replies, the same on every platform.

    The first partial of a run posts a message; later partials edit it; the
    final text (any kind but partial) replaces it, its overflow follows in more
    messages, then its files. A partial the platform rate-limits is skipped (a
    newer one, or the final, carries its text); a final one waits as told.
    After the final, the run's entry says so: a redelivered partial or final
    does not post the answer twice.
    """

    def __init__(self, bus: Bus, channel: str, surface: Surface) -> None:
        self.channel = channel
        self.live = LiveReplies(bus, channel)
        self.surface = surface

    async def deliver(self, out: OutboundMessage, delivery: Delivery) -> None:
        if out.kind == "partial":
            if out.run_id:
                await self._partial(out, out.run_id)
            return
        deadline = time.monotonic() + MAX_RATE_WAIT
        while True:
            try:
                await self._final(out)
                return
            except RateLimited as exc:
                if time.monotonic() + exc.delay > deadline:
                    raise Retry(f"{self.channel}: {exc}", delay=exc.delay) from None
                log.info("%s: %s; the reply waits", self.channel, exc)
                await asyncio.sleep(exc.delay)

    async def _partial(self, out: OutboundMessage, run_id: str) -> None:
        ref = await self.live.get(run_id)
        if ref is not None and ref.get("done"):
            return  # the final answer is out already
        text = self.surface.split(out.text)[0]
        try:
            if ref is None:
                await self.live.put(run_id, **await self.surface.post(out, text))
            else:
                await self.surface.edit(ref, text)
        except RateLimited as exc:
            log.info("%s: partial reply of run %s skipped: %s", self.channel, run_id, exc)

    async def _final(self, out: OutboundMessage) -> None:
        """Each step once: after a rate-limit wait, a restart or a redelivery it goes on where it stopped."""
        run_id = out.run_id
        ref = (await self.live.get(run_id) if run_id else None) or {}
        if ref.get("done"):
            return  # delivered before; this is a redelivery
        pieces = self.surface.split(out.text or "(empty reply)")
        first = pieces[0]
        steps: list[Callable[[], Awaitable[Any]]] = [
            (lambda: self.surface.edit(ref, first)) if ref else (lambda: self.surface.post(out, first))
        ]
        steps += [lambda piece=piece: self.surface.post(out, piece) for piece in pieces[1:]]
        steps += [lambda file=file: self.surface.send_file(out, file) for file in out.files]
        done = int(ref.get("steps_done", 0))
        for number, step in enumerate(steps[done:], start=done + 1):
            await step()
            if run_id:
                await self.live.put(run_id, **{**ref, "steps_done": number})
        if run_id:
            await self.live.put(run_id, done=True)
