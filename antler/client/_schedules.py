"""Scheduled tasks, as the gateway's `/api/scheduled-tasks`: every call goes to the scheduler's
`schedules` service with the client's user id (another user's task is not found, like a missing
one), and tasks come back in DeerFlow's ScheduledTask shape (`gateway.answers.scheduled_task`).

`schedule_type` is `once` (`schedule_spec={"run_at": ISO 8601}`), `cron` (`{"cron": "0 8 * * 1-5"}`)
or Antler's `interval` (`{"every": "15m"}`); `timezone` is an IANA zone.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from antler.client._base import Connected, check_thread_id
from antler.client.errors import InvalidRequest
from bus import Bus
from bus.messages import (
    RunRecord,
    ScheduleAction,
    ScheduleChange,
    ScheduleCreate,
    ScheduledRunList,
    ScheduledTask,
    ScheduledTaskFields,
    ScheduledTaskList,
    ScheduledTaskReply,
    ScheduleQuery,
)
from bus.records import RecordStore
from gateway import answers

_TIMEOUT = 15.0  # as the gateway's routes wait for the scheduler
_CHANGEABLE = {"context_mode", "thread_id", "title", "prompt", "schedule_spec", "timezone", "chat"}


def _fields(**given: Any) -> ScheduledTaskFields:
    for name in ("title", "prompt"):
        if (
            name in given
            and given[name] is not None
            and (not isinstance(given[name], str) or not given[name])
        ):
            raise InvalidRequest(f"{name}: a non-empty string")
    try:
        return ScheduledTaskFields.model_validate({k: v for k, v in given.items() if v is not None})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InvalidRequest(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None


class Schedules(Connected):
    """The user's scheduled tasks: list, create, get, update, pause, resume, trigger, delete, runs."""

    async def _tasks(self, tasks: list[ScheduledTask]) -> list[dict[str, Any]]:
        async def shaped(bus: Bus) -> list[dict[str, Any]]:
            runs = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
            return [await answers.scheduled_task(task, runs) for task in tasks]

        return await self._guarded("read the tasks' runs", shaped)

    async def _task(self, endpoint: str, request: Any) -> dict[str, Any]:
        reply = await self._ask("schedules", endpoint, request, ScheduledTaskReply, timeout=_TIMEOUT)
        assert reply.task is not None
        return (await self._tasks([reply.task]))[0]

    def _action(self, task_id: str, **paging: int) -> ScheduleAction:
        if not isinstance(task_id, str) or not task_id:
            raise InvalidRequest(f"task_id: a task's id, not {task_id!r}")
        return ScheduleAction(user_id=self.user_id, task_id=task_id, **paging)

    async def list_scheduled_tasks(self, thread_id: str | None = None) -> list[dict[str, Any]]:
        """The user's tasks (only a thread's with `thread_id`), as `GET /api/scheduled-tasks`."""
        if thread_id is not None:
            await self._own_thread(thread_id)
        query = ScheduleQuery(user_id=self.user_id, thread_id=thread_id)
        found = await self._ask("schedules", "list", query, ScheduledTaskList, timeout=_TIMEOUT)
        return await self._tasks(found.tasks)

    async def create_scheduled_task(
        self,
        title: str,
        prompt: str,
        schedule_type: str,
        schedule_spec: dict[str, Any],
        *,
        timezone: str = "UTC",
        thread_id: str | None = None,
        context_mode: str = "fresh_thread_per_run",
        chat: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A new task: its `prompt` is sent as a message at each firing (in a fresh thread per run,
        or with `context_mode="reuse_thread"` in `thread_id`).

        Raises:
            InvalidRequest: a schedule the scheduler or the NATS server cannot fire (it says why).
            NotAllowed: `chat` names a chat that is not the user's.
        """
        if thread_id is not None:
            check_thread_id(thread_id)
        fields = _fields(
            title=title,
            prompt=prompt,
            schedule_type=schedule_type,
            schedule_spec=schedule_spec,
            timezone=timezone,
            thread_id=thread_id,
            context_mode=context_mode,
            chat=chat,
        )
        return await self._task("create", ScheduleCreate(user_id=self.user_id, fields=fields))

    async def create_scheduled_task_from_text(
        self, text: str, thread_id: str | None = None
    ) -> dict[str, Any]:
        """A task from the words of the chat command `/schedule`: `every weekday 08:00
        Europe/Berlin summarize the news` (its runs answer in `thread_id` when given)."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidRequest("text: `<when> <what to do>`, not empty")
        if thread_id is not None:
            check_thread_id(thread_id)
        fields = ScheduledTaskFields(
            thread_id=thread_id, context_mode="reuse_thread" if thread_id else "fresh_thread_per_run"
        )
        return await self._task("create", ScheduleCreate(user_id=self.user_id, text=text, fields=fields))

    async def get_scheduled_task(self, task_id: str) -> dict[str, Any]:
        return await self._task("get", self._action(task_id))

    async def update_scheduled_task(self, task_id: str, **changes: Any) -> dict[str, Any]:
        """Change some of a task's fields (title, prompt, schedule_spec, timezone, context_mode,
        thread_id, chat), as `PATCH /api/scheduled-tasks/{id}`."""
        unknown = sorted(set(changes) - _CHANGEABLE)
        if unknown:
            raise InvalidRequest(
                f"cannot change {', '.join(unknown)}; a task's {', '.join(sorted(_CHANGEABLE))}"
            )
        request = ScheduleChange(
            user_id=self.user_id, task_id=self._action(task_id).task_id, fields=_fields(**changes)
        )
        return await self._task("update", request)

    async def pause_scheduled_task(self, task_id: str) -> dict[str, Any]:
        return await self._task("pause", self._action(task_id))

    async def resume_scheduled_task(self, task_id: str) -> dict[str, Any]:
        return await self._task("resume", self._action(task_id))

    async def trigger_scheduled_task(self, task_id: str) -> dict[str, Any]:
        """One firing now: `{"id", "triggered": True}` (InvalidRequest while its previous run goes on)."""
        await self._ask("schedules", "trigger", self._action(task_id), ScheduledTaskReply, timeout=_TIMEOUT)
        return {"id": task_id, "triggered": True}

    async def delete_scheduled_task(self, task_id: str) -> dict[str, Any]:
        """`{"id", "deleted": True}`."""
        await self._ask("schedules", "delete", self._action(task_id), ScheduledTaskReply, timeout=_TIMEOUT)
        return {"id": task_id, "deleted": True}

    async def list_scheduled_task_runs(
        self, task_id: str, limit: int = 50, offset: int = 0
    ) -> list[dict[str, Any]]:
        """The task's firings, newest first: each run's status now, or why none started."""
        if not isinstance(limit, int) or not 1 <= limit <= 200 or not isinstance(offset, int) or offset < 0:
            raise InvalidRequest("limit: 1 to 200, offset: 0 or more")
        request = self._action(task_id, limit=limit, offset=offset)
        found = await self._ask("schedules", "runs", request, ScheduledRunList, timeout=_TIMEOUT)
        return [line.model_dump(mode="json", exclude={"v"}) for line in found.runs]
