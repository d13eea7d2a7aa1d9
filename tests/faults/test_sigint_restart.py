"""Ctrl-C under load, then `antler up` again on the same data dir: every stored message is answered once."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.faults.budget import ONE_AT_A_TIME, QUIET, SIZE, STOP_TIMEOUT, TIMEOUT
from tests.faults.harness import OpenLoad, UpFactory, Verdict, free_port

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
        await load.publish(load.part(0, 0.5), deadline)
        assert await load.wait_answered(SIZE.messages // 4, deadline), up.tail()
        processes = up.children()  # runners, nats-server and anything they started
        up.send_signal(signal.SIGINT)
        # The rest is published while it drains and stops, and after: retried until it is back.
        publishing = asyncio.create_task(load.publish(load.part(0.5, 1), deadline))
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
        await publishing
        await load.wait_all_accepted_answered(deadline)
        await asyncio.sleep(QUIET)  # a late second reply would land in this window
        redelivered = await load.redelivered_runs()
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
