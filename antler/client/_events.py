"""A run's events (`RunEvent`s from the bus) as DeerFlow's `StreamEvent`s.

- `values`: the thread's state after a step: `{"title", "messages", "artifacts"}`, messages in
  DeerFlow's serialized shape (`type`, `content`, `id`, and `tool_calls` / `name`, `tool_call_id`);
- `messages-tuple`: for AI text a delta (`{"type": "ai", "content": <delta>, "id"}`; concatenate per
  `id`), an AI message's tool calls once (`"tool_calls"`, content empty), a tool's result once
  (`{"type": "tool", "content", "name", "tool_call_id", "id"}`);
- `custom`: what the agent's tools wrote (subagents' task events among them), as it is;
- `end`: `{"usage": {"input_tokens", "output_tokens", "total_tokens"}}`, each message counted once
  (and `goal`, how the thread's goal stands, when it has one).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bus.content import text_of
from bus.messages import RunEvent

STREAM_MODES = ["values", "messages-tuple", "custom"]
USAGE_KEYS = ("input_tokens", "output_tokens", "total_tokens")
_KINDS = {"AIMessageChunk": "ai", "HumanMessageChunk": "human", "ToolMessageChunk": "tool"}


@dataclass
class StreamEvent:
    """One event of a streamed turn: `type` is `values`, `messages-tuple`, `custom` or `end`."""

    type: str
    data: dict[str, Any] = field(default_factory=dict)


def kind_of(message: dict[str, Any]) -> str:
    kind = str(message.get("type") or message.get("role") or "")
    return _KINDS.get(kind, {"user": "human", "assistant": "ai"}.get(kind, kind))


def _tool_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    calls = []
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict) and call.get("name"):
            args = call.get("args")
            if isinstance(args, str):  # a chunk's arguments, as the model streamed them
                try:
                    args = json.loads(args or "{}")
                except ValueError:
                    args = {"raw": args}
            calls.append({"name": call["name"], "args": args or {}, "id": call.get("id")})
    return calls


def serialize_message(message: Any) -> dict[str, Any]:
    """A message of the thread's state in DeerFlow's shape."""
    if not isinstance(message, dict):
        return {"type": "unknown", "content": str(message), "id": None}
    kind = kind_of(message)
    out: dict[str, Any] = {"type": kind, "content": message.get("content", ""), "id": message.get("id")}
    if kind == "ai":
        calls = _tool_calls(message)
        if calls:
            out["tool_calls"] = calls
        if message.get("usage_metadata"):
            out["usage_metadata"] = message["usage_metadata"]
    elif kind == "tool":
        out["name"] = message.get("name")
        out["tool_call_id"] = message.get("tool_call_id")
    if message.get("additional_kwargs"):
        out["additional_kwargs"] = message["additional_kwargs"]
    return out


def goal_outcome(end_data: Any) -> dict[str, Any] | None:
    """What a run's `end` says about the thread's goal (`data.goal`: verdict, next_run_id, ...)."""
    goal = end_data.get("goal") if isinstance(end_data, dict) else None
    return goal if isinstance(goal, dict) else None


class Translator:
    """One run's events in, StreamEvents out; keeps what each AI message has delivered so far."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}  # AI text delivered, per message id
        self.last_ai_id: str | None = None
        self.tool_calls_sent: set[str] = set()
        self.tools_sent: set[str] = set()
        self.usage = dict.fromkeys(USAGE_KEYS, 0)
        self.values: dict[str, Any] = {}
        self.error: dict[str, Any] | None = None
        self.status: str | None = None

    @property
    def final_text(self) -> str:
        """The text of the last AI message that had any."""
        return self.texts.get(self.last_ai_id or "", "")

    def take(self, event: RunEvent) -> list[StreamEvent]:
        name, data = event.event, event.data
        if "|" in name:  # a subgraph's: DeerFlow streams the lead agent's graph only
            return []
        if name == "values" and isinstance(data, dict):
            self.values = data
            messages = [serialize_message(m) for m in data.get("messages") or []]
            return [
                StreamEvent(
                    "values",
                    {
                        "title": data.get("title"),
                        "messages": messages,
                        "artifacts": data.get("artifacts") or [],
                    },
                )
            ]
        if name == "messages" and isinstance(data, list) and data and isinstance(data[0], dict):
            return self._message(data[0])
        if name == "custom":
            return [StreamEvent("custom", data if isinstance(data, dict) else {"data": data})]
        if name == "error" and isinstance(data, dict):
            self.error = data
        if name == "end":
            data = data if isinstance(data, dict) else {}
            self.status = str(data.get("status") or "success")
            given = data.get("usage")
            usage = given if isinstance(given, dict) else {}
            self.usage = {key: int(usage.get(key, 0) or 0) for key in USAGE_KEYS}
            return [StreamEvent("end", {"usage": dict(self.usage)})]
        return []

    def _message(self, message: dict[str, Any]) -> list[StreamEvent]:
        kind, msg_id = kind_of(message), message.get("id") or ""
        found: list[StreamEvent] = []
        if kind == "ai":
            text = text_of(message.get("content"), sep="")
            if message.get("type") == "AIMessageChunk":
                delta = text
            else:  # a whole message (a resumed run sends again what it had finished): only what is new
                sent = self.texts.get(msg_id, "")
                delta = text[len(sent) :] if text.startswith(sent) else ("" if sent else text)
            if delta:
                self.texts[msg_id] = self.texts.get(msg_id, "") + delta
                self.last_ai_id = msg_id
                found.append(StreamEvent("messages-tuple", {"type": "ai", "content": delta, "id": msg_id}))
            calls = _tool_calls(message)
            if calls and msg_id not in self.tool_calls_sent:
                self.tool_calls_sent.add(msg_id)
                found.append(
                    StreamEvent(
                        "messages-tuple", {"type": "ai", "content": "", "id": msg_id, "tool_calls": calls}
                    )
                )
        elif kind == "tool":
            key = msg_id or str(message.get("tool_call_id"))
            if key not in self.tools_sent:
                self.tools_sent.add(key)
                data = {
                    "type": "tool",
                    "content": message.get("content", ""),
                    "name": message.get("name"),
                    "tool_call_id": message.get("tool_call_id"),
                    "id": msg_id,
                }
                found.append(StreamEvent("messages-tuple", data))
        return found
