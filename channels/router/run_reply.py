"""One chat run's reply, built only from that run's own events: the assistant's words as they
stream, the files it presents, its clarification question, its subagents' progress, its error.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from bus.content import text_of
from bus.layout import output_relative
from bus.messages import ChatButton, ChatOrigin

# The custom events that end a subagent task (as the runner's task tool sends them).
FINAL_TASK_EVENTS = frozenset({"task_completed", "task_failed", "task_cancelled", "task_timed_out"})


@dataclass
class RunReply:
    """One chat run's reply, built only from that run's own events (never from the thread's state,
    which may already hold the chat's next run)."""

    origin: ChatOrigin
    thread_id: str
    texts: dict[str, str] = field(default_factory=dict)  # AI message id -> text so far
    order: list[str] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)  # AI message id -> attempt that streamed it
    pieces: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # AI message id -> (seq, delta)
    tool_calls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)  # call id -> name, args
    files: list[str] = field(default_factory=list)  # presented outputs, in order
    clarification: str | None = None
    applied: set[tuple[int, int]] = field(default_factory=set)  # (attempt, seq) of events taken in
    last_seq: int = 0
    seq: int = 0
    # Never: the first partial goes out at once. (0.0 held it back on a machine up for less than
    # stream_update_seconds, the monotonic clock counting from boot.)
    last_sent: float = float("-inf")
    sent_text: str = ""
    error: str | None = None
    tasks: dict[str, tuple[str, bool]] = field(default_factory=dict)  # subagent task -> (label, done)
    approvals: list[dict[str, Any]] = field(default_factory=list)  # tool calls waiting for a yes
    steered_into: str | None = None  # a steer run: the running run that took its message in
    steered_waiting: bool = False  # ... or will, once the approval it waits for is answered

    def approval(self, data: Any) -> None:
        """An `approval` event: a tool call the run stopped at, waiting for a person's answer."""
        if isinstance(data, dict) and data.get("approval_id"):
            if all(a.get("approval_id") != data["approval_id"] for a in self.approvals):
                self.approvals.append(data)

    def approval_buttons(self) -> list[ChatButton]:
        """Approve and Deny for each request, where the platform shows buttons."""
        buttons = []
        for request in self.approvals:
            ident = request["approval_id"]
            what = str(request.get("tool") or "")
            buttons += [
                ChatButton(label=f"Approve {what}".strip(), command=f"/approve {ident}"),
                ChatButton(label=f"Deny {what}".strip(), command=f"/deny {ident}"),
            ]
        return buttons

    def approval_text(self) -> str:
        """The question the chat is asked, with the commands that answer it."""
        lines = ["I need your approval before I go on:"]
        for request in self.approvals:
            ident = request["approval_id"]
            what = request.get("description") or request.get("tool") or "a tool call"
            lines.append(f"- {what}\n  /approve {ident} or /deny {ident} <reason>")
        return "\n".join(lines)

    def answer(self, attempt: int | None = None) -> str:
        """The latest assistant text; with `attempt`, the latest that delivery of the run streamed.

        A run redelivered while its first delivery still ran (a process stalled past ack_wait) has
        two attempts streaming at once: the one whose `end` makes the final reply answers with its
        own words, not with the other's text so far.
        """
        texts = [self.texts[m] for m in reversed(self.order) if self.texts[m]]
        if attempt is not None:
            own = [
                self.texts[m] for m in reversed(self.order) if self.texts[m] and self.attempts[m] == attempt
            ]
            texts = own or texts
        return texts[0] if texts else ""

    def task_event(self, data: Any) -> None:
        """A subagent's `custom` task event: only its label and whether it is over, never its output."""
        if not isinstance(data, dict) or not str(data.get("type", "")).startswith("task_"):
            return
        task_id = str(data.get("task_id") or "")
        if task_id:
            label = str(data.get("description") or "a subtask")[:60]
            self.tasks[task_id] = (label, data["type"] in FINAL_TASK_EVENTS)

    def progress(self) -> str:
        """The streamed reply's status line while subagents work (empty when none does)."""
        working = [label for label, done in self.tasks.values() if not done]
        if not working:
            return ""
        done = len(self.tasks) - len(working)
        return f"[subtasks: {done} of {len(self.tasks)} done; working on: {'; '.join(working)}]"

    def collect(self, data: Any, seq: int, attempt: int) -> None:
        """Take one `messages` event: assistant text, the tool calls it makes, their results."""
        if not isinstance(data, list) or not data or not isinstance(data[0], dict):
            return
        chunk = data[0]
        kind = chunk.get("type")
        if kind in ("AIMessageChunk", "ai"):
            self._tool_calls(chunk)
            self._text(chunk, seq, attempt)
        elif kind == "tool":
            self._tool_result(chunk)

    def _text(self, chunk: dict[str, Any], seq: int, attempt: int) -> None:
        text = text_of(chunk.get("content"), sep="")
        message_id = chunk.get("id")
        if not text or not message_id:
            return  # only the assistant's own words reach a chat, never tool results or context
        if attempt < self.attempts.get(message_id, attempt):
            return  # an earlier delivery's late piece: the later attempt's text stands
        if self.attempts.get(message_id) != attempt:  # new, or streamed again by a resumed attempt
            if message_id in self.texts:
                self.order.remove(message_id)
            self.order.append(message_id)
            self.pieces[message_id] = []
            self.attempts[message_id] = attempt
            self.clarification = None  # the agent went on talking after its question
        if chunk.get("type") == "ai":
            self.pieces[message_id] = [(seq, text)]
            self.texts[message_id] = text
            return
        pieces = self.pieces[message_id]
        if not pieces or seq > pieces[-1][0]:
            pieces.append((seq, text))
            self.texts[message_id] = self.texts.get(message_id, "") + text
        elif all(s != seq for s, _ in pieces):  # stored late, after a server restart: put it in its place
            bisect.insort(pieces, (seq, text))
            self.texts[message_id] = "".join(t for _, t in pieces)

    def _tool_calls(self, chunk: dict[str, Any]) -> None:
        for call in chunk.get("tool_calls") or []:
            if isinstance(call, dict) and call.get("id") and call.get("name"):
                args = call.get("args")
                self.tool_calls[call["id"]] = (call["name"], args if isinstance(args, dict) else {})

    def _tool_result(self, chunk: dict[str, Any]) -> None:
        name = chunk.get("name")
        if chunk.get("status") == "error":
            return
        if name == "ask_clarification":
            self.clarification = text_of(chunk.get("content"))
        elif name == "present_files":
            _, args = self.tool_calls.get(chunk.get("tool_call_id") or "", ("", {}))
            for path in args.get("filepaths") or []:
                if isinstance(path, str) and output_relative(path) and path not in self.files:
                    self.files.append(path.rstrip("/"))
