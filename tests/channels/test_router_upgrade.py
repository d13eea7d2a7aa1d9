"""A router upgraded past the split of run events by partition answers the runs an earlier runner
still publishes to the single RUN_EVENTS, and stops reading it once `antler provision` removed it."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable

import pytest
from nats.js.errors import BucketNotFoundError

from bus import Bus, provision, split_kv
from bus.chat_partitions import chat_partitions
from bus.messages import RunEvent, RunRecord, RunStatus
from bus.records import RecordStore, keys_matching
from config import AppConfig
from tests.fakes.openai_server import FakeOpenAI
from tests.support.chat import Chat, running_router
from tests.support.runner import running_runner
from tests.support.unsplit import (
    earlier_runners_subject,
    legacy_kv,
    make_unsplit_buckets,
    make_unsplit_run_events,
)

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


async def test_a_chat_goes_on_in_its_thread_across_the_move_of_the_threads_and_runs_buckets(
    bus: Bus,
    nats_url: str,
    app_config: Callable[[], AppConfig],
    fake_model: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(split_kv, "REFRESH", 0.2)
    monkeypatch.setattr(split_kv, "LISTEN", 0.5)
    old = await make_unsplit_buckets(nats_url, bus.config)  # threads, runs, thread_runs as before
    s = bus.subjects
    config = app_config()
    try:
        async with running_runner(nats_url, config), running_router(nats_url, config), Chat(bus) as chat:
            await chat.say("remember the number 7", message_id="m1")
            first = await chat.final()
            assert first.thread_id is not None
            # Upgraded components, not moved yet: the thread is where earlier versions read it.
            legacy_threads = await legacy_kv(old, s.threads_bucket)
            assert (await legacy_threads.get(first.thread_id)).value

            await provision(bus, retire=True)  # `antler provision`: the records move, the buckets go
            with pytest.raises(BucketNotFoundError):
                await bus.js.key_value(s.threads_bucket)

            await chat.say("what number?", message_id="m2")
            second = await chat.final()
        assert second.thread_id == first.thread_id, "the chat's thread goes on"
        asked = [m["content"] for m in fake_model.agent_requests[-1]["messages"] if m["role"] == "user"]
        assert asked == ["remember the number 7", "what number?"]
        listed = await keys_matching(bus.js, s.thread_runs_bucket, f"{first.thread_id}.>")
        assert len(listed) == 2, "both runs listed with their thread"
        runs = RecordStore(await bus.kv(s.runs_bucket), RunRecord)
        for key in listed:
            record = await runs.get(key.rsplit(".", 1)[1])
            assert record is not None
            assert record.status == RunStatus.SUCCESS
    finally:
        await old.close()
