"""`/new`: the chat starts a fresh conversation (a new thread; the chat's model stays)."""

from __future__ import annotations

from bus.messages import InboundMessage
from channels.router.commands.context import Answer, CommandContext


async def handle(ctx: CommandContext, message: InboundMessage, name: str, argument: str) -> Answer:
    binding = await ctx.bindings.of(message, fresh=True)
    return f"Started a new conversation ({binding.thread_id[:8]})."
