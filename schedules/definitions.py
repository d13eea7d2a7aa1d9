"""A task's definition on the SCHEDULES stream: stored, replaced and removed by subject.

The definition is one message on `<p>.sched.def.<task>` whose `Nats-Schedule` headers tell the
server when to copy its body (a `ScheduleFiring`) onto `<p>.sched.fire.<task>`. Publishing on the
subject again replaces it (the server keeps one schedule per subject); removing it is a rollup of
the subject to an empty message that expires a second later, so nothing of it stays in the stream.
The definition carries no `Nats-Msg-Id`: the server would copy it into every firing.
"""

from __future__ import annotations

from nats.js.errors import BadRequestError

from bus import Bus
from bus.messages import ScheduledTask, ScheduleFiring
from schedules.spec import InvalidSchedule, Schedule, build, headers

# Codes the server gives a definition it cannot fire (ADR-51): the user's mistake, said in its words.
_REFUSED = {10189: "the server cannot read this schedule", 10223: "unknown time zone"}


def schedule_of(task: ScheduledTask) -> Schedule:
    """The task's schedule, checked (raises InvalidSchedule)."""
    return build(task.schedule_type, task.schedule_spec, task.timezone)


async def store_definition(bus: Bus, task: ScheduledTask, schedule: Schedule) -> None:
    """Store (or replace) the task's definition, firing with the task's current generation.

    Raises:
        InvalidSchedule: the server refused the schedule (an expression it cannot read, say).
    """
    s = bus.subjects
    body = ScheduleFiring(task_id=task.id, user_id=task.user_id, generation=task.generation)
    try:
        await bus.publish(
            s.schedule_definition(task.id), body, headers=headers(schedule, s.schedule_firing(task.id))
        )
    except BadRequestError as exc:
        if exc.err_code in _REFUSED:
            reason = f"{_REFUSED[exc.err_code]}: {schedule.expression!r} ({exc.description})"
            raise InvalidSchedule(reason) from None
        raise


async def remove_definition(bus: Bus, task_id: str) -> None:
    """No more firings of the task: its definition rolled up to an empty message that expires."""
    await bus.publish(
        bus.subjects.schedule_definition(task_id), b"", headers={"Nats-Rollup": "sub", "Nats-TTL": "1s"}
    )


async def trigger(bus: Bus, task: ScheduledTask, trigger_id: str) -> None:
    """One firing now, besides the schedule (deduplicated by `trigger_id`)."""
    firing = ScheduleFiring(
        task_id=task.id,
        user_id=task.user_id,
        generation=task.generation,
        trigger="manual",
        trigger_id=trigger_id,
    )
    await bus.publish(bus.subjects.schedule_firing(task.id), firing, msg_id=f"trigger:{trigger_id}")
