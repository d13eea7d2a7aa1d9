"""Idempotent creation of the streams, KV buckets and object store (docs/architecture.md).

Every component provisions on start, so they can start in any order; running it
twice changes nothing, and a changed setting (a longer max age, say) is applied
by updating the stream in place.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass

from nats.js.api import (
    DiscardPolicy,
    KeyValueConfig,
    ObjectStoreConfig,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    StreamInfo,
)
from nats.js.errors import APIError, BadRequestError, BucketNotFoundError, NotFoundError

from bus.chat_partitions import COUNT_KEY, count_to_provision
from bus.chat_partitions import DEFAULT as DEFAULT_PARTITIONS
from bus.chat_partitions import MAX as MAX_PARTITIONS
from bus.connection import Bus
from bus.errors import BusError
from bus.split_kv import COUNT_KEY as KV_COUNT_KEY
from bus.split_kv import partition_bucket
from bus.split_kv_retire import retire_all
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
    # partition's router consumes both. Inbound messages go to one stream per partition (publishers
    # add the partition: bus.chat_partitions.chat_in_subject), so their leaders spread over a cluster.
    partitions = partitions or c.chat_partitions or DEFAULT_PARTITIONS
    chat_in = [
        stream(
            s.chat_in_partition_stream(k),
            # Partition 0 also takes what is published without a partition: without the chat's route
            # (scripts), or as adapters of earlier versions publish (served by their own durables).
            [s.chat_in_partition(k)] + ([s.chat_in_direct, s.chat_in_published] if k == 0 else []),
            f"Inbound chat messages of chat partition {k} of {partitions}",
            metadata={COUNT_KEY: str(partitions)},
            **work,
        )
        for k in range(partitions)
    ]
    return [
        *chat_in,
        stream(
            s.chat_out_stream,
            [s.chat_out_all],
            "Replies for chat channels, one durable per adapter",
            retention=RetentionPolicy.LIMITS,
            max_age=c.chat_out_max_age_hours * HOUR,
        ),
        stream(s.runs_stream, [s.runs_submit], "Run requests for agent runners", **work),
        *(
            stream(
                s.run_events_partition_stream(k),
                s.run_events_partition_subjects(k),
                f"Ordered event logs of runs, partition {k} of {partitions}: its chats' runs and other "
                "runs by id",
                metadata={COUNT_KEY: str(partitions)},
                retention=RetentionPolicy.LIMITS,
                max_age=c.run_events_max_age_hours * HOUR,
            )
            for k in range(partitions)
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


async def provision(bus: Bus, *, retire: bool = False) -> Provisioned:
    """Create or update everything; safe to run any number of times, concurrently too.

    Args:
        retire: also remove the single `CHAT_IN` and `RUN_EVENTS` of an installation made before
            the split by partition, once they are empty, and move the records of its single
            `threads`, `runs` and `thread_runs` buckets to the buckets per partition, then remove
            them, once no process of an earlier version is heard (`bus.split_kv.retire_all`: it
            listens `LISTEN` seconds, then waits `REFRESH` seconds and a margin). `antler
            provision` does; components starting do not, as components of the earlier version
            may still use them.
    """
    streams = []
    # The chat streams' partition count is theirs to keep: changed only while nothing waits in CHAT_IN.
    count = await count_to_provision(bus)
    s = bus.subjects
    # The single CHAT_IN of before: it takes nothing new (a subject nobody publishes on); the
    # routers drain what waits in it with the durables they had.
    await _narrow_unsplit(
        bus, s.unsplit_chat_in_stream, [s.full("unsplit.chat.in")], retire=retire, transform=False
    )
    # The single RUN_EVENTS: it keeps taking what earlier versions' runners publish during an
    # upgrade (bus.run_events; readers read it too) until its max_age has emptied it.
    await _narrow_unsplit(
        bus, s.unsplit_run_events_stream, s.unsplit_run_events, retire=retire, transform=True
    )
    for config in stream_configs(bus, count):
        await _ensure_stream(bus, config)
        streams.append(config.name or "")
    await _drop_partition_streams_beyond(bus, count)
    # The buckets written every turn: one per partition each, their leaders spread as the streams'.
    buckets = []
    split_names = {split: await _ensure_split_kv(bus, split, count) for split in s.split_buckets}
    for names in split_names.values():
        buckets += names
    if retire:  # records of a bucket from before the split moved, then the bucket removed
        await retire_all(bus)
    buckets += [
        s.chats_bucket,
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
    # Background tasks (list_background_tasks): as long as their outcomes are kept.
    await _ensure_kv(bus, s.background_tasks_bucket, ttl=bus.config.subagent_results_ttl_hours * HOUR)
    # Model budgets (llm.budget): leases with their own TTL; watchers see the ones that lapse.
    await _ensure_kv(bus, s.bucket("model_slots"), marker_ttl=60.0)
    # Leases (bus.leases): routers' partitions, adapters' single connections; each with its own TTL.
    await _ensure_kv(bus, s.leases_bucket, marker_ttl=60.0)
    buckets += [
        s.replies_bucket,
        s.subagent_results_bucket,
        s.background_tasks_bucket,
        s.bucket("users"),
        s.bucket("login_failures"),
        s.bucket("access"),
        s.bucket("usage"),
        s.bucket("model_slots"),
        s.leases_bucket,
    ]
    await _drop_unpartitioned_router(bus)
    await _ensure_object_store(bus, s.files_store)
    # Last, when everything exists: a leader moved is an election, and the API answers slower meanwhile.
    # The buckets may have another count than the streams (theirs is fixed): spread on their own then.
    kinds = [
        [s.chat_in_partition_stream(k) for k in range(count)],
        [s.run_events_partition_stream(k) for k in range(count)],
        *([f"KV_{name}" for name in names] for names in split_names.values()),
    ]
    alike = [kind for kind in kinds if len(kind) == count]
    await spread_leaders(bus, [stream for kind in alike for stream in kind], groups=len(alike))
    for kind in kinds:
        if len(kind) != count:
            await spread_leaders(bus, kind)
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


async def _narrow_unsplit(
    bus: Bus, stream: str, subjects: list[str], *, retire: bool, transform: bool
) -> None:
    """A single stream of an installation made before the split by partition (`CHAT_IN`,
    `RUN_EVENTS`): it keeps only `subjects` (none that the partition streams take), with its subject
    transform if `transform`, and keeps what it holds for the routers (and readers) of the new
    version. With `retire`, an empty one is removed (docs/operating.md, "Moving to streams per
    partition")."""
    try:
        info = await bus.js.stream_info(stream)
    except NotFoundError:
        return
    if retire and not info.state.messages:
        await bus.js.delete_stream(stream)
        log.info("removed %s, emptied after the split by partition", stream)
        return
    if info.config.subjects != subjects:
        info.config.subjects = subjects
        if not transform:
            info.config.subject_transform = None
        await bus.js.update_stream(info.config)
        log.info("%s keeps %d message(s) from before the split by partition", stream, info.state.messages)


async def spread_leaders(bus: Bus, streams: list[str], *, groups: int = 1) -> dict[str, str]:
    """Give the partition streams' leaders to the cluster's nodes in turn (the `k`-th stream to the
    `k`-th node by name, of those holding a copy) unless they are already even (no node leads two
    more than another, over all of them and within each of the `groups` equal parts of `streams`:
    one kind's partitions each); JetStream alone places leaders at random, which leaves them all on
    one node now and then. With several kinds in turn, the node that leads one partition more than
    the others differs from kind to kind (4 partitions on 3 nodes: 7, 7 and 6 of 5 kinds' 20), not
    always the same. A leader is moved by asking it to step down in favour of the chosen node
    (nats-server 2.11+), one at a time; one that cannot move stays where it is. Nothing to do on
    one server.

    Returns:
        Each stream's leader afterwards, as far as known (empty on one server).
    """
    infos = []
    for stream in streams:
        info = await bus.js.stream_info(stream)
        if info.cluster is None or not info.cluster.leader or not info.cluster.replicas:
            return {}
        infos.append(info)
    nodes = sorted({name for info in infos for name in _peers(info)})
    leaders = {info.config.name or "": info.cluster.leader or "" for info in infos if info.cluster}
    size = max(1, len(infos) // max(1, groups))
    parts = [list(leaders.values())] + [
        list(leaders.values())[i : i + size] for i in range(0, len(infos), size)
    ]
    led = [[sum(1 for leader in part if leader == node) for node in nodes] for part in parts]
    if all(max(counts) - min(counts) <= 1 for counts in led):
        return leaders  # as even as it gets: moving leaders would only pause their streams
    for k, info in enumerate(infos):
        name, leader = info.config.name or "", info.cluster.leader if info.cluster else None
        wanted = nodes[k % len(nodes)]
        leaders[name] = leader or ""
        if leader == wanted or wanted not in _peers(info):
            continue
        request = json.dumps({"placement": {"preferred": wanted}}).encode()
        try:
            reply = await bus.nc.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{name}", request, timeout=5)
        except Exception as exc:  # a slow election, an older server: the leader stays put
            log.warning(
                "stream %s keeps its leader %s (could not move it to %s: %s)", name, leader, wanted, exc
            )
            continue
        if json.loads(reply.data or b"{}").get("success"):
            leaders[name] = wanted
            log.info("stream %s: leader moved from %s to %s", name, leader, wanted)
            await _elected(bus, name)
    return leaders


async def _elected(bus: Bus, stream: str, timeout: float = 10.0) -> None:
    """Until the stream answers with a leader again (one election at a time: several at once left
    the JetStream API slow to answer on a loaded machine), at most `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        try:
            info = await bus.js.stream_info(stream)
            if info.cluster is not None and info.cluster.leader:
                return
        except Exception:  # no leader yet: the API may not answer for this stream meanwhile
            pass
        await asyncio.sleep(0.1)


def _peers(info: StreamInfo) -> set[str]:
    cluster = info.cluster
    if cluster is None:
        return set()
    return {name for name in (cluster.leader, *(peer.name for peer in cluster.replicas or [])) if name}


async def _drop_partition_streams_beyond(bus: Bus, count: int) -> None:
    """Partition streams of a larger count than now (changed only while they were empty)."""
    for k in range(count, MAX_PARTITIONS):
        stream = bus.subjects.chat_in_partition_stream(k)
        try:
            info = await bus.js.stream_info(stream)
        except NotFoundError:
            return
        if info.state.messages:
            log.warning(
                "%s holds %d message(s) but is beyond the partition count", stream, info.state.messages
            )
            continue
        await bus.js.delete_stream(stream)
        log.info("removed %s (the chat streams have %d partitions now)", stream, count)


async def _drop_unpartitioned_router(bus: Bus) -> None:
    """Remove the durables of routers from before partitioning (one durable over all chat messages,
    one over all run events): on a work queue, an overlapping filter would stop the partitions'
    durables from being created. Messages stay in their streams."""
    s = bus.subjects
    for stream, durable in (
        (s.unsplit_chat_in_stream, "router"),
        (s.unsplit_run_events_stream, "router-projection"),
    ):
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
        "and restart it, or lower the streams' size limits in config.yaml (bus.audit_max_mb, 1024 "
        "by default; bus.memory_updates_max_mb, 256)"
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


async def _ensure_split_kv(bus: Bus, bucket: str, count: int) -> list[str]:
    """The partition buckets of `bucket` (`bus.split_kv`): as many as they were first made with
    (their count never changes: a key's bucket is computed from it), else `count`; each says the
    count in its stream's metadata (their leaders are spread over a cluster's nodes by `provision`)."""
    first = f"KV_{partition_bucket(bucket, 0)}"
    try:
        made = (await bus.js.stream_info(first)).config.metadata or {}
        count = int(made.get(KV_COUNT_KEY) or count)
    except NotFoundError:
        pass
    names = [partition_bucket(bucket, k) for k in range(count)]
    for name in names:
        await _ensure_kv(bus, name)
        info = await bus.js.stream_info(f"KV_{name}")
        if (info.config.metadata or {}).get(KV_COUNT_KEY) != str(count):
            info.config.metadata = {**(info.config.metadata or {}), KV_COUNT_KEY: str(count)}
            await bus.js.update_stream(info.config)
    return names


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
