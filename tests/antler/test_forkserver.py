"""`antler run runner --processes 2`: runner processes forked from one that loaded the libraries,
which then supervises them as a bare interpreter (antler/fork_supervisor.py)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bus import Bus, decode
from bus.messages import ComponentReady
from tests.conftest import REPO, finished, run_antler
from tests.support.processes import descendants, pid_alive

pytestmark = pytest.mark.skipif(os.uname().sysname != "Linux", reason="forking a loaded process: Linux")


def maps_library(pid: int, library: str) -> bool:
    """Whether the process maps a file whose path contains `library` (/proc/<pid>/maps)."""
    return library in Path(f"/proc/{pid}/maps").read_text()


def command_line(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def private_and_resident_kb(pid: int) -> tuple[int, int]:
    """(pages only this process maps, every page it maps in memory), in kB (/proc/<pid>/smaps_rollup)."""
    figures = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, rest = line.partition(":")
        figures[key] = int(rest.split()[0])
    return figures["Private_Clean"] + figures["Private_Dirty"], figures["Rss"]


async def test_forked_runners_share_what_they_loaded_are_started_again_when_killed_and_stop_together(
    bus: Bus, nats_url: str, config_file: Callable[[], Path]
) -> None:
    ready: asyncio.Queue[int] = asyncio.Queue()

    async def on_ready(msg: Any) -> None:
        ready.put_nowait(decode(ComponentReady, msg.data).pid)

    sub = await bus.nc.subscribe(bus.subjects.component_ready("runner"), cb=on_ready)
    leader = await run_antler(
        "run", "runner", "--processes", "2", "-c", str(config_file()), "--nats-url", nats_url
    )
    try:
        runners = {await asyncio.wait_for(ready.get(), 60) for _ in range(2)}
        assert {p.pid for p in descendants(leader.pid)} == runners, "two processes, forked by the leader"
        for pid in runners:
            private, resident = private_and_resident_kb(pid)
            # Started anew, a runner's own pages are nearly all of it (about 105 of 130 MB).
            assert private < resident / 2, f"runner {pid}: {private} kB of {resident} kB its own"
            assert maps_library(pid, "pydantic_core")
        # The leader no longer maps what it loaded for them: it became the small supervisor.
        assert not maps_library(leader.pid, "pydantic_core")
        assert "fork_supervisor.py" in command_line(leader.pid)

        killed = min(runners)
        os.kill(killed, signal.SIGKILL)
        again = await asyncio.wait_for(ready.get(), 60)
        assert again not in runners
        assert {p.pid for p in descendants(leader.pid)} == runners - {killed} | {again}
        assert maps_library(again, "pydantic_core"), "started anew: the runner, loaded"
    finally:
        await sub.unsubscribe()
        if leader.returncode is None:
            leader.send_signal(signal.SIGTERM)
        code, _, err = await finished(leader, 60)
    assert code == 0, err
    assert not any(pid_alive(pid) for pid in runners | {again}), "every forked runner stopped with it"
    assert err.count("runner: stopped") == 2, err
    assert "runner process 1 exited with code -9; starting it again" in err or (
        "runner process 2 exited with code -9; starting it again" in err
    ), err


async def test_a_forked_process_that_keeps_failing_at_once_fails_the_leader_loudly(
    nats_url: str, config_file: Callable[[], Path], tmp_path: Path
) -> None:
    # A process that dies (an exception is retried inside the process: bus.supervision).
    (tmp_path / "broken_component.py").write_text(
        "async def run(bus, config):\n    raise SystemExit('cannot start')\n", encoding="utf-8"
    )
    leader = await run_antler(
        "run",
        "broken_component:run",
        "--processes",
        "2",
        "-c",
        str(config_file()),
        "--nats-url",
        nats_url,
        env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"},
    )
    code, _, err = await finished(leader, 60)
    assert code == 1
    assert "cannot start" in err
    assert "keeps exiting (code 1)" in err
