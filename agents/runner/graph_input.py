"""What a run hands LangGraph: its config, its input (or nothing, to resume), and its time limit."""

from __future__ import annotations

from typing import Any

from langgraph.types import Command, Send

from agents.checkpoints import since_last_input
from agents.graph.run_check import InvalidRun, check_run
from agents.graph.state import thread_data
from bus.messages import RunCommand, RunRequest, SendTo


def graph_config(request: RunRequest, configurable: dict[str, Any], recursion_limit: int) -> dict[str, Any]:
    """The RunnableConfig: the thread (and checkpoint) to run on, metadata, the step limit."""
    configurable = {**configurable, "thread_id": request.thread_id}
    if request.checkpoint_id:
        configurable["checkpoint_id"] = request.checkpoint_id
    return {
        "configurable": configurable,
        "metadata": {
            **request.metadata,
            "run_id": request.run_id,
            "user_id": request.user_id,
            "assistant_id": request.assistant_id,
        },
        "recursion_limit": int(request.config.get("recursion_limit") or recursion_limit),
    }


async def graph_input_of(request: RunRequest, agent: Any, resumed: bool) -> tuple[Any, list[Any]]:
    """The graph's input, and for a run resumed mid-way the messages it already finished.

    Raises:
        InvalidRun: the request cannot run on the agent's graph or its thread (`agents.graph.run_check`).
    """
    if resumed:
        # Continue only if this run's input made it into a checkpoint; else start it afresh.
        snapshot = await agent.aget_state({"configurable": {"thread_id": request.thread_id}})
        if snapshot and (snapshot.metadata or {}).get("run_id") == request.run_id:
            return None, since_last_input(snapshot.values.get("messages") or [])
    await check_run(request, agent)
    if request.command is not None:
        command = command_of(request.command)
        if request.command.resume is not None:
            snapshot = await agent.aget_state({"configurable": {"thread_id": request.thread_id}})
            resume = addressed(request.command.resume, list(snapshot.interrupts or ()) if snapshot else [])
            command = Command(update=command.update, resume=resume, goto=command.goto)
        return command, []
    if request.input is None and await _stopped_midway(agent, request.thread_id):
        return None, []  # LangGraph's "continue": a run stopped by interrupt_before/after goes on
    graph_input = dict(request.input or {})
    graph_input.setdefault("thread_data", thread_data(request.user_id))
    graph_input.setdefault("sandbox", {"sandbox_id": f"{request.user_id}:{request.thread_id}"})
    return graph_input, []


async def _stopped_midway(agent: Any, thread_id: str) -> bool:
    """Whether the thread's last run stopped before its graph's end (nodes are still to run)."""
    snapshot = await agent.aget_state({"configurable": {"thread_id": thread_id}})
    return bool(snapshot and snapshot.next)


def addressed(resume: Any, interrupts: list[Any]) -> Any:
    """A resume LangGraph can apply while several interrupts wait (tool calls made side by side ask
    together): an approval answer (`{"approval_id": ...}`) goes to the interrupt asking it, as
    `{interrupt_id: answer}`. One interrupt, or an answer already addressed by ids: as it is.

    Raises:
        InvalidRun: several wait and the answer says not which (`command.resume` names the ids).
    """
    if len(interrupts) < 2:
        return resume
    ids = {str(getattr(item, "id", "")): getattr(item, "value", None) for item in interrupts}
    if isinstance(resume, dict) and resume and set(resume) <= set(ids):
        return resume  # LangGraph's own form: answers by interrupt id
    approval = resume.get("approval_id") if isinstance(resume, dict) else None
    for interrupt_id, value in ids.items():
        if approval and isinstance(value, dict) and value.get("approval_id") == approval:
            return {interrupt_id: resume}
    asked = [v.get("approval_id") for v in ids.values() if isinstance(v, dict) and v.get("approval_id")]
    raise InvalidRun(
        f"command.resume: {len(ids)} requests wait on this thread; answer one of them with "
        f'{{"approval_id": <one of {asked}>, "decision": ...}}, or map interrupt ids to answers '
        f"({sorted(ids)})"
    )


def command_of(command: RunCommand) -> Command[Any]:
    """LangGraph's Command for a run's: a Send as the SDK writes it (`{"node", "input"}`) made one."""
    goto = command.goto if isinstance(command.goto, list) else [command.goto] if command.goto else []
    return Command(
        update=command.update,
        resume=command.resume,
        goto=[Send(target.node, target.input) if isinstance(target, SendTo) else target for target in goto],
    )


def run_timeout(configurable: dict[str, Any], default: float) -> float:
    """Seconds the run may take: its own `run_timeout_seconds`, else the runner's."""
    return float(configurable.get("run_timeout_seconds") or default)
