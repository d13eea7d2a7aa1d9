"""What the LangGraph-compatible runs API takes and gives: the run a client asks for (`RunCreate`),
a run as the API shows it (`run_json`) and what OpenAPI says streams and waits answer."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator

from bus.messages import (
    MultitaskStrategy,
    RunCommand,
    RunRecord,
)
from bus.messages.commands import InterruptAt, input_or_command
from gateway.rest.feedback import feedback_json
from gateway.schemas import ASSISTANT_ID, Body, Run, iso

# Streams and waits answer as the run goes; OpenAPI says what their bodies are.
SSE_EVENT = {  # one event (before OpenAPI 3.2's itemSchema, `schema` describes each)
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"type": "string", "description": "`metadata` first, `end` last; `mode|ns` for subgraphs"},
        "data": {"type": "string", "description": "One line of JSON"},
        "id": {"type": "string", "pattern": "^[0-9]+-[0-9]+$", "description": "`<ms>-<seq>`"},
    },
}
SSE_BODY: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-Sent Events until `end`; `: heartbeat` comments while quiet",
        "content": {"text/event-stream": {"schema": SSE_EVENT}},
    }
}
WAIT_BODY: dict[int | str, dict[str, Any]] = {
    200: {
        "description": 'The thread\'s values when the run ends, or `{"__error__": ...}` (newlines before it '
        "keep the connection alive)",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
}


def run_json(record: RunRecord) -> Run:
    return Run(
        run_id=record.run_id,
        thread_id=record.thread_id,
        assistant_id=record.assistant_id,
        created_at=iso(record.created_at),
        updated_at=iso(record.updated_at),
        status=record.status.value,
        metadata=record.metadata,
        multitask_strategy=record.multitask_strategy.value,
        feedback=feedback_json(record),
    )


StreamMode = Literal[
    "values", "updates", "messages", "messages-tuple", "custom", "tasks", "checkpoints", "debug", "events"
]


class Configurable(BaseModel):
    """`config.configurable`: anything goes through, but what the runner reads must have its type."""

    model_config = ConfigDict(extra="allow")

    run_timeout_seconds: float | None = Field(None, gt=0, strict=True)


class RunConfig(BaseModel):
    """LangGraph's run `config` (other keys go through as they are)."""

    model_config = ConfigDict(extra="allow")

    tags: list[str] | None = None
    recursion_limit: StrictInt | None = Field(None, ge=1)
    configurable: Configurable | None = None


class CheckpointRef(BaseModel):
    """LangGraph's run `checkpoint`: where on the thread to start (other keys go through as they are)."""

    model_config = ConfigDict(extra="allow")

    checkpoint_id: StrictStr | None = None


class RunCreate(Body):
    """A run as LangGraph clients ask for it. What a runner cannot start with (a `command` that is
    none, a `recursion_limit` that is no number) is refused here, naming the field: a runner would
    fail on it before the run starts. What only the agent's graph and the thread can tell (its
    nodes, its state keys, whether anything waits for a `resume`) a runner is asked about
    (`refuse_what_cannot_run`)."""

    assistant_id: str = ASSISTANT_ID
    input: dict[str, Any] | None = None
    command: RunCommand | None = None
    config: RunConfig | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    stream_mode: StreamMode | list[StreamMode] = "values"
    stream_subgraphs: StrictBool = False
    stream_resumable: StrictBool = False
    multitask_strategy: MultitaskStrategy = MultitaskStrategy.ENQUEUE
    if_not_exists: Literal["reject", "create"] = "reject"
    on_disconnect: Literal["cancel", "continue"] = "continue"
    checkpoint_id: str | None = None
    checkpoint: CheckpointRef | None = None
    interrupt_before: InterruptAt = None
    interrupt_after: InterruptAt = None

    one_of_input_and_command = field_validator("command")(input_or_command)

    def modes(self) -> list[str]:
        modes: list[str] = [self.stream_mode] if isinstance(self.stream_mode, str) else list(self.stream_mode)
        return modes or ["values"]
