"""Envelopes: the versioned JSON messages components exchange on the bus.

Every envelope has `v` (schema version). Consumers validate at the boundary
with `decode()`; raw dicts never travel further. Unknown fields are ignored so
a newer producer does not break an older consumer; a different `v` is refused.
`antler schema` prints the JSON Schemas so other languages can produce these.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bus.errors import EnvelopeError
from bus.layout import USER_DATA


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    return str(uuid.uuid4())


# Run and thread ids become subject tokens, KV keys and directory names: one safe token each.
ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$"
ID_RULE = "letters, digits, '_' and '-', at most 128, not starting with '-'"
Id = Annotated[str, Field(pattern=ID_PATTERN, description=f"{ID_RULE}; a UUID, say.")]


def is_valid_id(value: str) -> bool:
    """Whether `value` may be a run or thread id (see `ID_PATTERN`)."""
    return _ID.fullmatch(value) is not None


class Envelope(BaseModel):
    """Base of every message on the bus."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    v: Literal[1] = Field(1, description="Envelope schema version.")


E = TypeVar("E", bound=BaseModel)


def encode(message: BaseModel) -> bytes:
    return message.model_dump_json(exclude_none=True).encode()


def decode(model: type[E], data: bytes | str) -> E:
    """Parse and validate one payload.

    Raises:
        EnvelopeError: not JSON, or not a valid `model`; the message says which fields.
    """
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors()[:5]:
            loc = ".".join(str(p) for p in err["loc"]) or "(payload)"
            problems.append(f"{loc}: {err['msg']}")
        if exc.errors() and exc.errors()[0]["type"] == "json_invalid":
            raise EnvelopeError(model.__name__, f"not valid JSON ({exc.errors()[0]['msg']})") from None
        raise EnvelopeError(model.__name__, "; ".join(problems)) from None


_ID = re.compile(ID_PATTERN[1:-1])


# --------------------------------------------------------------------- shared parts


class FileRef(BaseModel):
    """A file travelling with a message: in the object store, or at a platform URL."""

    model_config = ConfigDict(extra="ignore")

    name: str
    content_type: str | None = None
    size: int | None = None
    object_name: str | None = Field(None, description="Key in the antler_files object store.")
    url: str | None = Field(None, description="Where a channel adapter can fetch it.")
    path: str | None = Field(
        None, description="Virtual path the agent sees, e.g. /mnt/user-data/outputs/a.md"
    )


class ChatOrigin(BaseModel):
    """Where a chat-started run came from, so its replies can find their way back."""

    model_config = ConfigDict(extra="ignore")

    channel: str
    chat_id: str
    topic_id: str | None = None
    message_id: str | None = None
    user_id: str | None = None
    platform: dict[str, Any] = Field(
        default_factory=dict, description="The inbound message's metadata, handed back with every reply."
    )


class Usage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0


class ModelTokens(BaseModel):
    model_config = ConfigDict(extra="ignore")

    tokens: int = 0
    runs: int = 0


class ErrorInfo(BaseModel):
    """A failure a caller (or the model) can act on."""

    model_config = ConfigDict(extra="ignore")

    code: str = Field(
        description="not_found, not_allowed, invalid, timeout, too_large, conflict, internal ..."
    )
    message: str


# --------------------------------------------------------------------- chat


class InboundMessage(Envelope):
    """A user's message from a chat platform or a script, on `<prefix>.chat.in.<channel>`."""

    channel: str = Field(description="cli, slack, telegram, feishu, dingtalk, or a script's own name.")
    chat_id: str = Field(description="Conversation id on that channel.")
    text: str = ""
    user_id: str = Field("default", description="The sender on the platform.")
    user_name: str | None = None
    message_id: str = Field(default_factory=new_id, description="Platform message id; retries repeat it.")
    topic_id: str | None = Field(
        None, description="Thread / topic inside the chat (Slack thread_ts, forum topic)."
    )
    chat_type: Literal["private", "group"] = "private"
    mentioned: bool = Field(False, description="The bot was @-mentioned (group chats).")
    reply_to_bot: bool = Field(False, description="The message replies to one of the bot's messages.")
    files: list[FileRef] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="Platform extras an adapter needs to answer (DingTalk's session webhook ...); "
        "every reply to this message carries them back as its metadata.",
    )
    sent_at: datetime = Field(default_factory=utcnow)

    def dedupe_id(self) -> str:
        """`Nats-Msg-Id`: a platform's retry of the same message is dropped by JetStream."""
        return f"{self.channel}:{self.chat_id}:{self.message_id}"

    def chat_key(self) -> str:
        return f"{self.channel}:{self.chat_id}" + (f":{self.topic_id}" if self.topic_id else "")


