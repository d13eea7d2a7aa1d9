"""Which thread a chat talks to: the router owns chat bindings (KV `<prefix>_chats`).

A chat's thread is created on its first message (or anew with `/new`), safely when several of its
messages arrive at once; a chat whose thread was deleted is unbound, and its next message starts a
fresh one.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from access import RoleBook
from bus import Bus, Delivery
from bus.messages import (
    ChatBinding,
    InboundMessage,
    ThreadCreateReply,
    ThreadCreateRequest,
    ThreadDeleted,
    ThreadPatchReply,
    ThreadPatchRequest,
    utcnow,
)
from bus.records import RecordStore
from bus.service import ServiceError, call

log = logging.getLogger(__name__)


def chat_key(channel: str, chat_id: str, topic_id: str | None) -> str:
    """KV key of a chat (dots separate the parts; each part made a safe token)."""
    return ChatBinding.key_of(channel, chat_id, topic_id)


def chat_user(message: InboundMessage) -> str:
    """The user id a chat user has in Antler: per platform, so memory and files never mix."""
    return f"{message.channel}:{message.user_id}"


class Bindings:
    """The chats' bindings to threads, read and written here only."""

    def __init__(self, bus: Bus, chats: RecordStore[ChatBinding]) -> None:
        self.bus = bus
        self.chats = chats
        self._roles: RoleBook | None = None

    async def person(self, message: InboundMessage) -> str:
        """Whose the chat user's runs are: the account they linked with `/connect`, else the chat user."""
        if self._roles is None:
            self._roles = await RoleBook.open(self.bus)
        who = chat_user(message)
        return await self._roles.linked_user(who) or who

    async def of(
        self,
        message: InboundMessage,
        *,
        fresh: bool = False,
        record_thread: bool = True,
        made: list[str] | None = None,
    ) -> ChatBinding:
        """The chat's thread, created on first contact (or anew for /new), safely under concurrency.

        `record_thread`: a new thread is recorded at once (asking the runners' threads service).
        Without it, the run the message becomes records it as it takes the thread (with the chat
        as its metadata, `agents.runner.thread_claims`): one round trip less before a new chat's
        first answer. `made`: the thread's id is added to it when this call made the thread.
        """
        key = chat_key(message.channel, message.chat_id, message.topic_id)
        seen: tuple[ChatBinding | None, int] | None = None  # the binding as read here (none: (None, 0))
        if fresh:
            user_id = await self.person(message)
        else:  # the two reads side by side: one round trip of waiting, not two
            user_id, found = await asyncio.gather(self.person(message), self.chats.get_with_revision(key))
            seen = found or (None, 0)
            current = seen[0]
            if current is not None and current.user_id == user_id:
                return current
            if current is not None and current.user_id == chat_user(message):
                adopted = await self._adopt(key, current, user_id)
                if adopted is not None:
                    return adopted
            elif current is not None and message.chat_type == "group":
                return current  # a group's thread is the member's who spoke first; the others talk in it
            fresh = current is not None  # its thread is gone, or another account's: a fresh one
        thread_id = str(uuid.uuid4())

        def bind(current: ChatBinding | None) -> ChatBinding | None:
            if current is not None and not fresh:
                return None  # another message of this chat created it meanwhile
            return ChatBinding(
                channel=message.channel,
                chat_id=message.chat_id,
                topic_id=message.topic_id,
                thread_id=thread_id,
                user_id=user_id,
                model_name=current.model_name if current else None,
            )

        binding = await self.chats.update(key, bind, known=seen)
        assert binding is not None  # `bind` leaves only an existing binding as it is
        if binding.thread_id == thread_id and made is not None:
            made.append(thread_id)
        if binding.thread_id == thread_id and record_thread:  # the runners own thread records: ask them
            metadata = {"channel": message.channel, "chat_id": message.chat_id}
            request = ThreadCreateRequest(thread_id=thread_id, user_id=user_id, metadata=metadata)
            try:
                await call(self.bus, "threads", "create", request, ThreadCreateReply, timeout=10)
            except ServiceError as exc:  # its first run creates it (without the chat's metadata)
                log.warning("thread %s of chat %s not recorded yet: %s", thread_id, key, exc.message)
        return binding

    async def _adopt(self, key: str, current: ChatBinding, user_id: str) -> ChatBinding | None:
        """The chat user was linked to account `user_id` since (`/connect`): the chat's thread becomes
        the account's (the gateway gave it at the link already; asking again does no harm) and the
        chat goes on in it. None when the thread cannot be given (deleted meanwhile)."""
        request = ThreadPatchRequest(thread_id=current.thread_id, user_id=current.user_id, owner=user_id)
        try:
            await call(self.bus, "threads", "patch", request, ThreadPatchReply, timeout=10)
        except ServiceError as exc:
            log.info("chat %s starts a fresh thread: its thread %s: %s", key, current.thread_id, exc.message)
            return None
        log.info("chat %s goes on in thread %s as %s", key, current.thread_id, user_id)

        def adopt(found: ChatBinding | None) -> ChatBinding | None:
            if found is None or found.thread_id != current.thread_id:
                return None
            return found.model_copy(update={"user_id": user_id, "updated_at": utcnow()})

        return await self.chats.update(key, adopt)

    async def choose_model(self, message: InboundMessage, binding: ChatBinding, model_name: str) -> None:
        """The chat's runs use `model_name` from now on."""
        key = chat_key(message.channel, message.chat_id, message.topic_id)
        await self.chats.put(
            key, binding.model_copy(update={"model_name": model_name, "updated_at": utcnow()})
        )

    async def on_thread_deleted(self, event: ThreadDeleted, delivery: Delivery) -> None:
        """Chats bound to a deleted thread start a fresh one with their next message."""
        for key in await self.chats.keys():
            binding = await self.chats.get(key)
            if binding is not None and binding.thread_id == event.thread_id:
                await self.chats.delete(key)
                log.info("chat %s is unbound from deleted thread %s", key, event.thread_id)
