"""Idempotent creation of the streams, KV buckets and object store (docs/architecture.md).

Every component provisions on start, so they can start in any order; running it
twice changes nothing, and a changed setting (a longer max age, say) is applied
by updating the stream in place.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from nats.js.api import (
    DiscardPolicy,
    KeyValueConfig,
    ObjectStoreConfig,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    SubjectTransform,
)
from nats.js.errors import APIError, BadRequestError, BucketNotFoundError, NotFoundError

from bus.chat_partitions import DEFAULT as DEFAULT_PARTITIONS
from bus.chat_partitions import count_to_provision
from bus.connection import Bus
from bus.errors import BusError
from bus.subjects import partition_transform
from config import BusConfig

log = logging.getLogger(__name__)

HOUR = 3600.0
DAY = 24 * HOUR


@dataclass(frozen=True)
class Provisioned:
    streams: list[str]
    buckets: list[str]
    object_stores: list[str]


def stream_configs(bus: Bus, partitions: int | None = None) -> list[StreamConfig]:
    """The streams, configured from `bus.config`; the chat streams with `partitions` partitions
    (default: the configured count, else `bus.chat_partitions.DEFAULT`)."""
    s, c = bus.subjects, bus.config
    dedupe = c.dedupe_window_seconds

    def stream(name: str, subjects: list[str], description: str, **kw: object) -> StreamConfig:
        return StreamConfig(
            name=name,
            subjects=subjects,
            description=description,
            storage=StorageType.FILE,
            num_replicas=c.replicas,
            **{"duplicate_window": dedupe, **kw},  # type: ignore[arg-type]  # StreamConfig fields by name
        )

    work = {"retention": RetentionPolicy.WORK_QUEUE}
    # A chat's messages and its runs' events are stored with the chat's partition appended, so each
    # partition's router consumes both; publishers never need to know the partition count.
    partitions = partitions or c.chat_partitions or DEFAULT_PARTITIONS
    chat_in = SubjectTransform(*partition_transform(s.chat_in_published, partitions))
    chat_events = SubjectTransform(*partition_transform(s.chat_run_events_published, partitions))
    return [
        stream(
            s.chat_in_stream,
            [s.chat_in_all],
            "Inbound chat messages (adapters, scripts), by chat partition",
            subject_transform=chat_in,
            **work,
        ),
        stream(
            s.chat_out_stream,
            [s.chat_out_all],
            "Replies for chat channels, one durable per adapter",
            retention=RetentionPolicy.LIMITS,
            max_age=c.chat_out_max_age_hours * HOUR,
        ),
        stream(s.runs_stream, [s.runs_submit], "Run requests for agent runners", **work),
        stream(
            s.run_events_stream,
            [s.run_events_all],
            "Ordered event log of every run (a chat's runs by chat partition)",
            subject_transform=chat_events,
            retention=RetentionPolicy.LIMITS,
            max_age=c.run_events_max_age_hours * HOUR,
        ),
        stream(
            s.subagents_stream,
            [s.subagents_submit],
            "Subagent tasks",
            # A parent run resumed hours later submits its task again: still the same task.
            duplicate_window=c.subagent_results_ttl_hours * HOUR,
            **work,
        ),
        stream(
            s.memory_stream,
            [s.memory_update_all],
            "Conversations to learn memory from: the newest per thread, bounded if no updater runs",
            max_msgs_per_subject=1,
            max_age=c.memory_updates_max_age_hours * HOUR,
            max_bytes=int(c.memory_updates_max_mb * 1024 * 1024),
            discard=DiscardPolicy.OLD,
            **work,
        ),
        stream(
            s.events_stream,
            [s.events_all],
            "Announcements (a thread deleted, ...): each interested component has its own durable",
            retention=RetentionPolicy.LIMITS,
            max_age=7 * DAY,
        ),
        stream(
            s.dlq_stream,
            [s.dlq_all],
            "Dead letters: original messages plus the reason they failed",
            retention=RetentionPolicy.LIMITS,
            max_age=c.dlq_max_age_days * DAY,
            discard=DiscardPolicy.OLD,
        ),
        stream(
            s.stream("AUDIT"),
            [s.full("audit.>")],
            "The audit trail: sign-ins, role and admin changes, runs, tool calls, refusals (access/audit.py)",
            retention=RetentionPolicy.LIMITS,
            max_age=c.audit_max_age_days * DAY,
            max_bytes=c.audit_max_mb * 1024 * 1024,
            discard=DiscardPolicy.OLD,
        ),
        stream(
            s.schedules_stream,
            [s.schedule_definitions_all, s.schedule_firings_all],
            "Scheduled tasks: one definition per task the server fires on its schedule, and the firings",
            # The server fires definitions itself (ADR-51); a definition is replaced by publishing
            # anew (the server rolls its subject up) and removed by a rollup with a short TTL.
            allow_msg_schedules=True,
            allow_rollup_hdrs=True,
            allow_msg_ttl=True,
            **work,
        ),
    ]


REPLIES_TTL = 24 * 3600.0  # seconds a streaming reply's message id is kept


async def provision(bus: Bus) -> Provisioned:
    """Create or update everything; safe to run any number of times, concurrently too."""
    streams = []
    # The chat streams' partition count is theirs to keep: changed only while nothing waits in CHAT_IN.
    for config in stream_configs(bus, await count_to_provision(bus)):
        await _ensure_stream(bus, config)
        streams.append(config.name or "")
    s = bus.subjects
    buckets = [
        s.threads_bucket,
        s.chats_bucket,
        s.runs_bucket,
        s.thread_runs_bucket,
        s.memory_bucket,
        s.settings_bucket,
        s.agents_bucket,
        s.schedules_bucket,
        s.schedule_runs_bucket,
    ]
    for bucket in buckets:
        await _ensure_kv(bus, bucket)
    await _ensure_kv(bus, s.replies_bucket, ttl=REPLIES_TTL)
    # Accounts (the gateway's sign-in) and failed sign-ins, which go after a day at the latest.
    await _ensure_kv(bus, s.bucket("users"))
    await _ensure_kv(bus, s.bucket("login_failures"), ttl=DAY)
    # Teams (access/): people's roles, chat users linked to accounts, /connect codes (per-key TTL).
    await _ensure_kv(bus, s.bucket("access"), marker_ttl=60.0)
    # Per-person budgets (access.usage): a day's and a month's counters, kept 62 days after their last write.
    await _ensure_kv(bus, s.bucket("usage"), ttl=62 * DAY)
    await _ensure_kv(bus, s.subagent_results_bucket, ttl=bus.config.subagent_results_ttl_hours * HOUR)
    # Model budgets (llm.budget): leases with their own TTL; watchers see the ones that lapse.
    await _ensure_kv(bus, s.bucket("model_slots"), marker_ttl=60.0)
    # Leases (bus.leases): routers' partitions, adapters' single connections; each with its own TTL.
    await _ensure_kv(bus, s.leases_bucket, marker_ttl=60.0)
    buckets += [
        s.replies_bucket,
        s.subagent_results_bucket,
        s.bucket("users"),
        s.bucket("login_failures"),
        s.bucket("access"),
        s.bucket("usage"),
        s.bucket("model_slots"),
        s.leases_bucket,
    ]
    await _drop_unpartitioned_router(bus)
    await _ensure_object_store(bus, s.files_store)
    log.debug("provisioned %d streams, %d buckets, 1 object store", len(streams), len(buckets))
    return Provisioned(streams=streams, buckets=buckets, object_stores=[s.files_store])


async def connect_and_provision(
    url: str, config: BusConfig | None = None, *, name: str = "antler", inbox_prefix: str | None = None
) -> Bus:
    """`Bus.connect`, then `provision`: what the admin does before any component starts.

    Raises:
        BusConnectError: the first connection attempt failed.
        BusError: provisioning failed (the connection is closed then, not left reconnecting forever
            behind the error).
    """
    bus = await Bus.connect(url, config, name=name, inbox_prefix=inbox_prefix)
    try:
        await provision(bus)
    except BaseException:
        await bus.close()
        raise
    return bus


async def _drop_unpartitioned_router(bus: Bus) -> None:
    """Remove the durables of routers from before partitioning (one durable over all chat messages,
    one over all run events): on a work queue, an overlapping filter would stop the partitions'
    durables from being created. Messages stay in their streams."""
    s = bus.subjects
    for stream, durable in ((s.chat_in_stream, "router"), (s.run_events_stream, "router-projection")):
        try:
            await bus.js.delete_consumer(stream, durable)
            log.info("removed the unpartitioned router durable %s/%s", stream, durable)
        except NotFoundError:
            pass


NO_STORAGE = 10047  # JetStream's "insufficient storage resources available"


def _no_room(config: StreamConfig) -> BusError:
    """A stream with a size limit reserves it out of JetStream's store, which nats-server sizes
    from the disk's free space when it starts (75 %) unless its config sets `max_file_store`."""
    size = (
        f" {config.max_bytes / 1024 / 1024:.0f} MB for" if config.max_bytes and config.max_bytes > 0 else ""
    )
    return BusError(
        f"the bus has no room to reserve{size} stream {config.name}: JetStream's store is sized from "
        "the disk space free when nats-server started. Free disk space where the bus keeps its data "
        "and restart it, or lower bus.memory_updates_max_mb in config.yaml"
    )


