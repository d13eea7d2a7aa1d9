"""Background tasks: subagent work the lead starts and does not wait for, and its report back.

The `task` tool with `run_in_background` records the task (KV `<prefix>_background_tasks`, key
`<thread>.<task>`: what `list_background_tasks` lists) and publishes its SubagentTask with a
`BackgroundReport`: the parent run's options and chat origin. The parent run goes on and ends;
the executor runs the task like any other (its outcome in KV `<prefix>_subagent_results`), but a
parent run's end does not stop it. When it ends, the executor submits the report: an ordinary
RunRequest on the parent's thread (`report_run`) whose input is a hidden message carrying the
outcome. It is a message on the RUNS stream like every run, so a runner that is down takes it
later, and a run with a chat origin answers in that chat through whichever router and adapter
copy is alive then. Its run id is derived from the task, so an outcome reported twice (an
executor killed between storing it and reporting it) is one run.

`cancel_background_task` marks the record (a task still waiting for an executor is then never
started) and asks the executors to stop it (`subagents.cancel.<parent run>`); a task cancelled so
is not reported back: the model already knows. Deleting the thread removes its tasks' records and
stops them (`agents.background_stop`, from the threads service): none reports into a deleted thread.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool

from agents.background_stop import kill_command
from agents.follow_up import follow_up_run
from agents.tools.decorator import tool
from bus import Bus, decode
from bus.messages import (
    BackgroundTask,
    RunRequest,
    SubagentCancel,
    SubagentResult,
    SubagentTask,
    utcnow,
)
from bus.records import RecordStore, keys_matching
from bus.runs import submit_run
from bus.subjects import safe_token

REPORT_NAMESPACE = uuid.UUID("5b0f3c3e-1d7a-4c55-9d3e-6f0d8e2b7a41")
LISTED = 20  # the newest tasks list_background_tasks shows


def report_run_id(task: SubagentTask) -> str:
    """The run that reports `task`'s outcome: the same however often it is reported."""
    return str(uuid.uuid5(REPORT_NAMESPACE, f"background:{task.parent_run_id}:{task.task_id}"))


def report_prompt(task: SubagentTask, result: SubagentResult) -> str:
    if task.kind == "command":
        return command_report_prompt(task, result)
    if result.status == "completed":
        capped = " (it stopped at its turn limit)" if result.stop_reason else ""
        outcome = f"Status: completed{capped}\nResult:\n{result.result}"
    else:
        outcome = f"Status: {result.status}\nError: {result.error or 'no detail'}"
    return (
        f'<background_task_result task_id="{task.task_id}">\n'
        f"Task: {task.description or task.prompt[:200]}\n{outcome}\n"
        "</background_task_result>\n"
        "A task you started in the background earlier has ended. Tell the user what came of it "
        "(or why it did not finish), and go on from there."
    )


def command_report_prompt(task: SubagentTask, result: SubagentResult) -> str:
    """What the agent reads when the command has ended."""
    exit_code = "" if result.exit_code is None else f"\nExit code: {result.exit_code}"
    error = f"\nError: {result.error}" if result.error and result.status != "failed" else ""
    if result.status == "failed" and result.exit_code is None:
        error = f"\nError: {result.error or 'no detail'}"
    output = f"\nOutput (its end):\n{result.result}" if result.result else ""
    return (
        f'<background_task_result task_id="{task.task_id}" kind="command">\n'
        f"Command: {json.dumps(task.prompt[:2000])}\nStatus: {result.status}{exit_code}{error}{output}\n"
        "</background_task_result>\n"
        "A command you started in the background earlier has ended. Tell the user what came of it "
        "(or why it did not finish), and go on from there."
    )


def report_run(task: SubagentTask, result: SubagentResult) -> RunRequest:
    """The run on the parent's thread that carries `task`'s outcome to the agent (and its chat)."""
    assert task.background is not None
    # The parent's metadata goes with it: a chat run's `origin` there is where the router answers.
    about = {"task_id": task.task_id, "parent_run_id": task.parent_run_id}
    return follow_up_run(
        task.background,
        report_run_id(task),
        task.thread_id,
        task.user_id,
        report_prompt(task, result),
        kind="background",
        marks={"background_task": task.task_id},
        metadata={"background_task": about},
    )


async def record_of(bus: Bus, task: SubagentTask) -> BackgroundTask | None:
    store = RecordStore(await bus.kv(bus.subjects.background_tasks_bucket), BackgroundTask)
    return await store.get(BackgroundTask.key(task.thread_id, task.task_id))


async def report(bus: Bus, task: SubagentTask, result: SubagentResult) -> None:
    """Submit the run that reports a background task's outcome (not for one cancelled on request,
    nor for one whose thread was deleted: its record went with it)."""
    record = await record_of(bus, task)
    if record is None or (result.status == "cancelled" and record.cancel_requested_at is not None):
        return
    await submit_run(bus, report_run(task, result))


