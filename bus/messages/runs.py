"""Runs: requests, events, control, the run and thread records and chat bindings."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from bus.messages.base import (
    ChatOrigin,
    Envelope,
    ErrorInfo,
    Id,
    ModelTokens,
    Usage,
    new_id,
    utcnow,
)
from bus.messages.commands import (
    LEAD_AGENT,
    InterruptAt,
    RunCommand,
    check_assistant_id,
    input_or_command,
)
from bus.messages.goals import ThreadGoal
from bus.subjects import safe_token

# --------------------------------------------------------------------- runs


class MultitaskStrategy(StrEnum):
    REJECT = "reject"
    INTERRUPT = "interrupt"
    ROLLBACK = "rollback"
    ENQUEUE = "enqueue"
    # Delivered into the thread's running run, before its next model call (the message is added to
    # that turn); a thread with no run in progress runs it as `enqueue` would.
    STEER = "steer"


class RunStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCESS = "success"
    ERROR = "error"
    INTERRUPTED = "interrupted"
    TIMEOUT = "timeout"

    @property
    def finished(self) -> bool:
        return self not in (RunStatus.PENDING, RunStatus.RUNNING)


class RunRequest(Envelope):
    """Start (or resume) an agent run, on `<prefix>.runs.submit`; `Nats-Msg-Id` is the run id.

    A request that can never run (a command that is none, both input and a command, an agent
    nobody has) is refused where the runner takes it: the run ends with an error naming the field.
    """

    run_id: Id = Field(default_factory=new_id)
    thread_id: Id
    assistant_id: Annotated[str, AfterValidator(check_assistant_id)] = LEAD_AGENT
    user_id: str = "default"
    input: dict[str, Any] | None = Field(None, description='LangGraph input, e.g. {"messages": [...]}')
    command: RunCommand | None = Field(
        None, description="LangGraph Command (resume / update / goto); not with `input`."
    )
    config: dict[str, Any] = Field(default_factory=dict, description="RunnableConfig; configurable options.")
    context: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    stream_mode: list[str] = Field(default_factory=lambda: ["values"])
    stream_subgraphs: bool = False
    multitask_strategy: MultitaskStrategy = MultitaskStrategy.ENQUEUE
    after: Id | None = Field(
        None,
        description="The run its submitter sent to this thread just before (`bus.runs.SubmissionOrder`): "
        "an enqueued run does not take an idle thread while that one has not had its turn.",
    )
    checkpoint_id: str | None = None
    interrupt_before: InterruptAt = None
    interrupt_after: InterruptAt = None
    origin: ChatOrigin | None = None
    followed: bool | None = Field(
        None,
        description="Whether a reader follows the run's text as it streams (a web UI, an SDK stream, "
        "an agent-protocol client): its deltas go out live at once (`runs.live.…`) beside the four a "
        "second stored. False: only the stored ones, until a reader says it follows (`RunControl` "
        "`follow`). None (default): followed unless the run answers a chat (`origin`).",
    )
    events_partition: int | None = Field(
        None,
        ge=0,
        description="The `RUN_EVENTS_<k>` stream its events go to (`bus.run_events`); set by submitters.",
    )
    created_at: datetime = Field(default_factory=utcnow)

    one_of_input_and_command = field_validator("command")(input_or_command)


class RunEventName(StrEnum):
    METADATA = "metadata"
    VALUES = "values"
    UPDATES = "updates"
    MESSAGES = "messages"
    CUSTOM = "custom"
    EVENTS = "events"
    ERROR = "error"
    END = "end"
    TASK_STARTED = "task_started"
    TASK_RUNNING = "task_running"
    TASK_COMPLETED = "task_completed"
    TASK_FAILED = "task_failed"
    TASK_TIMED_OUT = "task_timed_out"


class RunEvent(Envelope):
    """One event of a run, on `<prefix>.runs.ev.<run_id>`, in order; relayed 1:1 as SSE."""

    run_id: str
    thread_id: str
    seq: int = Field(description="1, 2, 3 ... within the run.")
    event: str = Field(description="A RunEventName, or `mode|namespace` for subgraph events.")
    data: Any = None
    attempt: int = Field(1, description="Which delivery of the RunRequest produced it (resumes count up).")
    ts: datetime = Field(default_factory=utcnow)
    part: int | None = Field(
        None,
        description="A live delta (`<prefix>.runs.live.<run_id>…`, core NATS, never stored): the "
        "`part`-th (from 0) of the text deltas that the stored `messages` event numbered `seq` merges.",
    )
    parts: list[Any] | None = Field(
        None,
        description="A stored `messages` event that merges text deltas sent live before it: their "
        "chunks, in order (a reader that showed the first k takes the rest: `bus.deltas.rest_of`).",
    )


class RunControl(Envelope):
    """Cancel or interrupt a run, or steer it, on `<prefix>.runs.ctl.<run_id>` (core NATS)."""

    run_id: str
    action: Literal["cancel", "interrupt", "rollback", "steer", "follow"] = Field(
        "cancel",
        description="follow: a reader follows the run's text live (`bus.runs.follow_run(live=True)`); "
        "a run nobody followed (`RunRequest.followed`) sends its deltas live from then on.",
    )
    reason: str | None = None
    messages: list[dict[str, Any]] = Field(
        default_factory=list,
        description="steer: the messages added to the running turn (a request: its runner replies "
        '`{"ok": true}` once it has them, `{"ok": false}` when the run can take none any more).',
    )
    by_run: str | None = Field(None, description="steer: the run that brought the messages.")

    @property
    def stops(self) -> bool:
        """Whether it stops the run (cancel, interrupt, rollback), and the subagent tasks it started."""
        return self.action in ("cancel", "interrupt", "rollback")


class RunFeedback(BaseModel):
    """A user's rating of a run's answer (thumbs up: 1, down: -1), kept on the run's record."""

    feedback_id: str = Field(default_factory=new_id)
    user_id: str
    rating: Literal[1, -1]
    comment: str | None = None
    created_at: datetime = Field(default_factory=utcnow)


