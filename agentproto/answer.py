"""A run's events as the agent protocol's chunks: answer text, tool and subagent steps, a question.

`RunAnswer.take(event)` turns one run event (in order, as `bus.runs.follow_run` yields them) into
the chunks to send now: the assistant's new words as `response` chunks (deltas: the caller
concatenates them), each tool call and its result, and each subagent task's start and end, as
`status` chunks (`tool:<name>`, `tool_done:<name>`, `tool_failed:<name>`, `<task event>: <label>`;
callers ignore tokens they do not know, §6.4). What the run's `end` means — an answer, a question
(`ask_clarification`), an error — is read from `outcome()`.

A run redelivered after its runner died resumes from its last checkpoint (a higher `attempt`):
the step that was interrupted streams its message again from the start, under a new message id.
What the caller already has of that message is not sent again, only the words beyond it, so the
caller reads one answer (a model that words it differently the second time is streamed as it comes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from synadia_ai.agents import ResponseChunk, StatusChunk

from bus.content import text_of
from bus.layout import output_relative
from bus.messages import RunEvent

TASK_EVENTS = frozenset({"task_started", "task_completed", "task_failed", "task_cancelled", "task_timed_out"})


@dataclass
class Outcome:
    """How a run ended, for the caller: `kind` is `answer`, `question`, `approval` (a tool call
    waits for the caller's yes) or `error`."""

    kind: str
    text: str = ""
    files: list[str] = field(default_factory=list)  # virtual paths of presented outputs


@dataclass
class RunAnswer:
    """The chunks of one run, built from its own events only."""

    texts: dict[str, tuple[int, str]] = field(default_factory=dict)  # AI message id -> (attempt, text)
    sent: dict[str, str] = field(default_factory=dict)  # AI message id -> text sent to the caller
    attempt: int = 0  # the latest delivery of the run seen
    last_message: str | None = None  # the AI message that spoke last
    replay: str | None = None  # what was sent of the message a resumed delivery is likely repeating
    calls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)  # call id -> (name, args)
    announced: set[str] = field(default_factory=set)  # tool calls and results already told
    question: str | None = None
    files: list[str] = field(default_factory=list)
    error: str | None = None
    status: str | None = None  # the `end` event's status
    approvals: list[dict[str, Any]] = field(default_factory=list)  # tool calls waiting for a yes

    def take(self, event: RunEvent) -> list[ResponseChunk | StatusChunk]:
        if event.event == "messages":
            return self._message(event.data, event.attempt)
        if event.event == "custom":
            return self._task(event.data)
        if event.event == "error":
            data = event.data if isinstance(event.data, dict) else {}
            self.error = str(data.get("message") or data.get("error") or "the run failed")
        elif event.event == "approval" and isinstance(event.data, dict):
            self.approvals.append(event.data)
        elif event.event == "end":
            self.status = event.data.get("status") if isinstance(event.data, dict) else None
        return []

    def outcome(self) -> Outcome:
        if self.error is not None or self.status == "error":
            return Outcome("error", self.error or "the run failed")
        if self.status in ("interrupted", "timeout", "cancelled"):
            return Outcome("error", "the run was stopped before it finished" if self.status != "timeout"
                           else "the run took too long and was stopped")  # fmt: skip
        if self.question is not None:
            return Outcome("question", self.question)
        if self.approvals:
            what = "; ".join(str(a.get("description") or a.get("tool")) for a in self.approvals)
            return Outcome("approval", f"May I run {what}? Answer approve, or deny with a reason.")
        return Outcome("answer", files=list(self.files))

    def _message(self, data: Any, attempt: int) -> list[ResponseChunk | StatusChunk]:
        if not isinstance(data, list) or not data or not isinstance(data[0], dict):
            return []
        chunk = data[0]
        kind = chunk.get("type")
        if kind in ("AIMessageChunk", "ai"):
            return self._calls(chunk) + self._text(chunk, attempt)
        if kind == "tool":
            return self._result(chunk)
        return []

    def _text(self, chunk: dict[str, Any], attempt: int) -> list[ResponseChunk | StatusChunk]:
        text = text_of(chunk.get("content"), sep="")
        message_id = chunk.get("id")
        if not text or not message_id:
            return []
        if attempt < self.attempt:
            return []  # a late piece of an earlier delivery
        if attempt > self.attempt:
            # A resumed delivery runs the interrupted step again (its message under a new id): what
            # was sent of the last message is not sent twice.
            self.replay = self.sent.get(self.last_message, "") if self.last_message else None
            self.attempt = attempt
        seen_attempt, so_far = self.texts.get(message_id, (attempt, ""))
        if seen_attempt != attempt:
            so_far = ""
        so_far = text if chunk.get("type") == "ai" else so_far + text
        self.texts[message_id] = (attempt, so_far)
        self.last_message = message_id
        self.question = None  # the agent went on talking after a question
        if self.replay and message_id not in self.sent:
            if self.replay.startswith(so_far):
                return []  # still repeating what the caller has
            if so_far.startswith(self.replay):
                self.sent[message_id] = self.replay  # the interrupted message again: only what is new
            self.replay = None  # (else: another message, streamed as it comes)
        sent = self.sent.get(message_id, "")
        if len(so_far) <= len(sent) or not so_far.startswith(sent):
            return []
        self.sent[message_id] = so_far
        return [ResponseChunk(text=so_far[len(sent) :])]

    def _calls(self, chunk: dict[str, Any]) -> list[ResponseChunk | StatusChunk]:
        out: list[ResponseChunk | StatusChunk] = []
        for call in chunk.get("tool_calls") or []:
            if not (isinstance(call, dict) and call.get("id") and call.get("name")):
                continue
            args = call.get("args")
            self.calls[call["id"]] = (call["name"], args if isinstance(args, dict) else {})
            if f"call:{call['id']}" not in self.announced:
                self.announced.add(f"call:{call['id']}")
                out.append(StatusChunk(status=f"tool:{call['name']}"))
        return out

    def _result(self, chunk: dict[str, Any]) -> list[ResponseChunk | StatusChunk]:
        call_id = str(chunk.get("tool_call_id") or "")
        name = str(chunk.get("name") or self.calls.get(call_id, ("tool", {}))[0])
        failed = chunk.get("status") == "error"
        if not failed and name == "ask_clarification":
            self.question = text_of(chunk.get("content"))
        elif not failed and name == "present_files":
            for path in self.calls.get(call_id, ("", {}))[1].get("filepaths") or []:
                if isinstance(path, str) and output_relative(path) and path not in self.files:
                    self.files.append(path.rstrip("/"))
        if f"result:{call_id}" in self.announced:
            return []
        self.announced.add(f"result:{call_id}")
        return [StatusChunk(status=f"{'tool_failed' if failed else 'tool_done'}:{name}")]

    def _task(self, data: Any) -> list[ResponseChunk | StatusChunk]:
        if not isinstance(data, dict) or data.get("type") not in TASK_EVENTS:
            return []
        key = f"{data['type']}:{data.get('task_id')}"
        if key in self.announced:
            return []
        self.announced.add(key)
        label = str(data.get("description") or "a subtask")[:80]
        return [StatusChunk(status=f"{data['type']}: {label}")]