async def start(bus: Bus, task: SubagentTask) -> str:
    """Record and submit a background task; what the lead model reads."""
    store = RecordStore(await bus.kv(bus.subjects.background_tasks_bucket), BackgroundTask)
    record = BackgroundTask.model_validate(task, from_attributes=True)  # what was asked, by whom
    await store.create(BackgroundTask.key(task.thread_id, task.task_id), record)  # kept if resumed
    await bus.publish(bus.subjects.subagents_submit, task, msg_id=f"task:{task.parent_run_id}:{task.task_id}")
    return (
        f"Started background task {task.task_id} ({task.description}). It works on its own; you do "
        "not wait for it. When it ends, its result comes back to this conversation as a new message "
        "and you continue from there. Tell the user it is running; list_background_tasks shows its "
        "state and cancel_background_task stops it."
    )


class ThreadTasks:
    """A thread's background tasks with their state, newest first."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def listed(self, thread_id: str) -> list[tuple[BackgroundTask, SubagentResult | None]]:
        bucket = self.bus.subjects.background_tasks_bucket
        store = RecordStore(await self.bus.kv(bucket), BackgroundTask)
        results = await self.bus.kv(self.bus.subjects.subagent_results_bucket)
        found = []
        for key in await keys_matching(self.bus.js, bucket, f"{safe_token(thread_id)}.*"):
            record = await store.get(key)
            if record is None:
                continue
            try:
                entry = await results.get(SubagentResult.key(record.parent_run_id, record.task_id))
                result = decode(SubagentResult, entry.value) if entry.value else None
            except Exception:  # no outcome yet (nats-py raises KeyNotFoundError)
                result = None
            found.append((record, result))
        found.sort(key=lambda pair: pair[0].created_at, reverse=True)
        return found

    async def request_cancel(self, record: BackgroundTask) -> None:
        store = RecordStore(await self.bus.kv(self.bus.subjects.background_tasks_bucket), BackgroundTask)
        now = utcnow()

        def mark(current: BackgroundTask | None) -> BackgroundTask | None:
            if current is None or current.cancel_requested_at is not None:
                return None
            return current.model_copy(update={"cancel_requested_at": now})

        await store.update(BackgroundTask.key(record.thread_id, record.task_id), mark)
        stop = SubagentCancel(
            parent_run_id=record.parent_run_id, task_id=record.task_id, reason="cancelled on request"
        )
        await self.bus.publish_core(self.bus.subjects.subagent_cancel(record.parent_run_id), stop)
        if record.kind == "command":  # killed where it runs, even with no executor waiting for it
            await kill_command(self.bus, record.parent_run_id, record.task_id)


def _status(record: BackgroundTask, result: SubagentResult | None) -> str:
    if result is not None:
        return result.status
    return "cancelling" if record.cancel_requested_at is not None else "running"


def _shown(record: BackgroundTask, result: SubagentResult | None) -> dict[str, Any]:
    kind = (
        {"command": record.command} if record.kind == "command" else {"subagent_type": record.subagent_type}
    )
    return {
        "task_id": record.task_id,
        "kind": record.kind,
        "description": record.description,
        **kind,
        "status": _status(record, result),
        "started_at": record.created_at.isoformat(),
        "ended_at": result.ended_at.isoformat() if result else None,
        "error": result.error if result else None,
        **({"exit_code": result.exit_code} if result and record.kind == "command" else {}),
    }


def make_background_tools(bus: Bus) -> list[BaseTool]:
    """`list_background_tasks` and `cancel_background_task`, as DeerFlow names them."""
    tasks = ThreadTasks(bus)

    @tool
    async def list_background_tasks(runtime: ToolRuntime[Any, Any], active_only: bool = False) -> str:
        """List this conversation's background tasks (started with run_in_background of task or
        bash): id, kind (subagent or command), description, status (running, cancelling,
        completed, failed, cancelled, timed_out).

        Args:
            active_only: Only the tasks still running.
        """
        found = await tasks.listed(runtime.context.thread_id)
        shown = [_shown(record, result) for record, result in found]
        if active_only:
            shown = [t for t in shown if t["status"] in ("running", "cancelling")]
        return json.dumps({"tasks": shown[:LISTED], "count": len(shown)})

    @tool
    async def cancel_background_task(runtime: ToolRuntime[Any, Any], task: str | None = None) -> str:
        """Cancel one running background task of this conversation (a command is killed).

        Args:
            task: The task's id or its exact description, as list_background_tasks shows them;
                leave it out only when one task is running.
        """
        found = await tasks.listed(runtime.context.thread_id)
        active = [record for record, result in found if result is None and not record.cancel_requested_at]
        if task:
            wanted = task.strip().casefold()
            active = [r for r in active if wanted in (r.task_id.casefold(), r.description.strip().casefold())]
        if not active:
            return json.dumps({"cancelled": False, "message": "No running background task matches."})
        if len(active) > 1:
            names = ", ".join(f"{r.task_id} ({r.description})" for r in active[:5])
            message = f"More than one running background task matches; name one: {names}"
            return json.dumps({"cancelled": False, "message": message})
        await tasks.request_cancel(active[0])
        shown = _shown(active[0], None) | {"status": "cancelling"}
        message = "Cancellation requested; the task stops and does not report back."
        if active[0].kind == "command":
            message = (
                "Cancellation requested; the command is killed with all its processes and does not "
                "report back."
            )
        return json.dumps({"cancelled": True, "task": shown, "message": message})

    return [list_background_tasks, cancel_background_task]
