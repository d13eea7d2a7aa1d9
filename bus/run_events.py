"""Which stream holds a run's events: one `RUN_EVENTS_<k>` per chat partition, so in a cluster their
leaders spread over the nodes as the inbound chat streams' do (docs/scaling.md).

A chat's runs have their events in the chat's partition (its router reads them with its inbound
messages); any other run's are in the partition its id hashes to. The partition is decided once,
when the run is submitted (`RunRequest.events_partition`, kept in its `RunRecord`), with the count
of that moment: a count changed later does not move a run's events, and a reader that knows only
the run id finds them from its record (`events_streams`). An installation made before the split
keeps its single `RUN_EVENTS` for what earlier versions' runners publish during an upgrade
(`bus.provision`); while it is there, readers read it too and merge by `seq`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from typing import Any

from nats.js.api import RawStreamMsg
from nats.js.errors import NotFoundError

from bus.chat_partitions import current_count, partition_of
from bus.connection import Bus
from bus.messages import RunRecord, RunRequest, RunStatus
from bus.subjects import chat_route, safe_token

log = logging.getLogger(__name__)

RECORD_POLL = 0.25  # seconds between looks at a run's record that does not say its partition yet
NO_RECORD_WAIT = 2.0  # seconds a reader waits for a run's record to appear before guessing its stream
UNSPLIT_REFRESH = 10.0  # seconds a reader trusts what it saw of the unsplit RUN_EVENTS


def chat_of(origin: Any) -> tuple[str, str] | None:
    """The (channel, chat id) of a run's chat origin (a `ChatOrigin` or its dict), or None."""
    if isinstance(origin, dict):
        channel, chat_id = origin.get("channel"), origin.get("chat_id")
    else:
        channel, chat_id = getattr(origin, "channel", None), getattr(origin, "chat_id", None)
    if isinstance(channel, str) and isinstance(chat_id, str) and channel and chat_id:
        return channel, chat_id
    return None


def request_chat(request: RunRequest) -> tuple[str, str] | None:
    """The chat a run answers (its request's origin, else the origin in its metadata)."""
    return chat_of(request.origin) or chat_of(request.metadata.get("origin"))


async def events_partition(bus: Bus, request: RunRequest) -> int:
    """The partition of a run's events: the request's, else its chat's, else its id's."""
    if request.events_partition is not None:
        return request.events_partition
    return await run_partition(bus, request.run_id, request_chat(request))


async def run_partition(bus: Bus, run_id: str, chat: tuple[str, str] | None) -> int:
    """The partition a run's events go to when nothing decided it before: its chat's, else its id's
    (with the partition count now)."""
    key = chat_route(*chat) if chat is not None else safe_token(run_id)
    return partition_of(key, await current_count(bus))


async def last_stored_event(bus: Bus, run_id: str, partition: int) -> RawStreamMsg | None:
    """A run's last stored event (the highest `seq`): in its partition's stream, and while the single
    `RUN_EVENTS` of before the split is there, in it too (a run under way during an upgrade may have
    events in both); None if it has none."""
    found = await last_in(
        bus, run_id, await _with_unsplit(bus, bus.subjects.run_events_partition_stream(partition))
    )
    return found[1] if found is not None else None


async def last_in(bus: Bus, run_id: str, streams: list[str]) -> tuple[str, RawStreamMsg] | None:
    """The run's event with the highest `seq` in `streams`, and the stream it is in."""
    found = []
    for stream in streams:
        try:
            found.append((stream, await bus.js.get_last_msg(stream, bus.subjects.run_events(run_id))))
        except NotFoundError:  # no such event, or no such stream
            continue
    return max(found, key=lambda pair: _seq(pair[1]), default=None)


def _seq(msg: RawStreamMsg) -> int:
    try:
        return int(json.loads(msg.data or b"{}").get("seq") or 0)
    except (ValueError, AttributeError):
        return 0


async def with_events_partition(bus: Bus, request: RunRequest) -> RunRequest:
    """`request` with its events' partition decided (what submitters send)."""
    if request.events_partition is not None:
        return request
    return request.model_copy(update={"events_partition": await events_partition(bus, request)})


async def events_streams(bus: Bus, run_id: str, *, wait: float | None = 0.0) -> list[str]:
    """The streams that may hold a run's events: its partition's (from its record), and while it is
    there the single `RUN_EVENTS` of before the split (an earlier version's runner, during an
    upgrade, still publishes there). Readers read both and put the events in `seq` order.

    A pending record that does not say its partition (submitted by an earlier version; its runner
    will say) is looked at again every `RECORD_POLL` seconds for `wait` seconds (None: until it
    says); a run with no record after `NO_RECORD_WAIT` seconds (a request published raw) is looked for
    in the partition its id hashes to, where a runner puts a run it knows no chat of.
    """
    from bus.records import RecordStore

    runs = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    loop = asyncio.get_running_loop()
    deadline = None if wait is None else loop.time() + wait
    # A reader may hear of a run (a schedule's firing line, say) just before its record is made.
    no_record_until = loop.time() + (NO_RECORD_WAIT if wait is None else min(wait, NO_RECORD_WAIT))
    while True:
        record = await runs.get(run_id)
        if record is not None and record.events_partition is not None:
            partition = record.events_partition
            break
        if (
            (record is None and loop.time() >= no_record_until)
            or (record is not None and record.status != RunStatus.PENDING)
            or (deadline is not None and loop.time() >= deadline)
        ):
            partition = await run_partition(bus, run_id, None)
            break
        await asyncio.sleep(RECORD_POLL)
    return await _with_unsplit(bus, bus.subjects.run_events_partition_stream(partition))


async def _with_unsplit(bus: Bus, stream: str) -> list[str]:
    return [stream, bus.subjects.unsplit_run_events_stream] if await has_unsplit_stream(bus) else [stream]


_unsplit_seen: weakref.WeakKeyDictionary[Bus, tuple[float, bool]] = weakref.WeakKeyDictionary()


async def has_unsplit_stream(bus: Bus) -> bool:
    """Whether the single `RUN_EVENTS` of an installation made before the split is still there (read
    again at most every `UNSPLIT_REFRESH` seconds)."""
    now = asyncio.get_running_loop().time()
    seen = _unsplit_seen.get(bus)
    if seen is None or now - seen[0] > UNSPLIT_REFRESH:
        try:
            await bus.js.stream_info(bus.subjects.unsplit_run_events_stream)
            seen = (now, True)
        except NotFoundError:
            seen = (now, False)
        _unsplit_seen[bus] = seen
    return seen[1]
