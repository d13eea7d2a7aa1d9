"""Chat traffic through Telegram for the fault tests: users write to the bot on the fake Bot API, and
what they would see is read back from the calls the adapter made.

A user sees an answer as a bot message replying to theirs (`reply_to_message_id`), edited as the
answer streams in. So a message is answered once when exactly one bot message replies to it and that
message's last text is `You said: <its text>`; two such bot messages are a duplicate; none is lost.
A chat's answers are in order when each message's bot message reached its full text (the adapter's
call that set it, in call order) after the earlier messages' did.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.telegram_server import FakeTelegram


def _replying_to(params: dict[str, Any]) -> int | None:
    """The user message a bot message replies to: python-telegram-bot sends `reply_parameters` (JSON,
    a form field) for the `reply_to_message_id` it is given."""
    if params.get("reply_to_message_id") is not None:
        return int(params["reply_to_message_id"])
    reply = params.get("reply_parameters")
    if isinstance(reply, str):
        with contextlib.suppress(ValueError):
            reply = json.loads(reply)
    if isinstance(reply, dict) and reply.get("message_id") is not None:
        return int(reply["message_id"])
    return None


@dataclass
class TelegramLoad:
    telegram: FakeTelegram
    chats: int
    sent: list[tuple[int, int, str]] = field(default_factory=list)  # (chat id, message id, text)

    async def send_steadily(self, every: float, until: asyncio.Event) -> None:
        """Each chat writes its next message every `every` seconds until `until` is set."""
        k = 0
        while not until.is_set():
            for chat in range(self.chats):
                chat_id = 7000 + chat
                text = f"tg chat {chat} message {k}"
                update = self.telegram.send_user_message(text, chat_id=chat_id, user_id=chat_id)
                self.sent.append((chat_id, update["message"]["message_id"], text))
            k += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(until.wait(), every)

    def _answers(self) -> tuple[dict[int, list[int]], dict[int, str], dict[int, int]]:
        """Bot messages replying to each user message; each bot message's last text; and the call
        index at which each bot message's text last changed."""
        replies: dict[int, list[int]] = defaultdict(list)
        text: dict[int, str] = {}
        settled_at: dict[int, int] = {}
        for index, (method, params) in enumerate(self.telegram.calls):
            if method not in ("sendMessage", "editMessageText") or "sent_message_id" not in params:
                continue
            bot_message = int(params["sent_message_id"])
            replying_to = _replying_to(params)
            if method == "sendMessage" and replying_to is not None:
                replies[replying_to].append(bot_message)
            if text.get(bot_message) != str(params.get("text")):
                text[bot_message] = str(params.get("text"))
                settled_at[bot_message] = index
        return replies, text, settled_at

    def unanswered(self) -> int:
        replies, text, _ = self._answers()
        return sum(
            1 for _, m, t in self.sent if not any(text.get(b) == f"You said: {t}" for b in replies.get(m, []))
        )

    async def wait_answered(self, timeout: float) -> None:
        """Until every message sent has its full answer, or `timeout` seconds pass."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            if not self.unanswered() or asyncio.get_running_loop().time() > deadline:
                return
            await asyncio.sleep(0.2)  # polling the fake's call log, as a user glances at the chat

    def counts(self) -> dict[str, int]:
        replies, text, settled_at = self._answers()
        counts = dict.fromkeys(("answered", "duplicated", "wrong", "lost", "out_of_order"), 0)
        counts["sent"] = len(self.sent)
        last_in_chat: dict[int, int] = {}
        for chat_id, message_id, sent_text in self.sent:
            bots = replies.get(message_id, [])
            if not bots:
                counts["lost"] += 1
                continue
            if len(bots) > 1:
                counts["duplicated"] += 1
            elif text.get(bots[0]) == f"You said: {sent_text}":
                counts["answered"] += 1
            else:
                counts["wrong"] += 1
            at = settled_at.get(bots[0], 0)
            if at < last_in_chat.get(chat_id, -1):
                counts["out_of_order"] += 1
            last_in_chat[chat_id] = max(at, last_in_chat.get(chat_id, -1))
        return counts
