"""The consumer runtime against a real nats-server: ack, retry, DLQ, concurrency, heartbeats."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from bus import Bus, Consumer, Delivery, Reject, connect_and_provision, list_dead_letters
from bus.capacity import Capacity
from bus.consumer import CAPACITY_STEP
from bus.dlq import H_CONSUMER, H_DELIVERIES, H_REASON, H_SUBJECT
from bus.messages import InboundMessage
from tests.support.consumers import inbound_consumer

pytestmark = pytest.mark.asyncio


class Watch:
    """Messages seen on a core subscription, as an awaitable queue."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()

    async def cb(self, msg: Any) -> None:
        self.queue.put_nowait(msg)

    async def next(self, timeout: float = 10.0) -> Any:
        return await asyncio.wait_for(self.queue.get(), timeout)


@pytest_asyncio.fixture
async def dlq_watch(bus: Bus) -> AsyncIterator[Watch]:
    watch = Watch()
    sub = await bus.nc.subscribe(bus.subjects.dlq_all, cb=watch.cb)
    yield watch
    await sub.unsubscribe()


def chat_consumer(
    bus: Bus, handler: Callable[[InboundMessage, Delivery], Awaitable[None]], **kw: Any
) -> Consumer[InboundMessage]:
    """Every inbound message, redelivered quickly after a failure."""
    return inbound_consumer(bus, handler, **{"backoff": (0.05,), "drain_timeout": 5.0, **kw})


def inbound(text: str = "hi", **kw: Any) -> InboundMessage:
    return InboundMessage(**{"channel": "cli", "chat_id": "c1", "text": text, **kw})


async def test_successful_handler_acks_and_the_work_queue_empties(bus: Bus) -> None:
    done = asyncio.Event()
    seen: list[str] = []

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        seen.append(msg.text)
        done.set()

    async with chat_consumer(bus, handle) as consumer:
        await bus.publish(bus.subjects.chat_in("cli", "c"), inbound("hello"))
        await asyncio.wait_for(done.wait(), 10)
    assert seen == ["hello"]
    assert consumer.stats.acked == 1
    info = await bus.js.stream_info(bus.subjects.chat_in_partition_stream(0))
    assert info.state.messages == 0, "an acked work-queue message is removed from the stream"


async def test_a_failing_handler_sees_the_message_again_then_it_is_dead_lettered_with_the_reason(
    bus: Bus, dlq_watch: Watch
) -> None:
    deliveries: list[int] = []

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        deliveries.append(delivery.num_delivered)
        raise RuntimeError("model endpoint unreachable")

    async with chat_consumer(bus, handle, max_deliver=3):
        await bus.publish(bus.subjects.chat_in("cli", "c"), inbound("poison"))
        letter = await dlq_watch.next()

    assert deliveries == [1, 2, 3]
    assert letter.headers[H_CONSUMER] == "test"
    assert letter.headers[H_DELIVERIES] == "3"
    assert "RuntimeError: model endpoint unreachable" in letter.headers[H_REASON]
    assert letter.headers[H_SUBJECT].startswith(bus.subjects.chat_in("cli", "c"))
    assert InboundMessage.model_validate_json(letter.data).text == "poison", "the original payload is kept"
    info = await bus.js.stream_info(bus.subjects.chat_in_partition_stream(0))
    assert info.state.messages == 0, "the dead letter no longer blocks the work queue"


async def test_a_handler_that_recovers_on_redelivery_is_not_dead_lettered(bus: Bus) -> None:
    done = asyncio.Event()
    attempts = 0

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        nonlocal attempts
        attempts += 1
        if delivery.num_delivered == 1:
            raise ConnectionError("flaky")
        done.set()

    async with chat_consumer(bus, handle) as consumer:
        await bus.publish(bus.subjects.chat_in("cli", "c"), inbound())
        await asyncio.wait_for(done.wait(), 10)
    assert attempts == 2
    assert consumer.stats.dead_lettered == 0
    assert await list_dead_letters(bus) == []


