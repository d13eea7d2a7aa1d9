"""`/schedule`, `/schedules`, `/unschedule`: the chat's scheduling commands, answered by asking the
scheduler's `schedules` service.

    /schedule <when> <what>   a task of the sender, answering in this chat (grammar: `schedules.grammar`,
                              read by the scheduler, which answers a schedule it cannot read with the usage)
    /schedules                the sender's tasks made in this chat, numbered
    /unschedule <N>           remove task N of that list

Numbers follow the order the tasks were made, so /schedules then /unschedule 2 removes the second
listed. A task's answers come back in this chat through the ordinary reply path (its runs carry the
chat as their origin).
"""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bus import Bus
from bus.messages import (
    InboundMessage,
    ScheduleAction,
    ScheduleCreate,
    ScheduledTask,
    ScheduledTaskList,
    ScheduledTaskReply,
    ScheduleQuery,
)
from bus.service import ServiceError, call
from channels.router.bindings import chat_user
from channels.router.commands.context import Answer, CommandContext
from skills.commands import USAGE

NO_SCHEDULER = "Scheduling is not available right now (no scheduler is running)."


def _next(task: ScheduledTask) -> str:
    """` (next Wed 2026-11-25 08:00 Europe/Berlin)`: the next firing in the task's zone, if one is due."""
    if task.status != "enabled" or task.next_run_at is None:
        return ""
    try:
        local = task.next_run_at.astimezone(ZoneInfo(task.timezone))
    except (ZoneInfoNotFoundError, ValueError):
        local = task.next_run_at
    seconds = ":%S" if local.second else ""
    return f" (next {local.strftime(f'%a %Y-%m-%d %H:%M{seconds}')} {task.timezone})"


def _line(number: int, task: ScheduledTask) -> str:
    paused = " [paused]" if task.status == "paused" else ""
    done = " [done]" if task.status == "completed" else ""
    return f"{number}. {task.when(markdown=True)}{paused}{done}: {task.prompt}{_next(task)}"


async def _mine(bus: Bus, message: InboundMessage, user_id: str) -> list[ScheduledTask]:
    query = ScheduleQuery(user_id=user_id, channel=message.channel, chat_id=message.chat_id)
    found = await call(bus, "schedules", "list", query, ScheduledTaskList, timeout=10)
    return found.tasks


async def handle(ctx: CommandContext, message: InboundMessage, name: str, argument: str) -> Answer:
    """The reply to /schedule, /schedules or /unschedule from `message`'s sender."""
    bus, user_id = ctx.bus, chat_user(message)
    if name in USAGE and not argument.strip():  # asking how is not a mistake: the usage, as usage
        return USAGE[name]
    try:
        if name == "schedule":
            origin = message.origin(in_reply=False)
            request = ScheduleCreate(user_id=user_id, text=argument, origin=origin)
            reply = await call(bus, "schedules", "create", request, ScheduledTaskReply, timeout=10)
            made = reply.task
            assert made is not None
            number = len(await _mine(bus, message, user_id))
            return (
                f"Scheduled #{number}: {made.when(markdown=True)}: {made.prompt}{_next(made)}\n"
                "I will answer here. /schedules lists your tasks; /unschedule <number> removes one."
            )
        tasks = await _mine(bus, message, user_id)
        if name == "schedules":
            if not tasks:
                return "You have no scheduled tasks in this chat. Make one with /schedule <when> <what>."
            return "Your scheduled tasks here:\n" + "\n".join(_line(i, t) for i, t in enumerate(tasks, 1))
        if not tasks:
            return "You have no scheduled tasks in this chat to remove."
        if not argument.strip().isdigit() or not 1 <= int(argument) <= len(tasks):
            return f"Which one? Write /unschedule <number>, a number from /schedules (1 to {len(tasks)})."
        task = tasks[int(argument) - 1]
        await call(
            bus,
            "schedules",
            "delete",
            ScheduleAction(user_id=user_id, task_id=task.id),
            ScheduledTaskReply,
            timeout=10,
        )
        return f"Removed #{argument}: {task.when(markdown=True)}: {task.prompt}"
    except ServiceError as exc:
        if exc.code == "invalid":
            return f"I could not schedule that: {exc.message}"
        if exc.code in ("unavailable", "timeout"):
            return NO_SCHEDULER
        return f"That did not work: {exc.message}"
