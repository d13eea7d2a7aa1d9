"""`/status`: the chat's conversation, its model and whether the agent is busy with it."""

from __future__ import annotations

from bus.messages import InboundMessage
from channels.router.commands.context import Answer, CommandContext


async def handle(ctx: CommandContext, message: InboundMessage, name: str, argument: str) -> Answer:
    binding = await ctx.bindings.of(message)
    thread = await ctx.threads.get(binding.thread_id)
    default = ctx.config.get_model()
    model = binding.model_name or (default.name if default else "none configured")
    busy = f"working on run {thread.active_run_id[:8]}" if thread and thread.active_run_id else "idle"
    title = thread.title if thread and thread.title else "untitled"
    return f"Conversation {binding.thread_id[:8]} ({title})\nModel: {model}\nStatus: {busy}"
