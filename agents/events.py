"""From LangGraph stream parts to run events shaped like the LangGraph API's SSE events.

`StreamTranslator.translate(mode, chunk, ns)` yields `(event, data)` pairs with
JSON-ready data:

- `messages` (stream mode messages-tuple): `[message, metadata]`. AI text comes
  as deltas per message id (concatenate by id); tool calls come once, whole,
  when the model has finished the message; tool results come once. The event
  log may send several consecutive deltas as one (`merge_deltas`): the same
  text, in fewer events.
- `values`, `updates`, `custom`, `tasks`, `checkpoints`, `debug`: as LangGraph
  gives them, serialized.
- with subgraphs, the event name is `mode|ns1|ns2`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from pydantic import BaseModel

from bus.deltas import delta_size, merge_deltas

# The key LangGraph streams an interrupt under (in `updates`, and in `values` beside the state).
INTERRUPT = "__interrupt__"

__all__ = ["FINAL_TASK_EVENTS", "STREAM_MODES", "StreamTranslator", "delta_size", "jsonable", "merge_deltas"]

# Metadata keys of a messages event worth sending (the rest is internal or bulky).
_META_KEYS = (
    "langgraph_node",
    "langgraph_step",
    "langgraph_checkpoint_ns",
    "checkpoint_ns",
    "ls_provider",
    "ls_model_name",
    "thread_id",
    "run_id",
    "tags",
)
# The custom events that end a subagent task (its `usage` counts toward the parent run).
FINAL_TASK_EVENTS = frozenset({"task_completed", "task_failed", "task_cancelled", "task_timed_out"})
# Client stream modes and the LangGraph mode that serves each.
STREAM_MODES = {
    "values": "values",
    "updates": "updates",
    "messages-tuple": "messages",
    "messages": "messages",
    "custom": "custom",
    "tasks": "tasks",
    "checkpoints": "checkpoints",
    "debug": "debug",
}


def jsonable(value: Any) -> Any:
    """Plain JSON types for anything LangGraph puts in state or stream parts."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, BaseMessage):
        return jsonable(value.model_dump())
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if hasattr(value, "_asdict"):
        return jsonable(value._asdict())
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def _tool_call_chunk(message: AIMessage) -> dict[str, Any]:
    """The finished tool calls of a streamed AI message, as one chunk that concatenates cleanly."""
    chunk = AIMessageChunk(
        content="",
        id=message.id,
        tool_call_chunks=[
            {
                "name": c["name"],
                "args": json.dumps(c["args"]),
                "id": c["id"],
                "index": i,
                "type": "tool_call_chunk",
            }
            for i, c in enumerate(message.tool_calls)
        ],
    )
    return jsonable(chunk)  # type: ignore[no-any-return]  # a message serializes to a dict


class StreamTranslator:
    """Turns one run's stream parts into events, for the client's requested modes."""

    def __init__(self, requested: list[str]) -> None:
        self.requested = set(requested)
        self.wants_messages = bool(self.requested & {"messages", "messages-tuple"})
        self._streamed_ids: set[str] = set()
        self._emitted_tool_calls: set[str] = set()
        self.final_values: dict[str, Any] | None = None
        # The run stopped at an interrupt (LangGraph's `__interrupt__` update, in any namespace): only
        # then does the runner read the thread's state back for the approvals it waits on.
        self.interrupted = False
        self.usage: dict[str, int] = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        self.subagent_tokens = 0  # of usage["total_tokens"]
        self._usage_ids: set[str] = set()

    @property
    def graph_modes(self) -> list[str]:
        """LangGraph modes to run with: what was asked, plus what the runner needs itself."""
        modes = {STREAM_MODES[m] for m in self.requested if m in STREAM_MODES}
        modes |= {"values", "updates", "custom"}  # custom: subagents report their tokens there
        return sorted(modes)

    def translate(self, mode: str, chunk: Any, ns: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
        suffix = "".join(f"|{part}" for part in ns)
        if mode == "values":
            if not ns:
                self.final_values = chunk
            if "values" in self.requested:
                yield "values" + suffix, jsonable(chunk)
        elif mode == "updates":
            if isinstance(chunk, dict) and INTERRUPT in chunk:
                self.interrupted = True
            self._count_usage(chunk)
            if "updates" in self.requested:
                yield "updates" + suffix, jsonable(chunk)
            if self.wants_messages:
                yield from self._finished_tool_calls(chunk, suffix)
        elif mode == "messages":
            message, metadata = chunk
            yield from self._message(message, metadata, suffix)
        else:
            if mode == "custom":
                self._count_task_usage(chunk)
            if mode in self.requested:
                yield mode + suffix, jsonable(chunk)

    def _message(
        self, message: BaseMessage, metadata: dict[str, Any], suffix: str
    ) -> Iterator[tuple[str, Any]]:
        meta = {k: metadata[k] for k in _META_KEYS if k in metadata}
        if isinstance(message, AIMessageChunk):
            if message.id:
                self._streamed_ids.add(message.id)
            if not message.content and not message.additional_kwargs.get("reasoning_content"):
                return  # tool-call pieces and empty chunks: the whole calls follow once
            delta = AIMessageChunk(
                content=message.content,
                id=message.id,
                additional_kwargs={k: v for k, v in message.additional_kwargs.items() if k != "tool_calls"},
                response_metadata=message.response_metadata,
            )
            yield "messages" + suffix, [jsonable(delta), jsonable(meta)]
            return
        if isinstance(message, AIMessage) and message.id in self._emitted_tool_calls:
            return
        yield "messages" + suffix, [jsonable(message), jsonable(meta)]

    def _finished_tool_calls(self, update: Any, suffix: str) -> Iterator[tuple[str, Any]]:
        if not isinstance(update, dict):
            return
        for node, value in update.items():
            messages = value.get("messages", []) if isinstance(value, dict) else []
            for message in messages if isinstance(messages, list) else []:
                if (
                    isinstance(message, AIMessage)
                    and message.tool_calls
                    and message.id in self._streamed_ids
                    and message.id not in self._emitted_tool_calls
                ):
                    self._emitted_tool_calls.add(message.id)
                    yield "messages" + suffix, [_tool_call_chunk(message), {"langgraph_node": node}]

    def _count_task_usage(self, chunk: Any) -> None:
        """A subagent's tokens count toward its parent run (its final task event carries them)."""
        if not isinstance(chunk, dict) or chunk.get("type") not in FINAL_TASK_EVENTS:
            return
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            for key in self.usage:
                self.usage[key] += int(usage.get(key, 0) or 0)
            self.subagent_tokens += int(usage.get("total_tokens", 0) or 0)

    def _count_usage(self, update: Any) -> None:
        if not isinstance(update, dict):
            return
        for value in update.values():
            messages = value.get("messages", []) if isinstance(value, dict) else []
            for message in messages if isinstance(messages, list) else []:
                usage = getattr(message, "usage_metadata", None)
                if isinstance(message, AIMessage) and usage and message.id not in self._usage_ids:
                    self._usage_ids.add(message.id or "")
                    for key in self.usage:
                        self.usage[key] += int(usage.get(key, 0) or 0)
