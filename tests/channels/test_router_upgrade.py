"""A router upgraded past the split of run events by partition answers the runs an earlier runner
still publishes to the single RUN_EVENTS, and stops reading it once `antler provision` removed it."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable

import pytest

from bus import Bus, provision
from bus.chat_partitions import chat_partitions
from bus.messages import RunEvent, RunRecord
from bus.records import RecordStore
from config import AppConfig
from tests.support.chat import Chat, running_router
from tests.support.unsplit import earlier_runners_subject, make_unsplit_run_events

pytestmark = pytest.mark.asyncio


async def legacy_projection_ready(bus: Bus) -> None:
    """Until the router reads the old stream for every partition (it reads only events newer than
    its durables there)."""
    wanted = {f"router-ev-{k}" for k in range(await chat_partitions(bus))}
    for _ in range(600):
        consumers = await bus.js.consumers_info(bus.subjects.unsplit_run_events_stream)
        if wanted <= {c.name for c in consumers}:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the router never read the old RUN_EVENTS")


async def test_a_chat_run_an_earlier_runner_answers_during_the_upgrade_is_replied_to(
    bus: Bus, nats_url: str, app_config: Callable[[], AppConfig], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="channels.router.partitions")
    old = await make_unsplit_run_events(nats_url, bus.config)
    await provision(old)  # `antler up` or `antler provision` of the upgraded version
    await old.close()
    origin = {"channel": "cli", "chat_id": "c-up", "message_id": "m-up", "user_id": "u1"}
    run_id, thread_id = str(uuid.uuid4()), str(uuid.uuid4())
    # Submitted by an earlier router (its record says no partition), answered by an earlier runner.
    record = RunRecord(run_id=run_id, thread_id=thread_id, user_id="cli:u1", metadata={"origin": origin})
    await RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord).create(run_id, record)
    chunk = {"type": "AIMessageChunk", "id": "ai-up", "content": "Answered across the upgrade."}
    events = [
        RunEvent(run_id=run_id, thread_id=thread_id, seq=1, event="messages", data=[chunk, {}]),
        RunEvent(run_id=run_id, thread_id=thread_id, seq=2, event="end", data={"status": "success"}),
    ]
    async with running_router(nats_url, app_config()), Chat(bus) as chat:
        await legacy_projection_ready(bus)
        for event in events:
            await bus.publish(earlier_runners_subject(bus, run_id, ("cli", "c-up")), event)
        final = await chat.final()
        assert (final.kind, final.text, final.reply_to) == ("final", "Answered across the upgrade.", "m-up")

        # Every runner upgraded, its events expired: `antler provision` removes the old stream, and
        # the router stops reading it at its next look.
        await bus.js.purge_stream(bus.subjects.unsplit_run_events_stream)
        await provision(bus, retire=True)
        for _ in range(400):
            if "RUN_EVENTS is gone (drained); stopped its consumers" in caplog.text:
                break
            await asyncio.sleep(0.05)
        assert "RUN_EVENTS is gone (drained); stopped its consumers" in caplog.text