@pytest.mark.parametrize(
    ("payload", "reason_part"),
    [
        pytest.param(b"{not json", "not valid JSON", id="malformed-json"),
        pytest.param(b'{"channel": "cli"}', "chat_id", id="missing-field"),
        pytest.param(b'{"v": 2, "channel": "cli", "chat_id": "c"}', "v:", id="unknown-version"),
        pytest.param(b'["a list"]', "InboundMessage", id="not-an-object"),
    ],
)
async def test_bad_payloads_go_to_the_dlq_at_once_and_the_consumer_keeps_consuming(
    bus: Bus, dlq_watch: Watch, payload: bytes, reason_part: str
) -> None:
    good = asyncio.Event()
    calls = 0

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        nonlocal calls
        calls += 1
        good.set()

    async with chat_consumer(bus, handle):
        await bus.publish(bus.subjects.chat_in("cli", "c"), payload)
        letter = await dlq_watch.next()
        await bus.publish(bus.subjects.chat_in("cli", "c"), inbound("after the bad one"))
        await asyncio.wait_for(good.wait(), 10)

    assert letter.data == payload
    assert letter.headers[H_DELIVERIES] == "1", "bad input is not retried"
    assert letter.headers[H_REASON].startswith("bad input:")
    assert reason_part in letter.headers[H_REASON]
    assert calls == 1, "the handler never saw the bad payload"


async def test_reject_dead_letters_without_retrying(bus: Bus, dlq_watch: Watch) -> None:
    calls = 0

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        nonlocal calls
        calls += 1
        raise Reject("unknown channel 'fax'")

    async with chat_consumer(bus, handle, max_deliver=5):
        await bus.publish(bus.subjects.chat_in("cli", "c"), inbound())
        letter = await dlq_watch.next()
    assert calls == 1
    assert letter.headers[H_REASON] == "rejected: unknown channel 'fax'"


async def test_a_dead_letter_hook_that_fails_is_told_again_before_the_message_is_let_go(bus: Bus) -> None:
    """Whoever waits for a dead-lettered message's outcome (a run's followers) hears of it even when
    telling them failed the first time: the message stays until the hook has run, then goes."""
    told: list[str] = []
    settled = asyncio.Event()

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        raise RuntimeError("always")

    async def on_dead_letter(msg: Any, reason: str) -> None:
        told.append(reason)
        if len(told) == 1:
            raise ConnectionError("the bus went away as the outcome was being told")
        settled.set()

    async with chat_consumer(bus, handle, max_deliver=2, on_dead_letter=on_dead_letter) as consumer:
        await bus.publish(bus.subjects.chat_in("cli", "c"), inbound("poison"))
        await asyncio.wait_for(settled.wait(), 10)
    # Stopping waited for the message's handling: terminated once the hook had returned.
    assert consumer.stats.dead_lettered == 1
    assert len(told) == 2
    assert told[0] == "failed 2 times; last error: RuntimeError: always"
    assert len(await list_dead_letters(bus)) == 1, "dead-lettered again, stored once"
    info = await bus.js.stream_info(bus.subjects.chat_in_partition_stream(0))
    assert info.state.messages == 0


async def test_concurrency_is_bounded_and_every_message_is_handled(bus: Bus) -> None:
    running = peak = 0
    handled: list[str] = []
    all_done = asyncio.Event()

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1
        handled.append(msg.text)
        if len(handled) == 8:
            all_done.set()

    for i in range(8):
        await bus.publish(bus.subjects.chat_in("cli", "c"), inbound(str(i)))
    async with chat_consumer(bus, handle, concurrency=2):
        await asyncio.wait_for(all_done.wait(), 10)
    assert sorted(handled) == [str(i) for i in range(8)]
    assert peak == 2


async def test_heartbeats_keep_a_handler_longer_than_ack_wait_from_being_redelivered(bus: Bus) -> None:
    deliveries: list[int] = []
    done = asyncio.Event()

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        deliveries.append(delivery.num_delivered)
        await asyncio.sleep(2.5)  # more than twice ack_wait
        done.set()

    async with chat_consumer(bus, handle, ack_wait=1.0):
        await bus.publish(bus.subjects.chat_in("cli", "c"), inbound())
        await asyncio.wait_for(done.wait(), 10)
    assert deliveries == [1]


