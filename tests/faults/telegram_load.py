"""Chat traffic through Telegram for the fault tests: users write to the bot on the fake Bot API, and
what they would see is read back from the calls the adapter made.

A user sees an answer as a bot message, edited as the answer streams in. So a message is answered once
when exactly one bot message's last text is `You said: <its text>` (every message's text is its own);
two such bot messages are a duplicate; none is lost.
A chat's answers are in order when each message's bot message reached its full text (the adapter's
call that set it, in call order) after the earlier messages' did.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from dataclasses import dataclass, field

from tests.fakes.telegram_server import FakeTelegram


@dataclass
class TelegramLoad:
    telegram: FakeTelegram
    chats: int
    sent: list[tuple[int, int, str]] = field(default_factory=list)  # (chat id, message id, text)

    async def send_steadily(self, every: float, until: asyncio.Event, backlog: int = 4) -> None:
        """Each chat writes its next message every `every` seconds until `until` is set, the chats
        together waiting while `backlog` messages per chat are unanswered (as `ChatLoad`)."""
        k = 0
        while not until.is_set():
            while True:
                if self.unanswered() < backlog * self.chats or until.is_set():
                    break
                await asyncio.sleep(0.2)  # polling the fake's call log, as a user glances at the chat
            for chat in range(self.chats):
                chat_id = 7000 + chat
                text = f"tg chat {chat} message {k}"
                update = self.telegram.send_user_message(text, chat_id=chat_id, user_id=chat_id)
                self.sent.append((chat_id, update["message"]["message_id"], text))
            k += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(until.wait(), every)

    def _answers(self) -> tuple[dict[str, list[int]], dict[int, int]]:
        """Bot messages by their last text (the adapter does not reply *to* the user's message: its
        echo is what ties an answer to its message), and the call index at which each bot message's
        text last changed."""
        text: dict[int, str] = {}
        settled_at: dict[int, int] = {}
        for index, (method, params) in enumerate(self.telegram.calls):
            if method not in ("sendMessage", "editMessageText") or "sent_message_id" not in params:
                continue
            bot_message = int(params["sent_message_id"])
            if text.get(bot_message) != str(params.get("text")):
                text[bot_message] = str(params.get("text"))
                settled_at[bot_message] = index
        by_text: dict[str, list[int]] = defaultdict(list)
        for bot_message, last in text.items():
            by_text[last].append(bot_message)
        return by_text, settled_at

    def unanswered(self) -> int:
        by_text, _ = self._answers()
        return sum(1 for _, _, sent in self.sent if not by_text.get(f"You said: {sent}"))

    async def wait_answered(self, timeout: float) -> None:
        """Until every message sent has its full answer, or `timeout` seconds pass."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            if not self.unanswered() or asyncio.get_running_loop().time() > deadline:
                return
            await asyncio.sleep(0.2)  # polling the fake's call log, as a user glances at the chat

    def counts(self) -> dict[str, int]:
        by_text, settled_at = self._answers()
        counts = dict.fromkeys(("answered", "duplicated", "lost", "out_of_order"), 0)
        counts["sent"] = len(self.sent)
        last_in_chat: dict[int, int] = {}
        for chat_id, _, sent in self.sent:
            bots = by_text.get(f"You said: {sent}", [])
            if not bots:
                counts["lost"] += 1
                continue
            counts["duplicated" if len(bots) > 1 else "answered"] += 1
            at = min(settled_at[b] for b in bots)
            if at < last_in_chat.get(chat_id, -1):
                counts["out_of_order"] += 1
            last_in_chat[chat_id] = max(at, last_in_chat.get(chat_id, -1))
        return counts
