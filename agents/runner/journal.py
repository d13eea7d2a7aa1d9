"""A run's journal: its messages and steps as DeerFlow's run-event rows, kept when the run ends.

The runner that ends a run is the journal's one writer (`JournalRecorder.write`, from
`Runner._finish`, before the run's `end`): whoever sees the end can read the journal. It is
built from what the runner sees whatever the client asked to stream: every stream part goes
through `observe` (the graph always streams `values` and `custom`), so the final state gives
the run's messages and the `task_*` custom parts give its subagents' cards. The live event
log (RUN_EVENTS) expires; the journal (`bus.journal`) does not.

A run resumed by another runner (attempt 2) starts a new recorder: its journal has the run's
messages (from the final state) but only the subagent steps streamed in that attempt (tasks
finished earlier show their start and end again, as the resumed `task` tool reports them).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from langchain_core.messages import BaseMessage

from agents.events import jsonable
from bus import Bus
from bus.journal import write_journal
from bus.messages import ErrorInfo, RunJournal, RunRequest, RunStatus, utcnow

log = logging.getLogger(__name__)

STEP_TEXT_LIMIT = 4000  # characters of a subagent step's text kept in its row
DIFF_LIMIT = 64 * 1024  # characters of a written file shown as its diff
FILE_TOOLS = frozenset({"write_file", "str_replace"})
_TASK_END = {
    "task_completed": "completed",
    "task_failed": "failed",
    "task_cancelled": "cancelled",
    "task_timed_out": "timed_out",
}


class JournalRecorder:
    """Collects one attempt of a run as it streams; `rows()` turns it into journal rows."""

    def __init__(self, request: RunRequest, attempt: int, resumed: bool, first_start: bool = False) -> None:
        self.request = request
        self.attempt = attempt
        self.resumed = resumed
        # No delivery started the run before this one: no journal of it can exist yet.
        self.first_start = first_start
        self.started = utcnow()
        self.first_values: list[Any] | None = None
        self.final_values: dict[str, Any] = {}
        self.tasks: list[tuple[datetime, dict[str, Any]]] = []  # task_* parts as they came

    def observe(self, mode: str, chunk: Any, ns: tuple[str, ...]) -> None:
        """One stream part of the run (the lead graph's; subgraphs' are their own). Never raises:
        a part the journal cannot take is left out of it, not the run's failure."""
        try:
            self._observe(mode, chunk, ns)
        except Exception as exc:
            log.warning("run %s: a %s part is not in its journal: %s", self.request.run_id, mode, exc)

    def _observe(self, mode: str, chunk: Any, ns: tuple[str, ...]) -> None:
        if ns:
            return
        if mode == "values" and isinstance(chunk, dict):
            if self.first_values is None:
                self.first_values = list(chunk.get("messages") or [])
            self.final_values = chunk
        elif mode == "custom" and isinstance(chunk, dict) and str(chunk.get("type", "")).startswith("task_"):
            self.tasks.append((utcnow(), jsonable(chunk)))

    # ------------------------------------------------------------------ rows

    def _run_messages(self) -> list[dict[str, Any]]:
        """The messages this run added, its user message first (when it brought one).

        Only those are made JSON: the thread's earlier messages (its whole history) are not."""
        final = [m for m in self.final_values.get("messages") or [] if isinstance(m, BaseMessage | dict)]
        first = self.first_values or []
        brought = (self.request.input or {}).get("messages") if not self.resumed else None
        if isinstance(brought, list) and first:
            start = max(0, len(first) - len(brought))
        elif not self.resumed and self.request.command is not None:
            start = len(first)  # a resumed interrupt: what came after the state it resumed
        else:
            start = max((i for i, m in enumerate(final) if _kind(m) == "human"), default=0)
        return [m for m in jsonable(final[min(start, len(final)) :]) if isinstance(m, dict)]

    def rows(self, status: RunStatus, error: ErrorInfo | None) -> list[dict[str, Any]]:
        request = self.request
        now = utcnow().isoformat()
        rows: list[dict[str, Any]] = []

        def add(
            event_type: str,
            category: str,
            content: Any,
            metadata: dict[str, Any] | None = None,
            at: str | None = None,
        ) -> None:
            rows.append(
                {
                    "thread_id": request.thread_id,
                    "run_id": request.run_id,
                    "seq": len(rows) + 1,
                    "event_type": event_type,
                    "category": category,
                    "content": content,
                    "metadata": metadata or {},
                    "created_at": at or now,
                }
            )

        def add_card(part: dict[str, Any], at: datetime) -> None:
            event_type, category, content = subagent_row(part)
            add(event_type, category, content, {"task_id": content["task_id"]}, at.isoformat())

        add(
            "run.start",
            "trace",
            {"run_id": request.run_id, "attempt": self.attempt},
            {"assistant_id": request.assistant_id},
            self.started.isoformat(),
        )
        by_task: dict[str, list[tuple[datetime, dict[str, Any]]]] = {}
        for at, part in self.tasks:
            by_task.setdefault(str(part.get("task_id") or ""), []).append((at, part))
        placed: set[str] = set()
        messages = self._run_messages()
        for message in messages:
            kind = message.get("type")
            if kind == "human":
                add("llm.human.input", "message", message, {"caller": "lead_agent"})
            elif kind == "ai":
                add("llm.ai.response", "message", message, {"caller": "lead_agent"})
            elif kind == "tool":
                add("llm.tool.result", "message", message, {"caller": "lead_agent"})
            for call in message.get("tool_calls") or []:
                task_id = str(call.get("id") or "")
                if call.get("name") == "task" and task_id in by_task and task_id not in placed:
                    placed.add(task_id)
                    for at, part in by_task[task_id]:
                        add_card(part, at)
        for task_id, parts in by_task.items():  # cards whose delegating answer is not in the state
            if task_id not in placed:
                for at, part in parts:
                    add_card(part, at)
        changes = workspace_changes(messages)
        if changes is not None:
            summary = changes["summary"]
            text = f"{summary['created']} created, {summary['modified']} modified"
            add("workspace_changes", "workspace", text, {"workspace_changes": changes})
        if error is not None:
            add("run.error", "error", error.message, {"error": error.code})
        outputs = jsonable({k: v for k, v in self.final_values.items() if k != "messages"})
        add("run.end", "outputs", outputs, {"status": status.value})
        return rows

    async def write(self, bus: Bus, status: RunStatus, error: ErrorInfo | None) -> None:
        """Keep the journal; a failure is logged, never the run's (its live log still holds it)."""
        try:
            journal = RunJournal(
                run_id=self.request.run_id,
                thread_id=self.request.thread_id,
                user_id=self.request.user_id,
                status=status.value,
                attempt=self.attempt,
                events=self.rows(status, error),
            )
            await write_journal(await bus.files(), journal, new=self.first_start)
        except Exception as exc:
            log.warning("run %s: journal not kept: %s: %s", self.request.run_id, type(exc).__name__, exc)


