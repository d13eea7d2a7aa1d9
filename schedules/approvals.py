"""An approval request's expiry: the firing the runner scheduled when a run stopped to ask
(`agents.runner.approvals`), turned into a denial if the request still waits.

The denial is the request's one answer run (`bus.approvals.answer_run_id`), as a person's from a chat
would be: whichever comes first is applied, the other finds its run there already. An answer given
over HTTP (a run id of its own) leaves nothing waiting, which the thread's state shows here.
"""

from __future__ import annotations

import logging

from bus import Bus
from bus.approvals import answer_run_id
from bus.messages import (
    ApprovalExpiry,
    MultitaskStrategy,
    RunCommand,
    RunRequest,
    ThreadStateReply,
    ThreadStateRequest,
)
from bus.runs import submit_run
from bus.service import ServiceError, call

log = logging.getLogger(__name__)

TIMEOUT = 15.0
EXPIRED = {"decision": "deny", "expired": True}


async def still_waits(bus: Bus, expiry: ApprovalExpiry, user_id: str) -> bool:
    """Whether the thread's latest checkpoint still waits on the request."""
    request = ThreadStateRequest(thread_id=expiry.thread_id, user_id=user_id)
    try:
        reply = await call(bus, "threads", "state", request, ThreadStateReply, timeout=TIMEOUT)
    except ServiceError as exc:
        if exc.code == "not_found":  # the thread is gone: nothing to deny
            return False
        raise
    interrupts = reply.state.interrupts if reply.state is not None else []
    values = [i.get("value") for i in interrupts]
    return any(isinstance(v, dict) and v.get("approval_id") == expiry.approval_id for v in values)


async def expire(bus: Bus, expiry: ApprovalExpiry, user_id: str) -> None:
    """Deny the request if it still waits: the run goes on, the model reading nobody answered in time.

    Raises:
        ServiceError: the runners could not say what the thread waits on (the firing is retried).
    """
    if not await still_waits(bus, expiry, user_id):
        log.info("approval %s on thread %s was answered in time", expiry.approval_id, expiry.thread_id)
        return
    origin = expiry.origin
    request = RunRequest(
        run_id=answer_run_id(expiry.thread_id, expiry.approval_id),
        thread_id=expiry.thread_id,
        user_id=user_id,
        command=RunCommand(resume={**EXPIRED, "approval_id": expiry.approval_id}),
        metadata={"origin": origin.model_dump(exclude_none=True)} if origin is not None else {},
        stream_mode=["messages-tuple", "custom"] if origin is not None else ["values"],
        multitask_strategy=MultitaskStrategy.ENQUEUE,
        origin=origin,
    )
    if await submit_run(bus, request) is not None:
        log.info("approval %s on thread %s expired: denied", expiry.approval_id, expiry.thread_id)
