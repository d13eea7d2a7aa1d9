"""What the runner, the router and the scheduler agree on about approval requests
(`agents.graph.approvals`): the run that answers one, and where its expiry is scheduled."""

from __future__ import annotations

import uuid

ANSWER_NAMESPACE = uuid.UUID("5f0c7e4e-53a1-4d5e-9a3b-0b7a9d6c2e11")


def answer_run_id(thread_id: str, approval_id: str) -> str:
    """The resume run of an approval request: one, whoever answers (a person, its expiry) and
    however often, so the request is answered once."""
    return str(uuid.uuid5(ANSWER_NAMESPACE, f"{thread_id}:{approval_id}"))


def expiry_task_id(approval_id: str) -> str:
    """The schedule's task id of the request's expiry (`sched.def.<it>`)."""
    return f"approval-{approval_id}"
