"""A run's lasting record: its messages and steps as DeerFlow's run-event rows."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from bus.messages.base import Envelope


class RunJournal(Envelope):
    """What a run did, kept after its live event log expires (`bus.journal`: in the object store).

    `events` are DeerFlow's run-event rows (`thread_id`, `run_id`, `seq`, `event_type`, `category`,
    `content`, `metadata`, `created_at`), numbered 1, 2, ... within the run: `run.start`, the run's
    messages (`llm.human.input`, `llm.ai.response`, `llm.tool.result`), its subagents' cards
    (`subagent.start`, `subagent.step`, `subagent.end`, after the answer that delegated them),
    `workspace_changes` when its file tools wrote files, `run.error` and `run.end` (the final
    values but the messages: todos, title, artifacts).
    """

    run_id: str
    thread_id: str
    user_id: str
    status: str
    attempt: int = 1
    events: list[dict[str, Any]] = Field(default_factory=list)
