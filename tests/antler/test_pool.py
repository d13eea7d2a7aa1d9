"""The runner pool of `antler up`: children restarted when they die, given up on if they keep dying."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from antler.pool import _keep_alive, process_count
from tests.support.processes import pid_alive


async def test_a_child_that_dies_is_started_again(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    script = f"open({str(starts)!r}, 'a').write('x'); import time; time.sleep(0.2)"
    keeper = asyncio.create_task(_keep_alive("runner", [sys.executable, "-c", script], dict(os.environ), 0))
    for _ in range(200):
        if starts.exists() and len(starts.read_text()) >= 2:
            break
        await asyncio.sleep(0.05)
    keeper.cancel()
    with pytest.raises(asyncio.CancelledError):
        await keeper
    assert len(starts.read_text()) >= 2, "the child ran again after it exited"


async def test_a_child_that_keeps_dying_at_once_fails_loudly() -> None:
    with pytest.raises(RuntimeError, match="keeps exiting \\(code 3\\)"):
        await _keep_alive("runner", [sys.executable, "-c", "raise SystemExit(3)"], dict(os.environ), 0)


async def test_a_running_child_is_stopped_when_the_pool_stops(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    keeper = asyncio.create_task(_keep_alive("runner", [sys.executable, "-c", script], dict(os.environ), 0))
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text():
            break
        await asyncio.sleep(0.05)
    keeper.cancel()
    with pytest.raises(asyncio.CancelledError):
        await keeper
    pid = int(pid_file.read_text())
    assert not pid_alive(pid), "the child was stopped, not left behind"


def test_zero_processes_means_one_per_core_at_most_four() -> None:
    assert 1 <= process_count(0) <= 4
    assert process_count(3) == 3
