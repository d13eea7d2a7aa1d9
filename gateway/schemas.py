"""The JSON the gateway answers with, as models the routes declare (so OpenAPI says what comes back).

The LangGraph shapes follow the notes in shared/notes/langgraph-api.md (what
the SDK clients read); errors are always `{"detail": "..."}`. A property-based
test (tests/gateway/test_schema_fuzz.py) checks the answers against these.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bus.messages import ThreadState

__all__ = [
    "ASSISTANT_ID",
    "Assistant",
    "Body",
    "CheckpointAnswer",
    "ErrorBody",
    "Run",
    "Thread",
    "ThreadState",
    "errors",
    "iso",
]

ASSISTANT_ID = "lead_agent"  # the one assistant: DeerFlow's graph name
Timestamp = str  # ISO 8601, as the LangGraph server sends them


def iso(value: datetime | None) -> Timestamp | None:
    return value.isoformat() if value else None


class Body(BaseModel):
    """Base of request bodies: fields a newer client sends and we do not know are ignored."""

    model_config = ConfigDict(extra="ignore")


class ErrorBody(BaseModel):
    """Every error: 4xx for the caller's mistakes, never a stack trace."""

    detail: str


_ERROR_TEXT = {
    400: "Bad request (the message says what to send instead)",
    401: "Missing or unknown token",
    403: "The token may not do this (an admin token may)",
    404: "Not found (also for other users' things)",
    409: "Conflict with the current state",
    413: "Request body over its limit",
    422: "Invalid request (the message names the field)",
    501: "Not offered by Antler (the message says what to use instead)",
    502: "The model behind the request failed",
    503: "The component that does this is not running (the message says which)",
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for these error statuses, all with the one error body."""
    return {code: {"model": ErrorBody, "description": _ERROR_TEXT[code]} for code in codes}


class Assistant(BaseModel):
    assistant_id: str
    graph_id: str
    name: str
    description: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    context: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    version: int
    created_at: Timestamp
    updated_at: Timestamp


class Thread(BaseModel):
    thread_id: str
    created_at: Timestamp | None
    updated_at: Timestamp | None
    metadata: dict[str, Any]
    status: Literal["idle", "busy", "interrupted", "error"]
    values: dict[str, Any]
    interrupts: dict[str, Any]


ThreadField = Literal["thread_id", "created_at", "updated_at", "metadata", "status", "values", "interrupts"]


class ThreadPart(BaseModel):
    """A thread with only the fields a search selected (`select`); all of them otherwise."""

    thread_id: str | None = None
    created_at: Timestamp | None = None
    updated_at: Timestamp | None = None
    metadata: dict[str, Any] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    values: dict[str, Any] | None = None
    interrupts: dict[str, Any] | None = None


class CheckpointAnswer(BaseModel):
    """What updating a thread's state answers: the checkpoint it made."""

    checkpoint: dict[str, Any]


class Run(BaseModel):  # type: ignore[no-redef]  # its field `kwargs` (LangGraph's) meets the pydantic plugin's __init__(**kwargs)
    run_id: str
    thread_id: str
    assistant_id: str
    created_at: Timestamp | None
    updated_at: Timestamp | None
    status: Literal["pending", "running", "success", "error", "interrupted", "timeout"]
    metadata: dict[str, Any]
    multitask_strategy: Literal["reject", "interrupt", "rollback", "enqueue", "steer"]
    kwargs: dict[str, Any] = Field(default_factory=dict)
    feedback: dict[str, Any] | None = Field(None, description="The owner's rating of the answer, if any.")
