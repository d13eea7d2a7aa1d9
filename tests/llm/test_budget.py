"""The model budget on a real bus: several processes' calls share a model's slots and are served in
the order they asked; a holder that stops renewing loses its slot to the next in line."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from bus import Bus
from config import BusConfig
from llm.budget import ModelSlots

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def processes(
    bus: Bus, nats_url: str, bus_config: BusConfig
) -> AsyncIterator[Callable[[], ModelSlots]]:
    """Each call: the budget side of another process (its own connection), started."""
    opened: list[tuple[Bus, ModelSlots]] = []

    async def open_one() -> ModelSlots:
        connection = await Bus.connect(nats_url, bus_config, name="budget-test")
        slots = ModelSlots(connection, lease_seconds=1)
        await slots.start()
        opened.append((connection, slots))
        return slots

    yield open_one  # type: ignore[misc]
    for connection, slots in opened:
        await slots.close()
        await connection.close()


async def until(slots: ModelSlots, condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(20):
        while not condition():
            await slots._view.changed.wait()


async def test_waiting_calls_of_several_processes_are_served_in_the_order_they_asked(
    processes: Callable,
) -> None:
    first, second, third = await processes(), await processes(), await processes()
    held = await first.acquire("gpt", 1)
    served: list[str] = []

    async def call(slots: ModelSlots, name: str) -> None:
        lease = await slots.acquire("gpt", 1)
        served.append(name)
        await slots.release(lease)

    waiting = []
    for n, slots in enumerate([second, third, second, third]):
        waiting.append(asyncio.create_task(call(slots, f"call-{n}")))
        await until(first, lambda n=n: len(first._tickets("gpt")) == n + 1)  # its ticket is in line
    await first.release(held)
    await asyncio.gather(*waiting)
    assert served == ["call-0", "call-1", "call-2", "call-3"]


async def test_a_slot_whose_holder_stops_renewing_goes_to_the_next_in_line(processes: Callable) -> None:
    dead, alive = await processes(), await processes()
    await dead.acquire("gpt", 1)
    for task in dead._tasks:  # the process is gone: nothing renews or gives back its slot
        task.cancel()
    dead._leases.clear()
    lease = await alive.acquire("gpt", 1)  # after the lease lapses, with no polling of ours
    assert lease.key == "gpt.slot.0"