class OutboundMessage(Envelope):
    """A reply (partial or final) for a chat, on `<prefix>.chat.out.<channel>`."""

    channel: str
    chat_id: str
    topic_id: str | None = None
    reply_to: str | None = Field(None, description="Platform message id being answered.")
    thread_id: str | None = None
    run_id: str | None = None
    kind: Literal["partial", "final", "error", "clarification", "command"] = "final"
    text: str = ""
    seq: int = Field(0, description="Order of updates within one run; adapters drop stale partials.")
    files: list[FileRef] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict, description="The answered message's metadata.")

    @property
    def is_final(self) -> bool:
        return self.kind != "partial"


# --------------------------------------------------------------------- runs


class MultitaskStrategy(StrEnum):
    REJECT = "reject"
    INTERRUPT = "interrupt"
    ROLLBACK = "rollback"
    ENQUEUE = "enqueue"


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
    """Start (or resume) an agent run, on `<prefix>.runs.submit`; `Nats-Msg-Id` is the run id."""

    run_id: Id = Field(default_factory=new_id)
    thread_id: Id
    assistant_id: str = "lead_agent"
    user_id: str = "default"
    input: dict[str, Any] | None = Field(None, description='LangGraph input, e.g. {"messages": [...]}')
    command: dict[str, Any] | None = Field(None, description="LangGraph Command (resume / update / goto).")
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
    interrupt_before: list[str] | Literal["*"] | None = None
    interrupt_after: list[str] | Literal["*"] | None = None
    origin: ChatOrigin | None = None
    created_at: datetime = Field(default_factory=utcnow)


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


class RunControl(Envelope):
    """Cancel or interrupt a run, on `<prefix>.runs.ctl.<run_id>` (core NATS)."""

    run_id: str
    action: Literal["cancel", "interrupt", "rollback"] = "cancel"
    reason: str | None = None


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
    usage: Usage = Field(default_factory=Usage, description="Tokens used by the thread's finished runs.")
    finished_runs: int = 0
    tokens_by_model: dict[str, ModelTokens] = Field(
        default_factory=dict, description="Tokens and runs per model the runs used."
    )
    subagent_tokens: int = Field(0, description="Of `usage.total_tokens`, what subagents used.")
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class ChatBinding(Envelope):
    """A chat's current thread and choices, in KV `<prefix>_chats` (key: chat key)."""

    channel: str
    chat_id: str
    topic_id: str | None = None
    thread_id: str
    user_id: str = "default"
    model_name: str | None = None
    updated_at: datetime = Field(default_factory=utcnow)


# --------------------------------------------------------------------- subagents and memory


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


class SubagentCancel(Envelope):
    """Stop a parent run's subagent tasks (one, or all when `task_id` is None), on
    `<prefix>.subagents.cancel.<parent run>` (core NATS): its task tool gave up, or the run ended."""

    parent_run_id: str
    task_id: str | None = None
    reason: str = "cancelled"


class ComponentReady(Envelope):
    """A component process is ready to serve (its consumers take work, its services answer), on
    `<prefix>.ready.<component>` (core NATS): how `antler up` knows its runner processes are."""

    component: str
    pid: int


SubagentStatus = Literal["completed", "failed", "cancelled", "timed_out"]


class SubagentResult(Envelope):
    """How a subagent task ended, in KV `<prefix>_subagent_results` (entries expire)."""

    task_id: str
    parent_run_id: str
    status: SubagentStatus
    result: str = Field("", description="The subagent's final answer (what it had, if a cap stopped it).")
    error: str | None = None
    stop_reason: str | None = Field(None, description="turn_capped when its turn limit ended it.")
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


class ChatTurn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["user", "assistant"]
    content: str


class MemoryUpdate(Envelope):
    """A conversation to learn from, on `<prefix>.memory.update.<thread>`.

    The stream keeps only the newest per thread: runs in quick succession
    become one update carrying the whole conversation so far.
    """

    user_id: str = "default"
    agent_name: str | None = None
    thread_id: str
    run_id: str | None = None
    messages: list[ChatTurn] = Field(description="The user's messages and the final answers, in order.")
    created_at: datetime = Field(default_factory=utcnow)


