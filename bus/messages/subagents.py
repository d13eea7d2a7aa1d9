"""Subagent tasks, their progress and results; component readiness."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bus.messages.base import (
    ChatOrigin,
    Envelope,
    Usage,
    utcnow,
)
from bus.messages.sandbox import EgressPolicy

# --------------------------------------------------------------------- subagents and memory


class BackgroundReport(BaseModel):
    """How a background task's outcome comes back: a run on the parent's thread, with the parent
    run's options and chat origin (so its answer goes to the chat that started the task)."""

    model_config = ConfigDict(extra="ignore")

    assistant_id: str = "lead_agent"
    config: dict[str, Any] = Field(default_factory=dict)
    context: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    stream_mode: list[str] = Field(default_factory=lambda: ["values"])
    origin: ChatOrigin | None = None


class SubagentTask(Envelope):
    """Work for a subagent, on `<prefix>.subagents.submit` (`Nats-Msg-Id` `task:<parent run>:<task>`).

    The `task` tool of a parent run publishes it and waits for the result in KV
    `<prefix>_subagent_results` (key `SubagentResult.key`), relaying progress
    from `<prefix>.subagents.progress.<parent run>` as the run's custom events.
    """

    task_id: str = Field(description="The task tool call's id: one task per call, however often resumed.")
    parent_run_id: str
    thread_id: str = Field(description="The parent's thread: the subagent works in its sandbox directories.")
    user_id: str = "default"
    subagent_type: str = "general-purpose"
    description: str = ""
    prompt: str
    model_name: str | None = Field(None, description="The parent run's model; a type may name its own.")
    max_turns: int | None = Field(None, gt=0)
    timeout_seconds: float | None = Field(
        None, gt=0, description="From created_at: time spent waiting for an executor counts too."
    )
    created_at: datetime = Field(default_factory=utcnow)
    background: BackgroundReport | None = Field(
        None,
        description="Set for a task started in the background: its parent run does not wait; its "
        "outcome becomes a new run on the thread (not stopped when the parent run ends).",
    )
    kind: Literal["subagent", "command"] = Field(
        "subagent",
        description="command: a `bash` command run in the background (`prompt` is the command), "
        "started in the thread's sandbox by the executor, which waits for it and reports it.",
    )
    egress: EgressPolicy | None = Field(None, description="A command's: the parent run's egress policy.")


class BackgroundTask(Envelope):
    """A task the agent started in the background, in KV `<prefix>_background_tasks` (key
    `BackgroundTask.key`, entries expire): what `list_background_tasks` lists. How it ended is
    its `SubagentResult`; the record says only what was asked, and whether a stop was."""

    task_id: str
    thread_id: str
    parent_run_id: str
    user_id: str = "default"
    description: str = ""
    subagent_type: str = "general-purpose"
    kind: Literal["subagent", "command"] = "subagent"
    command: str = Field("", description="A command's: what it runs.")
    started_at: datetime | None = Field(
        None, description="A command's: when a sandbox broker started it (it is never started twice)."
    )
    cancel_requested_at: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)

    @staticmethod
    def key(thread_id: str, task_id: str) -> str:
        from bus.subjects import safe_token

        return f"{safe_token(thread_id)}.{safe_token(task_id)}"


class SubagentCancel(Envelope):
    """Stop a parent run's subagent tasks (one, or all when `task_id` is None), on
    `<prefix>.subagents.cancel.<parent run>` (core NATS): its task tool gave up, or the run ended."""

    parent_run_id: str
    task_id: str | None = None
    reason: str = "cancelled"


class ComponentReady(Envelope):
    """A component process is ready to serve (its consumers take work, its services answer), on
    `<prefix>.ready.<component>` (core NATS): how `antler up` knows its runner processes are. With
    `problem`, it cannot serve yet and says why (it failed and is being started again); with
    `degraded`, it serves with less than it should, and says why (a runner with no usable model)."""

    component: str
    pid: int
    problem: str | None = None
    degraded: str | None = None


SubagentStatus = Literal["completed", "failed", "cancelled", "timed_out"]


class SubagentResult(Envelope):
    """How a subagent task ended, in KV `<prefix>_subagent_results` (entries expire)."""

    task_id: str
    parent_run_id: str
    status: SubagentStatus
    result: str = Field("", description="The subagent's final answer (what it had, if a cap stopped it).")
    error: str | None = None
    stop_reason: str | None = Field(None, description="turn_capped when its turn limit ended it.")
    exit_code: int | None = Field(None, description="A background command's exit code.")
    turns: int = 0
    usage: Usage = Field(default_factory=Usage)
    started_at: datetime | None = None
    ended_at: datetime = Field(default_factory=utcnow)

    @staticmethod
    def key(parent_run_id: str, task_id: str) -> str:
        from bus.subjects import safe_token

        return f"{safe_token(parent_run_id)}.{safe_token(task_id)}"


class SubagentProgress(Envelope):
    """A running subagent's latest message, on `<prefix>.subagents.progress.<parent run>` (core NATS)."""

    task_id: str
    parent_run_id: str
    turn: int
    message: dict[str, Any] = Field(default_factory=dict, description="Its latest AI message.")
