"""`/approve <id> [always]` and `/deny <id> [reason]`: answer a tool call waiting for a person's yes
(`always`: that tool asks no more in this conversation).

The request is found in the chat's thread (its pending interrupts, through the runners' `threads.state`):
an id that waits for nothing there is said so; in a chat, only the person whose message made the run
ask may answer. The answer becomes a resume run whose id is the request's, so an answer that comes
twice (two taps, two people, the platform sending it again) is applied once.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from bus.approvals import answer_run_id
from bus.messages import InboundMessage, ThreadStateReply, ThreadStateRequest
from bus.service import ServiceError, call
from channels.router.commands.context import Answer, CommandContext, PassOn

log = logging.getLogger(__name__)

TIMEOUT = 15.0


async def waiting(ctx: CommandContext, thread_id: str, user_id: str) -> list[dict[str, Any]]:
    """The approval requests the thread waits on (the interrupts' values)."""
    request = ThreadStateRequest(thread_id=thread_id, user_id=user_id)
    reply = await call(ctx.bus, "threads", "state", request, ThreadStateReply, timeout=TIMEOUT)
    interrupts = reply.state.interrupts if reply.state is not None else []
    values = [i.get("value") for i in interrupts]
    return [v for v in values if isinstance(v, dict) and v.get("type") == "approval_request"]


async def handle(ctx: CommandContext, message: InboundMessage, name: str, argument: str) -> Answer:
    """The chat's answer to `/approve` or `/deny` (never raises: a failure is said in words)."""
    approve = name == "approve"
    ident, _, reason = argument.strip().partition(" ")
    binding = await ctx.bindings.of(message)
    try:
        pending = await waiting(ctx, binding.thread_id, binding.user_id)
    except ServiceError as exc:
        log.warning("reading approvals of thread %s failed: %s", binding.thread_id, exc.message)
        return f"I could not look up what waits for approval: {exc.message}"
    if not ident:
        if not pending:
            return "Nothing waits for your approval here."
        lines = [f"{p['approval_id']}: {p.get('description', p.get('tool'))}" for p in pending]
        return "Waiting for approval:\n" + "\n".join(lines) + f"\nAnswer with /{name} <id>."
    found = next((p for p in pending if p.get("approval_id") == ident), None)
    if found is None:
        return f"No approval {ident} waits here (it was answered already, or belongs to another chat)."
    asker = found.get("chat_user")
    if asker and asker != message.user_id:
        return f"Only the person who asked for this may answer approval {ident}."
    expired = time.time() > float(found.get("expires_at") or float("inf"))
    always = approve and reason.strip().lower() == "always"  # `/approve <id> always`: for this chat
    resume: dict[str, Any] = {
        "approval_id": ident,
        "decision": ("always" if always else "approve") if approve and not expired else "deny",
        "by": message.user_id,
    }
    if expired:
        resume["expired"] = True
    elif reason.strip() and not always:
        resume["reason"] = reason.strip()
    log.info("approval %s on thread %s: %s from a chat", ident, binding.thread_id, resume["decision"])
    return PassOn(resume=resume, run_id=answer_run_id(binding.thread_id, ident))