FactCategory = Literal["preference", "knowledge", "context", "behavior", "goal"]


class _Camel(BaseModel):
    """Fields named as DeerFlow's memory.json names them (`by_alias`), read in either spelling."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class MemorySection(_Camel):
    summary: str = ""
    updated_at: datetime | None = Field(None, alias="updatedAt")


class MemoryUser(_Camel):
    work_context: MemorySection = Field(default_factory=MemorySection, alias="workContext")
    personal_context: MemorySection = Field(default_factory=MemorySection, alias="personalContext")
    top_of_mind: MemorySection = Field(default_factory=MemorySection, alias="topOfMind")


class MemoryHistory(_Camel):
    recent_months: MemorySection = Field(default_factory=MemorySection, alias="recentMonths")
    earlier_context: MemorySection = Field(default_factory=MemorySection, alias="earlierContext")
    long_term_background: MemorySection = Field(default_factory=MemorySection, alias="longTermBackground")


class MemoryFact(_Camel):
    id: str = Field(default_factory=lambda: f"fact_{uuid.uuid4().hex[:12]}")
    content: str
    category: FactCategory = "context"
    confidence: float = Field(0.8, ge=0, le=1)
    created_at: datetime = Field(default_factory=utcnow, alias="createdAt")
    source: str | None = Field(None, description="The thread it was learned in, or `manual`, `import`.")


class MemoryDocument(Envelope):
    """What the agent remembers about one user (and custom agent), in KV `<prefix>_memory`.

    DeerFlow's memory.json structure; `model_dump(by_alias=True)` gives its
    camelCase names (`user.workContext`, `history.recentMonths`, `lastUpdated`).
    """

    user_id: str = "default"
    agent_name: str | None = None
    version: str = "1.0"
    last_updated: datetime = Field(default_factory=utcnow, alias="lastUpdated")
    user: MemoryUser = Field(default_factory=MemoryUser)
    history: MemoryHistory = Field(default_factory=MemoryHistory)
    facts: list[MemoryFact] = Field(default_factory=list)

    @staticmethod
    def key(user_id: str, agent_name: str | None = None) -> str:
        """`<user>.<digest>` (`<user>.<agent>.<digest>`): readable, and one key per user and agent
        however alike their ids look once made key-safe (`a.b@x` and `a_b@x`)."""
        import hashlib

        from bus.subjects import safe_token

        digest = hashlib.sha256(f"{user_id}\0{agent_name or ''}".encode()).hexdigest()[:16]
        readable = safe_token(user_id)[:64] + (f".{safe_token(agent_name)[:64]}" if agent_name else "")
        return f"{readable}.{digest}"

    def is_empty(self) -> bool:
        sections = [*self.user.__dict__.values(), *self.history.__dict__.values()]
        return not self.facts and not any(section.summary for section in sections)


class AgentDefinition(Envelope):
    """A user's custom agent, in KV `<prefix>_agents` (key `AgentDefinition.key(user, name)`).

    Its soul (SOUL.md: personality and instructions) goes into the system prompt of runs with
    its `agent_name`; the rest chooses their model, tools and skills. None means "the default"
    (for `skills` and `tool_groups`: all), an empty list "none".
    """

    user_id: str = "default"
    name: str
    description: str = ""
    soul: str = ""
    model: str | None = None
    tool_groups: list[str] | None = None
    skills: list[str] | None = None
    model_settings: dict[str, Any] | None = None
    thinking_enabled: bool | None = None
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)

    @staticmethod
    def key(user_id: str, name: str) -> str:
        """Readable, and one per (user, lower-cased name): users never share a key."""
        import hashlib

        from bus.subjects import safe_token

        digest = hashlib.sha256(f"{user_id}\0{name.lower()}".encode()).hexdigest()[:16]
        return f"{safe_token(user_id)[:64]}.{safe_token(name.lower())[:64]}.{digest}"

    @staticmethod
    def user_prefix(user_id: str) -> str:
        from bus.subjects import safe_token

        return safe_token(user_id)[:64]


# --------------------------------------------------------------------- request / reply


class Reply(Envelope):
    """Base of service replies: `error` is set when the request failed."""

    error: ErrorInfo | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class SandboxRequest(Envelope):
    user_id: str = "default"
    thread_id: str


class ExecRequest(SandboxRequest):
    """Run a shell command in a thread's sandbox: `<prefix>.sandbox.exec` (request/reply)."""

    command: str
    timeout_seconds: float | None = None


