"""The consumer runtime against a real nats-server when things get in its way: NATS going away
under it, stops while handlers wait or hold messages, a long fetch window, a process without room."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bus import Bus, Delivery, EmbeddedServer, connect_and_provision
from bus.capacity import Capacity
from bus.consumer import CAPACITY_STEP
from bus.messages import InboundMessage
from tests.support.consumers import Texts, chat_consumer, inbound

pytestmark = pytest.mark.asyncio


class OwnServer:
    """A nats-server of the test's own (the session's may not go away), which can go away and come
    back on the same port with the same store, and the test's connection to it."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.server = EmbeddedServer(store)
        self.conn: Bus

    async def start(self, bus_config: Any) -> None:
        await self.server.start()
        self.conn = await connect_and_provision(self.server.url, bus_config)

    async def back(self) -> None:
        """Started again after `server.stop()`."""
        self.server = EmbeddedServer(self.store, port=self.server.port)
        await self.server.start()


@pytest_asyncio.fixture
async def own(tmp_path: Path, bus_config: Any) -> AsyncIterator[OwnServer]:
    own = OwnServer(tmp_path / "nats")
    await own.start(bus_config)
    try:
        yield own
    finally:
        await own.conn.close()
        await own.server.stop()


async def test_after_a_long_outage_a_handler_leaves_its_message_to_the_new_delivery(own: OwnServer) -> None:
    conn = own.conn
    deliveries: list[int] = []
    started, cancelled, second = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        deliveries.append(delivery.num_delivered)
        started.set()
        if delivery.num_delivered > 1:
            second.set()
            return
        try:
            await asyncio.Event().wait()  # long work, cut off by the outage
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async with chat_consumer(conn, handle, ack_wait=1.0) as consumer:
        await conn.publish(conn.subjects.chat_in("cli", "c"), inbound("long job"))
        await asyncio.wait_for(started.wait(), 10)
        await own.server.stop()
        await asyncio.sleep(1.5)  # longer than ack_wait: the server will hand the message out again
        await own.back()
        await asyncio.wait_for(cancelled.wait(), 10)
        await asyncio.wait_for(second.wait(), 15)
    assert deliveries == [1, 2]
    assert consumer.stats.abandoned == 1
    assert consumer.stats.released == 0, "the abandoned delivery was not settled"


async def test_after_a_long_outage_a_keys_next_message_waits_for_the_one_given_up(own: OwnServer) -> None:
    """NATS went away while a chat's first message was handled. The chat's second message, published
    once NATS is back, is new and comes at once; the first comes again only when the server's
    ack_wait for it runs out. The second waits for it: the chat's messages are handled in the order
    they were sent (before, the second went first)."""
    conn = own.conn
    handled: list[str] = []
    started, both = asyncio.Event(), asyncio.Event()

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        if msg.text == "one" and delivery.num_delivered == 1:
            started.set()
            await asyncio.Event().wait()  # long work, cut off by the outage
        handled.append(msg.text)
        if len(handled) == 2:
            both.set()

    # An ack wait well past the outage: "one" comes again seconds after NATS is back.
    consumer = chat_consumer(conn, handle, ack_wait=6.0, key=lambda m: m.chat_id)
    async with consumer:
        await conn.publish(conn.subjects.chat_in("cli", "c1"), inbound("one"))
        await asyncio.wait_for(started.wait(), 10)
        await own.server.stop()
        await asyncio.sleep(3.5)  # the outage: longer than half the ack wait, so "one" is given up
        await own.back()
        while consumer.stats.abandoned < 1:  # noqa: ASYNC110 - the consumer's own count: back, gave "one" up
            await asyncio.sleep(0.05)
        await conn.publish(conn.subjects.chat_in("cli", "c1"), inbound("two"))
        await asyncio.wait_for(both.wait(), 30)
    assert handled == ["one", "two"]


