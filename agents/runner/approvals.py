"""A run that stopped at a tool call waiting for approval says so: one `approval` event per request.

The request itself lives in the thread's checkpoint (`agents.graph.approvals`); the event on the
run's log (a durable stream) is what the chat's router shows with `/approve` and `/deny`, and what
any follower of the run can answer with a resume run.
"""

from __future__ import annotations

import logging
from typing import Any

from agents.graph.approvals import APPROVAL
from agents.runner.active_run import ActiveRun
from agents.runner.setup import Ready

log = logging.getLogger(__name__)

APPROVAL_EVENT = "approval"


async def pending_approvals(agent: Any, thread_id: str) -> list[dict[str, Any]]:
    """The approval requests the thread's latest checkpoint waits on, each with its interrupt's id."""
    snapshot = await agent.aget_state({"configurable": {"thread_id": thread_id}})
    found = []
    for item in getattr(snapshot, "interrupts", ()) or ():
        value = getattr(item, "value", None)
        if isinstance(value, dict) and value.get("type") == APPROVAL:
            found.append({**value, "interrupt_id": getattr(item, "id", None)})
    return found


async def announce_approvals(run: ActiveRun, ready: Ready) -> None:
    """Publish an `approval` event for each request the run stopped at."""
    for request in await pending_approvals(ready.agent, run.thread_id):
        log.info(
            "run %s on thread %s waits for approval %s (%s)",
            run.run_id,
            run.thread_id,
            request["approval_id"],
            request.get("tool"),
        )
        await run.events.emit(APPROVAL_EVENT, request)