async def test_two_instances_of_one_durable_share_the_work(bus: Bus) -> None:
    seen: dict[str, list[str]] = {"a": [], "b": []}
    total = asyncio.Event()

    def handler_for(name: str) -> Callable[[InboundMessage, Delivery], Awaitable[None]]:
        async def handle(msg: InboundMessage, delivery: Delivery) -> None:
            await asyncio.sleep(0.02)
            seen[name].append(msg.text)
            if len(seen["a"]) + len(seen["b"]) == 20:
                total.set()

        return handle

    async with (
        chat_consumer(bus, handler_for("a"), concurrency=1),
        chat_consumer(bus, handler_for("b"), concurrency=1),
    ):
        for i in range(20):
            await bus.publish(bus.subjects.chat_in("cli", "c"), inbound(str(i)))
        await asyncio.wait_for(total.wait(), 10)
    assert sorted(seen["a"] + seen["b"], key=int) == [str(i) for i in range(20)], "each message handled once"
    assert seen["a"], "both instances took work"
    assert seen["b"], "both instances took work"


async def test_stop_releases_a_message_whose_handler_cannot_finish_in_time(bus: Bus) -> None:
    started = asyncio.Event()
    second = asyncio.Event()

    async def stuck(msg: InboundMessage, delivery: Delivery) -> None:
        started.set()
        await asyncio.sleep(60)

    async def finishes(msg: InboundMessage, delivery: Delivery) -> None:
        second.set()

    consumer = chat_consumer(bus, stuck, drain_timeout=0.2)
    await consumer.start()
    await bus.publish(bus.subjects.chat_in("cli", "c"), inbound())
    await asyncio.wait_for(started.wait(), 10)
    await consumer.stop()
    assert consumer.stats.released == 1
    # Released, not lost: the next instance gets it right away, not after ack_wait.
    async with chat_consumer(bus, finishes, ack_wait=30.0):
        await asyncio.wait_for(second.wait(), 5)


async def test_messages_with_one_key_are_handled_in_order_while_other_keys_go_on(bus: Bus) -> None:
    import random

    seen: dict[str, list[int]] = {"a": [], "b": []}
    running: set[str] = set()
    overlapped = False
    done = asyncio.Event()

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        nonlocal overlapped
        assert msg.chat_id not in running, "two messages of one key at once"
        running.add(msg.chat_id)
        overlapped = overlapped or len(running) > 1
        await asyncio.sleep(random.uniform(0, 0.02))
        seen[msg.chat_id].append(int(msg.text))
        running.discard(msg.chat_id)
        if sum(map(len, seen.values())) == 40:
            done.set()

    for n in range(20):
        for chat in ("a", "b"):
            await bus.publish(bus.subjects.chat_in("cli", "c"), inbound(str(n), chat_id=chat))
    async with chat_consumer(bus, handle, concurrency=8, key=lambda m: m.chat_id):
        await asyncio.wait_for(done.wait(), 20)
    assert seen == {"a": list(range(20)), "b": list(range(20))}
    assert overlapped, "different keys were handled concurrently"


async def test_after_a_long_outage_a_handler_leaves_its_message_to_the_new_delivery(
    tmp_path: Any, bus_config: Any
) -> None:
    from bus import EmbeddedServer

    server = EmbeddedServer(tmp_path / "nats")
    await server.start()
    port = server.port
    conn = await connect_and_provision(server.url, bus_config)
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

    try:
        async with chat_consumer(conn, handle, ack_wait=1.0) as consumer:
            await conn.publish(conn.subjects.chat_in("cli", "c"), inbound("long job"))
            await asyncio.wait_for(started.wait(), 10)
            await server.stop()
            await asyncio.sleep(1.5)  # longer than ack_wait: the server will hand the message out again
            server = EmbeddedServer(tmp_path / "nats", port=port)
            await server.start()
            await asyncio.wait_for(cancelled.wait(), 10)
            await asyncio.wait_for(second.wait(), 15)
        assert deliveries == [1, 2]
        assert consumer.stats.abandoned == 1
        assert consumer.stats.released == 0, "the abandoned delivery was not settled"
    finally:
        await conn.close()
        await server.stop()


