"""Chat messages: what adapters publish on `chat.in` and the router sends on `chat.out`."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from bus.messages.base import (
    ChatOrigin,
    Envelope,
    FileRef,
    new_id,
    utcnow,
)

# --------------------------------------------------------------------- chat


class InboundMessage(Envelope):
    """A user's message from a chat platform or a script, on `<prefix>.chat.in.<channel>`."""

    channel: str = Field(description="cli, slack, telegram, feishu, dingtalk, or a script's own name.")
    chat_id: str = Field(description="Conversation id on that channel.")
    text: str = ""
    user_id: str = Field("default", description="The sender on the platform.")
    user_name: str | None = None
    message_id: str = Field(default_factory=new_id, description="Platform message id; retries repeat it.")
    topic_id: str | None = Field(
        None, description="Thread / topic inside the chat (Slack thread_ts, forum topic)."
    )
    chat_type: Literal["private", "group"] = "private"
    mentioned: bool = Field(False, description="The bot was @-mentioned (group chats).")
    reply_to_bot: bool = Field(False, description="The message replies to one of the bot's messages.")
    files: list[FileRef] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="Platform extras an adapter needs to answer (DingTalk's session webhook ...); "
        "every reply to this message carries them back as its metadata.",
    )
    sent_at: datetime = Field(default_factory=utcnow)

    def dedupe_id(self) -> str:
        """`Nats-Msg-Id`: a platform's retry of the same message is dropped by JetStream."""
        return f"{self.channel}:{self.chat_id}:{self.message_id}"

    def chat_key(self) -> str:
        return f"{self.channel}:{self.chat_id}" + (f":{self.topic_id}" if self.topic_id else "")

    def origin(self, *, in_reply: bool = True) -> ChatOrigin:
        """Where the answers to this message go: its chat (and topic), handed its metadata back;
        `in_reply` makes them replies to this very message (a scheduled task's later firings are not)."""
        return ChatOrigin(
            channel=self.channel,
            chat_id=self.chat_id,
            topic_id=self.topic_id,
            message_id=self.message_id if in_reply else None,
            user_id=self.user_id,
            platform=self.metadata,
        )


class ChatButton(BaseModel):
    """A button under a reply, where the platform has them: pressing it sends `command` as the
    presser's message (`/approve <id>`); elsewhere the reply's text says the same command."""

    label: str
    command: str = Field(max_length=64, description="Telegram carries at most 64 bytes per button.")


class OutboundMessage(Envelope):
    """A reply (partial or final) for a chat, on `<prefix>.chat.out.<channel>`."""

    channel: str
    chat_id: str
    topic_id: str | None = None
    reply_to: str | None = Field(None, description="Platform message id being answered.")
    thread_id: str | None = None
    run_id: str | None = None
    kind: Literal["partial", "final", "error", "clarification", "command"] = "final"
    text: str = ""
    seq: int = Field(0, description="Order of updates within one run; adapters drop stale partials.")
    files: list[FileRef] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict, description="The answered message's metadata.")
    buttons: list[ChatButton] = Field(default_factory=list, description="Buttons under a final reply.")

    @classmethod
    def answering(cls, origin: ChatOrigin, **fields: Any) -> OutboundMessage:
        """A message to the chat (and topic) `origin` names, in reply to its message, carrying its
        platform extras back; `fields` say the rest (kind, text, run ...)."""
        return cls(
            channel=origin.channel,
            chat_id=origin.chat_id,
            topic_id=origin.topic_id,
            reply_to=origin.message_id,
            metadata=origin.platform,
            **fields,
        )

    @property
    def is_final(self) -> bool:
        return self.kind != "partial"
