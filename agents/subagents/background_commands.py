"""Background commands: `bash` with `run_in_background`, a background task of kind `command`.

They go the way background subagent tasks go (`agents.subagents.background`): the tool records the
task (KV `<prefix>_background_tasks`, `kind: command`), publishes a SubagentTask whose `prompt` is
the command on `<prefix>.subagents.submit`, and answers at once. A subagent executor takes it, has a
sandbox broker start the command (`sandbox.jobs`: it runs in the thread's sandbox under the run's
egress policy and `sandbox.background_timeout_seconds`), waits for its end, stores the outcome in
KV `<prefix>_subagent_results` and reports it back as a run on the thread, into the chat that
started it: `list_background_tasks` and `cancel_background_task` see it as any other.

Who may die meanwhile:
- the runner that started it: nothing of the command is in it;
- the executor that waits: the task is delivered again, and the next executor asks the brokers for
  the job (`<prefix>.sandbox.job.<job id>`) and goes on waiting for it;
- the broker that runs it: its processes die with it; the waiting executor hears no broker answer
  for the job and reports the command failed, saying so. A command the record says was started is
  never started a second time (it may have done part of its work).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import ToolException

from agents.background_stop import command_job_id, kill_command
from agents.subagents import background
from agents.subagents.task_tool import executor_running
from agents.tools.sandbox import BackgroundStarter
from bus import Bus
from bus.errors import NoResponders, RequestTimeout
from bus.messages import (
    BackgroundTask,
    JobControl,
    JobReply,
    SubagentResult,
    SubagentTask,
    utcnow,
)
from bus.records import RecordStore
from config.sandbox import SandboxConfig
from sandbox.client import SandboxClient
from sandbox.errors import SandboxError
from sandbox.hygiene import check_command

log = logging.getLogger(__name__)

WAIT_SECONDS = 15.0  # each wait for the job's end; a broker that stops answering is gone
ANSWER_GRACE = 10.0  # beyond a wait, how long its answer may take (a busy broker, a slow bus)
REPORT_CHARS = 8000  # the end of a command's output the report carries
LOST = (
    "the sandbox broker running the command stopped before it ended (its processes went with it); "
    "it was not started again, as it may have done part of its work: check, and run it again if needed"
)


def job_id(task: SubagentTask) -> str:
    """The command's name at the brokers (`agents.background_stop.command_job_id`)."""
    return command_job_id(task.parent_run_id, task.task_id)


def job_subject(bus: Bus, task: SubagentTask) -> str:
    return bus.subjects.sandbox(f"job.{job_id(task)}")


# --------------------------------------------------------------------- the tool's side


def refusal(command: str) -> str | None:
    """Why the sandbox would refuse the command (said at once, not in a report later)."""
    reason, _ = check_command(command)
    return reason


def placement_turn(state: Any, call_id: str) -> int:
    """The model turn (counted from 1) whose message made tool call `call_id`."""
    messages = state.get("messages", []) if isinstance(state, dict) else getattr(state, "messages", [])
    turn = 0
    for message in messages or []:
        if getattr(message, "type", None) == "ai":
            turn += 1
            if call_id in [c.get("id") for c in getattr(message, "tool_calls", [])]:
                return turn
    return turn


