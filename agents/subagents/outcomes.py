"""A subagent task's outcome (`SubagentResult`), from its child thread's state or from how it ended;
kept in KV `<prefix>_subagent_results`, where the first stored stands."""

from __future__ import annotations

import logging
from typing import Any, cast

from langchain_core.messages import AIMessage
from nats.js.errors import KeyWrongLastSequenceError

from bus import decode, encode
from bus.content import text_of
from bus.messages import SubagentResult, SubagentTask, Usage

log = logging.getLogger(__name__)


def outcome_from_state(
    task: SubagentTask,
    state: dict[str, Any],
    started: Any,
    status: str = "completed",
    error: str | None = None,
    stop_reason: str | None = None,
) -> SubagentResult:
    """The outcome, from the child thread's messages: the last answer, the turns, the tokens."""
    answers = [m for m in state.get("messages", []) if isinstance(m, AIMessage)]
    usage = Usage()
    for message in answers:
        used: dict[str, Any] = cast(dict[str, Any], message.usage_metadata or {})
        usage.input_tokens += int(used.get("input_tokens", 0) or 0)
        usage.output_tokens += int(used.get("output_tokens", 0) or 0)
        usage.total_tokens += int(used.get("total_tokens", 0) or 0)
    text = next((text_of(m.content, sep="") for m in reversed(answers) if m.content), "")
    if status == "completed" and stop_reason and not text:
        status, error = "failed", f"it used all {len(answers)} of its turns without an answer"
    return SubagentResult(
        task_id=task.task_id,
        parent_run_id=task.parent_run_id,
        status=status,
        result=text,
        error=error,
        stop_reason=stop_reason,
        turns=len(answers),
        usage=usage,
        started_at=started,
    )


def ended_outcome(task: SubagentTask, status: str, error: str) -> SubagentResult:
    return SubagentResult(
        task_id=task.task_id,
        parent_run_id=task.parent_run_id,
        status=status,
        error=error,
    )


async def stored_outcome(results: Any, key: str) -> SubagentResult | None:
    """The outcome stored under `key` in the results bucket, if any."""
    try:
        entry = await results.get(key)
    except Exception:  # not there
        return None
    return decode(SubagentResult, entry.value) if entry.value else None


async def store_outcome(results: Any, key: str, result: SubagentResult) -> SubagentResult:
    """The first outcome stands (another delivery may have finished the task meanwhile): the
    outcome that does."""
    try:
        await results.create(key, encode(result))
    except KeyWrongLastSequenceError:
        log.info("subagent %s: an outcome was stored already; keeping it", result.task_id)
        return await stored_outcome(results, key) or result
    return result