class ExecReply(Reply):
    """A sandbox command's output, exit code, and whether it was stopped at its time limit."""

    exit_code: int | None = None
    output: str = ""
    timed_out: bool = Field(False, description="The command outlived timeout_seconds and was killed.")
    timeout_seconds: float | None = Field(None, description="The time limit the command ran under.")
    truncated_chars: int = 0
    warnings: list[str] = Field(default_factory=list)


class ReadFileRequest(SandboxRequest):
    """Read a file (or a range of lines) of a thread's sandbox: `<prefix>.sandbox.read_file`."""

    path: str
    start_line: int | None = Field(None, ge=1)
    end_line: int | None = Field(None, ge=1)
    encoding: Literal["text", "base64"] = Field("text", description="base64: the whole file, for images.")


class ReadFileReply(Reply):
    """A sandbox file's text (cut at `sandbox.max_read_chars`, saying so)."""

    content: str = ""
    total_lines: int = 0
    truncated_chars: int = 0
    content_type: str | None = None


class WriteFileRequest(SandboxRequest):
    """Write or append to a file in a thread's sandbox: `<prefix>.sandbox.write_file`."""

    path: str
    content: str
    append: bool = False


class WriteFileReply(Reply):
    """What a sandbox write did (bytes written)."""

    path: str = ""
    bytes_written: int = 0


class ListDirRequest(SandboxRequest):
    """List a sandbox directory as a tree: `<prefix>.sandbox.list_dir`."""

    path: str = USER_DATA
    max_depth: int = Field(2, ge=1, le=5)


class ListDirReply(Reply):
    """A sandbox directory tree, as text."""

    tree: str = ""
    entries: list[str] = Field(default_factory=list)


class StrReplaceRequest(SandboxRequest):
    """Replace a unique string in a sandbox file: `<prefix>.sandbox.str_replace`."""

    path: str
    old_str: str
    new_str: str
    replace_all: bool = False


class StrReplaceReply(Reply):
    """What a sandbox replacement did."""

    replacements: int = 0


class GlobRequest(SandboxRequest):
    """Find sandbox files by glob pattern: `<prefix>.sandbox.glob`."""

    pattern: str
    path: str = USER_DATA


class GlobReply(Reply):
    """The sandbox paths a glob found."""

    paths: list[str] = Field(default_factory=list)
    truncated: bool = False


class GrepRequest(SandboxRequest):
    """Search sandbox files for a regular expression: `<prefix>.sandbox.grep`."""

    pattern: str
    path: str = USER_DATA
    glob: str | None = None
    ignore_case: bool = False
    max_matches: int = Field(200, ge=1, le=5000)


class GrepMatch(BaseModel):
    path: str
    line: int
    text: str


class GrepReply(Reply):
    """The matching lines a sandbox grep found."""

    matches: list[GrepMatch] = Field(default_factory=list)
    truncated: bool = False


class ThreadStateRequest(Envelope):
    """A thread's current state (or at a checkpoint): `<prefix>.threads.state`."""

    thread_id: str
    user_id: str = "default"
    checkpoint_id: str | None = None
    subgraphs: bool = False


class ThreadState(BaseModel):
    """LangGraph's ThreadState as the API returns it."""

    model_config = ConfigDict(extra="ignore")

    values: dict[str, Any] = Field(default_factory=dict)
    next: list[str] = Field(default_factory=list)
    checkpoint: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: str | None = None
    parent_checkpoint: dict[str, Any] | None = None
    tasks: list[dict[str, Any]] = Field(default_factory=list)
    interrupts: list[dict[str, Any]] = Field(default_factory=list)


class ThreadStateReply(Reply):
    """A thread's state: values, next nodes, checkpoint, tasks."""

    state: ThreadState | None = None


class ThreadHistoryRequest(Envelope):
    """A thread's earlier states, newest first: `<prefix>.threads.history`."""

    thread_id: str
    user_id: str = "default"
    limit: int = Field(10, ge=1, le=1000)
    before: str | None = Field(None, description="Checkpoint id to list from (exclusive).")
    metadata: dict[str, Any] | None = None


class ThreadHistoryReply(Reply):
    """A page of a thread's state history."""

    states: list[ThreadState] = Field(default_factory=list)


class ThreadUpdateStateRequest(Envelope):
    """Change a thread's state as a node would: `<prefix>.threads.update_state`."""

    thread_id: str
    user_id: str = "default"
    values: dict[str, Any] | list[Any] | None = None
    as_node: str | None = None
    checkpoint_id: str | None = None


