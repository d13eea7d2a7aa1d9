"""A runner process SIGKILLed while answers stream: its runs are redelivered and answered exactly once."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faults.budget import ONE_AT_A_TIME, SIZE, STOP_TIMEOUT, TIMEOUT
from tests.faults.harness import OpenLoad, UpFactory, Verdict
from tests.faults.scenario import through_a_fault
from tests.support.processes import busiest

pytestmark = [pytest.mark.asyncio, TIMEOUT, ONE_AT_A_TIME]


async def test_runner_killed_mid_run_loses_and_repeats_no_answer(
    fault_config: Callable[..., Path], antler_up: UpFactory, chat_load: OpenLoad, verdict: Verdict
) -> None:
    up = antler_up(fault_config())
    await up.start()
    started = time.monotonic()
    deadline = started + SIZE.budget
    async with chat_load(await up.nats_url()) as load:

        async def kill_the_busier_runner() -> None:
            # Answers are streaming. The busier runner is killed: one runner may have fetched every
            # request at once, and killing an idle one would prove nothing. A short look: a run takes
            # about 0.3 s here, and after a whole second of looking the load could be nearly done.
            victim = await busiest(up.runners(), window=0.25)
            os.kill(victim.pid, signal.SIGKILL)

        redelivered = await through_a_fault(up, load, deadline, kill_the_busier_runner, mid_publish=True)
        problems = []
        if redelivered == 0:
            problems.append("the killed runner held no run: the scenario proved nothing")
        if len(up.runners()) != 2:
            problems.append(f"{len(up.runners())} runner processes after the kill; the pool keeps 2")
        code = await up.stop(STOP_TIMEOUT)
        if code != 0:
            problems.append(f"antler up exited with {code} after SIGINT (None: still running)")
        verdict(load, "runner-sigkill", started, up, problems, redelivered_runs=redelivered)
