"""Scheduled tasks: the task record, its firings' history, and the `schedules` service's envelopes.

Field names follow DeerFlow's scheduled-task API (`id`, `context_mode`,
`schedule_type`, `schedule_spec`, `timezone`, ...), so the gateway hands these
records to DeerFlow's UI as they are.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field

from bus.messages.base import ChatOrigin, Envelope, Reply, utcnow
from bus.subjects import safe_token


def task_key(user_id: str, task_id: str) -> str:
    """A task's key in `<prefix>_schedules`: its user first, so one user's tasks are one key filter."""
    return f"{safe_token(user_id)}.{safe_token(task_id)}"


ContextMode = Literal["fresh_thread_per_run", "reuse_thread"]
ScheduleType = Literal["once", "cron", "interval"]
TaskStatus = Literal["enabled", "paused", "running", "completed", "failed", "cancelled"]
FiringStatus = Literal["queued", "running", "success", "failed", "skipped", "interrupted"]


class TaskChat(BaseModel):
    """A chat a task answers in besides its thread (Antler's own field in DeerFlow's shape): one the
    task's owner talks to the bot from (its binding in KV `<prefix>_chats` is the owner's)."""

    model_config = ConfigDict(extra="forbid")

    channel: str = Field(min_length=1, description="telegram, slack, feishu or dingtalk")
    chat_id: str = Field(min_length=1)
    topic_id: str | None = Field(None, description="A topic or thread within the chat, if it has one.")


class ScheduledTaskFields(BaseModel):
    """What a user chooses about a task (create takes them all, patch any of them)."""

    model_config = ConfigDict(extra="ignore")

    title: str | None = None
    prompt: str | None = None
    schedule_type: ScheduleType | None = None
    schedule_spec: dict[str, Any] | None = Field(
        None,
        description='once: {"run_at": ISO 8601, naive = in `timezone`}; cron: {"cron": 5 or 6 fields '
        '(6: seconds first)}; interval: {"every": "30m"} or {"seconds": 1800}',
    )
    timezone: str | None = Field(None, description="An IANA zone (cron and naive run_at are read in it).")
    context_mode: ContextMode | None = None
    thread_id: str | None = Field(None, description="The thread a reuse_thread task runs in.")
    chat: TaskChat | None = Field(None, description="A chat of the owner's to answer in as well.")


class ScheduledTask(Envelope):
    """A scheduled task as kept in KV `<prefix>_schedules` (key: `<user as a token>.<id>`, so a user's
    tasks are listed by key filter); the scheduler is its one writer."""

    @property
    def key(self) -> str:
        return task_key(self.user_id, self.id)

    id: str
    user_id: str
    title: str
    prompt: str
    schedule_type: ScheduleType
    schedule_spec: dict[str, Any]
    timezone: str = "UTC"
    context_mode: ContextMode = "fresh_thread_per_run"
    thread_id: str | None = None
    assistant_id: str = "lead_agent"
    status: TaskStatus = "enabled"
    generation: int = Field(
        1, description="Bumped by every change of the definition; older firings still queued are dropped."
    )
    origin: ChatOrigin | None = Field(None, description="The chat that asked for it: answers go there.")
    next_run_at: datetime | None = None
    last_run_at: datetime | None = None
    last_run_id: str | None = None
    last_thread_id: str | None = None
    last_error: str | None = None
    run_count: int = 0
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)

    def when(self, *, markdown: bool = False) -> str:
        """When it fires, in words: `once at <run_at> (<zone>)`, `every <interval>` or `cron <expr>
        (<zone>)`; with `markdown`, the cron expression as code (its stars are no emphasis)."""
        spec = self.schedule_spec
        if self.schedule_type == "once":
            return f"once at {spec.get('run_at')} ({self.timezone})"
        if self.schedule_type == "interval":
            return f"every {spec.get('every', spec.get('seconds'))}"
        cron = f"`{spec.get('cron')}`" if markdown else spec.get("cron")
        return f"cron {cron} ({self.timezone})"

    def shown_spec(self) -> dict[str, Any]:
        """`schedule_spec` with a once task's `run_at` as an instant in UTC (`2030-01-02T00:00:00Z`).

        A `run_at` without an offset is read in the task's zone, as the scheduler reads it; clients
        that take `run_at` for an instant (DeerFlow's UI) would read a bare time in their own zone.
        """
        raw = self.schedule_spec.get("run_at")
        if self.schedule_type != "once" or not isinstance(raw, str):
            return dict(self.schedule_spec)
        try:
            at = datetime.fromisoformat(raw)
            if at.tzinfo is None:
                at = at.replace(tzinfo=ZoneInfo(self.timezone or "UTC"))
        except (ValueError, ZoneInfoNotFoundError):
            return dict(self.schedule_spec)
        return {**self.schedule_spec, "run_at": at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}


class ApprovalExpiry(BaseModel):
    """A tool call waiting for approval (`agents.graph.approvals`), denied when its time is up."""

    model_config = ConfigDict(extra="ignore")

    thread_id: str
    approval_id: str
    origin: ChatOrigin | None = Field(
        None, description="The chat the run asked in: the denial answers there."
    )


class ScheduleFiring(Envelope):
    """The body of a task's definition, which the server copies into every firing; a trigger-now
    publishes one itself (`trigger` manual, `trigger_id` its request). With `approval`, no task's:
    the expiry of an approval request, which the runner defined (`task_id` `approval-<id>`)."""

    task_id: str
    user_id: str
    generation: int
    trigger: Literal["scheduled", "manual"] = "scheduled"
    trigger_id: str | None = None
    approval: ApprovalExpiry | None = None


class ScheduledTaskRun(Envelope):
    """One firing of a task, in KV `<prefix>_schedule_runs` (key `<task>.<fired ms>.<id>`): the run it
    started, or why it started none (`skipped`: the task's previous run was still going)."""

    id: str
    task_id: str
    thread_id: str | None = None
    run_id: str | None = None
    scheduled_for: datetime
    trigger: Literal["scheduled", "manual"] = "scheduled"
    status: FiringStatus = "queued"
    error: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)


# ------------------------------------------------------------------ the `schedules` service


class ScheduleCreate(Envelope):
    """`schedules.create`: a new task of `user_id`, from `fields`, or from a chat's `text`
    (`<when> <prompt>`, the grammar of `/schedule`)."""

    user_id: str
    fields: ScheduledTaskFields | None = None
    text: str | None = None
    origin: ChatOrigin | None = None


class ScheduleChange(Envelope):
    """`schedules.update`: change some of a task's fields."""

    user_id: str
    task_id: str
    fields: ScheduledTaskFields


class ScheduleAction(Envelope):
    """`schedules.{get,pause,resume,trigger,delete,runs}`: one task of `user_id`."""

    user_id: str
    task_id: str
    limit: int = 50
    offset: int = 0


class ScheduleQuery(Envelope):
    """`schedules.list`: `user_id`'s tasks, optionally only a thread's or a chat's."""

    user_id: str
    thread_id: str | None = None
    channel: str | None = None
    chat_id: str | None = None


class ScheduledTaskReply(Reply):
    task: ScheduledTask | None = None
    deleted: bool = False


class ScheduledTaskList(Reply):
    tasks: list[ScheduledTask] = Field(default_factory=list)


class ScheduledRunList(Reply):
    runs: list[ScheduledTaskRun] = Field(default_factory=list)
