"""`/compact` in a chat: the conversation's older messages summarised now, by the runners'
`threads.compact` (agents.compact: the summarization that runs near the context window, memory first).
"""

from __future__ import annotations

import logging

from bus.messages import InboundMessage, ThreadCompactReply, ThreadCompactRequest
from bus.service import ServiceError, call
from channels.router.commands.context import Answer, CommandContext

log = logging.getLogger(__name__)

TIMEOUT = 120.0  # the summary is a model call


async def handle(ctx: CommandContext, message: InboundMessage, name: str, argument: str) -> Answer:
    """The chat's answer to `/compact` (never raises: a failure is said in words)."""
    binding = await ctx.bindings.of(message)
    request = ThreadCompactRequest(
        thread_id=binding.thread_id, user_id=binding.user_id, model_name=binding.model_name
    )
    try:
        reply = await call(ctx.bus, "threads", "compact", request, ThreadCompactReply, timeout=TIMEOUT)
    except ServiceError as exc:
        if exc.code == "conflict":
            return "I am still working on your last message; send /compact once I have answered."
        log.warning("compacting thread %s failed: %s", binding.thread_id, exc.message)
        return f"I could not compact this conversation: {exc.message}"
    if not reply.compacted:
        return f"Nothing to compact: {reply.reason or 'the conversation is short'}."
    return (
        f"Compacted: {reply.removed_message_count} earlier message(s) are now a summary; "
        f"the latest {reply.preserved_message_count} stay as they were."
    )
