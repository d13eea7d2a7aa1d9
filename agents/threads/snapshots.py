"""The thread's state as the threads service reads and writes it: through a graph with the lead
agent's state and nodes but no real model, and turned into what clients see (`ThreadState`)."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

from agents.context import RunContext
from agents.events import jsonable
from agents.graph.state import ThreadState as ThreadStateSchema
from agents.tools import ask_clarification, present_files
from bus.messages import ThreadState


def state_graph(checkpointer: Any) -> Any:
    """A graph with the lead agent's state and nodes but no real model: for reading and writing state."""
    placeholder = GenericFakeChatModel(messages=iter(()))
    return create_agent(
        placeholder,
        [ask_clarification, present_files],
        state_schema=ThreadStateSchema,
        context_schema=RunContext,
        checkpointer=checkpointer,
        name="lead_agent",
    )


def task_error(error: Any) -> str | None:
    """A checkpoint task's error as clients see it; none for a task a stop cancelled.

    LangGraph saves a cancelled task's `CancelledError` as its error (so the super-step can end), but
    a stop is the user's choice, not a failure: DeerFlow's UI (the LangGraph SDK's `useStream`) reads
    the newest checkpoint's task error as the chat's error and shows it as failed after a reload.
    """
    if error is None or isinstance(error, asyncio.CancelledError):
        return None
    text = str(error) if isinstance(error, str) else repr(error)
    return None if text.startswith("CancelledError(") else text


def to_thread_state(snapshot: Any) -> ThreadState:
    conf = snapshot.config.get("configurable", {}) if snapshot.config else {}
    parent = snapshot.parent_config.get("configurable") if snapshot.parent_config else None
    return ThreadState(
        values=jsonable(snapshot.values or {}),
        next=list(snapshot.next or ()),
        checkpoint={k: conf.get(k) for k in ("thread_id", "checkpoint_ns", "checkpoint_id")},
        metadata=jsonable(snapshot.metadata or {}),
        created_at=snapshot.created_at,
        parent_checkpoint={k: parent.get(k) for k in ("thread_id", "checkpoint_ns", "checkpoint_id")}
        if parent
        else None,
        tasks=[
            {"id": t.id, "name": t.name, "error": task_error(t.error), "interrupts": jsonable(t.interrupts)}
            for t in snapshot.tasks or ()
        ],
        interrupts=jsonable(list(getattr(snapshot, "interrupts", ()) or ())),
    )


def checkpoint_config(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    """The graph config that reads (or writes after) the thread's newest checkpoint, or the one named."""
    configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}
