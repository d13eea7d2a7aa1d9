"""The `invoke_agent` span of a run or a subagent task (GenAI conventions; `bus.tracing`).

Its children are the agent's `chat` (llm.telemetry) and `execute_tool`
(agents.graph.middleware.tool_telemetry) spans, and through the bus the sandbox's and subagents'
work. Off, the work runs unwrapped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

from bus import tracing
from bus.log_context import with_run
from bus.messages import SubagentTask

T = TypeVar("T")


def invoke_agent(work: Awaitable[T], agent: str, thread_id: str, run_id: str, **more: Any) -> Awaitable[T]:
    """`work` inside an `invoke_agent <agent>` span."""
    if not tracing.ON:
        return work
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent,
        "gen_ai.conversation.id": thread_id,
        "antler.run_id": run_id,
        **more,
    }
    return tracing.in_span(work, f"invoke_agent {agent}", attributes)


def invoke_subagent(task: SubagentTask, work: Awaitable[T]) -> Coroutine[Any, Any, T]:
    """A subagent task's work, its log lines naming `<parent run>:<task>`; with tracing on, in an
    `invoke_agent` span, a child of the parent run's `task` tool call (its message's trace)."""
    if tracing.ON:
        more = {"antler.task_id": task.task_id, "gen_ai.agent.description": task.description[:200]}
        work = invoke_agent(work, task.subagent_type, task.thread_id, task.parent_run_id, **more)

    async def logged() -> T:
        with_run(f"{task.parent_run_id}:{task.task_id}")
        return await work

    return logged()
