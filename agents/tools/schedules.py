"""The agent's tools for scheduled tasks, when a user asks in words ("remind me every Monday ...").

`schedule_task`, `list_scheduled_tasks` and `unschedule_task` ask the scheduler's `schedules`
service as the run's user, exactly as the chat's /schedule does: a task made in a chat's run
answers in that chat (the run's origin), one made elsewhere answers in fresh threads of the user.
Each tool's answer is the confirmation the model is told to show the user.
"""

from __future__ import annotations

from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool

from agents.tools.decorator import tool
from bus import Bus
from bus.messages import (
    ScheduleAction,
    ScheduleCreate,
    ScheduledTask,
    ScheduledTaskList,
    ScheduledTaskReply,
    ScheduleQuery,
)
from bus.service import ServiceError, call


def _when(task: ScheduledTask) -> str:
    spec = task.schedule_spec
    if task.schedule_type == "once":
        return f"once at {spec.get('run_at')} ({task.timezone})"
    if task.schedule_type == "interval":
        return f"every {spec.get('every', spec.get('seconds'))}"
    return f"cron {spec.get('cron')} ({task.timezone})"


def make_schedule_tools(bus: Bus) -> list[BaseTool]:
    async def ask(endpoint: str, request: Any, reply: Any) -> Any:
        return await call(bus, "schedules", endpoint, request, reply, timeout=15)

    @tool
    async def schedule_task(when: str, prompt: str, runtime: ToolRuntime[Any, Any]) -> str:
        """Schedule a prompt for yourself to run later or repeatedly, when the user asks for it.

        Show the user the confirmation this returns (the schedule as understood, and the task id).

        Args:
            when: The schedule, in these words only: `every 30m` (s, m, h, d), `every day 08:00 Zone`,
                `every weekday 08:00 Zone`, `every monday,thursday 18:30 Zone`,
                `at 2026-12-01 09:00 Zone`, `in 20m`, or `cron "0 8 * * 1-5" Zone`; Zone is an
                IANA time zone such as Europe/Berlin (UTC when left out).
            prompt: What to do each time, written as the user's request to you.
        """
        context = runtime.context
        request = ScheduleCreate(
            user_id=context.user_id, text=f"{when.strip()} {prompt.strip()}", origin=context.origin
        )
        try:
            made = await ask("create", request, ScheduledTaskReply)
        except ServiceError as exc:
            return f"Error: could not schedule it: {exc.message}"
        task = made.task
        where = "in this chat" if context.origin else "in a new conversation each time"
        return f"Scheduled {_when(task)}: {task.prompt} (task {task.id}; I will answer {where})."

    @tool
    async def list_scheduled_tasks(runtime: ToolRuntime[Any, Any]) -> str:
        """The user's scheduled tasks: id, schedule, status and prompt of each."""
        try:
            found = await ask("list", ScheduleQuery(user_id=runtime.context.user_id), ScheduledTaskList)
        except ServiceError as exc:
            return f"Error: {exc.message}"
        if not found.tasks:
            return "The user has no scheduled tasks."
        return "\n".join(f"{t.id}: {_when(t)} [{t.status}]: {t.prompt}" for t in found.tasks)

    @tool
    async def unschedule_task(task_id: str, runtime: ToolRuntime[Any, Any]) -> str:
        """Delete one of the user's scheduled tasks (its id from list_scheduled_tasks).

        Show the user the confirmation this returns.
        """
        request = ScheduleAction(user_id=runtime.context.user_id, task_id=task_id)
        try:
            gone = await ask("delete", request, ScheduledTaskReply)
        except ServiceError as exc:
            return f"Error: {exc.message}"
        return f"Removed the scheduled task {_when(gone.task)}: {gone.task.prompt}."

    return [schedule_task, list_scheduled_tasks, unschedule_task]
