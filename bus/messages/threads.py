"""The threads service's requests and replies (state, history, create, patch, delete, suggestions)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bus.messages.base import (
    Envelope,
    Reply,
    utcnow,
)
from bus.messages.runs import (
    ThreadRecord,
)


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


class ThreadRunStartsRequest(Envelope):
    """Where each of a thread's newest runs began: `<prefix>.threads.run_starts`. Small where the
    history is not: counted on the runner side, no state is sent."""

    thread_id: str
    user_id: str = "default"
    limit: int = Field(100, ge=1, le=1000)


class RunStart(BaseModel):
    messages_before: int = Field(description="Messages the thread had when the run's input came.")
    run_id: str = ""
    created_at: str | None = None


class ThreadRunStartsReply(Reply):
    """The newest `limit` runs that brought input, oldest first."""

    starts: list[RunStart] = Field(default_factory=list)


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
    """Merge `metadata` into the caller's thread; with `owner`, give it (and its runs) to that user."""

    thread_id: str
    user_id: str = "default"
    metadata: dict[str, Any] = Field(default_factory=dict)
    owner: str | None = Field(
        None,
        description="The thread's new owner: a chat user linked to an account (`/connect`) gives the "
        "account their threads. A thread that is the owner's already is left as it is.",
    )


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


class ThreadCompactRequest(Envelope):
    """Summarise a thread's older messages now (`<prefix>.threads.compact`), as the summarization
    near the context window does: what they said goes to memory first."""

    thread_id: str
    user_id: str = "default"
    agent_name: str | None = Field(None, description="Whose memory the summarised turns go to.")
    model_name: str | None = Field(None, description="The model whose context window counts; default one.")


class ThreadCompactReply(Reply):
    """What a compaction did (DeerFlow's `ThreadCompactResponse`)."""

    thread_id: str = ""
    compacted: bool = False
    reason: str | None = None
    removed_message_count: int = 0
    preserved_message_count: int = 0
    summary_updated: bool = False
    checkpoint_id: str | None = None
    total_tokens: int = Field(0, description="Tokens of the thread's messages after compacting (estimated).")


class AssistantGraphRequest(Envelope):
    """An assistant's compiled graph described as LangGraph's server describes it (its drawable graph,
    its JSON schemas or its subgraphs' schemas): `<prefix>.threads.assistant_graph`. The graph lives
    in the runners; the gateway, which loads no LangChain, asks one."""

    user_id: str = "default"
    agent_name: str | None = Field(None, description="A custom agent's name; none: the lead agent.")
    part: Literal["graph", "schemas", "subgraphs"] = "graph"
    xray: bool | int = Field(False, description="`graph`: subgraphs drawn too (an int: that many levels).")
    namespace: str | None = Field(None, description="`subgraphs`: only the one at this namespace.")
    recurse: bool = Field(False, description="`subgraphs`: their subgraphs too.")


class AssistantGraphReply(Reply):
    """`graph`: `{nodes, edges}`; `schemas`: `{input_schema, output_schema, state_schema,
    config_schema, context_schema}`; `subgraphs`: those schemas per namespace."""

    answer: dict[str, Any] = Field(default_factory=dict)
