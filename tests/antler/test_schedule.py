"""`antler schedule` as a user runs it: a real process against the test's nats-server and scheduler."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from bus import Bus
from bus.runs import collect_run
from config import AppConfig, BusConfig
from tests.conftest import finished, run_antler
from tests.support.runner import running_runner
from tests.support.schedules import firings, running_scheduler


def next_weekday_8am_berlin() -> datetime:
    now = datetime.now(ZoneInfo("Europe/Berlin"))
    due = now.replace(hour=8, minute=0, second=0, microsecond=0)
    while due <= now or due.weekday() > 4:
        due = (due + timedelta(days=1)).replace(hour=8)
    return due


async def test_add_list_run_pause_resume_and_remove_a_task_from_the_shell(
    bus: Bus, bus_config: BusConfig, nats_url: str, tmp_path: Path, app_config: Callable[[], AppConfig]
) -> None:
    config = app_config()

    async def antler(*args: str) -> tuple[int, str, str]:
        where = ("--nats-url", nats_url, "--prefix", bus_config.prefix, "--data-dir", str(tmp_path / "data"))
        return await finished(await run_antler("schedule", *args, "--user", "ana", *where), 60)

    async with running_runner(nats_url, config), running_scheduler(nats_url, config):
        code, out, err = await antler(
            "add", "every", "weekday", "08:00", "Europe/Berlin", "summarize", "the news"
        )
        assert code == 0, err
        task_id = out.split()[0]
        assert "cron 0 0 8 * * 1-5 Europe/Berlin: summarize the news" in out
        code, out, _ = await antler("list")
        assert task_id in out
        assert "enabled" in out
        assert next_weekday_8am_berlin().isoformat() in out, "when it fires next, as its zone reads it"
        async with firings(bus, task_id) as lines:
            code, out, err = await antler("run", task_id)
            assert (code, out.strip()) == (0, f"{task_id}: fired once now"), err
            line = await lines.get()
        assert line.run_id is not None
        await collect_run(bus, line.run_id)
        code, out, _ = await antler("list", "--runs", task_id)
        assert "manual" in out
        assert line.run_id in out
        assert "success" in out
        assert (await antler("pause", task_id))[1].strip() == f"{task_id}: paused"
        assert "paused" in (await antler("list"))[1]
        assert (await antler("resume", task_id))[1].strip() == f"{task_id}: resumed"
        assert (await antler("remove", task_id))[1].strip() == f"{task_id}: removed"
        code, out, _ = await antler("list")
        assert "ana has no scheduled tasks" in out
        code, _, err = await antler("add", "every", "fortnight", "08:00", "water", "the", "plants")
        assert code == 2
        assert "every fortnight" in err
        code, _, err = await antler("pause", task_id)
        assert code == 2
        assert "not found" in err
