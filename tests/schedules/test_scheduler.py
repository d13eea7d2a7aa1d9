"""Scheduled tasks against a real nats-server: the server fires them, the scheduler makes them runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import pytest_asyncio
from nats.js.errors import NotFoundError

from bus import Bus
from bus.messages import ScheduleAction, ScheduledRunList, ScheduledTaskRun, ScheduleFiring
from bus.runs import collect_run
from bus.service import ServiceError, call
from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.runner import running_runner
from tests.support.runs import streamed_text
from tests.support.schedules import act, create_task, firings, running_scheduler

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def stack(nats_url: str, app_config: Callable[[], AppConfig]) -> AsyncIterator[AppConfig]:
    config = app_config()
    async with running_runner(nats_url, config), running_scheduler(nats_url, config):
        yield config


async def next_line(queue: asyncio.Queue[ScheduledTaskRun], timeout: float = 30) -> ScheduledTaskRun:
    return await asyncio.wait_for(queue.get(), timeout)


async def next_started(queue: asyncio.Queue[ScheduledTaskRun]) -> ScheduledTaskRun:
    """The next firing that started a run (one may be skipped while the runner is still busy)."""
    while True:
        line = await next_line(queue)
        if line.run_id is not None:
            return line


async def history_of(bus: Bus, task_id: str) -> ScheduledRunList:
    request = ScheduleAction(user_id="alice", task_id=task_id)
    return await call(bus, "schedules", "runs", request, ScheduledRunList, timeout=10)


async def answer_of(bus: Bus, line: ScheduledTaskRun) -> str:
    assert line.run_id is not None
    return streamed_text(await collect_run(bus, line.run_id))


async def definition_schedule(bus: Bus, task_id: str) -> str | None:
    """The `Nats-Schedule` the task's definition holds on the stream now (None: it fires no more)."""
    try:
        s = bus.subjects
        msg = await bus.js.get_last_msg(s.schedules_stream, s.schedule_definition(task_id))
    except NotFoundError:
        return None
    return (msg.headers or {}).get("Nats-Schedule")


async def test_an_every_2s_task_fires_runs_that_answer(bus: Bus, stack: AppConfig) -> None:
    task = await create_task(
        bus, title="Build", prompt="check the build", schedule_type="interval", schedule_spec={"every": "2s"}
    )
    async with firings(bus, task.id) as lines:
        first, second = await next_started(lines), await next_started(lines)
    assert first.trigger == second.trigger == "scheduled"
    assert first.run_id != second.run_id
    assert first.thread_id != second.thread_id
    assert await answer_of(bus, first) == "You said: check the build"
    assert await answer_of(bus, second) == "You said: check the build"
    history = await history_of(bus, task.id)
    by_run = {line.run_id: line for line in history.runs}
    assert by_run[first.run_id].status == "success"
    assert (await act(bus, "get", task.id)).task.run_count >= 2  # type: ignore[union-attr]
    await act(bus, "delete", task.id)


async def test_a_cron_task_with_seconds_fires_at_that_second_in_its_zone(bus: Bus, stack: AppConfig) -> None:
    zone = ZoneInfo("America/St_Johns")  # UTC-3:30 (or -2:30): a zone ignored would fire hours off
    target = (datetime.now(UTC) + timedelta(seconds=6)).replace(microsecond=0)
    local = target.astimezone(zone)
    task = await create_task(
        bus,
        prompt="what time is it",
        schedule_type="cron",
        schedule_spec={"cron": f"{local.second} {local.minute} {local.hour} * * *"},
        timezone="America/St_Johns",
    )
    assert task.next_run_at == target, "shown before the first firing: when the server fires it"
    async with firings(bus, task.id) as lines:
        line = await next_line(lines)
    assert line.scheduled_for.replace(microsecond=0) == target
    assert await answer_of(bus, line) == "You said: what time is it"
    refreshed = (await act(bus, "get", task.id)).task
    assert refreshed is not None
    assert refreshed.next_run_at == target + timedelta(days=1)
    await act(bus, "delete", task.id)


