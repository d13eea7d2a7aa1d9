"""Leases in the bus: a holder that stalls past the TTL keeps its lease if nobody took it meanwhile,
and loses it to whoever did."""

from __future__ import annotations

import asyncio

from bus import Bus
from bus.leases import Leases

TTL = 2.0  # the least `bus.lease_seconds` allows


async def lapse(leases: Leases, key: str) -> None:
    """Wait until the server has removed the lease's key (its TTL ran out without a renewal)."""
    for _ in range(100):
        await asyncio.sleep(TTL / 4)
        if key not in await leases.holders("t"):
            return
    raise AssertionError(f"{key} never lapsed")


async def test_a_holder_that_stalled_past_the_ttl_holds_its_lease_again_if_nobody_took_it(bus: Bus) -> None:
    mine = Leases(bus, "adapter-a", TTL)
    await mine.open()
    lease = await mine.claim("t.one")
    assert lease is not None
    await lapse(mine, "t.one")  # a stall: no renewal within the TTL

    assert await mine.renew(lease), "nobody else wanted it: still ours, nothing to stop"
    assert (await mine.holders("t")) == {"t.one": "adapter-a"}
    assert await mine.renew(lease), "and renewed as usual from then on"


async def test_a_holder_that_stalled_past_the_ttl_loses_its_lease_to_the_one_that_took_it(bus: Bus) -> None:
    mine, other = Leases(bus, "adapter-a", TTL), Leases(bus, "adapter-b", TTL)
    await mine.open()
    await other.open()
    lease = await mine.claim("t.two")
    assert lease is not None
    assert await other.claim("t.two") is None, "held: nobody else gets it"
    await lapse(mine, "t.two")
    assert await other.claim("t.two") is not None

    assert not await mine.renew(lease), "someone else holds it now"
    assert (await mine.holders("t")) == {"t.two": "adapter-b"}
