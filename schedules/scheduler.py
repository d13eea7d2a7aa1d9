"""The scheduler component: scheduled tasks' records and definitions, and their firings into runs.

It owns KV `<p>_schedules` (the tasks), `<p>_schedule_runs` (each task's firings) and the
definitions on the SCHEDULES stream; everyone else (the gateway's REST API, the router's
`/schedule`, `antler schedule`) asks its `schedules` service. The firing itself is the NATS
server's (ADR-51 message schedules): no timer runs here, so a scheduler that is down misses
nothing; the firings wait in the stream for its durable `scheduler` (see `schedules.firings`).

Every request names its `user_id`; a task of another user is answered `not_found`, exactly as a
task that does not exist. Every change (created, updated, paused, resumed, deleted), whichever way it
came in, is a `schedule_changed` record in the audit trail.
"""

from __future__ import annotations

import builtins
import logging
import uuid
from typing import Any

from access.audit import AuditLog
from bus import Bus, Consumer, run_consumers
from bus.messages import (
    ChatBinding,
    RunRecord,
    RunStatus,
    ScheduleAction,
    ScheduleChange,
    ScheduleCreate,
    ScheduledRunList,
    ScheduledTask,
    ScheduledTaskFields,
    ScheduledTaskList,
    ScheduledTaskReply,
    ScheduledTaskRun,
    ScheduleFiring,
    ScheduleQuery,
    ThreadRecord,
    utcnow,
)
from bus.messages.schedules import task_key
from bus.records import RecordStore, drop_keys, keys_matching, repair_by_key
from bus.service import Endpoint, ServiceError, start_service
from bus.subjects import safe_token
from config import AppConfig
from schedules import grammar
from schedules.chats import chat_origin
from schedules.definitions import remove_definition, schedule_of, store_definition, trigger
from schedules.firings import ACTIVE, Firings
from schedules.spec import InvalidSchedule

log = logging.getLogger(__name__)

_RUN_STATUS = {
    RunStatus.PENDING: "queued",
    RunStatus.RUNNING: "running",
    RunStatus.SUCCESS: "success",
    RunStatus.ERROR: "failed",
    RunStatus.TIMEOUT: "failed",
    RunStatus.INTERRUPTED: "interrupted",
}
_SCHEDULE_FIELDS = ("schedule_type", "schedule_spec", "timezone")


