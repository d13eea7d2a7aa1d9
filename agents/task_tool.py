"""The `task` tool: the lead agent hands a piece of work to a subagent and gets its result.

The tool publishes a SubagentTask on `<prefix>.subagents.submit` (deduplicated by
parent run and tool call, so a resumed parent never starts a second copy) and
waits, without holding a thread, for the result the subagent executor writes
to KV `<prefix>_subagent_results`. Meanwhile it relays the executor's progress
(`<prefix>.subagents.progress.<parent run>`) as the run's `custom` stream
events, shaped as DeerFlow's web UI reads them: task_started, task_running,
then task_completed / task_failed / task_cancelled / task_timed_out. The tool
message carries the result text and DeerFlow's structured status keys in
`additional_kwargs` (`subagent_status`, `subagent_result_brief`,
`subagent_error`, `subagent_stop_reason`, `subagent_model_name`,
`subagent_token_usage`).

At most `subagents.max_concurrent` task calls of one model turn run; the
others answer at once with an error saying why.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from nats.js.errors import NotFoundError

from agents.subagent_types import subagent_types
from bus import Bus, decode
from bus.errors import EnvelopeError
from bus.messages import SubagentProgress, SubagentResult, SubagentTask
from config import AppConfig

log = logging.getLogger(__name__)

EXECUTOR_DURABLE = "subagents"
# Beyond the task's own time limit, how long the tool waits for a result before it gives up
# (an executor that died mid-task is replaced after the bus's ack wait, and resumes the task).
WAIT_GRACE_SECONDS = 120.0

_DESCRIPTION = """Hand a self-contained piece of work to a subagent, which does it on its own with its own
tools and context and returns the result. Use it for independent parts of a larger job (they run at
the same time when you call task several times in one turn, at most {limit} per turn), or for work
that needs a specialist. The subagent cannot see this conversation or ask questions: put everything
it needs into `prompt` (the goal, the facts, file paths, what to return). It shares this
conversation's files under /mnt/user-data.

Arguments: description (a short label, 3-5 words), prompt (the complete task), subagent_type, and
optionally max_turns (a cap on its model turns).

Subagent types:
{types}"""


def status_kwargs(result: SubagentResult, model_name: str | None) -> dict[str, Any]:
    """DeerFlow's structured subagent keys for the tool message's `additional_kwargs`."""
    found: dict[str, Any] = {"subagent_status": result.status}
    if result.status == "completed" and result.result.strip():
        found["subagent_result_brief"] = result.result[:2000]
    if result.status != "completed" and result.error:
        found["subagent_error"] = result.error[:2000]
    if result.stop_reason:
        found["subagent_stop_reason"] = result.stop_reason
    if model_name:
        found["subagent_model_name"] = model_name
    found["subagent_token_usage"] = result.usage.model_dump()
    return found


def result_text(result: SubagentResult) -> str:
    """What the lead model reads."""
    if result.status == "completed":
        capped = " (stopped at its turn limit)" if result.stop_reason else ""
        return f"Task completed{capped}. Result:\n{result.result}"
    label = {"failed": "Task failed", "cancelled": "Task cancelled", "timed_out": "Task timed out"}
    return f"{label[result.status]}: {result.error or 'no detail'}"


def _position(state: Any, call_id: str) -> int:
    """This call's place among the task calls of the model turn that made it (0-based)."""
    messages = state.get("messages", []) if isinstance(state, dict) else getattr(state, "messages", [])
    for message in reversed(messages or []):
        if isinstance(message, AIMessage) and any(c.get("id") == call_id for c in message.tool_calls):
            ids = [c.get("id") for c in message.tool_calls if c.get("name") == "task"]
            return ids.index(call_id)
    return 0