async def test_a_consumer_started_while_nats_is_away_starts_once_it_is_back(own: OwnServer) -> None:
    """As a component starting while its cluster node is down (or its stream has no leader yet)."""
    conn = own.conn
    conn.js = conn.nc.jetstream(timeout=1.0)  # API requests give up sooner than the default 5s
    handled = asyncio.Event()

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        handled.set()

    consumer = chat_consumer(conn, handle)
    try:
        await own.server.stop()
        starting = asyncio.create_task(consumer.start())
        await asyncio.sleep(2.5)  # longer than an API request's timeout: it has timed out by now
        assert not starting.done(), "the consumer keeps trying while NATS is away"
        await own.back()
        await asyncio.wait_for(starting, 30)
        await conn.publish(conn.subjects.chat_in("cli", "c"), inbound("after the outage"))
        await asyncio.wait_for(handled.wait(), 10)
    finally:
        await consumer.stop()


async def test_a_handler_waiting_out_a_limit_and_its_keys_queue_hold_no_slot_and_go_back_in_order_on_stop(
    bus: Bus,
) -> None:
    seen: list[tuple[str, int]] = []
    other_done = asyncio.Event()

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        seen.append((msg.text, delivery.num_delivered))
        if msg.chat_id == "slow":
            await delivery.wait_out(300, release=True)  # a chat told to wait five minutes
        else:
            other_done.set()

    key = {"key": lambda m: m.chat_id, "concurrency": 1}
    async with chat_consumer(bus, handle, **key):
        for text in ("slow 1", "slow 2"):
            await bus.publish(bus.subjects.chat_in("cli", "c"), inbound(text, chat_id="slow"))
        await bus.publish(bus.subjects.chat_in("cli", "c"), inbound("other", chat_id="fast"))
        await asyncio.wait_for(other_done.wait(), 10)
    # The stop did not sit out the wait: both went back to the server, in their order.
    assert seen[:2] == [("slow 1", 1), ("other", 1)], "the waiting chat held neither the slot nor the other"
    again = Texts()
    async with chat_consumer(bus, again, **key):
        assert await again.until(2) == ["slow 1", "slow 2"]


async def test_messages_given_back_at_stop_come_again_in_the_order_they_came_while_a_pull_is_open(
    bus: Bus,
) -> None:
    """A stop with free slots leaves a pull request open on the server after we stop listening; the
    first message given back must not be spent on it (it would come again after the others)."""
    taken: list[str] = []
    five = asyncio.Event()

    async def stuck(msg: InboundMessage, delivery: Delivery) -> None:
        taken.append(msg.text)
        if len(taken) == 5:
            five.set()
        await asyncio.sleep(60)  # never finishes: the stop gives every one back

    texts = [f"reply {n}" for n in range(1, 6)]
    async with chat_consumer(bus, stuck, concurrency=10, drain_timeout=0.2):
        for text in texts:
            await bus.publish(bus.subjects.chat_in("cli", "c"), inbound(text))
        await asyncio.wait_for(five.wait(), 10)
    assert taken == texts
    again = Texts()
    async with chat_consumer(bus, again, concurrency=1):
        assert await again.until(len(texts)) == texts


# A fetch window far longer than any bound below: a message held for the window would fail them.
LONG_WINDOW = 60.0


