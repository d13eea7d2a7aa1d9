"""A run that stopped at a tool call waiting for approval says so: one `approval` event per request,
and the request's expiry scheduled.

The request itself lives in the thread's checkpoint (`agents.graph.approvals`); the event on the
run's log (a durable stream) is what the chat's router shows with `/approve` and `/deny`, and what
any follower of the run can answer with a resume run. Its expiry is a message schedule (`@at`, on
the SCHEDULES stream, as scheduled tasks are): the server fires it when the time is up, and the
scheduler denies the request then if it still waits (`schedules.firings`).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from agents.graph.approvals import APPROVAL
from agents.runner.active_run import ActiveRun
from agents.runner.setup import Ready
from bus import Bus
from bus.approvals import expiry_task_id
from bus.messages import ApprovalExpiry, RunRequest, ScheduleFiring

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
        run.waiting = True
        log.info(
            "run %s on thread %s waits for approval %s (%s)",
            run.run_id,
            run.thread_id,
            request["approval_id"],
            request.get("tool"),
        )
        await run.events.emit(APPROVAL_EVENT, request)
        try:
            await schedule_expiry(run.events.bus, run.request, request)
        except Exception as exc:  # answered in time, it needs none; late, the answer is a denial anyway
            log.warning("approval %s: its expiry could not be scheduled: %s", request["approval_id"], exc)


async def schedule_expiry(bus: Bus, run_request: RunRequest, request: dict[str, Any]) -> None:
    """The server fires the request's expiry at `expires_at` (a definition replaced, not added, when
    the run is announced again)."""
    s = bus.subjects
    task_id = expiry_task_id(str(request["approval_id"]))
    at = datetime.fromtimestamp(float(request["expires_at"]), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = ScheduleFiring(
        task_id=task_id,
        user_id=run_request.user_id,
        generation=0,
        approval=ApprovalExpiry(
            thread_id=run_request.thread_id,
            approval_id=str(request["approval_id"]),
            origin=run_request.origin,
        ),
    )
    headers = {"Nats-Schedule": f"@at {at}", "Nats-Schedule-Target": s.schedule_firing(task_id)}
    await bus.publish(s.schedule_definition(task_id), body, headers=headers)
