"""The router's reply projection on a real nats-server: a chat run's events in, its partial and final
replies out, also when events come again after the final went out."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any, cast

import pytest
from nats.js.errors import NoStreamResponseError

from bus import Bus, Defer, Delivery, decode
from bus.chat_partitions import chat_partitions
from bus.messages import ChatOrigin, OutboundMessage, RunEvent, RunRecord
from bus.records import RecordStore
from channels.router.ordering import FinalsInOrder, RecentOrigins
from channels.router.projection import ReplyProjection, projection_consumer
from config import AppConfig
from tests.support.eventually import eventually
from tests.support.runs import run_events_place

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
    consumers = [
        projection_consumer(bus, projection, k, bus.subjects.run_events_partition_stream(k), None)
        for k in range(await chat_partitions(bus))
    ]
    for consumer in consumers:
        await consumer.start()
    subject, _ = await run_events_place(bus, run, ("cli", "c1"))
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


async def test_a_runs_text_already_followed_by_its_end_goes_out_once_as_the_final(
    bus: Bus, app_config: Callable[[], AppConfig]
) -> None:
    """The router is behind (a burst of answers, or it has just taken the partition over): a run's
    text and its `end` are both waiting when it gets to them. The chat gets the answer once, as the
    final, not a partial that the final replaces a moment later (on a platform: a message sent, then
    edited at once). A run whose `end` has not come yet still gets its partial."""
    config = app_config()
    quick, slow = str(uuid.uuid4()), str(uuid.uuid4())
    origins = RecentOrigins()
    for run, chat in ((quick, "c1"), (slow, "c2")):
        origins.remember(run, ChatOrigin(channel="cli", chat_id=chat, message_id=f"m-{chat}"))
    runs = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    projection = ReplyProjection(bus, config, runs, origins)
    sent: asyncio.Queue[OutboundMessage] = asyncio.Queue()

    async def on_reply(msg: Any) -> None:
        sent.put_nowait(decode(OutboundMessage, msg.data))

    def ended(run: str) -> RunEvent:
        return RunEvent(run_id=run, thread_id=f"t-{run}", seq=2, event="end", data={"status": "success"})

    def said(run: str, text: str) -> RunEvent:
        return words(run, 1, text).model_copy(update={"thread_id": f"t-{run}"})

    # Both runs' events in partition 0, stored before its consumer starts: they come in one read.
    subject_quick = bus.subjects.run_events_for(quick, ("cli", "c1"), 0)
    subject_slow = bus.subjects.run_events_for(slow, ("cli", "c2"), 0)
    first = await bus.publish(subject_quick, said(quick, "Nine deer."), msg_id=f"{quick}:1")
    await bus.publish(subject_quick, ended(quick), msg_id=f"{quick}:2")
    await bus.publish(subject_slow, said(slow, "Counting the herd"), msg_id=f"{slow}:1")
    watch = await bus.nc.subscribe(bus.subjects.chat_out("cli"), cb=on_reply)
    consumer = projection_consumer(bus, projection, 0, bus.subjects.run_events_partition_stream(0), first.seq)
    await consumer.start()
    try:
        replies = [await asyncio.wait_for(sent.get(), 10) for _ in range(2)]
        by_chat = {reply.chat_id: (reply.kind, reply.text) for reply in replies}
        assert by_chat == {"c1": ("final", "Nine deer."), "c2": ("partial", "Counting the herd")}
        await bus.publish(subject_slow, ended(slow), msg_id=f"{slow}:2")
        final = await asyncio.wait_for(sent.get(), 10)
        assert (final.chat_id, final.kind, final.text) == ("c2", "final", "Counting the herd")
        # Every event handled (a handler's replies are stored before its ack): what CHAT_OUT holds is all.
        await eventually(lambda: consumer.stats.acked >= 4, "the four events handled", timeout=10)
        replies_subject = bus.subjects.chat_out("cli")
        out = await bus.js.stream_info(bus.subjects.chat_out_stream, subjects_filter=replies_subject)
        stored = sum((out.state.subjects or {}).values())
        assert stored == 3, "one reply to the quick run, a partial and a final to the slow one"
    finally:
        await consumer.stop()
        await watch.unsubscribe()


async def test_a_final_whose_send_failed_still_goes_out_before_the_threads_next_final(
    bus: Bus, app_config: Callable[[], AppConfig]
) -> None:
    """Run one's final cannot be stored (NATS went away as it was sent; here CHAT_OUT stores nothing
    for a moment); its `end` comes again later, after run two's `end` arrived. Run two's final waits
    for run one's: the chat gets the answers in the order it asked."""
    config = app_config()
    one, two = str(uuid.uuid4()), str(uuid.uuid4())
    origins, finals = RecentOrigins(), FinalsInOrder()
    runs = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    for run, message in ((one, "m1"), (two, "m2")):  # as the router submits a chat's runs
        origins.remember(run, ChatOrigin(channel="cli", chat_id="c1", message_id=message))
        finals.submitted("t1", run)
    projection = ReplyProjection(bus, config, runs, origins, finals)
    delivery = cast(Delivery, None)  # the projection does not look at it

    def end(run: str) -> RunEvent:
        return RunEvent(run_id=run, thread_id="t1", seq=2, event="end", data={"status": "success"})

    stored = await bus.js.subscribe(bus.subjects.chat_out("cli"), ordered_consumer=True)
    out = (await bus.js.stream_info(bus.subjects.chat_out_stream)).config
    taken = list(out.subjects or [])
    try:
        await projection.on_event(words(one, 1, "Answer one."), delivery)
        await projection.on_event(words(two, 1, "Answer two."), delivery)
        out.subjects = [f"{bus.config.prefix}.chat.parked"]  # nothing stores replies now
        await bus.js.update_stream(out)
        with pytest.raises(NoStreamResponseError):
            await projection.on_event(end(one), delivery)
        out.subjects = taken
        await bus.js.update_stream(out)

        with pytest.raises(Defer):  # run one's final is still due: run two's waits for it
            await projection.on_event(end(two), delivery)
        await projection.on_event(end(one), delivery)  # delivered again
        await projection.on_event(end(two), delivery)

        replies = [decode(OutboundMessage, (await stored.next_msg(timeout=10)).data) for _ in range(4)]
    finally:
        out.subjects = taken
        await bus.js.update_stream(out)
        await stored.unsubscribe()
    assert [(r.kind, r.text) for r in replies if r.kind == "final"] == [
        ("final", "Answer one."),
        ("final", "Answer two."),
    ]


