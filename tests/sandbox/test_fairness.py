"""One user's flood of slow commands never keeps another user's command from running."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from bus import Bus
from config import AppConfig
from sandbox import Busy, SandboxClient
from tests.support.sandbox import running_broker

pytestmark = pytest.mark.asyncio


async def test_a_flood_of_one_users_commands_leaves_room_for_another_user(
    bus: Bus, nats_url: str, make_config: Callable[..., AppConfig]
) -> None:
    config = make_config(command_timeout_seconds=300, max_commands_per_user=3, max_waiting_per_user=2)
    flooder = SandboxClient(bus, "mallory", "flood")
    async with running_broker(nats_url, config):
        # 70 commands that take minutes: more than the broker's 64 request slots.
        flood = [asyncio.create_task(flooder.exec("sleep 300", timeout=300)) for _ in range(70)]
        try:
            refused = 0
            for task in asyncio.as_completed(flood):
                with pytest.raises(Busy, match="you already have 3 commands running and 2 waiting"):
                    await task
                refused += 1
                if refused == 70 - 5:
                    break
            # Every one beyond 3 running and 2 waiting was refused; another user's command runs now,
            # while the flooder's are still running.
            reply = await SandboxClient(bus, "ana", "t1").exec("echo hi", timeout=10)
            assert reply.output == "hi\n"
            assert sum(not task.done() for task in flood) == 5
        finally:
            for task in flood:
                task.cancel()
            await asyncio.gather(*flood, return_exceptions=True)
