"""Streamed AI text deltas of `messages` run events: which combine, how two become one, and what is
left of a merged delta once some of its parts have been shown.

A `messages` event is `[chunk, metadata]` as the LangGraph API streams it (messages-tuple). The
runner's event log sends consecutive text deltas of one message as one event (`merge_deltas`); live
readers may have shown some of its parts already (`agents.runner.event_log`, `bus.runs.follow_run`):
`rest_of` gives them the parts they have not.
"""

from __future__ import annotations

import functools
from typing import Any

# Fields of a streamed delta that combine when two deltas become one (the rest must be equal).
_DELTA_COMBINED = frozenset(
    {"content", "additional_kwargs", "response_metadata", "usage_metadata", "chunk_position"}
)


def delta_size(data: Any) -> int | None:
    """Characters of text in a `messages` event that is a streamed AI delta; None for anything else
    (a whole message, tool calls, a tool result, or a delta that does not combine with others)."""
    if not isinstance(data, list) or len(data) != 2 or not isinstance(data[0], dict):
        return None
    chunk = data[0]
    if chunk.get("type") != "AIMessageChunk" or not chunk.get("id"):
        return None
    if not isinstance(chunk.get("content"), str):
        return None
    if chunk.get("tool_call_chunks") or chunk.get("tool_calls") or chunk.get("invalid_tool_calls"):
        return None
    extra = chunk.get("additional_kwargs") or {}
    if not isinstance(extra, dict) or not all(isinstance(v, str) for v in extra.values()):
        return None
    return len(chunk["content"]) + sum(len(v) for v in extra.values())


def merge_deltas(first: Any, second: Any) -> Any | None:
    """One `messages` event carrying two consecutive deltas of one AI message, as a client that
    concatenates deltas by message id would have them; None when they do not combine.

    Text (and reasoning text) is concatenated. Deltas combine only when they are of one kind:
    answer text with answer text, reasoning with reasoning, so a client still sees the
    reasoning before the answer. Both must be deltas `delta_size` accepts, with the same
    metadata and the same fields otherwise.
    """
    if delta_size(first) is None or delta_size(second) is None or first[1] != second[1]:
        return None
    a, b = first[0], second[0]
    if a["id"] != b["id"] or bool(a["content"]) != bool(b["content"]):
        return None
    a_extra, b_extra = a.get("additional_kwargs") or {}, b.get("additional_kwargs") or {}
    if set(a_extra) != set(b_extra):
        return None
    if any(a.get(k) != b.get(k) for k in (set(a) | set(b)) - _DELTA_COMBINED):
        return None
    a_meta, b_meta = a.get("response_metadata") or {}, b.get("response_metadata") or {}
    if any(a_meta[k] != b_meta[k] for k in set(a_meta) & set(b_meta)):
        return None
    if a.get("usage_metadata") and b.get("usage_metadata"):
        return None
    merged = {
        **a,
        "content": a["content"] + b["content"],
        "additional_kwargs": {k: a_extra[k] + b_extra[k] for k in a_extra},
        "response_metadata": {**a_meta, **b_meta},
        "usage_metadata": a.get("usage_metadata") or b.get("usage_metadata"),
    }
    if "chunk_position" in b:
        merged["chunk_position"] = b["chunk_position"]
    return [merged, first[1]]


def rest_of(merged: Any, parts: list[Any], shown: int) -> Any | None:
    """The `messages` data of a durable event that merged `parts` (their chunks, in order) into
    `merged`, without its first `shown` parts: what a reader that showed those still needs. None when
    nothing is left (every part was shown); `merged` itself when none was."""
    if shown <= 0:
        return merged
    left = [[chunk, merged[1]] for chunk in parts[shown:]]
    if not left:
        return None
    return functools.reduce(lambda a, b: merge_deltas(a, b) or a, left)
