"""The router's reply projection on a real nats-server: a chat run's events in, its partial and final
replies out, also when events come again after the final went out."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from bus import Bus, decode
from bus.chat_partitions import chat_partitions
from bus.messages import ChatOrigin, OutboundMessage, RunEvent, RunRecord
from bus.records import RecordStore
from channels.replies import RecentOrigins, ReplyProjection, projection_consumer
from config import AppConfig

pytestmark = pytest.mark.asyncio


def words(run: str, seq: int, text: str) -> RunEvent:
    chunk = {"type": "AIMessageChunk", "content": text, "id": f"msg-{run}"}
    return RunEvent(run_id=run, thread_id="t1", seq=seq, event="messages", data=[chunk, {}])


async def test_an_event_that_comes_again_after_the_final_sends_nothing_more(
    bus: Bus, app_config: Callable[[], AppConfig]
) -> None:
    """A partial whose send failed (an outage) comes back behind the run's `end`: the final is out by
    then, and a partial after it would turn the chat's answer back into a part of itself."""
    config = app_config()
    run = str(uuid.uuid4())
    origin = ChatOrigin(channel="cli", chat_id="c1", message_id="m1")
    origins = RecentOrigins()
    origins.remember(run, origin)
    # As the router records a chat run: where its replies go, for whoever did not submit it.
    runs = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    await runs.put(
        run, RunRecord(run_id=run, thread_id="t1", user_id="cli:u1", metadata={"origin": origin.model_dump()})
    )
    projection = ReplyProjection(bus, config, runs, origins)
    sent: asyncio.Queue[OutboundMessage] = asyncio.Queue()

    async def on_reply(msg: Any) -> None:
        sent.put_nowait(decode(OutboundMessage, msg.data))

    watch = await bus.nc.subscribe(bus.subjects.chat_out("cli"), cb=on_reply)
    consumers = [projection_consumer(bus, projection, k, None) for k in range(await chat_partitions(bus))]
    for consumer in consumers:
        await consumer.start()
    subject = bus.subjects.run_events_for(run, ("cli", "c1"))
    try:
        await bus.publish(subject, words(run, 1, "Nine deer."), msg_id=f"{run}:1")
        assert (await asyncio.wait_for(sent.get(), 10)).kind == "partial"
        end = RunEvent(run_id=run, thread_id="t1", seq=2, event="end", data={"status": "success"})
        await bus.publish(subject, end, msg_id=f"{run}:2")
        final = await asyncio.wait_for(sent.get(), 10)
        assert (final.kind, final.text) == ("final", "Nine deer.")
        # The first event again, as a delivery that failed earlier comes back (a new message id:
        # the stream would drop a publish of the same one).
        await bus.publish(subject, words(run, 1, "Nine deer."), msg_id=f"{run}:1:again")
        while sum(c.stats.acked for c in consumers) < 3:  # noqa: ASYNC110 - the consumers' own count
            await asyncio.sleep(0.05)
        await bus.nc.flush()  # what the handlers sent has reached this connection's subscriptions
        await asyncio.sleep(0)
        late = [(m.kind, m.text) for m in [sent.get_nowait() for _ in range(sent.qsize())]]
        assert late == [], "nothing is sent after the final"
    finally:
        for consumer in consumers:
            await consumer.stop()
        await watch.unsubscribe()