class Scheduler:
    """The `schedules` service's handlers, over the scheduler's own records."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.audit = AuditLog(bus)

    async def open(self) -> None:
        s = self.bus.subjects
        self.tasks = RecordStore(await self.bus.kv(s.schedules_bucket), ScheduledTask)
        self.history = RecordStore(await self.bus.kv(s.schedule_runs_bucket), ScheduledTaskRun)
        self.runs = RecordStore(await self.bus.kv(s.runs_bucket), RunRecord)
        self.threads = RecordStore(
            await self.bus.kv(s.threads_bucket), ThreadRecord, repair=repair_by_key(ThreadRecord, "thread_id")
        )
        self.chats = RecordStore(await self.bus.kv(s.chats_bucket), ChatBinding)

    # ------------------------------------------------------------------ reading

    async def owned(self, user_id: str, task_id: str) -> ScheduledTask:
        task = await self.tasks.get(task_key(user_id, task_id)) if task_id else None
        if task is None or task.user_id != user_id:
            raise ServiceError(f"scheduled task {task_id} not found", "not_found")
        return task

    async def get(self, request: ScheduleAction) -> ScheduledTaskReply:
        return ScheduledTaskReply(task=await self.owned(request.user_id, request.task_id))

    async def list(self, request: ScheduleQuery) -> ScheduledTaskList:
        found = []
        s = self.bus.subjects
        for key in await keys_matching(self.bus.js, s.schedules_bucket, f"{safe_token(request.user_id)}.>"):
            task = await self.tasks.get(key)
            if task is None or task.user_id != request.user_id:
                continue
            if request.thread_id and request.thread_id not in (task.thread_id, task.last_thread_id):
                continue
            if request.channel and (
                task.origin is None
                or (task.origin.channel, task.origin.chat_id) != (request.channel, request.chat_id)
            ):
                continue
            found.append(task)
        return ScheduledTaskList(tasks=sorted(found, key=lambda t: t.created_at))

    async def history_of(self, request: ScheduleAction) -> ScheduledRunList:
        """The task's firings, newest first, each with its run's status as it is now."""
        task = await self.owned(request.user_id, request.task_id)
        keys = await keys_matching(self.bus.js, self.bus.subjects.schedule_runs_bucket, f"{task.id}.>")
        page = list(reversed(keys))[request.offset : request.offset + max(1, min(request.limit, 200))]
        lines = []
        for key in page:
            line = await self.history.get(key)
            if line is None:
                continue
            run = await self.runs.get(line.run_id) if line.run_id else None
            if run is not None:
                line = line.model_copy(
                    update={
                        "status": _RUN_STATUS.get(run.status, line.status),
                        "started_at": run.started_at,
                        "finished_at": run.ended_at,
                        "error": run.error.message if run.error else line.error,
                    }
                )
            lines.append(line)
        return ScheduledRunList(runs=lines)

    # ------------------------------------------------------------------ changing

    async def create(self, request: ScheduleCreate) -> ScheduledTaskReply:
        fields = request.fields or ScheduledTaskFields()
        if request.text is not None:
            parsed = _checked(lambda: grammar.parse(request.text or ""))
            # What the words say, in the fields given beside them (where it answers: a thread, a chat).
            fields = fields.model_copy(
                update={
                    "title": fields.title or _title(parsed.prompt),
                    "prompt": parsed.prompt,
                    "schedule_type": parsed.schedule_type,
                    "schedule_spec": parsed.schedule_spec,
                    "timezone": parsed.timezone,
                }
            )
        if not fields.prompt or not fields.prompt.strip():
            raise ServiceError("a scheduled task needs a prompt", "invalid")
        if fields.schedule_type is None or fields.schedule_spec is None:
            raise ServiceError("a scheduled task needs schedule_type and schedule_spec", "invalid")
        task = ScheduledTask(
            id=f"task-{uuid.uuid4().hex}",
            user_id=request.user_id,
            title=(fields.title or _title(fields.prompt)).strip(),
            prompt=fields.prompt,
            schedule_type=fields.schedule_type,
            schedule_spec=fields.schedule_spec,
            timezone=fields.timezone or "UTC",
            context_mode=fields.context_mode or "fresh_thread_per_run",
            thread_id=fields.thread_id,
            origin=await chat_origin(self.chats, request.user_id, fields.chat)
            if fields.chat
            else request.origin,
        )
        await self._check_thread(task)
        schedule = _checked(lambda: schedule_of(task))
        task = task.model_copy(
            update={
                "schedule_spec": {**task.schedule_spec, **schedule.spec},
                "next_run_at": schedule.first_run,
            }
        )
        await self.tasks.put(task.key, task)  # first: a firing finds its task
        try:
            await store_definition(self.bus, task, schedule)
        except InvalidSchedule as exc:
            await self._drop(task)
            raise ServiceError(str(exc), "invalid") from None
        log.info("task %s of %s created: %s", task.id, task.user_id, schedule.expression)
        await self._audit("created", task)
        return ScheduledTaskReply(task=task)

    async def update(self, request: ScheduleChange) -> ScheduledTaskReply:
        task = await self.owned(request.user_id, request.task_id)
        changes: dict[str, Any] = request.fields.model_dump(exclude_none=True, exclude={"chat"})
        if request.fields.chat is not None:
            changes["origin"] = await chat_origin(self.chats, request.user_id, request.fields.chat)
        spec = changes.get("schedule_spec")
        if task.schedule_type == "interval" and spec is not None and not {"every", "seconds"} & spec.keys():
            # DeerFlow's edit form knows once and cron only: with every edit of an interval task it
            # sends a cron spec the task cannot take. The interval stays as it was.
            del changes["schedule_spec"]
        if changes.get("context_mode") == "fresh_thread_per_run":
            changes["thread_id"] = None
        changed = task.model_copy(
            update={**changes, "generation": task.generation + 1, "updated_at": utcnow()}
        )
        await self._check_thread(changed)
        schedule = _checked(lambda: schedule_of(changed))
        if any(name in changes for name in _SCHEDULE_FIELDS):
            due = None if changed.status == "paused" else schedule.first_run
            changed = changed.model_copy(update={"next_run_at": due})
            if changed.status == "completed":
                changed = changed.model_copy(update={"status": "enabled"})
        changed = await self._replace(task, changed, schedule)
        await self._audit("updated", changed, fields=sorted(changes))
        return ScheduledTaskReply(task=changed)

    async def pause(self, request: ScheduleAction) -> ScheduledTaskReply:
        task = await self.owned(request.user_id, request.task_id)
        paused = task.model_copy(
            update={
                "status": "paused",
                "generation": task.generation + 1,
                "next_run_at": None,  # nothing is due while paused
                "updated_at": utcnow(),
            }
        )
        await self.tasks.put(task.key, paused)
        await remove_definition(self.bus, task.id)
        log.info("task %s paused", task.id)
        await self._audit("paused", paused)
        return ScheduledTaskReply(task=paused)

    async def resume(self, request: ScheduleAction) -> ScheduledTaskReply:
        task = await self.owned(request.user_id, request.task_id)
        schedule = _checked(lambda: schedule_of(task))
        resumed = task.model_copy(
            update={
                "status": "enabled",
                "generation": task.generation + 1,
                "next_run_at": schedule.first_run,  # counted from now (a once: its time)
                "updated_at": utcnow(),
            }
        )
        resumed = await self._replace(task, resumed, schedule)
        await self._audit("resumed", resumed)
        return ScheduledTaskReply(task=resumed)

    async def trigger(self, request: ScheduleAction) -> ScheduledTaskReply:
        task = await self.owned(request.user_id, request.task_id)
        if task.last_run_id:
            previous = await self.runs.get(task.last_run_id)
            if previous is not None and previous.status in ACTIVE:
                raise ServiceError(
                    f"the task's run {previous.run_id} is still {previous.status.value}; "
                    "try again when it ends",
                    "conflict",
                )
        await trigger(self.bus, task, uuid.uuid4().hex)
        return ScheduledTaskReply(task=task)

    async def delete(self, request: ScheduleAction) -> ScheduledTaskReply:
        task = await self.owned(request.user_id, request.task_id)
        await self._drop(task)  # first: a firing already queued finds no task
        await remove_definition(self.bus, task.id)
        await drop_keys(self.bus.js, self.bus.subjects.schedule_runs_bucket, f"{task.id}.>")
        log.info("task %s deleted", task.id)
        await self._audit("deleted", task)
        return ScheduledTaskReply(task=task, deleted=True)

    async def _audit(self, change: str, task: ScheduledTask, **more: Any) -> None:
        """The change in the audit trail: the task's id, title and schedule (its prompt is not kept)."""
        detail = {
            "change": change,
            "task_id": task.id,
            "title": task.title,
            "schedule_type": task.schedule_type,
        }
        await self.audit.record("schedule_changed", user_id=task.user_id, detail={**detail, **more})

    async def _replace(self, old: ScheduledTask, new: ScheduledTask, schedule: Any) -> ScheduledTask:
        """Write `new` and its definition (if enabled); a definition the server refuses leaves `old`."""
        await self.tasks.put(new.key, new)
        try:
            if new.status == "enabled":
                await store_definition(self.bus, new, schedule)
            else:
                await remove_definition(self.bus, new.id)
        except InvalidSchedule as exc:
            await self.tasks.put(old.key, old)
            raise ServiceError(str(exc), "invalid") from None
        return new

    async def _drop(self, task: ScheduledTask) -> None:
        """The task's record gone for good (no delete marker left for key listings to find)."""
        await drop_keys(self.bus.js, self.bus.subjects.schedules_bucket, task.key)

    async def _check_thread(self, task: ScheduledTask) -> None:
        if task.context_mode != "reuse_thread":
            return
        if not task.thread_id:
            raise ServiceError("reuse_thread requires thread_id", "invalid")
        thread = await self.threads.get(task.thread_id)
        if thread is None or thread.user_id != task.user_id:
            raise ServiceError(f"thread {task.thread_id} not found", "not_found")

    def endpoints(self) -> builtins.list[Endpoint[Any, Any]]:  # `list` here is the endpoint above
        return [
            Endpoint("create", ScheduleCreate, ScheduledTaskReply, self.create),
            Endpoint("update", ScheduleChange, ScheduledTaskReply, self.update),
            Endpoint("get", ScheduleAction, ScheduledTaskReply, self.get),
            Endpoint("list", ScheduleQuery, ScheduledTaskList, self.list),
            Endpoint("runs", ScheduleAction, ScheduledRunList, self.history_of),
            Endpoint("pause", ScheduleAction, ScheduledTaskReply, self.pause),
            Endpoint("resume", ScheduleAction, ScheduledTaskReply, self.resume),
            Endpoint("trigger", ScheduleAction, ScheduledTaskReply, self.trigger),
            Endpoint("delete", ScheduleAction, ScheduledTaskReply, self.delete),
        ]


def _title(prompt: str) -> str:
    line = prompt.strip().splitlines()[0] if prompt.strip() else "Scheduled task"
    return line if len(line) <= 60 else line[:59] + "…"


def _checked(make: Any) -> Any:
    try:
        return make()
    except InvalidSchedule as exc:
        raise ServiceError(str(exc), "invalid") from None


async def run(bus: Bus, config: AppConfig) -> None:
    """The scheduler component: the `schedules` service and the firings consumer until cancelled."""
    scheduler = Scheduler(bus)
    await scheduler.open()
    s = bus.subjects
    firings = Consumer(
        bus,
        stream=s.schedules_stream,
        durable="scheduler",
        filter_subjects=[s.schedule_firings_all],
        model=ScheduleFiring,
        handler=Firings(bus, scheduler.tasks, scheduler.history, scheduler.runs).on_firing,
        key=lambda firing: firing.task_id,  # a task's firings one after another
        concurrency=16,
    )
    service = await start_service(
        bus, "schedules", scheduler.endpoints(), description="Scheduled tasks (fired by the NATS server)"
    )
    try:
        await run_consumers(firings)
    finally:
        await service.stop()
