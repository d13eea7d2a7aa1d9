"""Firings into runs: each firing the server (or a trigger-now) puts on `<p>.sched.fire.<task>`
becomes one ordinary `RunRequest`, or a `skipped` line in the task's history.

A firing is delivered at least once; everything derived from it is named after the firing itself,
so a redelivery changes nothing: the firing's id comes from the task, its generation and the
occurrence the server fired (its `Nats-Schedule-Next`, unique per occurrence), the run id and a
fresh thread's id from the firing's id; history lines are created, never overwritten; the run is
submitted with `submit_run` (its record is created first, its request deduplicated by run id).

Firings of one task are handled one after another (the consumer is keyed by task), so the check
"is the previous run still going?" and the record of the new run cannot interleave.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime

from bus import Bus, Delivery
from bus.messages import (
    ChatOrigin,
    MultitaskStrategy,
    RunRecord,
    RunRequest,
    RunStatus,
    ScheduledTask,
    ScheduledTaskRun,
    ScheduleFiring,
    ThreadCreateReply,
    ThreadCreateRequest,
    utcnow,
)
from bus.messages.schedules import task_key
from bus.metrics import SCHEDULE_FIRINGS
from bus.records import RecordStore
from bus.runs import submit_run
from bus.service import ServiceError, call
from schedules import approvals
from schedules.definitions import remove_definition
from schedules.spec import NEXT, next_run

log = logging.getLogger(__name__)

FIRING_NAMESPACE = uuid.UUID("3a1f6c2e-8d4b-4e0a-b7c9-5e2d1f0a9b8c")
ACTIVE = (RunStatus.PENDING, RunStatus.RUNNING)


def history_key(task_id: str, fired: datetime, firing_id: str) -> str:
    """A firing's key in `<p>_schedule_runs`: sorted keys are the task's firings in order."""
    return f"{task_id}.{int(fired.timestamp() * 1000):013d}.{firing_id}"


class Firings:
    """The scheduler's consumer of firings (durable `scheduler` on `<p>.sched.fire.*`)."""

    def __init__(
        self,
        bus: Bus,
        tasks: RecordStore[ScheduledTask],
        history: RecordStore[ScheduledTaskRun],
        runs: RecordStore[RunRecord],
    ) -> None:
        self.bus = bus
        self.tasks = tasks
        self.history = history
        self.runs = runs

    async def on_firing(self, firing: ScheduleFiring, delivery: Delivery) -> None:
        if firing.approval is not None:  # no task's: an approval request whose time is up
            await approvals.expire(self.bus, firing.approval, firing.user_id)
            return
        task = await self.tasks.get(task_key(firing.user_id, firing.task_id))
        if task is None:  # deleted; a definition left behind (its owner died mid-delete) goes now
            log.info("firing of unknown task %s: its definition is removed", firing.task_id)
            await remove_definition(self.bus, firing.task_id)
            return
        manual = firing.trigger == "manual"
        if not manual and (task.status != "enabled" or firing.generation != task.generation):
            log.info("task %s: a firing of an older definition is dropped (%s)", task.id, task.status)
            SCHEDULE_FIRINGS.labels("dropped").inc()
            return
        next_header = delivery.headers.get(NEXT)
        occurrence = firing.trigger_id if manual else (next_header or f"seq{delivery.stream_seq}")
        firing_id = str(uuid.uuid5(FIRING_NAMESPACE, f"{task.id}:{firing.generation}:{occurrence}"))
        fired = _fired_at(delivery)
        run_id = str(uuid.uuid5(FIRING_NAMESPACE, f"run:{firing_id}"))
        busy = await self._previous_still_going(task, run_id)
        if busy is not None:
            await self._record(
                task,
                ScheduledTaskRun(
                    id=firing_id,
                    task_id=task.id,
                    thread_id=busy.thread_id,
                    scheduled_for=fired,
                    trigger=firing.trigger,
                    status="skipped",
                    error=f"the previous run {busy.run_id} was still {busy.status.value}",
                ),
                fired,
            )
            log.info("task %s: firing skipped, run %s still %s", task.id, busy.run_id, busy.status.value)
            SCHEDULE_FIRINGS.labels("skipped").inc()
            return
        thread_id = (
            task.thread_id
            if task.context_mode == "reuse_thread" and task.thread_id
            else str(uuid.uuid5(FIRING_NAMESPACE, f"thread:{firing_id}"))
        )
        task = await self._started(task, run_id, thread_id, fired, next_run(next_header), manual)
        if task.last_run_id == run_id and task.last_run_at is not None:
            fired = task.last_run_at  # a copy of a firing already recorded: its line keeps its key
        await self._record(
            task,
            ScheduledTaskRun(
                id=firing_id,
                task_id=task.id,
                thread_id=thread_id,
                run_id=run_id,
                scheduled_for=fired,
                trigger=firing.trigger,
            ),
            fired,
        )
        if task.context_mode != "reuse_thread":
            await self._new_thread(task, thread_id)
        submitted = await submit_run(self.bus, self._request(task, run_id, thread_id))
        again = "" if submitted is not None else " (again)"
        SCHEDULE_FIRINGS.labels("started").inc()
        log.info("task %s fired run %s on thread %s%s", task.id, run_id, thread_id, again)

    async def _previous_still_going(self, task: ScheduledTask, run_id: str) -> RunRecord | None:
        if not task.last_run_id or task.last_run_id == run_id:
            return None
        previous = await self.runs.get(task.last_run_id)
        return previous if previous is not None and previous.status in ACTIVE else None

    async def _started(
        self,
        task: ScheduledTask,
        run_id: str,
        thread_id: str,
        fired: datetime,
        next_at: datetime | None,
        manual: bool,
    ) -> ScheduledTask:
        def change(current: ScheduledTask | None) -> ScheduledTask | None:
            if current is None or current.last_run_id == run_id:
                return None  # deleted meanwhile, or this firing was recorded by an earlier delivery
            update: dict[str, object] = {
                "last_run_id": run_id,
                "last_thread_id": thread_id,
                "last_run_at": fired,
                "run_count": current.run_count + 1,
                "updated_at": utcnow(),
            }
            if not manual:
                update["next_run_at"] = next_at
                if current.schedule_type == "once":
                    update["status"] = "completed"
            return current.model_copy(update=update)

        return await self.tasks.update(task.key, change) or task

    async def _record(self, task: ScheduledTask, line: ScheduledTaskRun, fired: datetime) -> None:
        await self.history.create(history_key(task.id, fired, line.id), line)

    async def _new_thread(self, task: ScheduledTask, thread_id: str) -> None:
        metadata = {"scheduled_task_id": task.id, "title": task.title}
        request = ThreadCreateRequest(thread_id=thread_id, user_id=task.user_id, metadata=metadata)
        try:
            await call(self.bus, "threads", "create", request, ThreadCreateReply, timeout=10)
        except ServiceError as exc:  # its run creates it, without the task's metadata
            log.warning("thread %s of task %s not recorded yet: %s", thread_id, task.id, exc.message)

    def _request(self, task: ScheduledTask, run_id: str, thread_id: str) -> RunRequest:
        origin = task.origin.model_copy(update={"message_id": None}) if task.origin else None
        metadata: dict[str, object] = {"scheduled_task_id": task.id}
        if origin is not None:
            metadata["origin"] = _origin_dump(origin)
        return RunRequest(
            run_id=run_id,
            thread_id=thread_id,
            user_id=task.user_id,
            assistant_id=task.assistant_id,
            input={"messages": [{"role": "user", "content": task.prompt}]},
            metadata=metadata,
            stream_mode=["messages-tuple", "custom"],
            multitask_strategy=MultitaskStrategy.ENQUEUE,
            origin=origin,
        )


def _origin_dump(origin: ChatOrigin) -> dict[str, object]:
    return origin.model_dump(mode="json", exclude_none=True)


def _fired_at(delivery: Delivery) -> datetime:
    """When the firing was stored (the server stores it at the scheduled moment)."""
    try:
        return delivery.msg.metadata.timestamp.astimezone(UTC)
    except Exception:  # a message without JetStream metadata: now is as good as it gets
        return utcnow()