async def test_pause_stops_firings_resume_restarts_them_and_trigger_fires_once_now(
    bus: Bus, stack: AppConfig
) -> None:
    task = await create_task(bus, prompt="tick", schedule_type="interval", schedule_spec={"every": "2s"})
    async with firings(bus, task.id) as lines:
        first = await next_line(lines)
        await answer_of(bus, first)
        paused = (await act(bus, "pause", task.id)).task
        assert paused is not None
        assert paused.status == "paused"
        assert await definition_schedule(bus, task.id) is None
        if paused.last_run_id:  # a trigger while the task's run is going is refused: let it end
            await collect_run(bus, paused.last_run_id)
        # After the pause the schedule fires no more: every line until the trigger's was fired before it.
        await act(bus, "trigger", task.id)
        manual = await next_line(lines)
        while manual.trigger == "scheduled":
            assert manual.scheduled_for <= paused.updated_at
            manual = await next_line(lines)
        assert manual.status == "queued"
        assert await answer_of(bus, manual) == "You said: tick"
        resumed = (await act(bus, "resume", task.id)).task
        assert resumed is not None
        assert resumed.status == "enabled"
        assert await definition_schedule(bus, task.id) == "@every 2s"
        again = await next_started(lines)
        assert again.trigger == "scheduled"
        assert again.scheduled_for > resumed.updated_at
    await answer_of(bus, again)
    deleted = await act(bus, "delete", task.id)
    assert deleted.deleted
    assert await definition_schedule(bus, task.id) is None
    with pytest.raises(ServiceError) as refused:
        await act(bus, "get", task.id)
    assert refused.value.code == "not_found"


async def test_a_firing_while_the_previous_run_is_going_is_skipped_and_recorded(
    bus: Bus, fake_model: FakeOpenAI, stack: AppConfig
) -> None:
    release = asyncio.Event()
    fake_model.script(Reply(text="done at last", hold=release))
    task = await create_task(bus, prompt="slow job", schedule_type="interval", schedule_spec={"every": "1s"})
    async with firings(bus, task.id) as lines:
        first = await next_line(lines)
        assert first.status == "queued"
        skipped = await next_line(lines)
        assert skipped.status == "skipped"
        assert skipped.run_id is None
        assert first.run_id is not None
        assert first.run_id in (skipped.error or "")
        await act(bus, "pause", task.id)
        release.set()
    assert await answer_of(bus, first) == "done at last"
    history = await history_of(bus, task.id)
    assert "skipped" in [line.status for line in history.runs]
    await act(bus, "delete", task.id)


@pytest.mark.parametrize(
    ("spec", "zone", "says"),
    [
        pytest.param({"cron": "0 61 * * *"}, "UTC", "cannot read", id="minute-61"),
        pytest.param({"cron": "0 8 * *"}, "UTC", "5 fields", id="four-fields"),
        pytest.param({"cron": "0 8 * * *"}, "Mars/Olympus", "unknown time zone", id="unknown-zone"),
    ],
)
async def test_an_invalid_schedule_is_refused_with_the_reason(
    bus: Bus, stack: AppConfig, spec: dict[str, str], zone: str, says: str
) -> None:
    with pytest.raises(ServiceError) as refused:
        await create_task(bus, prompt="x", schedule_type="cron", schedule_spec=spec, timezone=zone)
    assert refused.value.code == "invalid"
    assert says in refused.value.message


async def test_nobody_sees_or_fires_another_users_task(bus: Bus, stack: AppConfig) -> None:
    task = await create_task(bus, prompt="mine", schedule_type="cron", schedule_spec={"cron": "0 8 * * *"})
    for action in ("get", "pause", "resume", "trigger", "delete"):
        with pytest.raises(ServiceError) as refused:
            await act(bus, action, task.id, user_id="bob")
        assert refused.value.code == "not_found"
    assert (await act(bus, "get", task.id)).task is not None
    await act(bus, "delete", task.id)


async def test_a_firing_stored_twice_starts_one_run(bus: Bus, stack: AppConfig) -> None:
    """As a firing stored again (a publisher retrying past the dedupe window, a stream leader change):
    the copies name the same occurrence, so they are one firing, one history line and one run.
    (Clients may not forge the server's `Nats-Schedule-Next`, so the copies here are trigger-nows.)"""
    daily = {"cron": "0 8 * * *"}
    task = await create_task(bus, prompt="once only", schedule_type="cron", schedule_spec=daily)
    firing = ScheduleFiring(
        task_id=task.id, user_id="alice", generation=task.generation, trigger="manual", trigger_id="t1"
    )
    subject = bus.subjects.schedule_firing(task.id)
    async with firings(bus, task.id) as lines:
        await bus.publish(subject, firing)  # no Nats-Msg-Id: the stream stores both copies
        await bus.publish(subject, firing)
        # A task's firings are taken in order: once this one is in the history, both copies were handled.
        await bus.publish(subject, firing.model_copy(update={"trigger_id": "barrier"}))
        seen = [await next_line(lines)]
        while len({line.id for line in seen}) < 2:
            seen.append(await next_line(lines))
    first = seen[0]
    assert [line.id for line in seen].count(first.id) == 1
    history = await history_of(bus, task.id)
    assert len(history.runs) == 2, "the copy added nothing: two firings, two lines"
    assert first.run_id is not None
    assert await answer_of(bus, first) == "You said: once only"
    refreshed = (await act(bus, "get", task.id)).task
    assert refreshed is not None
    assert refreshed.run_count == len([line for line in history.runs if line.run_id]), "counted once"
    await act(bus, "delete", task.id)
