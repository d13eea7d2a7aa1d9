"""`/connect`: a one-time code that, entered in the web UI by a signed-in person (`POST
/api/v1/connect`), makes this chat user that person: their memory, role and threads. The chat goes on
in its thread, theirs now."""

from __future__ import annotations

from access import RoleBook
from bus.messages import InboundMessage
from channels.router.bindings import chat_user
from channels.router.commands.context import Answer, CommandContext


async def handle(ctx: CommandContext, message: InboundMessage, name: str, argument: str) -> Answer:
    roles = await RoleBook.open(ctx.bus)
    who = chat_user(message)
    linked = await roles.linked_user(who)
    minutes = ctx.config.access.connect_code_minutes
    code = await roles.new_code(who, minutes * 60)
    already = " (this chat user is linked to an account already; a new code links it anew)" if linked else ""
    return (
        f"Your code: {code}\nSign in to the web UI and enter it under Settings → Connect a chat "
        f"(or POST /api/v1/connect) within {minutes:g} minutes{already}."
    )
