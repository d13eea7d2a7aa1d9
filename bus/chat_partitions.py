"""How many partitions the chat traffic has: what the chat streams were made with, not each
process's configuration.

`CHAT_IN` and `RUN_EVENTS` append a chat's partition to every subject they store
(`partition(<count>, …)` in their subject transforms; `bus.subjects.partition_transform`), and
each partition has its own pair of router durables. The count in the streams is the one that
decides where messages wait, so routers serve exactly that many partitions, whatever their
own `bus.chat_partitions` says: a router configured differently from the streams would leave
the chats of the partitions it does not know unanswered.

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

import logging
import re

from nats.js.api import StreamInfo
from nats.js.errors import NotFoundError

from bus.connection import Bus

log = logging.getLogger(__name__)

DEFAULT = 4
_PARTITION = re.compile(r"\{\{\s*partition\(\s*(\d+)\s*,")


def stored_count(info: StreamInfo) -> int | None:
    """The partition count in a chat stream's subject transform; None if it has none (made before
    chat traffic was partitioned)."""
    transform = info.config.subject_transform
    match = _PARTITION.search(transform.dest or "") if transform is not None else None
    return int(match.group(1)) if match else None


async def streams_count(bus: Bus) -> int | None:
    """The chat streams' partition count; None if `CHAT_IN` is not there or has no partitions."""
    try:
        return stored_count(await bus.js.stream_info(bus.subjects.chat_in_stream))
    except NotFoundError:
        return None


async def chat_partitions(bus: Bus) -> int:
    """The count routers serve: the chat streams', else the configured one, else `DEFAULT`."""
    return await streams_count(bus) or bus.config.chat_partitions or DEFAULT


async def count_to_provision(bus: Bus) -> int:
    """The count provisioning gives the chat streams now (see the module's docstring)."""
    wanted = bus.config.chat_partitions
    stream = bus.subjects.chat_in_stream
    try:
        info = await bus.js.stream_info(stream)
    except NotFoundError:
        return wanted or DEFAULT
    current = stored_count(info)
    if current is None:
        return wanted or DEFAULT
    if wanted is None or wanted == current:
        return current
    if info.state.messages:
        log.warning(
            "bus.chat_partitions is %d, but %s still holds %d message(s) stored by %d partitions: "
            "keeping %d partitions until it is empty (stop the adapters, let the routers answer what "
            "waits, then provision again; docs/operating.md, 'Changing the partition count')",
            wanted,
            stream,
            info.state.messages,
            current,
            current,
        )
        return current
    log.info("chat partitions: %d -> %d (restart the routers so they serve the new count)", current, wanted)
    return wanted