async def test_after_a_long_outage_a_keys_next_message_waits_for_the_one_given_up(
    tmp_path: Any, bus_config: Any
) -> None:
    """NATS went away while a chat's first message was handled. The chat's second message, published
    once NATS is back, is new and comes at once; the first comes again only when the server's
    ack_wait for it runs out. The second waits for it: the chat's messages are handled in the order
    they were sent (before, the second went first)."""
    from bus import EmbeddedServer

    server = EmbeddedServer(tmp_path / "nats")
    await server.start()
    port = server.port
    conn = await connect_and_provision(server.url, bus_config)
    handled: list[str] = []
    started, both = asyncio.Event(), asyncio.Event()

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        if msg.text == "one" and delivery.num_delivered == 1:
            started.set()
            await asyncio.Event().wait()  # long work, cut off by the outage
        handled.append(msg.text)
        if len(handled) == 2:
            both.set()

    try:
        # An ack wait well past the outage: "one" comes again seconds after NATS is back.
        consumer = chat_consumer(conn, handle, ack_wait=6.0, key=lambda m: m.chat_id)
        async with consumer:
            await conn.publish(conn.subjects.chat_in("cli", "c1"), inbound("one"))
            await asyncio.wait_for(started.wait(), 10)
            await server.stop()
            await asyncio.sleep(3.5)  # the outage: longer than half the ack wait, so "one" is given up
            server = EmbeddedServer(tmp_path / "nats", port=port)
            await server.start()
            while consumer.stats.abandoned < 1:  # noqa: ASYNC110 - the consumer's own count: back, gave "one" up
                await asyncio.sleep(0.05)
            await conn.publish(conn.subjects.chat_in("cli", "c1"), inbound("two"))
            await asyncio.wait_for(both.wait(), 30)
        assert handled == ["one", "two"]
    finally:
        await conn.close()
        await server.stop()


async def test_a_consumer_started_while_nats_is_away_starts_once_it_is_back(
    tmp_path: Any, bus_config: Any
) -> None:
    """As a component starting while its cluster node is down (or its stream has no leader yet)."""
    from bus import EmbeddedServer

    server = EmbeddedServer(tmp_path / "nats")
    await server.start()
    port = server.port
    conn = await connect_and_provision(server.url, bus_config)
    conn.js = conn.nc.jetstream(timeout=1.0)  # API requests give up sooner than the default 5s
    handled = asyncio.Event()

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        handled.set()

    consumer = chat_consumer(conn, handle)
    try:
        await server.stop()
        starting = asyncio.create_task(consumer.start())
        await asyncio.sleep(2.5)  # longer than an API request's timeout: it has timed out by now
        assert not starting.done(), "the consumer keeps trying while NATS is away"
        server = EmbeddedServer(tmp_path / "nats", port=port)
        await server.start()
        await asyncio.wait_for(starting, 30)
        await conn.publish(conn.subjects.chat_in("cli", "c"), inbound("after the outage"))
        await asyncio.wait_for(handled.wait(), 10)
    finally:
        await consumer.stop()
        await conn.close()
        await server.stop()


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
    again: list[str] = []
    both = asyncio.Event()

    async def record(msg: InboundMessage, delivery: Delivery) -> None:
        again.append(msg.text)
        if len(again) == 2:
            both.set()

    async with chat_consumer(bus, record, **key):
        await asyncio.wait_for(both.wait(), 10)
    assert again == ["slow 1", "slow 2"]


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
    again: list[str] = []
    all_back = asyncio.Event()

    async def record(msg: InboundMessage, delivery: Delivery) -> None:
        again.append(msg.text)
        if len(again) == len(texts):
            all_back.set()

    async with chat_consumer(bus, record, concurrency=1):
        await asyncio.wait_for(all_back.wait(), 10)
    assert again == texts


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
    seen: list[str] = []
    all_seen = asyncio.Event()
    expected = {f"m{i}" for i in range(30)}

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        seen.append(msg.text)
        if set(seen) >= expected:
            all_seen.set()

    async def publish(first: int, last: int) -> None:
        for i in range(first, last):
            await bus.publish(bus.subjects.chat_in("cli", "c"), inbound(f"m{i}"))

    for first in (0, 10, 20):  # three lives of the durable; messages published during each stop
        consumer = chat_consumer(bus, handle, concurrency=3)
        await consumer.start()
        await publish(first, first + 5)
        await asyncio.gather(
            publish(first + 5, first + 10), asyncio.wait_for(consumer.stop(), LONG_WINDOW / 2)
        )
    async with chat_consumer(bus, handle, concurrency=3):
        await asyncio.wait_for(all_seen.wait(), LONG_WINDOW / 2)
    assert sorted(seen) == sorted(expected), "each message handled exactly once"


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
