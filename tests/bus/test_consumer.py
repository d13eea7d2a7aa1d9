"""The consumer runtime against a real nats-server: ack, retry, DLQ, concurrency, heartbeats."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from bus import AfterEarlier, Bus, Defer, Delivery, Reject, list_dead_letters
from bus.dlq import H_CONSUMER, H_DELIVERIES, H_REASON, H_SUBJECT
from bus.messages import InboundMessage
from tests.support.consumers import chat_consumer, inbound

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


async def test_a_keyed_message_whose_handler_failed_is_handled_again_before_its_keys_next_one(
    bus: Bus,
) -> None:
    """A chat's message whose handling fails (the bus away a moment) comes again after a backoff;
    the chat's next message, already delivered and waiting for its turn, waits for it: a chat's
    messages become runs in the order sent. Another chat goes on meanwhile."""
    handled: list[str] = []
    failed = False
    done = asyncio.Event()
    other_done = asyncio.Event()

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        nonlocal failed
        if msg.text == "a1" and not failed:
            failed = True
            # The other chat's message, published after a2, is handled first: a2 has arrived and
            # waits for its turn when this one fails.
            await asyncio.wait_for(other_done.wait(), 10)
            raise ConnectionError("the bus went away")
        handled.append(msg.text)
        if msg.text == "b1":
            other_done.set()
        if len(handled) == 4:
            done.set()

    for text, chat in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("a3", "a")):
        await bus.publish(bus.subjects.chat_in("cli", "c"), inbound(text, chat_id=chat))
    # The retry comes after 0.5 s: the other chat's message is handled long before it.
    async with chat_consumer(bus, handle, concurrency=8, key=lambda m: m.chat_id, backoff=(0.5,)):
        await asyncio.wait_for(done.wait(), 20)
    assert [t for t in handled if t.startswith("a")] == ["a1", "a2", "a3"]
    assert handled[0] == "b1", handled


async def test_a_keyed_message_found_ahead_of_an_earlier_one_waits_for_it_without_a_redelivery(
    bus: Bus,
) -> None:
    """A handler that finds an earlier message of its key not handled yet (the router: a chat's
    message lost on the way in an outage, coming again later) raises `AfterEarlier`: its message
    waits in the consumer for that one, is handled right after it, and counts no delivery."""
    handled: list[str] = []
    deliveries: dict[str, list[int]] = {}
    seqs: dict[str, int] = {}
    deferred = False
    done = asyncio.Event()

    async def handle(msg: InboundMessage, delivery: Delivery) -> None:
        nonlocal deferred
        seqs[msg.text] = delivery.stream_seq
        deliveries.setdefault(msg.text, []).append(delivery.num_delivered)
        if msg.text == "a1" and not deferred:
            deferred = True
            raise Defer(0.5)  # (as if lost on the way: it comes again in a moment)
        if msg.text == "a2" and "a1" not in handled:
            raise AfterEarlier(seqs["a1"])
        handled.append(msg.text)
        if len(handled) == 3:
            done.set()

    for text, chat in (("a1", "a"), ("a2", "a"), ("b1", "b")):
        await bus.publish(bus.subjects.chat_in("cli", "c"), inbound(text, chat_id=chat))
    async with chat_consumer(bus, handle, concurrency=8, key=lambda m: m.chat_id):
        await asyncio.wait_for(done.wait(), 20)
    assert [t for t in handled if t.startswith("a")] == ["a1", "a2"]
    assert handled[0] == "b1", handled
    assert deliveries["a2"] == [1, 1], "it waited in the consumer, not for a redelivery"


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