class ThreadUpdateStateReply(Reply):
    """The checkpoint an update of a thread's state wrote."""

    checkpoint: dict[str, Any] = Field(default_factory=dict)


class ThreadCreateRequest(Envelope):
    """Create a thread record (the runners own them); an existing one is returned as it is."""

    thread_id: str
    user_id: str = "default"
    metadata: dict[str, Any] = Field(default_factory=dict)


class ThreadCreateReply(Reply):
    """The thread record a `threads.create` request made (or found)."""

    thread: ThreadRecord | None = Field(
        None, description="The record: new, or the one that was there (whoever's it is)."
    )
    created: bool = False


class ThreadPatchRequest(Envelope):
    """Merge `metadata` into the caller's thread."""

    thread_id: str
    user_id: str = "default"
    metadata: dict[str, Any] = Field(default_factory=dict)


class ThreadPatchReply(Reply):
    """The thread record after a `threads.patch` request."""

    thread: ThreadRecord | None = None


class ThreadDeleteRequest(Envelope):
    """Delete the caller's thread: its record and checkpoints; `ThreadDeleted` tells the rest."""

    thread_id: str
    user_id: str = "default"


class ThreadDeleteReply(Reply):
    """What a `threads.delete` request removed."""

    deleted: bool = False


class ThreadDeleted(Envelope):
    """On `<prefix>.events.thread.deleted`: a thread is gone (chats bound to it start afresh)."""

    thread_id: str
    user_id: str = "default"
    deleted_at: datetime = Field(default_factory=utcnow)


class ThreadSuggestionsRequest(Envelope):
    """Follow-up questions the user might ask next, written by a model on the runner side."""

    thread_id: str
    user_id: str = "default"
    messages: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Turns as {role, content}; empty: the thread's own human and AI messages.",
    )
    n: int = Field(3, ge=1, le=10)
    model_name: str | None = Field(None, description="A configured model's name; the default one if unset.")


class ThreadSuggestionsReply(Reply):
    """Follow-up questions a model suggested for a thread."""

    suggestions: list[str] = Field(default_factory=list)


class MemoryRequest(Envelope):
    """To the memory updater's `memory` service (`get`, `clear`): one user's (and agent's) document."""

    user_id: str = "default"
    agent_name: str | None = None


class MemoryFactRequest(MemoryRequest):
    """`add_fact` (content required), `update_fact` and `delete_fact` (fact_id required)."""

    fact_id: str | None = None
    content: str | None = Field(None, max_length=4000)
    category: FactCategory | None = None
    confidence: float | None = Field(None, ge=0, le=1)


class MemoryImportRequest(MemoryRequest):
    """`import`: replace the document with an exported one (DeerFlow's memory.json shape)."""

    document: dict[str, Any]


class MemoryReply(Reply):
    """A memory document after a `<prefix>.memory.*` request."""

    document: MemoryDocument | None = None


ENVELOPES: dict[str, type[Envelope]] = {
    cls.__name__: cls
    for cls in (
        InboundMessage,
        OutboundMessage,
        RunRequest,
        RunEvent,
        RunControl,
        RunRecord,
        ThreadRecord,
        ChatBinding,
        SubagentTask,
        SubagentResult,
        SubagentProgress,
        SubagentCancel,
        ComponentReady,
        MemoryUpdate,
        MemoryDocument,
        AgentDefinition,
        ExecRequest,
        ExecReply,
        ReadFileRequest,
        ReadFileReply,
        WriteFileRequest,
        WriteFileReply,
        ListDirRequest,
        ListDirReply,
        StrReplaceRequest,
        StrReplaceReply,
        GlobRequest,
        GlobReply,
        GrepRequest,
        GrepReply,
        ThreadStateRequest,
        ThreadStateReply,
        ThreadHistoryRequest,
        ThreadHistoryReply,
        ThreadUpdateStateRequest,
        ThreadUpdateStateReply,
        ThreadCreateRequest,
        ThreadCreateReply,
        ThreadPatchRequest,
        ThreadPatchReply,
        ThreadDeleteRequest,
        ThreadDeleteReply,
        ThreadDeleted,
        ThreadSuggestionsRequest,
        ThreadSuggestionsReply,
        MemoryRequest,
        MemoryFactRequest,
        MemoryImportRequest,
        MemoryReply,
    )
}