async def test_an_idle_consumer_handles_a_message_and_stops_while_a_long_fetch_window_is_still_open(
    bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bus.consumer._FETCH_WAIT", LONG_WINDOW)
    seen: asyncio.Queue[str] = asyncio.Queue()

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        seen.put_nowait(msg.text)

    consumer = chat_consumer(bus, handle, concurrency=4)
    await consumer.start()
    for text in ("first", "second", "third"):  # each one to a consumer idle in a lingering pull
        await bus.publish(bus.subjects.chat_in("cli", "c"), inbound(text))
        assert await asyncio.wait_for(seen.get(), LONG_WINDOW / 2) == text
    # Idle again, with a pull request open: stopping does not wait for it to expire.
    await asyncio.wait_for(consumer.stop(), LONG_WINDOW / 2)


async def test_a_burst_while_every_slot_is_busy_is_handled_as_slots_free_up(
    bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bus.consumer._FETCH_WAIT", LONG_WINDOW)
    gates = {f"m{i}": asyncio.Event() for i in range(8)}
    started: asyncio.Queue[str] = asyncio.Queue()
    running: set[str] = set()
    most_at_once = 0

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        nonlocal most_at_once
        running.add(msg.text)
        most_at_once = max(most_at_once, len(running))
        started.put_nowait(msg.text)
        await gates[msg.text].wait()
        running.discard(msg.text)

    async def next_started() -> str:
        return await asyncio.wait_for(started.get(), LONG_WINDOW / 2)

    async with chat_consumer(bus, handle, concurrency=2) as consumer:
        for i in range(8):
            await bus.publish(bus.subjects.chat_in("cli", "c"), inbound(f"m{i}"))
        busy = {await next_started(), await next_started()}
        # Free one slot at a time: each frees exactly one waiting message, long before the window ends.
        handled = set(busy)
        while len(handled) < 8:
            gates[busy.pop()].set()
            text = await next_started()
            handled.add(text)
            busy.add(text)
        for gate in gates.values():
            gate.set()
    assert most_at_once == 2
    assert consumer.stats.acked == 8


async def test_nothing_is_lost_or_handled_twice_across_stop_and_start_with_a_long_fetch_window(
    bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bus.consumer._FETCH_WAIT", LONG_WINDOW)
    seen = Texts()
    expected = {f"m{i}" for i in range(30)}

    async def publish(first: int, last: int) -> None:
        for i in range(first, last):
            await bus.publish(bus.subjects.chat_in("cli", "c"), inbound(f"m{i}"))

    for first in (0, 10, 20):  # three lives of the durable; messages published during each stop
        consumer = chat_consumer(bus, seen, concurrency=3)
        await consumer.start()
        await publish(first, first + 5)
        await asyncio.gather(
            publish(first + 5, first + 10), asyncio.wait_for(consumer.stop(), LONG_WINDOW / 2)
        )
    async with chat_consumer(bus, seen, concurrency=3):
        await seen.until(len(expected), LONG_WINDOW / 2)
    assert sorted(seen.texts) == sorted(expected), "each message handled exactly once"


async def test_bursts_shared_by_two_instances_of_a_durable_are_all_handled_while_a_long_window_is_open(
    bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes of a component (two runners): each one's pull requests see the other's waiting."""
    monkeypatch.setattr("bus.consumer._FETCH_WAIT", LONG_WINDOW)
    seen: list[str] = []
    burst_done = asyncio.Event()
    expected = 0

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        await asyncio.sleep(0.01)  # some work, so slots are busy when the next burst comes
        seen.append(msg.text)
        if len(seen) == expected:
            burst_done.set()

    async with chat_consumer(bus, handle, concurrency=2), chat_consumer(bus, handle, concurrency=2):
        for burst in range(12):
            burst_done.clear()
            for i in range(1 + burst % 5):
                expected += 1
                await bus.publish(bus.subjects.chat_in("cli", "c"), inbound(f"b{burst}m{i}"))
            await asyncio.wait_for(burst_done.wait(), LONG_WINDOW / 2)
    assert len(seen) == len(set(seen)) == expected


class Room(Capacity):
    """A process whose room the test decides (its loop's timer still notices the change)."""

    def __init__(self) -> None:
        super().__init__(max_lag=1.0, max_memory_mb=float("inf"))
        self.room = False

    def has_room(self) -> bool:
        return self.room


async def test_a_process_without_room_leaves_the_rest_in_the_queue_and_takes_it_when_room_comes(
    bus: Bus,
) -> None:
    started: list[str] = []
    step_taken, all_taken, release = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        started.append(msg.text)
        if len(started) == CAPACITY_STEP:
            step_taken.set()
        if len(started) == 20:
            all_taken.set()
        await release.wait()

    for i in range(20):
        await bus.publish(bus.subjects.chat_in("cli", "c"), inbound(str(i)))
    room = Room()
    consumer = chat_consumer(bus, handle, concurrency=100, capacity=room)
    async with consumer:
        await asyncio.wait_for(step_taken.wait(), 10)
        info = await bus.js.consumer_info(bus.subjects.chat_in_partition_stream(0), "test")
        assert info.num_pending == 20 - CAPACITY_STEP, "with no room, the rest stays in the queue"
        assert len(started) == CAPACITY_STEP
        room.room = True  # e.g. the model calls under way now wait on the network
        await asyncio.wait_for(all_taken.wait(), 10)
        release.set()
    assert sorted(started, key=int) == [str(i) for i in range(20)], "each message handled once, none lost"
