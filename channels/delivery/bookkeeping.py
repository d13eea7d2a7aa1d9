"""The reply bookkeeping every adapter keeps: the message it is editing for each run, and the
platform's rate limits in force.

Adapters edit one message (Telegram, Slack), patch one card (Feishu) or stream
into one AI card (DingTalk) per run. Keeping that message's id only in memory
would make an adapter restarted mid-answer post the final text as a second
message; keeping it in KV `<prefix>_replies` (entries expire after a day) lets
the restarted adapter finish the message it started, from the text the user
last saw. The algorithm itself, written once, is `channels.delivery.reply_stream`.
"""

from __future__ import annotations

import base64
import json
import logging
from collections import OrderedDict
from typing import Any

from nats.js.errors import KeyNotFoundError
from pydantic import BaseModel

from bus import Bus

log = logging.getLogger(__name__)

_REMEMBERED = 2000  # replies whose entries an adapter keeps in memory besides KV


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
