"""A rolling restart under steady chat load drops, repeats and reorders nothing (issue 49).

A three-node NATS cluster (`bus.replicas: 3`, the users `antler creds` would give) and two copies
of each component, every copy its own `antler run <name>` process logged in as its component's
user, as on several machines; the Telegram adapter's two copies against the fake Bot API (one
polls, one stands by). Chats keep sending (each its next message every `EVERY` seconds, answered
or not; two of them through Telegram, judged by `TelegramLoad`) while a copy of every component
(every copy with `ANTLER_FAULTS_LONG=1`) is restarted in turn the way an orchestrator does it: SIGTERM,
wait until it has exited, start it again, wait until it says it is ready; then each NATS node in
turn: SIGTERM, start it on its store, wait until every node's `/healthz` says its JetStream copies
have caught up. Every message must be answered exactly once, with its own answer, in its chat's
order; the counts line adds the longest pause any chat saw (`ChatLoad.longest_pause`: the longest
a chat had a message outstanding with no answer coming) and the slowest stop and start.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from tests.conftest import run_antler
from tests.fakes.telegram_server import FakeTelegram
from tests.faults.budget import LONG, ONE_AT_A_TIME, TIMEOUT, Size
from tests.faults.copies import Copy, Stack
from tests.faults.harness import NatsCluster, OpenLoad, Verdict, write_config
from tests.faults.telegram_load import TelegramLoad

pytestmark = [pytest.mark.asyncio, TIMEOUT, ONE_AT_A_TIME]

# The order recommended in docs/operating.md (services the runs call first, then the runners, then
# what faces users); `ANTLER_ROLLING_ORDER=router,runner,...` restarts in another.
ORDER = os.environ.get(
    "ANTLER_ROLLING_ORDER", "sandbox,memory,subagents,scheduler,runner,router,gateway,telegram"
).split(",")
COPIES = 2
# Copies restarted per component: by default the first of each, while the second serves (every
# component type restarted with the other copy carrying its work: each Python start is seconds of
# CPU on two shared cores); `ANTLER_FAULTS_LONG=1` restarts every copy, as a whole upgrade does.
RESTARTED = COPIES if LONG else 1
LAME_DUCK = os.environ.get("ANTLER_ROLLING_LDM", "") not in ("", "0")
# 6 chats, each sending every 2 s (answered or not; every second with `ANTLER_FAULTS_LONG=1`): a run
# takes about a second, so most stops come with runs in flight and chats with messages waiting (the
# counts line says how many: `in_flight_at_stops`); the scenario's turns are most of its CPU, on a
# suite that shares two cores. `per_chat` only caps the load: chats stop sending once the restarts
# are done.
LOAD = Size(chats=6, per_chat=400, budget=30.0)
EVERY = 1.0 if LONG else 2.0
TELEGRAM_CHATS = 2  # more chats writing through the Telegram adapter (its active copy and standby)
ANSWER_WITHIN = LOAD.budget  # after the last restart: every answer due by then (later: `late`)
# Well above what a chat waits while one copy of each serves (up to ~11 s seen, in a node restart),
# and below the 30 s a final waits for an earlier run's that never comes (channels.router.ordering): a chat
# held back that way fails the scenario.
PAUSE_BOUND = 25.0


@pytest_asyncio.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


async def provision(config: Path) -> None:
    """`antler provision` as the admin: components with their own users create nothing."""
    proc = await run_antler("provision", "-c", str(config))
    out, err = await proc.communicate()
    assert proc.returncode == 0, (out + err).decode(errors="replace")


def rolling_config(
    tmp_path: Path, fault_config: Callable[..., Path], url: str, telegram: FakeTelegram
) -> Path:
    path = fault_config(url=url, replicas=3)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["channels"]["telegram"] = {
        "enabled": True,
        "bot_token": telegram.token,
        "base_url": telegram.base_url,
    }
    data["memory"] = {"debounce_seconds": 0.5}  # the memory updaters get work during the load
    data["gateway"] = {"port": 0, "host": "127.0.0.1"}  # two gateways on one machine
    return write_config(path, data)


async def test_a_rolling_restart_of_every_component_and_nats_node_loses_repeats_and_reorders_nothing(
    tmp_path: Path,
    fault_config: Callable[..., Path],
    chat_load: OpenLoad,
    verdict: Verdict,
    telegram: FakeTelegram,
) -> None:
    cluster = NatsCluster(tmp_path / "cluster", users_dir=tmp_path / "data")
    await cluster.start()
    logs = tmp_path / "logs"
    logs.mkdir()
    config = rolling_config(tmp_path, fault_config, cluster.url, telegram)
    tg = TelegramLoad(telegram, TELEGRAM_CHATS)
    stack = Stack(tmp_path, [Copy(name, n, config, logs) for name in ORDER for n in range(1, COPIES + 1)])
    try:
        await cluster.wait_jetstream()
        await provision(config)
        await stack.start()
        started = time.monotonic()
        problems: list[str] = []
        slowest_stop, slowest_start = (0.0, ""), (0.0, "")
        outstanding: list[int] = []  # messages accepted and not yet answered as each stop began
        steps: list[tuple[float, str]] = [(0.0, "warm-up")]  # (when it began, what restarted)
        async with chat_load(cluster.url, LOAD) as load:
            done = asyncio.Event()
            publishing = asyncio.create_task(load.publish_steadily(EVERY, done, started + 600))
            writing = asyncio.create_task(tg.send_steadily(EVERY, done))
            try:
                # Some answers first: the restarts begin with runs in flight.
                assert await load.wait_answered(LOAD.chats, started + 60), stack.tail()
                for name in ORDER:
                    for copy in stack.by_name(name)[:RESTARTED]:
                        outstanding.append(len(load.accepted) - load.answered_count())
                        began = time.monotonic()
                        steps.append((began, copy.label))
                        code = await copy.stop()
                        took = time.monotonic() - began
                        slowest_stop = max(slowest_stop, (took, copy.label))
                        if code != 0:
                            problems.append(f"{copy.label} exited with {code} on SIGTERM after {took:.1f}s")
                        ready = await copy.start()
                        slowest_start = max(slowest_start, (ready, copy.label))
                for node in range(len(cluster.ports)):
                    outstanding.append(len(load.accepted) - load.answered_count())
                    steps.append((time.monotonic(), f"nats-n{node + 1}"))
                    await cluster.stop(node, lame_duck=LAME_DUCK)
                    await cluster.start(node)
                    await cluster.wait_healthy()
            finally:
                done.set()
                await publishing
                await writing
            await load.settle(time.monotonic() + ANSWER_WITHIN)
            await tg.wait_answered(ANSWER_WITHIN)
            await asyncio.sleep(4.0)  # a late second reply (a redelivered run) would land in this window
            redelivered = await load.redelivered_runs()
            pause, which, since = load.longest_pause()
            # The restart under way when that wait began (or the one before it, if it began between).
            during = [label for at, label in steps if at <= since][-1]
            if pause > PAUSE_BOUND:
                problems.append(
                    f"a chat waited {pause:.1f}s ({which}, in {during}'s restart), over {PAUSE_BOUND:g}s"
                )
            problems += [f"{line.strip()}" for line in stack.log().splitlines() if "did not drain" in line]
            for message, earlier in load.overtaken():  # what a diagnosis needs: when, and around what
                at = [load.answered_at[m.message_id] for m in (message, earlier)]
                steps_then = [label for began, label in steps if began <= min(at)][-1:]
                print(
                    f"out of order: {message.message_id} ({at[0] - started:.1f}s) before "
                    f"{earlier.message_id} ({at[1] - started:.1f}s), during {steps_then}",
                    flush=True,
                )
            on_telegram = tg.counts()
            if on_telegram["answered"] != on_telegram["sent"]:
                problems.append(f"through Telegram: {on_telegram}")
            verdict(
                load,
                "rolling-restart",
                started,
                stack,
                problems,
                longest_pause=f"{pause:.1f}s({which},{during})",
                slowest_stop=f"{slowest_stop[0]:.1f}s({slowest_stop[1]})",
                slowest_ready=f"{slowest_start[0]:.1f}s({slowest_start[1]})",
                redelivered_runs=redelivered,
                restarts=len(outstanding),
                in_flight_at_stops=f"{min(outstanding)}..{max(outstanding)}",
                telegram="{answered}/{sent},dup={duplicated},lost={lost},ooo={out_of_order}".format(
                    **on_telegram
                ),
            )
    finally:
        await stack.kill()
        await cluster.close()