def _kind(message: BaseMessage | dict[str, Any]) -> Any:
    """A message's type ("human", "ai", "tool" ...), whether a message object or its JSON."""
    return message.type if isinstance(message, BaseMessage) else message.get("type")


def subagent_row(part: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """A `task_*` part as DeerFlow's subagent row: (event type, category, content)."""
    kind = str(part.get("type"))
    task_id = str(part.get("task_id") or "")
    if kind == "task_started":
        content = {"task_id": task_id, "description": part.get("description") or ""}
        if part.get("model_name"):
            content["model_name"] = part["model_name"]
        return "subagent.start", "subagent", content
    if kind == "task_running":
        message: dict[str, Any] = part["message"] if isinstance(part.get("message"), dict) else {}
        text = (
            str(message.get("content") or "")
            if not isinstance(message.get("content"), list)
            else "".join(str(p.get("text", "")) for p in message["content"] if isinstance(p, dict))
        )
        step: dict[str, Any] = {
            "task_id": task_id,
            "message_index": int(part.get("message_index") or 0),
            "kind": "tool" if message.get("type") == "tool" else "ai",
            "text": text[:STEP_TEXT_LIMIT],
            "truncated": len(text) > STEP_TEXT_LIMIT,
            "message": message,
        }
        if message.get("type") == "tool":
            step["tool_name"] = message.get("name")
        else:
            step["tool_calls"] = message.get("tool_calls") or []
        return "subagent.step", "subagent", step
    content = {
        "task_id": task_id,
        "status": _TASK_END.get(kind, "failed"),
        "result": part.get("result"),
        "error": part.get("error"),
        "usage": part.get("usage"),
    }
    if part.get("model_name"):
        content["model_name"] = part["model_name"]
    return "subagent.end", "subagent", content


def workspace_changes(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The files the run's file tools wrote, in DeerFlow's workspace-changes shape (None: none).

    Seen through the agent's `write_file` and `str_replace` calls that succeeded: a whole write is
    `created` (its diff the new text), an append or a replacement `modified`. Files a command wrote
    (`bash`) are not seen."""
    failed = {
        str(m.get("tool_call_id")) for m in messages if m.get("type") == "tool" and m.get("status") == "error"
    }
    answered = {str(m.get("tool_call_id")) for m in messages if m.get("type") == "tool"}
    files: dict[str, dict[str, Any]] = {}
    for message in messages:
        for call in message.get("tool_calls") or [] if message.get("type") == "ai" else []:
            call_id = str(call.get("id") or "")
            if call.get("name") not in FILE_TOOLS or call_id in failed or call_id not in answered:
                continue
            args = call.get("args") or {}
            path = str(args.get("path") or "")
            if not path:
                continue
            if call["name"] == "write_file" and not args.get("append"):
                added, removed, status = str(args.get("content") or ""), "", "created"
            elif call["name"] == "write_file":
                added, removed, status = str(args.get("content") or ""), "", "modified"
            else:
                added, removed, status = (
                    str(args.get("new_str") or ""),
                    str(args.get("old_str") or ""),
                    "modified",
                )
            entry = files.setdefault(
                path,
                {
                    "path": path,
                    "root": "user-data",
                    "status": status,
                    "additions": 0,
                    "deletions": 0,
                    "diff": "",
                },
            )
            if entry["status"] != "created":
                entry["status"] = status
            entry["additions"] += len(added.splitlines())
            entry["deletions"] += len(removed.splitlines())
            diff = "".join(f"-{line}\n" for line in removed.splitlines()) + "".join(
                f"+{line}\n" for line in added.splitlines()
            )
            entry["diff"] = (entry["diff"] + diff)[:DIFF_LIMIT]
            entry["diff_truncated"] = len(entry["diff"]) >= DIFF_LIMIT
    if not files:
        return None
    listed = list(files.values())
    for entry in listed:
        entry.update(
            {
                "binary": False,
                "sensitive": False,
                "size_before": None,
                "size_after": None,
                "sha256_before": None,
                "sha256_after": None,
                "symlink": False,
            }
        )
    summary = {
        "created": sum(1 for f in listed if f["status"] == "created"),
        "modified": sum(1 for f in listed if f["status"] == "modified"),
        "deleted": 0,
        "symlink_created": 0,
        "additions": sum(f["additions"] for f in listed),
        "deletions": sum(f["deletions"] for f in listed),
        "truncated": False,
    }
    return {"version": 1, "summary": summary, "files": listed, "limits": {"max_diff_chars": DIFF_LIMIT}}
