"""A model's concurrency budget is shared by every runner process through the bus, and a process
that dies holding a slot gives it back (its lease lapses). Runner processes as `antler run runner`
would start them, a real nats-server, the scripted model over real HTTP counting what is in flight."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bus import Bus, decode
from bus.messages import ComponentReady, ThreadCompactReply, ThreadCompactRequest
from bus.runs import collect_run, submit_run
from tests.conftest import finished, run_antler
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.runner import StartRunner, ask, submit_and_collect

pytestmark = pytest.mark.asyncio

RUNS = 15  # runs at once over three processes, each call held 0.2 s: far more than two slots' worth


@pytest.fixture
def limited(config_data: dict[str, Any]) -> dict[str, Any]:
    config_data["models"][0]["max_concurrent_calls"] = 2
    config_data["model_calls"]["lease_seconds"] = 2
    config_data["title"] = {"enabled": False}
    config_data["memory"] = {"enabled": False}
    return config_data


@contextlib.asynccontextmanager
async def runner_processes(count: int, config: Path, nats_url: str) -> AsyncIterator[list[Any]]:
    procs = [
        await run_antler("run", "runner", "-c", str(config), "--nats-url", nats_url) for _ in range(count)
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.terminate()
        for proc in procs:
            await finished(proc)


@contextlib.asynccontextmanager
async def forked_runners(count: int, config: Path, nats_url: str) -> AsyncIterator[None]:
    """`antler run runner --processes <count>`: one process loads the runner and forks `count`."""
    leader = await run_antler(
        "run", "runner", "--processes", str(count), "-c", str(config), "--nats-url", nats_url
    )
    try:
        yield
    finally:
        if leader.returncode is None:
            leader.terminate()  # passed on to every process it forked
        await finished(leader, timeout=60)


async def test_three_runner_processes_never_exceed_the_models_limit_of_two(
    bus: Bus, fake_model: FakeOpenAI, limited: dict[str, Any], config_file: Callable[[], Path], nats_url: str
) -> None:
    fake_model.concurrency_limit = 2  # the provider answers 429 to a third call at once
    fake_model.script(*[Reply(text="done", delay=0.2) for _ in range(RUNS)])
    requests = [ask(f"t-budget-{i}", f"question {i}") for i in range(RUNS)]
    ready: asyncio.Queue[int] = asyncio.Queue()

    async def on_ready(msg: Any) -> None:
        ready.put_nowait(decode(ComponentReady, msg.data).pid)

    announced = await bus.nc.subscribe(bus.subjects.component_ready("runner"), cb=on_ready)
    # Three runner processes forked from one that loaded them, as `antler up` starts its runners.
    async with forked_runners(3, config_file(), nats_url):
        # Every process waits for work before the runs come: each takes some, and their calls overlap.
        pids = {await asyncio.wait_for(ready.get(), 90) for _ in range(3)}
        await announced.unsubscribe()
        assert len(pids) == 3, pids
        for request in requests:
            await submit_run(bus, request)
        results = await asyncio.gather(*(collect_run(bus, r.run_id, timeout=120) for r in requests))

    assert [events[-1].data["status"] for events in results] == ["success"] * RUNS
    assert fake_model.max_in_flight == 2, "both slots were used, never a third"
    assert fake_model.refused == 0, "no call was sent over the provider's limit"


async def test_a_runner_killed_while_holding_a_slot_does_not_leak_it(
    bus: Bus,
    fake_model: FakeOpenAI,
    limited: dict[str, Any],
    config_file: Callable[[], Path],
    nats_url: str,
    start_runner: StartRunner,
) -> None:
    stuck, later = asyncio.Event(), asyncio.Event()
    fake_model.script(Reply(text="never delivered", hold=stuck))
    first = ask("t-killed", "the doomed one")
    async with runner_processes(1, config_file(), nats_url) as (doomed,):
        await submit_run(bus, first)
        await fake_model.wait_until(lambda: fake_model.holding == 1)  # its call holds a slot now
        doomed.kill()
        await finished(doomed)
    stuck.set()  # the dead runner's request ends at the model too
    await fake_model.wait_until(lambda: fake_model.holding == 0)

    # Every later call (the two new runs, and the killed one's, delivered again) is held at the model:
    # two of them in flight at once means both slots are free again.
    fake_model.script(*[Reply(text="after the crash", hold=later) for _ in range(3)])
    second, third = ask("t-after-1", "one"), ask("t-after-2", "two")
    async with start_runner():
        await submit_run(bus, second)
        await submit_run(bus, third)
        await fake_model.wait_until(lambda: fake_model.holding == 2, timeout=60)
        later.set()
        results = await asyncio.gather(
            *(collect_run(bus, r.run_id, timeout=60) for r in (first, second, third))
        )

    assert [events[-1].data["status"] for events in results] == ["success"] * 3
    assert fake_model.max_in_flight <= 2


async def test_a_summary_waits_for_the_models_slot_like_any_other_call(
    bus: Bus, fake_model: FakeOpenAI, limited: dict[str, Any], start_runner: StartRunner
) -> None:
    limited["models"][0]["max_concurrent_calls"] = 1
    fake_model.concurrency_limit = 1  # the provider refuses a second call at once
    stuck = asyncio.Event()
    async with start_runner():
        for text in ("first", "second"):
            fake_model.script(Reply(text=f"About the {text}."))
            await submit_and_collect(bus, ask("t-long", text))
        fake_model.script(Reply(text="held", hold=stuck), Reply(text="They talked about two things."))
        await submit_run(bus, ask("t-other", "take the only slot"))
        await fake_model.wait_until(lambda: fake_model.holding == 1)
        compact = asyncio.create_task(
            bus.request(
                bus.subjects.threads("compact"),
                ThreadCompactRequest(thread_id="t-long"),
                ThreadCompactReply,
                timeout=60,
            )
        )
        done, _ = await asyncio.wait({compact}, timeout=1.0)  # a chance to overtake: it must not
        assert not done, "the summary did not go out while the other call held the slot"
        stuck.set()
        reply = await compact
    assert reply.compacted, reply
    assert fake_model.refused == 0, "no call was sent over the provider's limit"
    assert fake_model.max_in_flight == 1
