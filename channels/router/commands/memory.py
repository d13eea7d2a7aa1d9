"""`/memory`: what the agent remembers about the sender (their memory document, read only)."""

from __future__ import annotations

from bus.messages import InboundMessage, MemoryDocument
from channels.router.bindings import chat_user
from channels.router.commands.context import Answer, CommandContext


async def handle(ctx: CommandContext, message: InboundMessage, name: str, argument: str) -> Answer:
    doc = await ctx.memory.get(MemoryDocument.key(chat_user(message)))
    if doc is None or doc.is_empty():
        return "I do not remember anything about you yet."
    user = doc.user
    lines = [s.summary for s in (user.work_context, user.personal_context, user.top_of_mind) if s.summary]
    lines += [f"- {fact.content}" for fact in sorted(doc.facts, key=lambda f: -f.confidence)[:15]]
    return "What I remember about you:\n" + "\n".join(lines)
