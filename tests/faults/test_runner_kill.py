"""A runner process SIGKILLed while answers stream: its runs are redelivered and answered exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faults.budget import ONE_AT_A_TIME, QUIET, SIZE, STOP_TIMEOUT, TIMEOUT
from tests.faults.harness import OpenLoad, UpFactory, Verdict, busiest

pytestmark = [pytest.mark.asyncio, TIMEOUT, ONE_AT_A_TIME]


async def test_runner_killed_mid_run_loses_and_repeats_no_answer(
    fault_config: Callable[..., Path], antler_up: UpFactory, chat_load: OpenLoad, verdict: Verdict
) -> None:
    up = antler_up(fault_config())
    await up.start()
    started = time.monotonic()
    deadline = started + SIZE.budget
    async with chat_load(await up.nats_url()) as load:
        publishing = asyncio.create_task(load.publish(load.messages, deadline))
        # A quarter answered: answers are streaming. The busier runner is killed: one runner may
        # have fetched every request at once, and killing an idle one would prove nothing.
        assert await load.wait_answered(SIZE.messages // 4, deadline), up.tail()
        victim = await busiest(up.runners())
        os.kill(victim.pid, signal.SIGKILL)
        await publishing
        await load.wait_all_accepted_answered(deadline)
        await asyncio.sleep(QUIET)  # a late second reply would land in this window
        redelivered = await load.redelivered_runs()
        problems = []
        if redelivered == 0:
            problems.append("the killed runner held no run: the scenario proved nothing")
        if len(up.runners()) != 2:
            problems.append(f"{len(up.runners())} runner processes after the kill; the pool keeps 2")
        code = await up.stop(STOP_TIMEOUT)
        if code != 0:
            problems.append(f"antler up exited with {code} after SIGINT (None: still running)")
        verdict(load, "runner-sigkill", started, up, problems, redelivered_runs=redelivered)
