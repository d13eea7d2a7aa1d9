"""Which chats a task may answer in: only its owner's.

A chat is its owner's when the router's binding of it (KV `<prefix>_chats`, written on the chat's
first message) belongs to the same user: the user id the chat's messages run as,
`<channel>:<platform user id>`. So a task made through the API may name a chat only when it is
made as that user (a gateway token or account whose `user_id` is `telegram:123456`, say), and the
answers it sends there are ones the chat's own user could have asked for. Any other chat, one
nobody has written from, and one of another user are refused alike (`not_allowed`), so the refusal
tells nothing about other people's chats.
"""

from __future__ import annotations

from bus.messages import ChatBinding, ChatOrigin, TaskChat
from bus.records import RecordStore
from bus.service import ServiceError


async def chat_origin(chats: RecordStore[ChatBinding], user_id: str, chat: TaskChat) -> ChatOrigin:
    """The origin a task of `user_id` answering in `chat` gives its runs.

    Raises:
        ServiceError: `not_allowed` when `chat` is not one `user_id` talks to the bot from.
    """
    binding = await chats.get(ChatBinding.key_of(chat.channel, chat.chat_id, chat.topic_id))
    if binding is None or binding.user_id != user_id:
        where = f"{chat.channel} chat {chat.chat_id}" + (f" (topic {chat.topic_id})" if chat.topic_id else "")
        raise ServiceError(
            f"a task may answer only in a chat you talk to the bot from as {user_id}; "
            f"{where} is not one (a chat becomes yours when you first write to the bot there, "
            f"as the user <channel>:<your id on that platform>)",
            "not_allowed",
        )
    platform_user = binding.user_id.removeprefix(f"{chat.channel}:")
    return ChatOrigin(
        channel=chat.channel, chat_id=chat.chat_id, topic_id=chat.topic_id, user_id=platform_user
    )
