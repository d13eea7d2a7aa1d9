"""What a chat run does besides answering, as short lines for `antler send`'s terminal.

The chat's replies carry only the answer; a run's own events (`runs.ev.<run>.chat.<route>.<partition>`, which
`antler send` hears as they are published) also say which tools it called and which subagent tasks
it started. `RunSteps.take(event)` turns one event into the lines to print now:

    · bash: ls -la /mnt/user-data/uploads
    · web_search: "nats jetstream"  (failed)
    · subtask: Summarize the report
    · subtask done: Summarize the report

Each call and task is told once, even when a resumed run sends its events again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bus.content import text_of
from bus.messages import RunEvent

WIDTH = 80  # a step's argument is cut to this many characters
# The argument that says most about a call, by the names tools use for it.
TELLING_ARGS = ("command", "query", "url", "path", "file_path", "pattern", "description", "filepaths")
# Calls told otherwise: the question comes as the reply, a subagent's task by its own events.
TOLD_OTHERWISE = frozenset({"ask_clarification", "task"})
TASK_ENDS = {
    "task_completed": "done",
    "task_failed": "failed",
    "task_cancelled": "cancelled",
    "task_timed_out": "timed out",
}


@dataclass
class RunSteps:
    """The steps of the runs of one chat, told once each."""

    told: set[str] = field(default_factory=set)
    calls: dict[str, str] = field(default_factory=dict)  # call id -> the line that told it

    def take(self, event: RunEvent) -> list[str]:
        if event.event == "messages":
            return self._message(event.data)
        if event.event == "custom":
            return self._task(event.data)
        return []

    def _message(self, data: Any) -> list[str]:
        if not isinstance(data, list) or not data or not isinstance(data[0], dict):
            return []
        chunk = data[0]
        if chunk.get("type") in ("AIMessageChunk", "ai"):
            return [line for call in chunk.get("tool_calls") or [] if (line := self._call(call))]
        if chunk.get("type") == "tool" and chunk.get("status") == "error":
            call_id = str(chunk.get("tool_call_id") or "")
            key = f"failed:{call_id}"
            if key not in self.told and call_id in self.calls:
                self.told.add(key)
                why = _one_line(text_of(chunk.get("content")))
                return [f"{self.calls[call_id]}  (failed{': ' + why if why else ''})"]
        return []

    def _call(self, call: Any) -> str | None:
        if not isinstance(call, dict) or not call.get("id") or not call.get("name"):
            return None
        if call["name"] in TOLD_OTHERWISE or f"call:{call['id']}" in self.told:
            return None
        self.told.add(f"call:{call['id']}")
        argument = _telling(call.get("args"))
        line = f"· {call['name']}" + (f": {argument}" if argument else "")
        self.calls[call["id"]] = line
        return line

    def _task(self, data: Any) -> list[str]:
        if not isinstance(data, dict) or not data.get("task_id"):
            return []
        kind = str(data.get("type") or "")
        if kind != "task_started" and kind not in TASK_ENDS:
            return []
        key = f"{kind}:{data['task_id']}"
        if key in self.told:
            return []
        self.told.add(key)
        label = _one_line(str(data.get("description") or "a subtask"))
        return [f"· subtask: {label}" if kind == "task_started" else f"· subtask {TASK_ENDS[kind]}: {label}"]


def _telling(args: Any) -> str:
    if not isinstance(args, dict):
        return ""
    value = next((args[k] for k in TELLING_ARGS if args.get(k)), None)
    if value is None:
        value = next((v for v in args.values() if isinstance(v, str) and v.strip()), "")
    if isinstance(value, list):
        value = ", ".join(str(v) for v in value)
    return _one_line(str(value))


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= WIDTH else flat[: WIDTH - 1] + "…"