async def _ensure_stream(bus: Bus, config: StreamConfig) -> None:
    assert config.name is not None
    try:
        await bus.js.stream_info(config.name)
    except NotFoundError:
        try:
            await bus.js.add_stream(config)
            log.info("created stream %s", config.name)
            return
        except BadRequestError as exc:
            if exc.err_code != 10058:  # not "already in use": a real problem
                raise BusError(f"cannot create stream {config.name}: {exc.description}") from None
            # another process created it concurrently; fall through to update
        except APIError as exc:
            if exc.err_code == NO_STORAGE:
                raise _no_room(config) from None
            raise
    try:
        await bus.js.update_stream(config)
    except APIError as exc:
        if exc.err_code == NO_STORAGE:
            raise _no_room(config) from None
        if not isinstance(exc, BadRequestError):
            raise
        raise BusError(
            f"stream {config.name} exists with settings that cannot be changed in place "
            f"({exc.description}); delete it (nats stream rm {config.name}) or use another bus.prefix"
        ) from None


async def _ensure_kv(
    bus: Bus, bucket: str, ttl: float | None = None, marker_ttl: float | None = None
) -> None:
    """The bucket, created if missing; on one server it answers reads by direct get.

    A direct get is a plain request answered with the stored message; without it nats-py reads
    a key through the JSON stream API (the value and headers in base64, headers parsed by
    `email.parser`), several times the CPU in client and server for the same answer. Only on
    one server (`replicas` 1): in a cluster every replica answers direct gets, and a follower
    may not have the latest write yet, which our compare-and-set reads must see.
    """
    direct = bus.config.replicas == 1
    stream = f"KV_{bucket}"
    try:
        info = await bus.js.stream_info(stream)
    except NotFoundError:
        await bus.js.create_key_value(
            KeyValueConfig(
                bucket=bucket,
                history=1,
                storage=StorageType.FILE,
                ttl=ttl,
                replicas=bus.config.replicas,
                limit_marker_ttl=marker_ttl,  # markers for entries whose TTL ran out, seen by watchers
                direct=direct or None,
            )
        )
        log.info("created KV bucket %s", bucket)
        return
    if direct and not info.config.allow_direct:  # a bucket made before direct gets were used
        info.config.allow_direct = True
        try:
            await bus.js.update_stream(info.config)
        except BadRequestError as exc:  # e.g. a server too old for it: reads work as they did
            log.warning("KV bucket %s keeps reads through the stream API: %s", bucket, exc.description)


async def _ensure_object_store(bus: Bus, bucket: str) -> None:
    try:
        await bus.js.object_store(bucket)
    except (BucketNotFoundError, NotFoundError):
        await bus.js.create_object_store(
            bucket, ObjectStoreConfig(bucket=bucket, storage=StorageType.FILE, replicas=bus.config.replicas)
        )
        log.info("created object store %s", bucket)
