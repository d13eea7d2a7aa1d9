"""How many partitions the chat traffic has: what the chat streams were made with, not each
process's configuration; and which partition a chat is in.

Inbound chat messages are stored in one stream per partition (`CHAT_IN_<k>`, so their leaders
spread over a cluster's nodes); publishers add the chat's partition to the subject
(`chat_in_subject`), computed with nats-server's own `partition()` hash (`partition_of`).
Run events are split the same way (`RUN_EVENTS_<k>`, `bus.run_events`). Each partition has its
own pair of router durables.
The count in the streams is the one that decides where messages wait, so routers serve exactly
that many partitions, whatever their own `bus.chat_partitions` says: a router configured
differently from the streams would leave the chats of the partitions it does not know unanswered.

Choosing the count when provisioning:

- a new installation takes `bus.chat_partitions`, or `DEFAULT` (4) when it is not set;
- an existing one keeps its count when `bus.chat_partitions` is not set (an installation made
  when the default was 16 keeps 16);
- a different count that is set is applied only while `CHAT_IN` holds no message: a message
  stored under the old count's partition would otherwise wait for a router that never comes.
  Until then provisioning keeps the old count and says so. Running routers follow a changed
  count at their next look (`channels.partitions.Partitions`).

Why 4 by default: each partition is two durables on the server, and nats-server writes a
durable's state to disk after every delivery and ack (coalesced over 10 ms). At 50 chats at once
16 partitions cost the server about 1.5 ms of CPU more per turn than 4 (~35 % of its share;
docs/performance.md), and 4 partitions let 4 routers share the work, past what one
installation's runners need (docs/scaling.md).
"""

from __future__ import annotations

import asyncio
import logging
import re
import weakref

from nats.js.api import PubAck, StreamInfo
from nats.js.errors import NoStreamResponseError, NotFoundError

from bus.connection import Bus
from bus.messages import InboundMessage

log = logging.getLogger(__name__)

DEFAULT = 4
MAX = 64  # partition streams a component's NATS user may use (bus.permissions names each)
COUNT_KEY = "antler_partitions"  # the count, in every `CHAT_IN_<k>` stream's metadata
PUBLISHER_REFRESH = 5.0  # seconds a publisher goes on with the count it read last
_PARTITION = re.compile(r"\{\{\s*partition\(\s*(\d+)\s*,")


def partition_of(route: str, count: int) -> int:
    """The partition of a chat route token: nats-server's `partition()` (FNV-1a, 32 bits, of the
    token's bytes, modulo the count), so a chat stays in the partition the stream transforms of
    earlier versions gave it."""
    digest = 0x811C9DC5
    for byte in route.encode():
        digest = ((digest ^ byte) * 0x01000193) & 0xFFFFFFFF
    return digest % count


def stored_count(info: StreamInfo) -> int | None:
    """The partition count a chat stream was made with: its metadata (`CHAT_IN_<k>`), else the
    `partition()` in its subject transform (`RUN_EVENTS`, the single `CHAT_IN` of earlier
    versions); None if it has neither (made before chat traffic was partitioned)."""
    metadata = info.config.metadata or {}
    if metadata.get(COUNT_KEY, "").isdigit():
        return int(metadata[COUNT_KEY])
    transform = info.config.subject_transform
    match = _PARTITION.search(transform.dest or "") if transform is not None else None
    return int(match.group(1)) if match else None


async def streams_count(bus: Bus) -> int | None:
    """The chat streams' partition count; None if no chat stream is there or has partitions."""
    for stream in (bus.subjects.chat_in_partition_stream(0), bus.subjects.unsplit_chat_in_stream):
        try:
            return stored_count(await bus.js.stream_info(stream))
        except NotFoundError:
            continue
    return None


_published: weakref.WeakKeyDictionary[Bus, tuple[float, int]] = weakref.WeakKeyDictionary()


async def publish_inbound(
    bus: Bus, channel: str, message: InboundMessage, *, timeout: float | None = None
) -> PubAck:
    """Store a chat's inbound message in its partition's stream (deduplicated by its id).

    A publisher that still had an older count when provisioning lowered it finds no stream for its
    partition (the server answers "no responders"): it reads the count again and publishes once more.

    Raises:
        NoStreamResponseError: no chat stream took it (none provisioned, or a leader being elected).
    """
    for attempt in (1, 2):
        subject = await chat_in_subject(bus, channel, message.chat_id, fresh=attempt == 2)
        try:
            return await bus.publish(subject, message, msg_id=message.dedupe_id(), timeout=timeout)
        except NoStreamResponseError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


async def chat_in_subject(bus: Bus, channel: str, chat_id: str, *, fresh: bool = False) -> str:
    """Where a publisher puts a chat's inbound message: `Subjects.chat_in` and the chat's partition,
    which picks its `CHAT_IN_<k>` stream. The count is read from the streams (again after
    `PUBLISHER_REFRESH` seconds), so publishers follow provisioning without configuration."""
    stem = bus.subjects.chat_in(channel, chat_id)
    return f"{stem}.{partition_of(stem.rsplit('.', 1)[-1], await current_count(bus, fresh=fresh))}"


async def current_count(bus: Bus, *, fresh: bool = False) -> int:
    """`chat_partitions`, read again at most every `PUBLISHER_REFRESH` seconds (or now if `fresh`):
    what publishers use, without a stream-info request per message."""
    now = asyncio.get_running_loop().time()
    seen = _published.get(bus)
    if fresh or seen is None or now - seen[0] > PUBLISHER_REFRESH:
        seen = (now, await chat_partitions(bus))
        _published[bus] = seen
    return seen[1]


async def chat_partitions(bus: Bus) -> int:
    """The count routers serve: the chat streams', else the configured one, else `DEFAULT`."""
    return await streams_count(bus) or bus.config.chat_partitions or DEFAULT


async def waiting(bus: Bus, count: int) -> int:
    """Messages waiting in the chat streams of `count` partitions and in a single `CHAT_IN` left
    from before the split."""
    s = bus.subjects
    total = 0
    for stream in [s.unsplit_chat_in_stream, *(s.chat_in_partition_stream(k) for k in range(count))]:
        try:
            total += (await bus.js.stream_info(stream)).state.messages
        except NotFoundError:
            continue
    return total


async def count_to_provision(bus: Bus) -> int:
    """The count provisioning gives the chat streams now (see the module's docstring)."""
    wanted = bus.config.chat_partitions
    stream = f"{bus.subjects.unsplit_chat_in_stream}(_<k>)"
    current = await streams_count(bus)
    if current is None:
        return wanted or DEFAULT
    if wanted is None or wanted == current:
        return current
    messages = await waiting(bus, current)
    if messages:
        log.warning(
            "bus.chat_partitions is %d, but %s still hold %d message(s) stored by %d partitions: "
            "keeping %d partitions until it is empty (stop the adapters, let the routers answer what "
            "waits, then provision again; docs/operating.md, 'Changing the partition count')",
            wanted,
            stream,
            messages,
            current,
            current,
        )
        return current
    log.info("chat partitions: %d -> %d (restart the routers so they serve the new count)", current, wanted)
    return wanted
