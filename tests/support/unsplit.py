"""Installations as versions before the split by partition left them: one `CHAT_IN` stream whose
subject transform appends the chat's partition, with messages waiting in it; one `RUN_EVENTS`; one
`threads`, `runs` and `thread_runs` bucket each."""

from __future__ import annotations

from collections.abc import Callable

from nats.js.api import KeyValueConfig, RetentionPolicy, StorageType, StreamConfig, SubjectTransform
from nats.js.errors import NotFoundError
from nats.js.kv import KeyValue

from bus import Bus, connect_and_provision
from bus.messages import InboundMessage
from bus.split_kv import partition_bucket
from bus.subjects import chat_route, partition_transform
from config import BusConfig


async def make_unsplit_installation(
    nats_url: str, config: BusConfig, *, waiting: int, channel: str = "cli"
) -> Bus:
    """A bus on `config`'s prefix whose chat inbound is the single `CHAT_IN` of earlier versions
    (4 partitions), holding `waiting` messages from as many chats, as their adapters published them.
    Everything else is provisioned as now; the partition streams are not there."""
    bus = await connect_and_provision(nats_url, config)
    s = bus.subjects
    await _unsplit(
        bus, s.chat_in_partition_stream, s.unsplit_chat_in_stream, s.chat_in_all, s.chat_in_published
    )
    for n in range(waiting):
        message = InboundMessage(
            channel=channel, chat_id=f"before-{n}", message_id=f"old-{n}", text=f"old {n}"
        )
        await bus.publish(s.chat_in(channel, message.chat_id), message, msg_id=message.dedupe_id())
    return bus


async def make_unsplit_run_events(nats_url: str, config: BusConfig) -> Bus:
    """A bus on `config`'s prefix whose run events go to the single `RUN_EVENTS` of earlier versions
    (all runs' events; a chat run's stored with its chat's partition of 4 appended), as those
    versions provisioned it. Everything else is provisioned as now; `RUN_EVENTS_<k>` are not there."""
    bus = await connect_and_provision(nats_url, config)
    s = bus.subjects
    await _unsplit(
        bus,
        s.run_events_partition_stream,
        s.unsplit_run_events_stream,
        s.run_events_all,
        f"{s.prefix}.runs.ev.*.chat.*",
        RetentionPolicy.LIMITS,
    )
    return bus


async def _unsplit(
    bus: Bus,
    partition_stream: Callable[[int], str],
    single: str,
    subjects: str,
    partitioned: str,
    retention: RetentionPolicy = RetentionPolicy.WORK_QUEUE,
) -> None:
    """The partition streams replaced by the single stream of earlier versions, whose transform
    appends the partition (of 4) to what matches `partitioned`."""
    for k in range(64):
        try:
            await bus.js.delete_stream(partition_stream(k))
        except NotFoundError:
            break
    await bus.js.add_stream(
        StreamConfig(
            name=single,
            subjects=[subjects],
            subject_transform=SubjectTransform(*partition_transform(partitioned, 4)),
            retention=retention,
            storage=StorageType.FILE,
            num_replicas=bus.config.replicas,
        )
    )


def earlier_runners_subject(bus: Bus, run_id: str, chat: tuple[str, str] | None) -> str:
    """Where a runner of a version from before the split publishes a run's events."""
    s = bus.subjects
    if chat is None:
        return f"{s.prefix}.runs.ev.{run_id}.api"
    return f"{s.prefix}.runs.ev.{run_id}.chat.{chat_route(*chat)}"


async def make_unsplit_buckets(nats_url: str, config: BusConfig) -> Bus:
    """A bus on `config`'s prefix whose `threads`, `runs` and `thread_runs` are the single buckets of
    earlier versions (as their provisioning made them), the buckets per partition not there.
    Everything else is provisioned as now. Write records as those versions did with `legacy_kv`."""
    bus = await connect_and_provision(nats_url, config)
    for bucket in bus.subjects.split_buckets:
        for k in range(64):
            try:
                await bus.js.delete_stream(f"KV_{partition_bucket(bucket, k)}")
            except NotFoundError:
                break
        await bus.js.create_key_value(
            KeyValueConfig(
                bucket=bucket, history=1, storage=StorageType.FILE, replicas=bus.config.replicas, direct=True
            )
        )
    return bus


async def legacy_kv(bus: Bus, bucket: str) -> KeyValue:
    """The single bucket of before the split, as an earlier version reads and writes it."""
    return await bus.js.key_value(bucket)
