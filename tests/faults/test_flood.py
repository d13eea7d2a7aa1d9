"""The flood: many chats at once through a real `antler up`, no faults; each reply answers its own message."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faults.budget import ONE_AT_A_TIME, QUIET, SIZE, STOP_TIMEOUT, TIMEOUT
from tests.faults.harness import OpenLoad, UpFactory, Verdict

pytestmark = [pytest.mark.asyncio, TIMEOUT, ONE_AT_A_TIME]


async def test_flood_every_message_is_answered_once_with_its_own_answer(
    fault_config: Callable[..., Path], antler_up: UpFactory, chat_load: OpenLoad, verdict: Verdict
) -> None:
    up = antler_up(fault_config())
    await up.start()
    started = time.monotonic()
    deadline = started + SIZE.budget
    async with chat_load(await up.nats_url()) as load:
        await load.publish(load.messages, deadline)
        await load.settle(deadline)
        await asyncio.sleep(QUIET)  # a late second reply would land in this window
        code = await up.stop(STOP_TIMEOUT)
        problems = [] if code == 0 else [f"antler up exited with {code} after SIGINT (None: still running)"]
        verdict(load, "flood", started, up, problems)