def make_task_tool(bus: Bus, config: AppConfig) -> BaseTool:
    types = subagent_types(config)
    settings = config.subagents
    listing = "\n".join(f"- {t.name}: {t.description}" for t in types.values())
    description = _DESCRIPTION.format(limit=settings.max_concurrent, types=listing)

    @tool("task", description=description)
    async def task(
        description: str,
        prompt: str,
        runtime: ToolRuntime[Any, Any],
        subagent_type: str = "general-purpose",
        max_turns: int | None = None,
    ) -> ToolMessage:
        call_id = runtime.tool_call_id or ""
        context = runtime.context
        parent_run_id = getattr(context, "run_id", "")
        write = runtime.stream_writer

        def error(text: str) -> ToolMessage:
            return ToolMessage(
                f"Error: {text}",
                tool_call_id=call_id,
                name="task",
                status="error",
                additional_kwargs={"subagent_status": "failed", "subagent_error": text},
            )

        kind = types.get(subagent_type)
        if kind is None:
            return error(f"no subagent type {subagent_type!r}; use one of: {', '.join(types)}")
        if _position(runtime.state, call_id) >= settings.max_concurrent:
            return error(
                f"at most {settings.max_concurrent} subagents run per turn; this one was not started. "
                "Use the results of the others, then delegate the rest in a later turn."
            )
        model_name = kind.model_name or settings.model_name or getattr(context, "model_name", None)
        timeout = kind.timeout_seconds or settings.timeout_seconds
        request = SubagentTask(
            task_id=call_id,
            parent_run_id=parent_run_id,
            thread_id=getattr(context, "thread_id", ""),
            user_id=getattr(context, "user_id", "default"),
            subagent_type=kind.name,
            description=description,
            prompt=prompt,
            model_name=model_name,
            max_turns=max_turns or kind.max_turns or settings.max_turns,
            timeout_seconds=timeout,
        )
        started = {"type": "task_started", "task_id": call_id, "description": description}
        write({**started, "model_name": model_name})

        async def relay(msg: Any) -> None:
            try:
                progress = decode(SubagentProgress, msg.data)
            except EnvelopeError:
                return
            if progress.task_id == call_id:
                write(
                    {
                        **started,
                        "type": "task_running",
                        "message": progress.message,
                        "message_index": progress.turn,
                        "model_name": model_name,
                    }
                )

        subscription = await bus.nc.subscribe(bus.subjects.subagent_progress(parent_run_id), cb=relay)
        try:
            result = await _outcome(bus, request, timeout + WAIT_GRACE_SECONDS)
        finally:
            await subscription.unsubscribe()
        if result is None:
            return error("no subagent executor is running (antler up starts one; or antler run subagents)")
        event = {"completed": "task_completed", "failed": "task_failed", "cancelled": "task_cancelled"}
        write(
            {
                "type": event.get(result.status, "task_timed_out"),
                "task_id": call_id,
                "description": description,
                "result": result.result if result.status == "completed" else None,
                "error": result.error,
                "usage": result.usage.model_dump(),
                "model_name": model_name,
            }
        )
        return ToolMessage(
            result_text(result),
            tool_call_id=call_id,
            name="task",
            status="success" if result.status == "completed" else "error",
            additional_kwargs=status_kwargs(result, model_name),
        )

    return task


async def _outcome(bus: Bus, task: SubagentTask, wait: float) -> SubagentResult | None:
    """The task's result: found (it finished before this parent attempt), or submitted and awaited.
    None when there is no executor to submit it to."""
    results = await bus.kv(bus.subjects.subagent_results_bucket)
    key = SubagentResult.key(task.parent_run_id, task.task_id)
    try:
        entry = await results.get(key)
        if entry.value:
            return decode(SubagentResult, entry.value)
    except Exception:  # not there (nats-py raises KeyNotFoundError, or KeyDeletedError)
        pass
    if not await _executor_exists(bus):
        return None
    msg_id = f"task:{task.parent_run_id}:{task.task_id}"  # a resumed parent never starts a second copy
    await bus.publish(bus.subjects.subagents_submit, task, msg_id=msg_id)
    try:
        async with asyncio.timeout(wait):
            return await _wait_for_result(results, key)
    except TimeoutError:
        return SubagentResult(
            task_id=task.task_id,
            parent_run_id=task.parent_run_id,
            status="timed_out",
            error=f"no result within {wait:g}s",
        )


async def _wait_for_result(results: Any, key: str) -> SubagentResult:
    watcher = await results.watch(key)
    try:
        async for entry in watcher:
            if entry is not None and entry.value:
                return decode(SubagentResult, entry.value)
    finally:
        await watcher.stop()
    raise RuntimeError("the result watch ended")  # only when stopped, which it is not here


async def _executor_exists(bus: Bus) -> bool:
    """Whether a subagent executor ever started on this bus (its durable consumer is there)."""
    try:
        await bus.js.consumer_info(bus.subjects.subagents_stream, EXECUTOR_DURABLE)
    except NotFoundError:
        return False
    return True