def starter(bus: Bus, settings: SandboxConfig) -> BackgroundStarter:
    """bash's `run_in_background` for the runner's tools (`agents.tools.sandbox`)."""

    async def start_command(
        runtime: ToolRuntime[Any, Any], command: str, timeout_seconds: float | None
    ) -> str:
        context = runtime.context
        report = getattr(context, "report", None)
        if report is None:
            raise ToolException(
                "Error: this run cannot start background commands (nothing to report back to)"
            )
        if settings.max_background_commands == 0:
            raise ToolException(
                "Error: background commands are turned off (sandbox.max_background_commands is 0)"
            )
        refused = refusal(command)
        if refused is not None:
            raise ToolException(f"Error: {refused}")
        if not await executor_running(bus):
            raise ToolException(
                "Error: no subagent executor is running to follow background commands "
                "(antler up starts one; or antler run subagents); run it without run_in_background"
            )
        call_id = runtime.tool_call_id or ""
        limit = settings.background_timeout_seconds
        task = SubagentTask(
            # One task per call, however often the run resumes; per turn too (call ids may repeat).
            task_id=f"{call_id}-t{placement_turn(runtime.state, call_id)}",
            parent_run_id=getattr(context, "run_id", ""),
            thread_id=getattr(context, "thread_id", ""),
            user_id=getattr(context, "user_id", "default"),
            kind="command",
            subagent_type="",
            description=command.strip().splitlines()[0][:80] if command.strip() else "",
            prompt=command,
            timeout_seconds=min(timeout_seconds, limit) if timeout_seconds else limit,
            egress=getattr(context, "egress", None),
            background=report,
        )
        try:
            return await start(bus, task, settings.max_background_commands)
        except ValueError as exc:
            raise ToolException(f"Error: {exc}") from exc

    return start_command


async def start(bus: Bus, task: SubagentTask, limit: int) -> str:
    """Record the command and hand it to the executors; what the model reads.

    Raises:
        ValueError: the thread already has `limit` background commands running (the text says so).
    """
    store = RecordStore(await bus.kv(bus.subjects.background_tasks_bucket), BackgroundTask)
    key = BackgroundTask.key(task.thread_id, task.task_id)
    record = BackgroundTask.model_validate(task, from_attributes=True).model_copy(
        update={"command": task.prompt}
    )
    if await store.create(key, record):  # not when the tool call is resumed: counted then
        # Counted with this one recorded: of the thread's running commands the first `limit`
        # stand, so two calls racing for the last place cannot both take it.
        running = sorted(
            (r.created_at, r.task_id)
            for r, result in await background.ThreadTasks(bus).listed(task.thread_id)
            if r.kind == "command" and result is None and r.cancel_requested_at is None
        )
        if task.task_id not in [t for _, t in running[:limit]]:
            await store.delete(key)
            raise ValueError(
                f"this conversation already has {limit} background commands running (the most it "
                "may); wait for one to end (its result comes back here), or stop one with "
                "cancel_background_task, then start this one again"
            )
    msg_id = f"task:{task.parent_run_id}:{task.task_id}"
    await bus.publish(bus.subjects.subagents_submit, task, msg_id=msg_id)
    return (
        f"Started background command {task.task_id}. It runs on its own in the sandbox (for up to "
        f"{task.timeout_seconds or 0:g}s); you do not wait for it. When it ends, its output and exit "
        "code come back to this conversation as a new message and you continue from there. Tell the "
        "user it is running; list_background_tasks shows its state and cancel_background_task stops it."
    )


async def kill(bus: Bus, task: SubagentTask | BackgroundTask) -> None:
    """Ask whichever broker runs the command to kill it (nothing happens where none does)."""
    await kill_command(bus, task.parent_run_id, task.task_id)


# --------------------------------------------------------------------- the executor's side


async def run_to_end(bus: Bus, task: SubagentTask, on_purpose: Callable[[], bool]) -> SubagentResult:
    """The command followed to its end (`follow`), as a task's outcome. Cancelled `on_purpose()`
    (its cancel, its thread deleted), it is killed; else (the executor stops) it runs on, for the
    next delivery to follow."""
    started = utcnow()
    try:
        state = await follow(bus, task)
    except asyncio.CancelledError:
        if on_purpose():
            await kill(bus, task)
        raise
    return outcome(task, state, started)


