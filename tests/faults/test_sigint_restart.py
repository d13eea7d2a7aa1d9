"""Ctrl-C under load, then `antler up` again on the same data dir: every stored message is answered once."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faults.budget import ONE_AT_A_TIME, SIZE, STOP_TIMEOUT, TIMEOUT
from tests.faults.harness import OpenLoad, UpFactory, Verdict, free_port
from tests.faults.scenario import through_a_fault

pytestmark = [pytest.mark.asyncio, TIMEOUT, ONE_AT_A_TIME]


async def test_sigint_under_load_then_restart_answers_every_accepted_message_once(
    fault_config: Callable[..., Path], antler_up: UpFactory, chat_load: OpenLoad, verdict: Verdict
) -> None:
    # A fixed port, so the second `antler up` serves where the test's client reconnects.
    up = antler_up(fault_config(embedded={"port": free_port()}))
    await up.start()
    started = time.monotonic()
    deadline = started + SIZE.budget + STOP_TIMEOUT
    problems: list[str] = []
    async with chat_load(await up.nats_url()) as load:
        processes = []
        stop_seconds = 0.0

        async def ctrl_c() -> None:
            processes.extend(up.children())  # runners, nats-server and anything they started
            up.send_signal(signal.SIGINT)

        async def start_again() -> None:
            # The rest is published while it drains and stops, and after: retried until it is back.
            nonlocal stop_seconds
            began = time.monotonic()
            code = await up.wait_exit(STOP_TIMEOUT)
            stop_seconds = time.monotonic() - began
            if code != 0:
                problems.append(f"antler up exited with {code} after SIGINT (None: still running after 60s)")
            leftovers = [p for p in processes if p.alive]
            if leftovers:
                problems.append(f"left running after antler up exited: {[p.cmdline for p in leftovers]}")
            await up.kill_all()
            for process in leftovers:  # the second start needs the data dir (and its lock) free
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)
            await up.start()

        redelivered = await through_a_fault(up, load, deadline, ctrl_c, start_again)
        code = await up.stop(STOP_TIMEOUT)
        if code != 0:
            problems.append(f"the second antler up exited with {code} after SIGINT (None: still running)")
        verdict(
            load,
            "sigint-restart",
            started,
            up,
            problems,
            redelivered_runs=redelivered,
            first_stop=f"{stop_seconds:.1f}s",
        )