def test_a_taken_over_chats_earlier_final_already_sent_holds_back_no_later_final() -> None:
    """A router that took a chat's partition over (a rolling restart: the old router stopped with
    the chat's run under way) learns of the run before it, whose final is due from here, while its
    events durable already runs: that run's `end` can come, and its final go out, before the chat's
    next message registers it as due. It must not then hold back every later final of the chat for
    the 30 s wait (the rolling-restart scenario saw 31 s pauses)."""
    finals = FinalsInOrder()
    finals.sent("t1", "earlier")  # its `end` came first and its final went out
    finals.submitted("t1", "earlier")  # the next message's `continue_chat`: due here, it believed
    finals.submitted("t1", "next")
    assert not finals.must_wait("t1", "next"), "the earlier final is out: the next one goes at once"


def test_an_earlier_final_waited_for_in_vain_holds_back_only_one_later_final() -> None:
    """Once a final has waited its time for an earlier run's that never came, the chat's finals after
    it do not each wait that long again for the same run."""
    finals = FinalsInOrder(wait=0.0)
    for run in ("lost", "second", "third"):
        finals.submitted("t1", run)
    assert not finals.must_wait("t1", "second"), "the wait (0 s here) has lapsed"
    finals.sent("t1", "second")
    finals.wait = 3600.0
    assert not finals.must_wait("t1", "third"), "'lost' was given up on when 'second' went out"
