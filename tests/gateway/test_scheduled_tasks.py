"""DeerFlow's scheduled-task API on Antler: the caller's own tasks, fired by the NATS server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import httpx
import pytest_asyncio

from bus import Bus
from bus.runs import collect_run
from config import AppConfig
from tests.support.gateway import running_gateway
from tests.support.runner import running_runner
from tests.support.schedules import firings, running_scheduler


@pytest_asyncio.fixture
async def api(nats_url: str, stack_config: AppConfig) -> AsyncIterator[str]:
    async with (
        running_runner(nats_url, stack_config),
        running_scheduler(nats_url, stack_config),
        running_gateway(nats_url, stack_config) as base,
    ):
        yield base


@pytest_asyncio.fixture
async def clients(api: str) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    async with (
        httpx.AsyncClient(base_url=f"{api}/api", headers={"x-api-key": "tok-ana"}, timeout=30) as ana,
        httpx.AsyncClient(base_url=f"{api}/api", headers={"x-api-key": "tok-bob"}, timeout=30) as bob,
    ):
        yield ana, bob


def next_weekday_at(hour: int, zone: str) -> str:
    """The next Monday-to-Friday `hour`:00 in `zone`, as the API writes times (UTC)."""
    now = datetime.now(ZoneInfo(zone))
    day = now.replace(hour=hour, minute=0, second=0, microsecond=0)
    while day <= now or day.weekday() > 4:
        day = (day + timedelta(days=1)).replace(hour=hour)
    return day.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


MORNINGS = {
    "title": "Morning news",
    "prompt": "summarize the news",
    "context_mode": "fresh_thread_per_run",
    "schedule_type": "cron",
    "schedule_spec": {"cron": "0 8 * * 1-5"},
    "timezone": "Europe/Berlin",
}


async def test_a_task_is_created_listed_changed_paused_resumed_and_deleted_in_deerflows_shapes(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    ana, _ = clients
    created = await ana.post("/scheduled-tasks", json=MORNINGS)
    assert created.status_code == 200, created.text
    task = created.json()
    assert task["id"].startswith("task-")
    assert (task["status"], task["timezone"], task["schedule_spec"]) == (
        "enabled",
        "Europe/Berlin",
        {"cron": "0 8 * * 1-5"},
    )
    assert task["run_count"] == 0
    assert task["next_run_at"] == next_weekday_at(8, "Europe/Berlin")
    assert [t["id"] for t in (await ana.get("/scheduled-tasks")).json()] == [task["id"]]
    changed = await ana.patch(
        f"/scheduled-tasks/{task['id']}", json={"title": "News", "timezone": "Asia/Tokyo"}
    )
    assert changed.status_code == 200, changed.text
    assert (changed.json()["title"], changed.json()["timezone"]) == ("News", "Asia/Tokyo")
    assert changed.json()["next_run_at"] == next_weekday_at(8, "Asia/Tokyo")
    paused = (await ana.post(f"/scheduled-tasks/{task['id']}/pause")).json()
    assert (paused["status"], paused["next_run_at"]) == ("paused", None)
    resumed = (await ana.post(f"/scheduled-tasks/{task['id']}/resume")).json()
    assert (resumed["status"], resumed["next_run_at"]) == ("enabled", next_weekday_at(8, "Asia/Tokyo"))
    assert (await ana.delete(f"/scheduled-tasks/{task['id']}")).json() == {"id": task["id"], "deleted": True}
    assert (await ana.get(f"/scheduled-tasks/{task['id']}")).status_code == 404
    assert (await ana.get("/scheduled-tasks")).json() == []


async def test_trigger_fires_once_now_and_the_run_shows_in_the_tasks_history(
    bus: Bus, clients: tuple[httpx.AsyncClient, httpx.AsyncClient]
) -> None:
    ana, _ = clients
    task = (await ana.post("/scheduled-tasks", json=MORNINGS)).json()
    async with firings(bus, task["id"]) as lines:
        triggered = await ana.post(f"/scheduled-tasks/{task['id']}/trigger")
        assert triggered.json() == {"id": task["id"], "triggered": True}
        line = await lines.get()
    assert line.run_id is not None
    await collect_run(bus, line.run_id)
    history = (await ana.get(f"/scheduled-tasks/{task['id']}/runs")).json()
    assert [(h["run_id"], h["trigger"], h["status"]) for h in history] == [(line.run_id, "manual", "success")]
    thread = (await ana.get(f"/threads/{line.thread_id}")).json()
    assert thread["metadata"]["scheduled_task_id"] == task["id"]
    shown = (await ana.get(f"/scheduled-tasks/{task['id']}")).json()
    assert (shown["run_count"], shown["last_run_id"]) == (1, line.run_id)


async def test_invalid_schedules_and_zones_are_a_422_that_says_why(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    ana, _ = clients
    cases = [
        ({"timezone": "Mars/Olympus"}, "unknown time zone"),
        ({"schedule_spec": {"cron": "0 61 * * *"}}, "cannot read"),
        ({"schedule_spec": {"cron": "every morning"}}, "fields"),
        ({"schedule_type": "fortnightly"}, "schedule_type"),
        ({"schedule_type": "once", "schedule_spec": {"run_at": "2001-01-01T08:00"}}, "not in the future"),
    ]
    for change, says in cases:
        refused = await ana.post("/scheduled-tasks", json={**MORNINGS, **change})
        assert refused.status_code == 422, change
        assert says in refused.text, refused.text
    assert (await ana.get("/scheduled-tasks")).json() == [], "nothing was kept of a refused task"


async def test_nobody_sees_changes_or_fires_another_users_task(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    ana, bob = clients
    thread = (await ana.post("/threads", json={})).json()["thread_id"]
    body = {**MORNINGS, "context_mode": "reuse_thread", "thread_id": thread}
    task = (await ana.post("/scheduled-tasks", json=body)).json()
    assert [t["id"] for t in (await ana.get(f"/threads/{thread}/scheduled-tasks")).json()] == [task["id"]]
    assert (await bob.get("/scheduled-tasks")).json() == []
    assert (await bob.get(f"/threads/{thread}/scheduled-tasks")).status_code == 404
    for method, path in [
        ("GET", ""),
        ("PATCH", ""),
        ("POST", "/pause"),
        ("POST", "/resume"),
        ("POST", "/trigger"),
        ("GET", "/runs"),
        ("DELETE", ""),
    ]:
        answer = await bob.request(
            method, f"/scheduled-tasks/{task['id']}{path}", json={} if method == "PATCH" else None
        )
        assert answer.status_code == 404, (method, path)
    stolen = await bob.post("/scheduled-tasks", json=body)
    assert stolen.status_code == 404, "bob cannot run a task in ana's thread"
    assert (await ana.get(f"/scheduled-tasks/{task['id']}")).json()["status"] == "enabled"


async def test_a_once_tasks_run_at_is_shown_as_an_instant_whatever_zone_it_was_written_in(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    """DeerFlow's UI reads `run_at` as an instant: a bare 09:00 would be read in the browser's zone."""
    ana, _ = clients
    body = {**MORNINGS, "schedule_type": "once", "timezone": "Asia/Tokyo"}
    made = await ana.post("/scheduled-tasks", json={**body, "schedule_spec": {"run_at": "2030-01-02T09:00"}})
    assert made.status_code == 200, made.text
    assert made.json()["schedule_spec"] == {"run_at": "2030-01-02T00:00:00Z"}
    assert made.json()["next_run_at"] == "2030-01-02T00:00:00Z"
    listed = (await ana.get("/scheduled-tasks")).json()
    assert [t["schedule_spec"]["run_at"] for t in listed] == ["2030-01-02T00:00:00Z"]
    as_the_ui_sends_it = await ana.post(
        "/scheduled-tasks", json={**body, "schedule_spec": {"run_at": "2030-01-02T00:00:00.000Z"}}
    )
    assert as_the_ui_sends_it.json()["schedule_spec"] == {"run_at": "2030-01-02T00:00:00Z"}


async def test_an_interval_task_is_renamed_with_the_cron_spec_deerflows_edit_form_sends(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    """DeerFlow's edit form knows once and cron only: it sends a cron spec with every edit."""
    ana, _ = clients
    body = {**MORNINGS, "schedule_type": "interval", "schedule_spec": {"every": "2h"}, "timezone": "UTC"}
    task = (await ana.post("/scheduled-tasks", json=body)).json()
    as_the_form_sends_it = {
        "title": "Every two hours",
        "prompt": "check",
        "schedule_spec": {"cron": "0 9 * * *"},
    }
    renamed = await ana.patch(
        f"/scheduled-tasks/{task['id']}", json={**as_the_form_sends_it, "timezone": "UTC"}
    )
    assert renamed.status_code == 200, renamed.text
    shown = renamed.json()
    assert (shown["title"], shown["schedule_type"], shown["schedule_spec"]) == (
        "Every two hours",
        "interval",
        {"every": "2h"},
    )
    faster = await ana.patch(f"/scheduled-tasks/{task['id']}", json={"schedule_spec": {"every": "30m"}})
    assert faster.json()["schedule_spec"] == {"every": "30m"}


