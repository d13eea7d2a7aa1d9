"""Streams per chat partition (inbound messages and run events) and the buckets written every turn
(threads, runs, thread_runs: one per partition) on a three-node cluster: their leaders are on more
than one node, and chats of every partition are answered through them."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from bus.chat_partitions import chat_partitions, partition_of
from bus.split_kv import partition_bucket
from bus.subjects import chat_route
from tests.faults.budget import ONE_AT_A_TIME, TIMEOUT
from tests.faults.harness import NatsCluster, UpFactory, admin_bus
from tests.faults.load import CHANNEL
from tests.support.chat import Chat

pytestmark = [pytest.mark.asyncio, TIMEOUT, ONE_AT_A_TIME]


def chat_in_partition(partition: int, count: int, nth: int = 0) -> str:
    """The `nth` chat id (from 0) whose chat falls in `partition`."""
    found = (
        f"p{partition}-{n}"
        for n in range(10_000)
        if partition_of(chat_route(CHANNEL, f"p{partition}-{n}"), count) == partition
    )
    return next(itertools.islice(found, nth, None))


async def test_partition_streams_lead_from_several_nodes_and_every_partition_answers(
    tmp_path: Path, fault_config: Callable[..., Path], antler_up: UpFactory, cluster: NatsCluster
) -> None:
    up = antler_up(fault_config(url=cluster.url, replicas=3))
    await up.start()
    bus = await admin_bus(cluster.url, tmp_path / "data")
    try:
        count = await chat_partitions(bus)
        s = bus.subjects
        for stream_of in (s.chat_in_partition_stream, s.run_events_partition_stream):
            leaders = {}
            for k in range(count):
                info = await bus.js.stream_info(stream_of(k))
                assert info.cluster is not None
                assert len(info.cluster.replicas or []) == 2, "three copies of each partition's stream"
                leaders[k] = info.cluster.leader
            assert len(set(leaders.values())) > 1, f"every partition led by one node: {leaders}"
            # Provisioning hands them out in turn: with 4 partitions, every node leads one or two.
            assert set(leaders.values()) == {"n1", "n2", "n3"}, leaders
        # Two chats per partition: their threads' records are spread by the threads' (random) ids, and
        # eight of them all in one bucket of four is a chance in 16,000 (four: one in 64).
        chats = [(k, n) for k in range(count) for n in range(2)]
        async with Chat(bus, channel=CHANNEL) as chat:
            for k, n in chats:
                await chat.say(
                    f"hello partition {k}", chat_id=chat_in_partition(k, count, n), message_id=f"m{k}-{n}"
                )
            answered = {(await chat.final(timeout=60)).reply_to for _ in chats}
        assert answered == {f"m{k}-{n}" for k, n in chats}
        for k in range(count):  # each came through its own partition's streams
            for stream in (s.chat_in_partition_stream(k), s.run_events_partition_stream(k)):
                info = await bus.js.stream_info(stream)
                assert info.state.last_seq >= 1, f"{stream} took no message"
        # The buckets written every turn are one per partition too, led from every node; and over
        # the streams and buckets of every kind, no node leads two more than another (the node
        # leading a kind's fourth partition is not the same one for every kind).
        every_kind = [
            *(s.chat_in_partition_stream(k) for k in range(count)),
            *(s.run_events_partition_stream(k) for k in range(count)),
            *(f"KV_{partition_bucket(bucket, k)}" for bucket in s.split_buckets for k in range(count)),
        ]
        led = Counter([(await bus.js.stream_info(name)).cluster.leader for name in every_kind])  # type: ignore[union-attr]
        assert max(led.values()) - min(led.values()) <= 1, led
        for bucket in s.split_buckets:
            names = [partition_bucket(bucket, k) for k in range(count)]
            leaders = {}
            for name in names:
                info = await bus.js.stream_info(f"KV_{name}")
                assert info.cluster is not None
                assert len(info.cluster.replicas or []) == 2, f"three copies of {name}"
                leaders[name] = info.cluster.leader
            assert set(leaders.values()) == {"n1", "n2", "n3"}, leaders
            written = [(await bus.js.stream_info(f"KV_{name}")).state.last_seq for name in names]
            assert sum(1 for seq in written if seq) > 1, (
                f"the turns' records all went to one {bucket}: {written}"
            )
    finally:
        await bus.close()
