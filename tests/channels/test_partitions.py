"""Routers share the chat partitions through leases in the bus: a joining router gets its share, a
dead router's partitions go to the others, and no partition ever has two owners."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bus import Bus, Consumer
from bus.leases import pause
from channels.router.partitions import Partitions

COUNT = 8
TTL = 2.0  # the least `bus.lease_seconds` allows


def router(bus: Bus) -> Partitions:
    # No consumers: what is tested is who holds which partition.
    async def no_consumers(partition: int, start: int | None) -> list[Consumer[Any]]:
        return []

    return Partitions(bus, COUNT, TTL, no_consumers)


async def settle(*routers: Partitions) -> None:
    """Each router looks (as it does every third of a lease) until they hold every partition, each
    its fair share, none twice."""
    for _ in range(200):
        for r in routers:
            await r.look()
        shares = {len(r.owned) for r in routers}
        if sum(len(r.owned) for r in routers) == COUNT and shares == {COUNT // len(routers)}:
            assert not owned_twice(*routers)
            return
        await asyncio.sleep(TTL / 3)
    raise AssertionError(f"never settled: {[sorted(r.owned) for r in routers]}")


def owned_twice(*routers: Partitions) -> set[int]:
    seen: set[int] = set()
    twice = set()
    for r in routers:
        twice |= seen & set(r.owned)
        seen |= set(r.owned)
    return twice


async def test_a_joining_router_takes_its_share_and_a_dead_ones_partitions_are_taken_over(bus: Bus) -> None:
    first, second = router(bus), router(bus)
    await first.leases.open()
    await second.leases.open()
    await first.look()
    assert sorted(first.owned) == list(range(COUNT)), "alone, a router holds every partition"

    await settle(first, second)
    assert len(first.owned) == len(second.owned) == COUNT // 2, "a joining router gets its share"

    # The first router dies: it renews nothing any more (no release either).
    for _ in range(200):
        await second.look()
        assert not owned_twice(first, second) or any(not lease.fresh for lease, _ in first.owned.values())
        if len(second.owned) == COUNT:
            break
        await asyncio.sleep(TTL / 3)
    assert sorted(second.owned) == list(range(COUNT)), "the dead router's partitions were taken over"


async def test_a_stopped_router_gives_its_partitions_back_and_another_takes_them_at_once(bus: Bus) -> None:
    first, second = router(bus), router(bus)
    running = asyncio.create_task(first.run())
    for _ in range(100):
        if len(first.owned) == COUNT:
            break
        await asyncio.sleep(0.05)
    assert len(first.owned) == COUNT

    first.stop()
    await running  # returns by itself: no cancellation needed
    await second.leases.open()
    await second.look()
    assert sorted(second.owned) == list(range(COUNT)), "given back, not left to lapse"


async def test_a_lease_loop_whose_cancellation_a_reply_swallowed_still_stops() -> None:
    """Python 3.11's `asyncio.wait_for` (under every nats-py request) returns the reply and drops a
    cancellation that arrives with it; the lease loops notice (`pause`) instead of going on forever."""
    replies = 0
    stop = asyncio.Event()
    reply: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def renewing() -> None:
        nonlocal replies
        while not await pause(stop, 0.01):
            await asyncio.wait_for(reply, 5)  # a request whose reply is in
            replies += 1

    task = asyncio.create_task(renewing())
    await asyncio.sleep(0.05)  # waiting for its reply
    reply.set_result("renewed")
    task.cancel()  # in the same step as the reply: wait_for returns it and drops the cancellation
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    assert replies == 1, "the reply was taken, and the loop stopped at its next pause"
