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
others answer at once with an error saying why. With `run_in_background` the tool does not wait:
`agents.subagents.background` starts the task and reports its outcome back as a new run.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool

from agents.subagents import background
from agents.subagents.types import subagent_types
from agents.tools.decorator import tool
from bus import Bus, decode
from bus.errors import EnvelopeError
from bus.messages import SubagentCancel, SubagentProgress, SubagentResult, SubagentTask
from config import AppConfig

log = logging.getLogger(__name__)

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
optionally max_turns (a cap on its model turns) and run_in_background: true starts it without
waiting (for long work the user need not wait for); you answer the user at once, and its result
comes back to this conversation as a new message when it ends.

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


def _placement(state: Any, call_id: str) -> tuple[int, int]:
    """(the model turn that made this call, counted from 1; its place among that turn's task calls)."""
    messages = state.get("messages", []) if isinstance(state, dict) else getattr(state, "messages", [])
    turn = 0
    for message in messages or []:
        if isinstance(message, AIMessage):
            turn += 1
            ids = [c.get("id") for c in message.tool_calls if c.get("name") == "task"]
            if call_id in ids:
                return turn, ids.index(call_id)
    return turn, 0


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
        run_in_background: bool = False,
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
        turn, place = _placement(runtime.state, call_id)
        if place >= settings.max_concurrent:
            return error(
                f"at most {settings.max_concurrent} subagents run per turn; this one was not started. "
                "Use the results of the others, then delegate the rest in a later turn."
            )
        if not await executor_running(bus):
            return error("no subagent executor is running (antler up starts one; or antler run subagents)")
        model_name = kind.model_name or settings.model_name or getattr(context, "model_name", None)
        timeout = kind.timeout_seconds or settings.timeout_seconds
        cap = kind.max_turns or settings.max_turns
        request = SubagentTask(
            # One task per call, however often the parent resumes; per turn too, should a model
            # reuse call ids from one turn to the next.
            task_id=f"{call_id}-t{turn}",
            parent_run_id=parent_run_id,
            thread_id=getattr(context, "thread_id", ""),
            user_id=getattr(context, "user_id", "default"),
            subagent_type=kind.name,
            description=description,
            prompt=prompt,
            model_name=model_name,
            max_turns=min(max_turns, cap) if max_turns else cap,
            timeout_seconds=timeout,
            background=getattr(context, "report", None) if run_in_background else None,
        )
        if run_in_background:
            if request.background is None:
                return error("this run cannot start background tasks (nothing to report back to)")
            started = await background.start(bus, request)
            kwargs = {"background": True}
            return ToolMessage(started, tool_call_id=call_id, name="task", additional_kwargs=kwargs)
        shown = {"task_id": call_id, "description": description, "model_name": model_name}
        write({"type": "task_started", **shown})

        async def relay(msg: Any) -> None:
            try:
                progress = decode(SubagentProgress, msg.data)
            except EnvelopeError:
                return
            if progress.task_id == request.task_id:
                running = {"message": progress.message, "message_index": progress.turn}
                write({"type": "task_running", **shown, **running})

        try:
            subscription = await bus.nc.subscribe(bus.subjects.subagent_progress(parent_run_id), cb=relay)
            try:
                result = await _outcome(bus, request, timeout + WAIT_GRACE_SECONDS)
            finally:
                await subscription.unsubscribe()
        except Exception as exc:  # the card the UI shows for this task still gets its end
            write({"type": "task_failed", **shown, "error": f"{type(exc).__name__}: {exc}"})
            raise
        event = {"completed": "task_completed", "failed": "task_failed", "cancelled": "task_cancelled"}
        write(
            {
                "type": event.get(result.status, "task_timed_out"),
                **shown,
                "result": result.result if result.status == "completed" else None,
                "error": result.error,
                "usage": result.usage.model_dump(),
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


async def _outcome(bus: Bus, task: SubagentTask, wait: float) -> SubagentResult:
    """The task's result: found (it finished before this parent attempt), or submitted and awaited.

    Giving up on it (no result within `wait`) also stops it, wherever it runs.
    """
    results = await bus.kv(bus.subjects.subagent_results_bucket)
    key = SubagentResult.key(task.parent_run_id, task.task_id)
    try:
        entry = await results.get(key)
        if entry.value:
            return decode(SubagentResult, entry.value)
    except Exception:  # not there (nats-py raises KeyNotFoundError, or KeyDeletedError)
        pass
    msg_id = f"task:{task.parent_run_id}:{task.task_id}"  # a resumed parent never starts a second copy
    await bus.publish(bus.subjects.subagents_submit, task, msg_id=msg_id)
    try:
        async with asyncio.timeout(wait):
            return await _wait_for_result(results, key)
    except TimeoutError:
        reason = f"no result within {wait:g}s"
        cancel = SubagentCancel(parent_run_id=task.parent_run_id, task_id=task.task_id, reason=reason)
        await bus.publish_core(bus.subjects.subagent_cancel(task.parent_run_id), cancel)
        return SubagentResult(
            task_id=task.task_id, parent_run_id=task.parent_run_id, status="timed_out", error=reason
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


async def executor_running(bus: Bus) -> bool:
    """Whether a subagent executor answers `$SRV` discovery right now."""
    try:
        await bus.nc.request(f"$SRV.PING.{bus.subjects.service_name('subagents')}", b"", timeout=2.0)
    except Exception:  # no responders, or none answered in time
        return False
    return True
