"""What every adapter's reply side shares: its consumer, the message it is editing, how a platform
shows a reply (`Surface`) and how it says "wait", for one chat or for all (`channels.errors.RateLimited`).

Adapters edit one message (Telegram, Slack), patch one card (Feishu) or stream
into one AI card (DingTalk) per run. Keeping that message's id only in memory
would make an adapter restarted mid-answer post the final text as a second
message; keeping it in KV `<prefix>_replies` (entries expire after a day) lets
the restarted adapter finish the message it started, from the text the user
last saw. The algorithm itself, written once, is `channels.reply_stream`.
"""

from __future__ import annotations

import base64
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from nats.js.errors import KeyNotFoundError
from pydantic import BaseModel

from bus import Bus, Consumer, Delivery
from bus.messages import FileRef, OutboundMessage

log = logging.getLogger(__name__)

_REMEMBERED = 2000  # replies whose entries an adapter keeps in memory besides KV
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


class ReplyEntry(BaseModel):
    """What an adapter keeps of one run's reply (in KV, so a restarted adapter goes on from it)."""

    ref: dict[str, Any] | None = None  # what the platform needs to change the message; None: not posted
    shown: str = ""  # the text the user sees now
    steps_done: int = 0  # steps of the final answer done (first piece, more pieces, files)
    done: bool = False  # the final answer is out


class LiveReplies:
    """Each run's `ReplyEntry`, remembered here and kept in KV."""

    def __init__(self, bus: Bus, channel: str) -> None:
        self.bus = bus
        self.channel = channel
        self._known: OrderedDict[str, ReplyEntry] = OrderedDict()

    def _key(self, run_id: str) -> str:
        return f"{self.channel}.{run_id}"

    async def get(self, run_id: str) -> ReplyEntry | None:
        """The entry stored for the run's reply, or None if none was started."""
        if run_id in self._known:
            return self._known[run_id]
        kv = await self.bus.kv(self.bus.subjects.replies_bucket)
        try:
            entry = await kv.get(self._key(run_id))
        except KeyNotFoundError:
            return None
        if not entry.value:
            return None
        stored = json.loads(entry.value)
        if "ref" not in stored and "done" not in stored:
            stored = {"ref": stored}  # written by an adapter before entries had fields of their own
        reply = ReplyEntry.model_validate(stored)
        self._remember(run_id, reply)
        return reply

    def _remember(self, run_id: str, reply: ReplyEntry) -> None:
        self._known[run_id] = reply
        self._known.move_to_end(run_id)
        while len(self._known) > _REMEMBERED:
            self._known.popitem(last=False)

    async def put(self, run_id: str, reply: ReplyEntry) -> None:
        self._remember(run_id, reply)
        kv = await self.bus.kv(self.bus.subjects.replies_bucket)
        await kv.put(self._key(run_id), reply.model_dump_json(exclude_defaults=True).encode())

    async def limit(self, scope: str) -> float | None:
        """When (epoch seconds) a rate limit on `scope` ("platform", or a chat's id) ends, as `hold`
        wrote it (None: none known)."""
        kv = await self.bus.kv(self.bus.subjects.replies_bucket)
        try:
            entry = await kv.get(self._limit_key(scope))
        except KeyNotFoundError:
            return None
        try:
            return float(json.loads(entry.value or b"{}").get("until"))
        except (TypeError, ValueError):
            return None

    async def hold(self, scope: str, until: float) -> None:
        """Remember that the platform holds `scope` until `until` (epoch seconds): an adapter
        started meanwhile makes no call before then."""
        kv = await self.bus.kv(self.bus.subjects.replies_bucket)
        await kv.put(self._limit_key(scope), json.dumps({"until": until}).encode())

    def _limit_key(self, scope: str) -> str:
        name = base64.urlsafe_b64encode(scope.encode()).decode().rstrip("=")  # any chat id, a valid key
        return f"{self.channel}.limit.{name}"

    async def drop(self, run_id: str) -> None:
        """The answer is final: forget the reference (here and on the bus)."""
        self._known.pop(run_id, None)
        kv = await self.bus.kv(self.bus.subjects.replies_bucket)
        await kv.purge(self._key(run_id))


class Surface(Protocol):
    """How one platform shows a reply; each adapter implements it (and may inherit the defaults
    below by naming it as a base). Calls raise `RateLimited` when the platform asks to wait; any
    other error is a failed delivery (retried with backoff)."""

    #: Whether partial answers are shown as they stream (otherwise only the final one is posted).
    streams: bool = True

    def split(self, text: str) -> list[str]:
        """The text in pieces that each fit one message (at least one piece)."""
        ...

    async def post(self, out: OutboundMessage, text: str) -> dict[str, Any]:
        """Send a new message answering `out`; what `edit` needs to change it later (JSON-able)."""
        ...

    async def edit(self, ref: dict[str, Any], text: str) -> None:
        """Replace the text of a message `post` sent (unchanged text is not an error)."""
        ...

    async def finish(self, ref: dict[str, Any], text: str, out: OutboundMessage, shown: str) -> None:
        """Make the message `post` sent show the final `text` (the user sees `shown` now)."""
        if text != shown:
            await self.edit(ref, text)

    async def post_more(self, out: OutboundMessage, text: str) -> None:
        """A further piece of a final answer too long for one message, or a note about it."""
        await self.post(out, text)

    async def send_file(self, out: OutboundMessage, file: FileRef, data: bytes) -> None:
        """Attach a file of the answer (`data`, read from the object store by `ReplyStream`)."""
        ...
