"""NATS going away under load: an external server restarted, the embedded one killed.

Either way every message published is stored (the publisher retries while NATS is
down) and answered exactly once with its own answer; `antler up` still stops
cleanly afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.faults.budget import ONE_AT_A_TIME, SIZE, TIMEOUT, Size
from tests.faults.harness import ExternalNats, OpenLoad, UpFactory, Verdict
from tests.faults.scenario import through_a_fault, through_faults
from tests.faults.stopping import OUTAGE, stopped_cleanly
from tests.support.antler_up import AntlerUp
from tests.support.processes import Proc

pytestmark = [pytest.mark.asyncio, TIMEOUT, ONE_AT_A_TIME]


# Two outages, one each way, on one stack (each `antler up` costs some 7 s of CPU): a third of the
# load per outage and one after, 6 messages per chat.
TWO_OUTAGES = Size(chats=SIZE.chats, per_chat=SIZE.per_chat * 3 // 2, budget=SIZE.budget * 3 // 2)
# Outage after outage on one stack, each way in turn, a small load: two messages of each chat per
# outage, so every outage strikes with each chat's answers due in order on both sides of it.
RESTARTS = 4
AGAIN_AND_AGAIN = Size(chats=6, per_chat=2 * (RESTARTS + 1), budget=30.0 * RESTARTS)


async def test_external_nats_restarted_mid_load_loses_and_repeats_no_answer(
    external_nats: ExternalNats,
    fault_config: Callable[..., Path],
    antler_up: UpFactory,
    chat_load: OpenLoad,
    verdict: Verdict,
) -> None:
    """SIGTERM (JetStream flushes and exits), then later SIGKILL (a crash): each outage strikes
    with runs in flight and lasts longer than a redelivery."""
    up = antler_up(fault_config(url=external_nats.url))
    await up.start()
    started = time.monotonic()
    deadline = started + TWO_OUTAGES.budget
    async with chat_load(external_nats.url, TWO_OUTAGES) as load:

        async def outage() -> None:  # the publisher retries until the server is back
            await asyncio.sleep(OUTAGE)
            await external_nats.start()

        faults = [
            (lambda: external_nats.stop(signal.SIGTERM), outage),
            (lambda: external_nats.stop(signal.SIGKILL), outage),
        ]
        redelivered = await through_faults(up, load, deadline, faults)
        problems = await stopped_cleanly(up)
        verdict(
            load,
            "external-nats-sigterm-then-sigkill",
            started,
            up,
            problems,
            redelivered_runs=redelivered,
        )


async def test_external_nats_restarted_again_and_again_keeps_each_chats_answers_in_order(
    external_nats: ExternalNats,
    fault_config: Callable[..., Path],
    antler_up: UpFactory,
    chat_load: OpenLoad,
    verdict: Verdict,
) -> None:
    """SIGTERM, SIGKILL, SIGTERM, SIGKILL: each outage strikes while chats have answers in flight
    and messages still to come, and every chat's answers must come back in the order it sent."""
    up = antler_up(fault_config(url=external_nats.url))
    await up.start()
    started = time.monotonic()
    deadline = started + AGAIN_AND_AGAIN.budget
    async with chat_load(external_nats.url, AGAIN_AND_AGAIN) as load:

        async def outage() -> None:
            await asyncio.sleep(OUTAGE)
            await external_nats.start()

        signals = [signal.SIGTERM, signal.SIGKILL] * (RESTARTS // 2)
        faults = [(functools.partial(external_nats.stop, signum), outage) for signum in signals]
        redelivered = await through_faults(up, load, deadline, faults)
        problems = await stopped_cleanly(up)
        verdict(
            load,
            "external-nats-restarted-again-and-again",
            started,
            up,
            problems,
            restarts=RESTARTS,
            redelivered_runs=redelivered,
        )


async def watch_health(gateway: str, seen: list[tuple[int, bool | None]]) -> None:
    """Poll the gateway's /health until cancelled: (status code, its `nats` field) per answer."""
    async with httpx.AsyncClient(base_url=gateway, timeout=1.0) as http:
        while True:
            with contextlib.suppress(httpx.HTTPError, ValueError):
                response = await http.get("/health")
                body = response.json()
                seen.append((response.status_code, body.get("nats") if isinstance(body, dict) else None))
            await asyncio.sleep(0.05)


async def replacement(up: AntlerUp, old: Proc, timeout: float) -> Proc | None:
    """The nats-server child that took `old`'s place, once there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        servers = [p for p in up.nats_servers() if p.pid != old.pid]
        if servers:
            return servers[0]
        await asyncio.sleep(0.05)
    return None


async def test_embedded_nats_killed_mid_load_is_restarted_and_nothing_is_lost(
    tmp_path: Path,
    fault_config: Callable[..., Path],
    antler_up: UpFactory,
    chat_load: OpenLoad,
    verdict: Verdict,
) -> None:
    up = antler_up(fault_config())
    await up.start()
    gateway, url = await up.gateway_url(), await up.nats_url()
    started = time.monotonic()
    deadline = started + SIZE.budget
    health: list[tuple[int, bool | None]] = []
    async with chat_load(url) as load:
        [server] = up.nats_servers()
        watching: list[asyncio.Task[None]] = []
        restarted: list[Proc | None] = []

        async def kill_the_server() -> None:
            watching.append(asyncio.create_task(watch_health(gateway, health)))
            os.kill(server.pid, signal.SIGKILL)

        async def restarted_by_antler_up() -> None:
            restarted.append(await replacement(up, server, timeout=20.0))

        redelivered = await through_a_fault(up, load, deadline, kill_the_server, restarted_by_antler_up)
        watching[0].cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching[0]
        problems = []
        if restarted[0] is None:
            problems.append("antler up did not start the embedded nats-server again within 20s")
        now_url = (tmp_path / "data" / "nats.url").read_text().strip() if restarted[0] else url
        if now_url != url:
            problems.append(f"the restarted server is at {now_url}, not {url} where clients reconnect")
        down = [code for code, nats in health if nats is False or code == 503]
        if any(code != 503 for code in down):
            problems.append(f"GET /health answered {sorted(set(down))} while NATS was down (expected 503)")
        problems += await stopped_cleanly(up)
        health_seen = f"{len(down)}-down-answers" if down else "bus-down-not-observed"
        extra = {"redelivered_runs": redelivered, "health": health_seen}
        verdict(load, "embedded-nats-sigkill", started, up, problems, **extra)
