"""The scheduler in a test: run it, ask its service as a user, and wait for a task's firings."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from bus import Bus, decode
from bus.messages import (
    ScheduleAction,
    ScheduleCreate,
    ScheduledTask,
    ScheduledTaskFields,
    ScheduledTaskReply,
    ScheduledTaskRun,
)
from bus.service import call
from config import AppConfig
from schedules.scheduler import run as run_scheduler
from tests.conftest import running_component, until_answering
from tests.fakes.telegram_server import FakeTelegram


def running_scheduler(nats_url: str, config: AppConfig) -> contextlib.AbstractAsyncContextManager[Bus]:
    async def ready(bus: Bus, task: asyncio.Task[None]) -> None:
        await until_answering(bus.subjects.service_subject("schedules", "list"), bus, task)

    return running_component(nats_url, config, run_scheduler, "scheduler", ready)


async def create_task(bus: Bus, user_id: str = "alice", **fields: Any) -> ScheduledTask:
    request = ScheduleCreate(user_id=user_id, fields=ScheduledTaskFields(**fields))
    reply = await call(bus, "schedules", "create", request, ScheduledTaskReply, timeout=10)
    assert reply.task is not None
    return reply.task


async def act(bus: Bus, action: str, task_id: str, user_id: str = "alice") -> ScheduledTaskReply:
    request = ScheduleAction(user_id=user_id, task_id=task_id)
    return await call(bus, "schedules", action, request, ScheduledTaskReply, timeout=10)


@contextlib.asynccontextmanager
async def firings(bus: Bus, task_id: str) -> AsyncIterator[asyncio.Queue[ScheduledTaskRun]]:
    """Each history line the scheduler writes for the task, as it is written (a KV watch)."""
    kv = await bus.kv(bus.subjects.schedule_runs_bucket)
    queue: asyncio.Queue[ScheduledTaskRun] = asyncio.Queue()
    # While a cluster node is down the bucket may be electing a leader: wait for it, as components do.
    watcher = await bus.while_unavailable(
        "watch a task's firings", lambda: kv.watch(f"{task_id}.>", include_history=True)
    )

    async def pump() -> None:
        async for entry in watcher:
            if entry is not None and entry.value:
                queue.put_nowait(decode(ScheduledTaskRun, entry.value))

    task = asyncio.create_task(pump())
    try:
        yield queue
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        with contextlib.suppress(Exception):
            await watcher.stop()


def said(telegram: FakeTelegram, chat_id: int, text: str) -> bool:
    """Whether the bot has shown `text` in the Telegram chat (sent, or edited into a message)."""
    return any(
        method in ("sendMessage", "editMessageText")
        and int(params.get("chat_id", 0)) == chat_id
        and text in str(params.get("text", ""))
        for method, params in telegram.calls
    )


async def reply_to(
    telegram: FakeTelegram, chat_id: int, text: str, shown: str, timeout: float = 20.0
) -> None:
    """The user writes `text` in the Telegram chat and the bot shows `shown` there."""
    telegram.send_user_message(text, chat_id=chat_id)
    await telegram.wait(lambda: said(telegram, chat_id, shown), timeout)