async def test_a_task_from_the_words_of_schedule_answers_in_the_thread_it_names(
    bus: Bus, clients: tuple[httpx.AsyncClient, httpx.AsyncClient]
) -> None:
    ana, bob = clients
    thread = (await ana.post("/threads", json={})).json()["thread_id"]
    made = await ana.post(
        "/scheduled-tasks/from-text", json={"text": "every 2h check the build", "thread_id": thread}
    )
    assert made.status_code == 200, made.text
    task = made.json()
    assert (task["prompt"], task["schedule_type"], task["schedule_spec"]) == (
        "check the build",
        "interval",
        {"every": "2h"},
    )
    assert (task["context_mode"], task["thread_id"]) == ("reuse_thread", thread)
    async with firings(bus, task["id"]) as lines:
        await ana.post(f"/scheduled-tasks/{task['id']}/trigger")
        line = await lines.get()
    assert line.thread_id == thread, "its run answers in that conversation"
    unreadable = await ana.post("/scheduled-tasks/from-text", json={"text": "every fortnight water it"})
    assert unreadable.status_code == 422
    assert "Usage: /schedule <when> <what to do>" in unreadable.text
    assert (
        await bob.post("/scheduled-tasks/from-text", json={"text": "in 20m x", "thread_id": thread})
    ).status_code == 404