async def follow(bus: Bus, task: SubagentTask) -> JobReply | str:
    """The command run to its end: started by a broker unless an earlier delivery started it. Its
    ended `JobReply`, or why there is none (a text)."""
    record = await background.record_of(bus, task)
    if record is None:
        return "its conversation was deleted"
    if record.started_at is not None:  # an earlier delivery started it: is it still running?
        found = await _ask(bus, task, JobControl(action="wait", wait_seconds=0))
        if found is None:
            return LOST
        state = found
    else:
        # A broker that runs it already (an earlier delivery's start whose mark was not written)
        # answers with its state instead of starting it again.
        client = SandboxClient(bus, task.user_id, task.thread_id)
        try:
            state = await client.start_job(
                task.prompt, job_id(task), task.timeout_seconds, egress=task.egress, run_id=task.parent_run_id
            )
        except SandboxError as exc:
            return f"Error ({exc.code}): {exc.message}"
        await _mark_started(bus, task)
        log.info("background command %s of run %s started", task.task_id, task.parent_run_id)
    while state.state == "running":
        found = await _ask(bus, task, JobControl(action="wait", wait_seconds=WAIT_SECONDS))
        if found is None:
            return LOST
        state = found
    return state


async def _ask(bus: Bus, task: SubagentTask, control: JobControl) -> JobReply | None:
    """The broker's answer about the job; None when no broker runs (or remembers) it: none is up
    at all, or none answered twice in a row (a broker whose loop stalled once is not taken for gone)."""
    for attempt in range(2):
        try:
            return await bus.request(
                job_subject(bus, task), control, JobReply, timeout=control.wait_seconds + ANSWER_GRACE
            )
        except NoResponders:  # no broker is up: none runs it
            return None
        except RequestTimeout:
            if attempt:
                return None
            log.info("background command %s: no broker answered; asking once more", task.task_id)
    return None


async def _mark_started(bus: Bus, task: SubagentTask) -> None:
    store = RecordStore(await bus.kv(bus.subjects.background_tasks_bucket), BackgroundTask)
    now = utcnow()

    def mark(current: BackgroundTask | None) -> BackgroundTask | None:
        if current is None or current.started_at is not None:
            return None
        return current.model_copy(update={"started_at": now})

    await store.update(BackgroundTask.key(task.thread_id, task.task_id), mark)


def outcome(task: SubagentTask, state: JobReply | str, started: datetime) -> SubagentResult:
    """How the command ended, as a task's outcome: `result` is its output's end with its exit code."""
    ended: dict[str, Any] = {"task_id": task.task_id, "parent_run_id": task.parent_run_id}
    ended["started_at"] = started
    if isinstance(state, str):
        return SubagentResult(**ended, status="failed", error=state)
    reply = state.result
    if reply is None or reply.error is not None:
        info = reply.error if reply is not None else None
        text = f"Error ({info.code}): {info.message}" if info else "the broker gave no result"
        return SubagentResult(**ended, status="failed", error=text)
    text = output_text(reply.output, reply.truncated_chars, reply.warnings)
    if state.killed:
        return SubagentResult(**ended, status="cancelled", result=text, error="cancelled on request")
    if reply.timed_out:
        limit = f" than {reply.timeout_seconds:g}s" if reply.timeout_seconds else ""
        killed = f"the command ran longer{limit} and was killed with all its processes"
        return SubagentResult(**ended, status="timed_out", result=text, error=killed)
    code = reply.exit_code
    if code == 0:
        return SubagentResult(**ended, status="completed", result=text, exit_code=code)
    return SubagentResult(**ended, status="failed", result=text, error=f"exit code {code}", exit_code=code)


def output_text(output: str, cut: int, warnings: list[str]) -> str:
    """The output's end (`REPORT_CHARS`), saying how much came before; the broker's warnings."""
    text = output.rstrip("\n")
    if len(text) > REPORT_CHARS:
        cut_here = len(text) - REPORT_CHARS
        text = f"[... {cut_here + cut} earlier characters not shown ...]\n{text[cut_here:]}"
    lines = [text] if text else ["(no output)"]
    return "\n".join([*lines, *(f"[{w}]" for w in warnings)])