class RunRecord(Envelope):
    """A run as kept in KV `<prefix>_runs` (key: run id)."""

    run_id: str
    thread_id: str
    assistant_id: str = "lead_agent"
    user_id: str = "default"
    status: RunStatus = RunStatus.PENDING
    multitask_strategy: MultitaskStrategy = MultitaskStrategy.ENQUEUE
    metadata: dict[str, Any] = Field(default_factory=dict)
    error: ErrorInfo | None = None
    usage: Usage = Field(default_factory=Usage)
    attempt: int = 0
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    ended_at: datetime | None = None
    feedback: RunFeedback | None = Field(
        None, description="The owner's rating of the answer (written by the gateway's feedback API)."
    )
    events_partition: int | None = Field(
        None, description="Which `RUN_EVENTS_<k>` holds its events (None: a run from before the split)."
    )

    @classmethod
    def pending(cls, request: RunRequest) -> RunRecord:
        """The record of a run that has been accepted but not started."""
        return cls(
            run_id=request.run_id,
            thread_id=request.thread_id,
            assistant_id=request.assistant_id,
            user_id=request.user_id,
            multitask_strategy=request.multitask_strategy,
            metadata=request.metadata,
            events_partition=request.events_partition,
            created_at=request.created_at,
            updated_at=request.created_at,
        )


class QueuedRun(BaseModel):
    """A run waiting for its thread; `order` keeps submission order (the request's stream sequence)."""

    model_config = ConfigDict(extra="ignore")

    run_id: str
    order: int = 0


class ThreadRecord(Envelope):
    """Thread metadata as kept in KV `<prefix>_threads` (key: thread id)."""

    thread_id: str
    user_id: str = "default"
    status: Literal["idle", "busy", "interrupted", "error"] = "idle"
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    active_run_id: str | None = None
    last_run_id: str | None = Field(None, description="The run that took the thread most recently.")
    active_attempt: int | None = Field(
        None, description="Which delivery of the active run holds the thread (only it may release it)."
    )
    queue: list[QueuedRun] = Field(
        default_factory=list, description="Runs waiting for this thread, in order."
    )
    steering: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Messages steered in while the thread waited for a person's answer (an approval): "
        "the run that takes the thread next adds them before its next model call.",
    )
    usage: Usage = Field(default_factory=Usage, description="Tokens used by the thread's finished runs.")
    finished_runs: int = 0
    tokens_by_model: dict[str, ModelTokens] = Field(
        default_factory=dict, description="Tokens and runs per model the runs used."
    )
    subagent_tokens: int = Field(0, description="Of `usage.total_tokens`, what subagents used.")
    goal: ThreadGoal | None = Field(None, description="Goal mode: what the runner keeps working toward.")
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class ChatBinding(Envelope):
    """A chat's current thread and choices, in KV `<prefix>_chats` (key: `key_of` the chat)."""

    @staticmethod
    def key_of(channel: str, chat_id: str, topic_id: str | None = None) -> str:
        """KV key of a chat (dots separate the parts; each part made a safe token)."""
        parts = [channel, chat_id] + ([topic_id] if topic_id else [])
        return ".".join(safe_token(p) for p in parts)

    channel: str
    chat_id: str
    topic_id: str | None = None
    thread_id: str
    user_id: str = "default"
    model_name: str | None = None
    updated_at: datetime = Field(default_factory=utcnow)
