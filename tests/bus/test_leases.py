"""Leases in the bus: a holder that stalls past the TTL keeps its lease if nobody took it meanwhile,
and loses it to whoever did.

The stall is real: a lease written with a short TTL that the server lets run out. Everything
written after it has a TTL no test step outlives, however busy the machine: a check that came later
than the TTL of the lease it looks at would see it lapse too, not the behaviour under test.
"""

from __future__ import annotations

import asyncio

from bus import Bus
from bus.leases import Leases

STALL_TTL = 2.0  # the least `bus.lease_seconds` allows
TTL = 600.0  # every lease written after the stall


async def lapse(bus: Bus, key: str) -> None:
    """Until the server has removed the lease's key: its TTL ran out without a renewal, and the
    server put its marker in its place (a purge, as watchers see it)."""
    kv = await bus.kv(bus.subjects.leases_bucket)
    watcher = await kv.watch(key)
    try:
        async with asyncio.timeout(60):
            while True:
                entry = await watcher.updates(timeout=60)
                if entry is not None and entry.operation is not None:
                    return
    finally:
        await watcher.stop()


async def test_a_holder_that_stalled_past_the_ttl_holds_its_lease_again_if_nobody_took_it(bus: Bus) -> None:
    stalled = Leases(bus, "adapter-a", STALL_TTL)
    await stalled.open()
    lease = await stalled.claim("t.one")
    assert lease is not None
    await lapse(bus, "t.one")  # a stall: no renewal within the TTL
    mine = Leases(bus, "adapter-a", TTL)  # the same holder, back
    await mine.open()

    assert await mine.renew(lease), "nobody else wanted it: still ours, nothing to stop"
    assert (await mine.holders("t")) == {"t.one": "adapter-a"}
    assert await mine.renew(lease), "and renewed as usual from then on"
    assert (await mine.holders("t")) == {"t.one": "adapter-a"}


async def test_a_holder_that_stalled_past_the_ttl_loses_its_lease_to_the_one_that_took_it(bus: Bus) -> None:
    stalled, other = Leases(bus, "adapter-a", STALL_TTL), Leases(bus, "adapter-b", TTL)
    await stalled.open()
    await other.open()
    lease = await stalled.claim("t.two")
    assert lease is not None
    assert await other.claim("t.two") is None, "held: nobody else gets it"
    await lapse(bus, "t.two")
    assert await other.claim("t.two") is not None
    mine = Leases(bus, "adapter-a", TTL)
    await mine.open()

    assert not await mine.renew(lease), "someone else holds it now"
    assert (await mine.holders("t")) == {"t.two": "adapter-b"}
