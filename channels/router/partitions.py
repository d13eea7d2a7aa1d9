"""The router's share of the chat partitions: who owns which is held by leases in the bus.

Chat traffic is stored by chat partition (`bus.chat_partitions`, `bus.run_events`: streams
`CHAT_IN_<k>` and `RUN_EVENTS_<k>`), and each partition has its own pair of durables: `router-in-<k>`
(its chats' messages) and `router-ev-<k>` (its chat runs' events).
One router process at a time owns a partition, by holding the lease `router.partition.<k>`
(`bus.leases`), so a chat's messages become runs in the order sent and its replies go out in order,
whatever number of routers run.

Every router also holds `router.member.<holder>`, and every third of a lease it renews what it holds
and looks at the others: its fair share is the partition count divided by the live members, rounded
up. Below it, it claims free partitions; above it (a router joined), it drains its surplus and gives
those leases back. A router that dies renews nothing: its member lease and its partitions' leases
lapse after `bus.lease_seconds`, and the others claim them on their next look.

Taking a partition over starts its durables afresh from the first message the last owner did not
settle (the inbound one is a work queue: what is left is what was not settled; the events one
restarts from its ack floor), so the dead owner's messages come again before any newer one of the
same chat, in stream order. Handling a message again is safe: a run's id is its message's, a final
reply is deduplicated by run id. A router that cannot show a renewal younger than two thirds of the
lease (it stalled, or lost the bus) stops the partition's consumers before anyone may take it over.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from nats.js.errors import NotFoundError

from bus import Bus, Consumer, decode
from bus.leases import Lease, Leases, pause
from bus.messages import RunEvent, RunRecord, RunRequest
from bus.records import RecordStore
from bus.run_events import events_streams, has_unsplit_stream, last_in
from bus.runs import latest_run
from bus.runtime import component_ready
from bus.tasks import wait_for
from channels.router.ordering import FinalsInOrder

log = logging.getLogger(__name__)

GROUP = "router"
# How long a partition given up in a rebalance may take to finish what it handles.
HANDOVER_DRAIN = 20.0
# A partition whose lease was lost: someone else may be handling it already; stop at once.
LOST_DRAIN = 1.0

# Where a partition's events durables start again, by stream (its `RUN_EVENTS_<k>`, and while it is
# there the single `RUN_EVENTS` of before the split); None: a durable never consumed (new events only).
EventsStart = dict[str, int | None]
# (partition, where its events durables start) -> its consumers, not started yet
ConsumersFor = Callable[[int, EventsStart], Awaitable[list[Consumer[Any]]]]


def inbound_durable(partition: int) -> str:
    return f"router-in-{partition}"


def events_durable(partition: int) -> str:
    return f"router-ev-{partition}"


# Messages published on `<prefix>.chat.in.<channel>` without the chat's route (a script's raw
# publish, or stored before partitioning): one more inbound durable, run by partition 0's owner.
DIRECT_DURABLE = "router-in-direct"
# Messages published with their chat's route but not its partition (adapters of earlier versions).
UNPARTITIONED_DURABLE = "router-in-unpartitioned"


class Partitions:
    """Hold a fair share of the partitions and run their consumers; `run()` until cancelled.

    Args:
        bus: the connection.
        count: the partition count (the chat streams', `bus.chat_partitions`).
        ttl: seconds a lease outlives its last renewal (`bus.lease_seconds`).
        consumers: builds a partition's consumers (inbound first, events second).
        recount: `async () -> int | None`, the streams' count now (None: not known), looked at on
            every look: a count changed
            by provisioning is served without restarting the routers (partitions beyond a smaller
            count are drained and given back, new ones claimed).
    """

    def __init__(
        self,
        bus: Bus,
        count: int,
        ttl: float,
        consumers: ConsumersFor,
        recount: Callable[[], Awaitable[int | None]] | None = None,
    ) -> None:
        self.bus = bus
        self.count = count
        self.recount = recount
        self.holder = f"router-{uuid.uuid4().hex[:12]}"
        self.leases = Leases(bus, self.holder, ttl)
        self.consumers = consumers
        self.member: Lease | None = None
        self.owned: dict[int, tuple[Lease, list[Consumer[Any]]]] = {}
        # One renewal at a time (a renewal is a compare-and-set on the revision last written).
        self._renewing = asyncio.Lock()
        self._stopping = asyncio.Event()
        self._renewals_end = asyncio.Event()

    def stop(self) -> None:
        """Make `run()` give everything back and return (rather than cancelling it: a cancellation
        can be lost in a request, `bus.leases.cancel_swallowed`)."""
        self._stopping.set()

    async def run(self) -> None:
        """Hold a fair share until `stop()` (or cancelled), then drain and give back what is held."""
        await self.leases.open()
        # Renewals go on by themselves: a look that drains or starts partitions takes a while.
        renewing = asyncio.create_task(self._keep_renewing(), name="router-leases")
        try:
            await self.look()
            component_ready()
            while not await pause(self._stopping, self.leases.ttl / 3):
                try:
                    await self.look()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the bus is away: what we hold lapses unless renewed
                    log.warning("router %s: could not look at the partitions: %s", self.holder, exc)
        finally:
            self._stopping.set()
            # What is held stays renewed while it drains: nobody may take a partition still handled.
            giving_up = asyncio.gather(*(self._give_up(k, HANDOVER_DRAIN) for k in list(self.owned)))
            try:  # bounded: what is not given back lapses by itself
                await wait_for(giving_up, HANDOVER_DRAIN + 10)
            except TimeoutError:
                log.warning("router %s: partitions not given back in time; they lapse", self.holder)
            self._renewals_end.set()
            await asyncio.gather(renewing, return_exceptions=True)
            if self.member is not None:
                await self.leases.release(self.member)

    async def look(self) -> None:
        """Renew what is held, then claim or give back partitions towards a fair share."""
        await self._renew()
        await self._follow_count()
        await self._forget_unsplit_chat_in()
        held = await self.leases.holders(GROUP)
        members = {key for key in held if key.startswith(f"{GROUP}.member.")} | {self._member_key}
        fair = math.ceil(self.count / len(members))
        surplus = len(self.owned) - fair
        if surplus > 0:
            # Highest first: a joining router takes them (anyone's order would do).
            given = sorted(self.owned, reverse=True)[:surplus]
            await asyncio.gather(*(self._give_up(partition, HANDOVER_DRAIN) for partition in given))
            log.info("router %s: gave partitions %s back (fair share %d)", self.holder, given, fair)
            return
        free = [k for k in range(self.count) if self._partition_key(k) not in held and k not in self.owned]
        # Each router tries the free partitions in an order of its own, so joiners rarely collide.
        free.sort(key=lambda k: hashlib.sha256(f"{self.holder}:{k}".encode()).digest())
        for partition in free[: max(fair - len(self.owned), 0)]:
            lease = await self.leases.claim(self._partition_key(partition))
            if lease is not None:
                await self._take(partition, lease)

    async def _forget_unsplit_chat_in(self) -> None:
        """Stop the consumers draining the single CHAT_IN or RUN_EVENTS of before the split once
        `antler provision` has removed it, rather than asking a stream that is gone for messages."""
        s = self.bus.subjects
        for old, there in (
            (s.unsplit_chat_in_stream, unsplit_chat_in),
            (s.unsplit_run_events_stream, has_unsplit_stream),
        ):
            draining = [c for _, consumers in self.owned.values() for c in consumers if c.stream == old]
            if not draining or await there(self.bus):
                continue
            await asyncio.gather(*(c.stop(LOST_DRAIN) for c in draining), return_exceptions=True)
            for partition, (lease, consumers) in list(self.owned.items()):
                self.owned[partition] = (lease, [c for c in consumers if c.stream != old])
            log.info("router %s: %s is gone (drained); stopped its consumers", self.holder, old)

    async def _follow_count(self) -> None:
        """The streams' partition count changed (provisioning applied a new `bus.chat_partitions`):
        serve the new one; partitions that no longer exist are drained and given back."""
        if self.recount is None:
            return
        try:
            count = await self.recount()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the bus is away: keep serving what we serve
            log.warning("router %s: could not read the partition count: %s", self.holder, exc)
            return
        if count is None or count == self.count or count < 1:
            return  # not known just now (a stream that went away): keep serving what we serve
        log.info("router %s: the chat streams have %d partitions now, not %d", self.holder, count, self.count)
        self.count = count
        gone = [k for k in self.owned if k >= count]
        await asyncio.gather(*(self._give_up(k, HANDOVER_DRAIN) for k in gone))

    @property
    def _member_key(self) -> str:
        return f"{GROUP}.member.{self.holder}"

    @staticmethod
    def _partition_key(partition: int) -> str:
        return f"{GROUP}.partition.{partition}"

    async def _keep_renewing(self) -> None:
        while not await pause(self._renewals_end, self.leases.ttl / 3):
            try:
                await self._renew()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("router %s: could not renew its leases: %s", self.holder, exc)

    async def _renew(self) -> None:
        async with self._renewing:
            if self.member is None or not await self._renewed(self.member):
                self.member = await self.leases.claim(self._member_key)
            lost = [p for p, (lease, _) in list(self.owned.items()) if not await self._renewed(lease)]
        for partition in lost:
            log.warning("router %s: lost partition %d; stopping its consumers", self.holder, partition)
            await self._give_up(partition, LOST_DRAIN, release=False)

    async def _renewed(self, lease: Lease) -> bool:
        try:
            return await self.leases.renew(lease)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("router %s: could not renew %s: %s", self.holder, lease.key, exc)
            return lease.fresh

    async def _take(self, partition: int, lease: Lease) -> None:
        """Start the partition's consumers afresh from what its last owner did not settle."""
        s = self.bus.subjects
        try:
            streams = [s.run_events_partition_stream(partition)]
            if await has_unsplit_stream(self.bus):
                streams.append(s.unsplit_run_events_stream)
            starts = {
                stream: await _restart_point(self.bus, stream, events_durable(partition))
                for stream in streams
            }
            consumers = await self.consumers(partition, starts)
            for consumer in consumers:  # a work queue: what is left is what was not settled
                if consumer.stream.startswith(s.unsplit_chat_in_stream):
                    with contextlib.suppress(NotFoundError):
                        await self.bus.js.delete_consumer(consumer.stream, consumer.durable)
            started: list[Consumer[Any]] = []
            try:
                for consumer in consumers:
                    await consumer.start()
                    started.append(consumer)
            except BaseException:
                await asyncio.gather(*(c.stop(LOST_DRAIN) for c in started), return_exceptions=True)
                raise
        except Exception as exc:
            log.warning("router %s: could not start partition %d: %s", self.holder, partition, exc)
            await self.leases.release(lease)
            return
        self.owned[partition] = (lease, started)
        log.info("router %s: took partition %d", self.holder, partition)

    async def _give_up(self, partition: int, drain: float, *, release: bool = True) -> None:
        """Stop the partition's consumers (draining up to `drain` seconds), then let it go. Its lease
        is renewed until the consumers have stopped: nobody may take it over while it drains."""
        found = self.owned.get(partition)
        if found is None:
            return
        lease, consumers = found
        await asyncio.gather(*(c.stop(drain) for c in consumers), return_exceptions=True)
        if self.owned.get(partition) is not found:
            return  # given up meanwhile (lost while a rebalance drained it, say)
        del self.owned[partition]
        if release:
            await self.leases.release(lease)


async def unsplit_chat_in(bus: Bus) -> bool:
    """Whether the single `CHAT_IN` of an installation made before the split by partition is still
    there (its routers' durables drain it until `antler provision` removes it, empty)."""
    try:
        await bus.js.stream_info(bus.subjects.unsplit_chat_in_stream)
    except NotFoundError:
        return False
    return True


def partition_of(subject: str) -> int | None:
    """The partition a stored chat message's subject names (None: published without its route)."""
    last = subject.rsplit(".", 1)[-1]
    return int(last) if subject.count(".") >= 5 and last.isdigit() else None


async def continue_chat(
    bus: Bus,
    runs: RecordStore[RunRecord],
    finals: FinalsInOrder,
    request: RunRequest,
    events_start: EventsStart,
) -> RunRequest:
    """`request`, for a thread this router has not submitted to (it took the chat's partition over),
    made to go `after` the thread's last run; that run's final, when it is still due from here,
    goes before this one's (`FinalsInOrder`)."""
    last = await latest_run(bus, request.thread_id)
    if last is None or last == request.run_id:
        return request
    due = await final_still_due(bus, runs, last, events_start)
    if due:
        finals.submitted(request.thread_id, last)
    log.info("run %s goes after run %s (its final due here: %s)", request.run_id, last, due)
    return request.model_copy(update={"after": last})


async def final_still_due(
    bus: Bus, runs: RecordStore[RunRecord], run_id: str, events_start: EventsStart
) -> bool:
    """Whether the final reply of `run_id` (a run of a chat in a partition this router took over) is
    still to be sent from here: the run has not ended, or its `end` is at or after where this
    router's events durable of the partition on the run's stream started (`events_start`), so it
    comes here. A run whose `end` lies before it had its final sent by the partition's earlier owner."""
    record = await runs.get(run_id)
    if record is None or not record.status.finished:
        return record is not None
    found = await last_in(bus, run_id, await events_streams(bus, run_id))
    if found is None:
        return False
    stream, last = found
    if decode(RunEvent, last.data or b"{}").event != "end":
        return True  # its record says ended, its `end` is on its way
    start = events_start.get(stream)
    return start is not None and (last.seq or 0) >= start


async def _restart_point(bus: Bus, stream: str, durable: str) -> int | None:
    """Where a partition's events durable starts again: after its ack floor (the old durable is
    deleted); None for a partition never consumed (only new events)."""
    try:
        info = await bus.js.consumer_info(stream, durable)
    except NotFoundError:
        return None
    floor = info.ack_floor.stream_seq if info.ack_floor is not None else 0
    await bus.js.delete_consumer(stream, durable)
    return (floor or 0) + 1
