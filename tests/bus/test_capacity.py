"""A process has room for more work while its event loop keeps up and its memory is in bounds."""

from __future__ import annotations

import asyncio
import time

import pytest

from bus.capacity import Capacity

pytestmark = pytest.mark.asyncio


async def test_a_loop_running_late_has_no_room_until_it_catches_up() -> None:
    capacity = Capacity(max_lag=0.05, max_memory_mb=float("inf"))
    room = asyncio.Event()
    capacity.listen(room.set)
    capacity.start()
    try:
        assert capacity.admits()
        busy_until = time.monotonic() + 0.4
        while time.monotonic() < busy_until:  # the process is short of CPU: its loop runs nothing
            pass
        deadline = time.monotonic() + 5
        while capacity.admits():  # until the overdue timer has run and seen the late loop
            assert time.monotonic() < deadline, "a loop late by 0.4 s still admitted runs"
            await asyncio.sleep(0)
        await asyncio.wait_for(room.wait(), 5)
        assert capacity.admits()
    finally:
        capacity.stop()


async def test_a_process_over_its_memory_bound_has_no_room() -> None:
    assert not Capacity(max_lag=1.0, max_memory_mb=1).admits()
