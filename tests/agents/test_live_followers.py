"""Live text goes out while someone follows a run. A chat's run is read by its router from the stored
log alone: it sends nothing live, and its model's text comes up at the stored cadence, until a reader
says it follows (`bus.runs.follow_run(live=True)`, as the gateway's SSE and the agent-protocol host
do); from then on that reader gets the text live. A run started from the API is followed from its
first token."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from bus import Bus, decode
from bus.messages import ChatOrigin, RunEvent
from bus.runs import collect_run, follow_run, submit_run
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.eventually import eventually
from tests.support.runner import ask
from tests.support.runs import streamed_text

pytestmark = pytest.mark.asyncio

WORDS = " ".join(f"w{i}" for i in range(60))  # 60 chunks 40 ms apart: 2.4 s of streaming
SHORT = " ".join(f"w{i}" for i in range(30))  # 1.2 s


async def live_parts(bus: Bus, run_id: str) -> tuple[list[RunEvent], Any]:
    """Every live delta the run sends, as they come (and the subscription, to end)."""
    seen: list[RunEvent] = []

    async def on_msg(msg: Any) -> None:
        seen.append(decode(RunEvent, msg.data))

    return seen, await bus.nc.subscribe(bus.subjects.run_live(run_id), cb=on_msg)


async def test_a_chats_run_sends_no_live_text_until_a_reader_follows_it_then_that_reader_gets_it_live(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    fake_model.script(Reply(text=WORDS, chunk_delay=0.04))
    request = ask("t-quiet", "count for me", origin=ChatOrigin(channel="cli", chat_id="quiet-1"))
    live, sub = await live_parts(bus, request.run_id)
    await submit_run(bus, request)
    stored: list[RunEvent] = []

    async def read_the_log() -> None:  # as the chat's router does: the stored log, not following
        async for event in follow_run(bus, request.run_id, timeout=30):
            stored.append(event)

    log_reader = asyncio.create_task(read_the_log())
    await eventually(
        lambda: sum(e.event == "messages" for e in stored) >= 3, "three stored deltas of the answer", 20
    )
    assert live == [], "nothing went live while only the log was read"
    assert streamed_text(stored) not in ("", WORDS), "the answer was still streaming"

    follower = [event async for event in follow_run(bus, request.run_id, timeout=30, live=True)]
    await asyncio.wait_for(log_reader, 30)
    await sub.unsubscribe()
    assert [e for e in follower if e.part is not None], "the follower got text live once it followed"
    assert live, "the run sent its text live once a reader followed"
    assert streamed_text(follower) == WORDS
    assert streamed_text(stored) == WORDS
    assert streamed_text(await collect_run(bus, request.run_id)) == WORDS


@pytest.fixture
def chat_edits_every_second(config_data: dict[str, Any]) -> None:
    config_data["channels"] = {"stream_update_seconds": 1.0}  # the default: a reply edited once a second


async def test_a_run_nobody_follows_stores_its_text_at_half_its_chats_edit_cadence_and_sends_none_live(
    bus: Bus, fake_model: FakeOpenAI, chat_edits_every_second: None, runner: None
) -> None:
    fake_model.script(Reply(text=WORDS, chunk_delay=0.04))
    request = ask("t-unfollowed", "count for me", followed=False)
    live, sub = await live_parts(bus, request.run_id)
    started = asyncio.get_running_loop().time()
    await submit_run(bus, request)
    events = await collect_run(bus, request.run_id, timeout=30)
    took = asyncio.get_running_loop().time() - started  # 2.4 s of streaming, more on a loaded machine
    await sub.unsubscribe()
    assert streamed_text(events) == WORDS
    assert live == []
    deltas = sum(e.event == "messages" for e in events)
    # The first words at once, then one per 0.5 s at most (every 0.25 s would be twice as many): its
    # chat's reply, edited once a second, still has new text at each edit.
    assert 3 <= deltas <= 1 + math.ceil(took / 0.5) + 2, (deltas, took)


async def test_a_run_from_the_api_sends_its_text_live_without_being_asked(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    fake_model.script(Reply(text=SHORT, chunk_delay=0.04))
    request = ask("t-followed", "count for me")
    live, sub = await live_parts(bus, request.run_id)
    await submit_run(bus, request)
    events = await collect_run(bus, request.run_id, timeout=30)
    await sub.unsubscribe()
    assert streamed_text(events) == SHORT
    assert len(live) >= 5, "text went live about every 100 ms while the answer streamed"
