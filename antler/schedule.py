"""`antler schedule list|add|pause|resume|run|remove`: a user's scheduled tasks from the shell.

Everything goes through the scheduler's `schedules` service (the tasks' one writer), as the
gateway's API and the chat commands do; `--user` is whose tasks (default: your login name, the
user `antler send` talks as is `cli:<login>`, a gateway token's is its `user_id`).
"""

from __future__ import annotations

import argparse
import getpass
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel

from antler._common import CliError, load, login, nats_url, setup_logging
from bus import Bus
from bus.messages import (
    Reply,
    ScheduleAction,
    ScheduleCreate,
    ScheduledRunList,
    ScheduledTask,
    ScheduledTaskList,
    ScheduledTaskReply,
    ScheduleQuery,
)
from bus.service import ServiceError, call

UNAVAILABLE = "no scheduler is running (antler up starts one; or antler run scheduler)"


def add_arguments(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    add_common: Callable[[argparse.ArgumentParser], None],
) -> None:
    p = sub.add_parser(
        "schedule",
        help="list, add, pause, resume, run or remove scheduled tasks",
        description="Scheduled tasks: prompts the agent runs on a schedule the NATS server fires. "
        "`add` takes the words of the chat command /schedule, e.g. "
        "antler schedule add every weekday 08:00 Europe/Berlin summarize the news",
    )
    actions = p.add_subparsers(dest="schedule_command", metavar="ACTION", required=True)
    q = actions.add_parser("list", help="your tasks", description="List your scheduled tasks.")
    q.add_argument("--runs", metavar="TASK", help="instead, a task's firings, newest first")
    _common(q, add_common)
    q = actions.add_parser(
        "add",
        help="add a task: <when> <what>",
        description="When: every <N>s|m|h|d, every day|weekday|<days> <HH:MM> [Zone], at [<date>] <HH:MM> "
        '[Zone], in <N>m, or cron "<5 or 6 fields>" [Zone]; then the prompt.',
    )
    q.add_argument("words", nargs="+", help="<when> <what to do>")
    _common(q, add_common)
    for action, about in (
        ("pause", "stop a task's firings (kept)"),
        ("resume", "fire a paused task again"),
        ("run", "fire a task once now"),
        ("remove", "delete a task and its history"),
    ):
        q = actions.add_parser(action, help=about, description=about[0].upper() + about[1:] + ".")
        q.add_argument("task", help="task id (from antler schedule list)")
        _common(q, add_common)


def _common(parser: argparse.ArgumentParser, add_common: Callable[[argparse.ArgumentParser], None]) -> None:
    parser.add_argument("--user", help="whose tasks (default: your login name)")
    add_common(parser)


def _row(task: ScheduledTask) -> str:
    spec = task.schedule_spec
    when = {
        "once": f"at {spec.get('run_at')} {task.timezone}",
        "interval": f"every {spec.get('every', spec.get('seconds'))}",
        "cron": f"cron {spec.get('cron')} {task.timezone}",
    }[task.schedule_type]
    nxt = _in_zone(task.next_run_at, task.timezone) if task.next_run_at else "-"
    return f"{task.id}  {task.status:9} {task.run_count:>4}  {nxt:25}  {when}: {task.prompt}"


def _in_zone(at: datetime, zone: str) -> str:
    """`at` as the task's zone reads it, with the offset (2026-11-25T08:00:00+01:00)."""
    try:
        return at.astimezone(ZoneInfo(zone)).isoformat()
    except (ZoneInfoNotFoundError, ValueError):
        return at.isoformat()


R = TypeVar("R", bound=Reply)
DONE = {"pause": "paused", "resume": "resumed", "run": "fired once now", "remove": "removed"}


async def _ask(bus: Bus, endpoint: str, request: BaseModel, reply: type[R]) -> R:
    try:
        return await call(bus, "schedules", endpoint, request, reply, timeout=15, unavailable=UNAVAILABLE)
    except ServiceError as exc:
        raise CliError(exc.message, code=2 if exc.code in ("invalid", "not_found") else 1) from None


async def schedule(args: argparse.Namespace) -> int:
    config = load(args)
    setup_logging(config, args.verbose)
    user = args.user or getpass.getuser()
    bus = await login(config).connect(nats_url(args, config), "antler-schedule")
    try:
        command = args.schedule_command
        if command == "list" and args.runs:
            found = await _ask(bus, "runs", ScheduleAction(user_id=user, task_id=args.runs), ScheduledRunList)
            for line in found.runs:
                why = f"  ({line.error})" if line.error else ""
                when = line.scheduled_for.isoformat()
                print(f"{when}  {line.trigger:9} {line.status:11} {line.run_id or '-'}{why}")
            return 0
        if command == "list":
            listed = await _ask(bus, "list", ScheduleQuery(user_id=user), ScheduledTaskList)
            tasks = listed.tasks
            if not tasks:
                print(f"{user} has no scheduled tasks")
                return 0
            print(f"{'TASK':37}  {'STATUS':9} {'RUNS':>4}  {'NEXT':25}  SCHEDULE: PROMPT")
            for task in tasks:
                print(_row(task))
            return 0
        if command == "add":
            request = ScheduleCreate(user_id=user, text=" ".join(args.words))
            made = await _ask(bus, "create", request, ScheduledTaskReply)
            assert made.task is not None
            print(_row(made.task))
            return 0
        endpoint = {"run": "trigger", "remove": "delete"}.get(command, command)
        await _ask(bus, endpoint, ScheduleAction(user_id=user, task_id=args.task), ScheduledTaskReply)
        print(f"{args.task}: {DONE[command]}")
        return 0
    finally:
        await bus.close()
