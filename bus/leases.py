"""Leases held in the bus: one process at a time holds a key, and loses it by itself if it dies.

A lease is a key of the `<prefix>_leases` KV bucket whose value names its holder, written with a
per-message TTL (nats-server 2.11+). The holder renews it with a compare-and-set on the revision it
last wrote, well within the TTL; a holder that dies (or stalls, or loses the bus) stops renewing, the
server removes the key when the TTL runs out, and the next `claim` by anyone wins it. A claim is a
compare-and-set too (on the revision of whatever marker the key has), so two claimants never both
win (the protocol: `bus.lease_keys`). A holder must stop the work a lease guards once it cannot show a
renewal younger than the TTL:
`Lease.fresh` says whether it can (the others may take the lease over from then on).

Used by the router's partitions (`channels.partitions`) and by adapters that may hold only one
platform connection at a time (`channels.standby`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from nats.js.errors import KeyWrongLastSequenceError

from bus.connection import Bus
from bus.lease_keys import LeaseKeys
from bus.tasks import wait_for

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Lease:
    """A lease this process holds: its key, the revision it last wrote, and when (time.monotonic)."""

    key: str
    revision: int
    renewed_at: float
    ttl: float

    @property
    def fresh(self) -> bool:
        """Renewed recently enough that nobody else can hold it yet (a margin of a third of the TTL
        for clocks and the server's own timer)."""
        return time.monotonic() - self.renewed_at < self.ttl * 2 / 3


class Leases:
    """Claim, renew and release leases under one holder name (a process); `open()` first.

    Args:
        bus: the connection.
        holder: this process's name, the value of every lease it holds.
        ttl: seconds a lease outlives its last renewal (renew every third of it).
    """

    def __init__(self, bus: Bus, holder: str, ttl: float) -> None:
        self.bus = bus
        self.holder = holder
        self.ttl = max(float(ttl), 1.0)
        self._keys = LeaseKeys(bus, bus.subjects.leases_bucket, self.ttl)

    async def open(self) -> None:
        await self._keys.open()

    async def claim(self, key: str) -> Lease | None:
        """The lease on `key` if nobody holds it (or this holder already does), else None."""
        began = time.monotonic()
        mine = self.holder.encode()
        revision = await self._keys.claim(key, mine, mine=lambda value: value == mine)
        return None if revision is None else Lease(key, revision, began, self.ttl)

    async def renew(self, lease: Lease) -> bool:
        """Write the lease again; False if it is no longer ours (it lapsed and someone took it).

        Raises:
            Exception: the bus is away (the lease may still be ours: `Lease.fresh` decides).
        """
        began = time.monotonic()
        try:
            lease.revision = await self._keys.write(lease.key, self.holder.encode(), lease.revision)
        except KeyWrongLastSequenceError:
            # It lapsed (this process stalled past the TTL, a busy machine): still ours if nobody
            # took it meanwhile, and then nothing has to stop and start again.
            again = await self.claim(lease.key)
            if again is None:
                return False
            log.warning("lease %s lapsed before it was renewed; nobody had taken it: held again", lease.key)
            lease.revision = again.revision
        lease.renewed_at = began
        return True

    async def release(self, lease: Lease) -> None:
        """Give the lease back at once (a marker), if it is still ours; never raises."""
        await self._keys.release(lease.key, lease.revision)

    async def holders(self, prefix: str) -> dict[str, str]:
        """`key -> holder` of every live lease under `prefix` (keys `<prefix>.…`), read now."""
        found: dict[str, str] = {}
        watcher = await self._keys.kv.watch(f"{prefix}.>", ignore_deletes=True, inactive_threshold=30.0)
        try:
            while True:
                entry = await watcher.updates(timeout=5.0)
                if entry is None:
                    break  # the current values are all in
                if entry.operation is None and entry.value:
                    found[entry.key] = entry.value.decode()
                else:
                    found.pop(entry.key, None)
        finally:
            with contextlib.suppress(Exception):
                await watcher.stop()
        return found


def cancel_swallowed() -> bool:
    """Whether this task was asked to stop (cancelled) but goes on: Python 3.11's `asyncio.wait_for`,
    under every nats-py request, returns the reply and drops a cancellation that arrives just as
    the reply does. A loop of requests that is stopped by cancelling it checks this after each one,
    or it may go on forever (seen under load: a router's teardown hung)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def pause(stop: asyncio.Event, seconds: float) -> bool:
    """Wait `seconds` or until `stop` is set; whether it is set."""
    if not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await wait_for(stop.wait(), seconds)
    if cancel_swallowed():
        raise asyncio.CancelledError
    return stop.is_set()


async def renew_until_lost(
    leases: Leases, lease: Lease, lost: asyncio.Event, stop: asyncio.Event | None = None
) -> None:
    """Renew `lease` every third of its TTL until `stop` is set (or this is cancelled); set `lost` once
    it cannot be shown to be ours (renewal refused, or no renewal for two thirds of the TTL while the
    bus is away)."""
    stop = stop or asyncio.Event()
    while not lost.is_set():
        if await pause(stop, leases.ttl / 3):
            return
        try:
            if not await leases.renew(lease):
                log.warning("lease %s was lost (it lapsed before it was renewed)", lease.key)
                lost.set()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("could not renew lease %s: %s", lease.key, exc)
            if not lease.fresh:
                lost.set()
