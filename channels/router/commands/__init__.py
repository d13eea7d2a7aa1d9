"""The chat commands the router answers, one module each, behind one dispatch table.

Every command is a `Handler` (`context`): given the router's parts, the message, the command's name
and the words after it, it answers with the reply to send, or `PassOn` (the message goes on to the
agent). A name not in the table is a skill's, or none (`help`). To add a command: a module with its
`handle`, a line in `COMMANDS`, and its line in `skills.commands.CHAT_COMMANDS` (what `/help` lists,
shared with the web UI).
"""

from __future__ import annotations

from bus.messages import InboundMessage
from channels.router.commands import (
    approve,
    bootstrap,
    compact,
    connect,
    goal,
    help,
    memory,
    models,
    new,
    schedule,
    status,
    usage,
)
from channels.router.commands.context import Answer, CommandContext, Handler, PassOn

__all__ = ["COMMANDS", "Answer", "CommandContext", "Handler", "PassOn", "answer"]

COMMANDS: dict[str, Handler] = {
    "new": new.handle,
    "status": status.handle,
    "models": models.handle,
    "memory": memory.handle,
    "goal": goal.handle,
    "compact": compact.handle,
    "schedule": schedule.handle,
    "schedules": schedule.handle,
    "unschedule": schedule.handle,
    "connect": connect.handle,  # a one-time code linking this chat user to a web account
    "bootstrap": bootstrap.handle,  # create a custom agent in this conversation
    "usage": usage.handle,  # this person's tokens and cost against their role's budget
    "approve": approve.handle,  # a tool call waiting for a person's yes
    "deny": approve.handle,
    "help": help.handle,
    "start": help.handle,  # what platforms send first (Telegram's /start)
}


async def answer(ctx: CommandContext, message: InboundMessage, name: str, argument: str) -> Answer:
    """The answer to `/<name> <argument>`: a built-in command's, else a skill's or the help's."""
    return await COMMANDS.get(name, help.handle)(ctx, message, name, argument)
