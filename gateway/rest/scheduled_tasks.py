"""DeerFlow's scheduled-task API, for the caller's own tasks: `/api/scheduled-tasks`.

GET/POST /api/scheduled-tasks, GET/PATCH/DELETE /api/scheduled-tasks/{id},
POST .../{id}/pause, .../{id}/resume, .../{id}/trigger, GET .../{id}/runs, and
GET /api/threads/{id}/scheduled-tasks, in DeerFlow's shapes (and Antler's POST
/api/scheduled-tasks/from-text: the words of `/schedule`) (`schedule_type` once or cron, and
Antler's `interval`; `schedule_spec`; an IANA `timezone`). The scheduler component owns the tasks:
every request goes to its `schedules` service with the caller's user id, so another user's task
is a 404 exactly like a missing one. A schedule the scheduler or the NATS server cannot fire is a
422 saying why.

A once task's `schedule_spec.run_at` is shown as an instant in UTC (`...Z`), whatever zone it was
written in: DeerFlow's UI reads it as one (a bare time would be read in the browser's zone).

Antler's own field `chat` (`{"channel", "chat_id", "topic_id"}`), on create, patch and every task
shown: a chat the task answers in besides its thread. Only a chat the caller talks to the bot
from as the same user may be named (`schedules.chats`); any other is a 403 saying so.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from bus.messages import (
    ScheduleAction,
    ScheduleChange,
    ScheduleCreate,
    ScheduledRunList,
    ScheduledTask,
    ScheduledTaskFields,
    ScheduledTaskList,
    ScheduledTaskReply,
    ScheduleQuery,
    TaskChat,
)
from bus.messages.schedules import ContextMode, ScheduleType
from bus.service import call
from gateway import answers
from gateway.deps import GW, Me, http_error
from gateway.schemas import errors

# Every route asks the scheduler: 503 when none runs.
router = APIRouter(responses=errors(503))

UNAVAILABLE = "no scheduler is running (antler up starts one; or antler run scheduler)"


class TaskCreate(BaseModel):
    thread_id: str | None = None
    context_mode: ContextMode = "fresh_thread_per_run"
    title: str = Field(min_length=1)
    prompt: str = Field(min_length=1)
    schedule_type: ScheduleType
    schedule_spec: dict[str, Any]
    timezone: str = "UTC"
    chat: TaskChat | None = Field(None, description="Antler: a chat of yours to answer in as well.")


class TaskUpdate(BaseModel):
    context_mode: ContextMode | None = None
    thread_id: str | None = None
    title: str | None = Field(None, min_length=1)
    prompt: str | None = Field(None, min_length=1)
    schedule_spec: dict[str, Any] | None = None
    timezone: str | None = None
    chat: TaskChat | None = Field(None, description="Antler: a chat of yours to answer in as well.")


async def _ask(gw: GW, endpoint: str, request: Any, reply: Any) -> Any:
    return await call(
        gw.bus, "schedules", endpoint, request, reply, timeout=15, errors=http_error, unavailable=UNAVAILABLE
    )


def _fields(body: BaseModel) -> ScheduledTaskFields:
    return ScheduledTaskFields.model_validate(body.model_dump(exclude_none=True))


async def task_json(gw: GW, task: ScheduledTask) -> dict[str, Any]:
    """DeerFlow's ScheduledTask shape; `running` while the task's latest run is going."""
    return await answers.scheduled_task(task, gw.runs)


@router.get("/scheduled-tasks")
async def list_tasks(gw: GW, me: Me) -> list[dict[str, Any]]:
    found: ScheduledTaskList = await _ask(gw, "list", ScheduleQuery(user_id=me), ScheduledTaskList)
    return [await task_json(gw, task) for task in found.tasks]


@router.post("/scheduled-tasks", responses=errors(403, 404, 422, 503))
async def create_task(gw: GW, me: Me, body: TaskCreate) -> dict[str, Any]:
    request = ScheduleCreate(user_id=me, fields=_fields(body))
    reply: ScheduledTaskReply = await _ask(gw, "create", request, ScheduledTaskReply)
    assert reply.task is not None
    return await task_json(gw, reply.task)


class TaskFromText(BaseModel):
    text: str = Field(
        min_length=1,
        description="`<when> <what to do>`, the words of the chat command /schedule "
        "(every weekday 08:00 Europe/Berlin summarize the news).",
    )
    thread_id: str | None = Field(
        None, description="A thread of yours the task's runs answer in (default: a new one per run)."
    )


@router.post("/scheduled-tasks/from-text", responses=errors(403, 404, 422, 503))
async def create_task_from_text(gw: GW, me: Me, body: TaskFromText) -> dict[str, Any]:
    """Antler: a task from the words of `/schedule` (as the web UI's message box takes them); 422 with
    the usage when the words are not a schedule."""
    fields = ScheduledTaskFields(
        thread_id=body.thread_id, context_mode="reuse_thread" if body.thread_id else "fresh_thread_per_run"
    )
    reply: ScheduledTaskReply = await _ask(
        gw, "create", ScheduleCreate(user_id=me, text=body.text, fields=fields), ScheduledTaskReply
    )
    assert reply.task is not None
    return await task_json(gw, reply.task)


@router.get("/scheduled-tasks/{task_id}", responses=errors(404))
async def get_task(gw: GW, me: Me, task_id: str) -> dict[str, Any]:
    reply = await _ask(gw, "get", ScheduleAction(user_id=me, task_id=task_id), ScheduledTaskReply)
    return await task_json(gw, reply.task)


@router.patch("/scheduled-tasks/{task_id}", responses=errors(403, 404, 422))
async def update_task(gw: GW, me: Me, task_id: str, body: TaskUpdate) -> dict[str, Any]:
    request = ScheduleChange(user_id=me, task_id=task_id, fields=_fields(body))
    reply = await _ask(gw, "update", request, ScheduledTaskReply)
    return await task_json(gw, reply.task)


@router.post("/scheduled-tasks/{task_id}/pause", responses=errors(404))
async def pause_task(gw: GW, me: Me, task_id: str) -> dict[str, Any]:
    reply = await _ask(gw, "pause", ScheduleAction(user_id=me, task_id=task_id), ScheduledTaskReply)
    return await task_json(gw, reply.task)


@router.post("/scheduled-tasks/{task_id}/resume", responses=errors(404, 422))
async def resume_task(gw: GW, me: Me, task_id: str) -> dict[str, Any]:
    reply = await _ask(gw, "resume", ScheduleAction(user_id=me, task_id=task_id), ScheduledTaskReply)
    return await task_json(gw, reply.task)


@router.post("/scheduled-tasks/{task_id}/trigger", responses=errors(404, 409))
async def trigger_task(gw: GW, me: Me, task_id: str) -> dict[str, Any]:
    """One firing now (409 while the task's previous run is still going, as DeerFlow)."""
    await _ask(gw, "trigger", ScheduleAction(user_id=me, task_id=task_id), ScheduledTaskReply)
    return {"id": task_id, "triggered": True}


@router.delete("/scheduled-tasks/{task_id}", responses=errors(404))
async def delete_task(gw: GW, me: Me, task_id: str) -> dict[str, Any]:
    await _ask(gw, "delete", ScheduleAction(user_id=me, task_id=task_id), ScheduledTaskReply)
    return {"id": task_id, "deleted": True}


@router.get("/scheduled-tasks/{task_id}/runs", responses=errors(404))
async def task_runs(
    gw: GW,
    me: Me,
    task_id: str,
    limit: int = Query(50, ge=1, le=200),
    offset: int = Query(0, ge=0),
) -> list[dict[str, Any]]:
    """The task's firings, newest first: each run's status as it is now, or why none started."""
    request = ScheduleAction(user_id=me, task_id=task_id, limit=limit, offset=offset)
    found: ScheduledRunList = await _ask(gw, "runs", request, ScheduledRunList)
    return [line.model_dump(mode="json", exclude={"v"}) for line in found.runs]


@router.get("/threads/{thread_id}/scheduled-tasks", responses=errors(404))
async def thread_tasks(gw: GW, me: Me, thread_id: str) -> list[dict[str, Any]]:
    await gw.own_thread(thread_id, me)
    query = ScheduleQuery(user_id=me, thread_id=thread_id)
    found: ScheduledTaskList = await _ask(gw, "list", query, ScheduledTaskList)
    return [await task_json(gw, task) for task in found.tasks]
