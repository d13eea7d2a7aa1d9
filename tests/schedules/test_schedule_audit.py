"""Every change to a scheduled task is in the audit trail, whichever way it came in (here a script's
requests to the `schedules` service, as `antler schedule` and the agent's tools make them): who, which
task, what changed; never the task's prompt."""

from __future__ import annotations

from collections.abc import Callable

from access import AuditLog
from bus import Bus
from bus.messages import ScheduleChange, ScheduledTaskFields, ScheduledTaskReply
from bus.service import call
from config import AppConfig
from tests.support.schedules import act, create_task, running_scheduler


async def test_creating_changing_pausing_and_deleting_a_task_are_audited(
    bus: Bus, nats_url: str, app_config: Callable[[], AppConfig]
) -> None:
    async with running_scheduler(nats_url, app_config()):
        task = await create_task(
            bus,
            user_id="sam",
            title="Digest",
            prompt="summarize the secret plans",
            schedule_type="cron",
            schedule_spec={"cron": "0 9 * * *"},
        )
        change = ScheduleChange(
            user_id="sam", task_id=task.id, fields=ScheduledTaskFields(title="Morning digest")
        )
        await call(bus, "schedules", "update", change, ScheduledTaskReply, timeout=10)
        await act(bus, "pause", task.id, user_id="sam")
        await act(bus, "resume", task.id, user_id="sam")
        await act(bus, "delete", task.id, user_id="sam")
    trail = await AuditLog(bus).read(user_id="sam", action="schedule_changed")
    assert [r.detail["change"] for r in trail] == ["created", "updated", "paused", "resumed", "deleted"]
    assert {r.detail["task_id"] for r in trail} == {task.id}
    assert trail[1].detail["title"] == "Morning digest"
    assert trail[1].detail["fields"] == ["title"]
    assert "secret plans" not in str([r.model_dump() for r in trail])
