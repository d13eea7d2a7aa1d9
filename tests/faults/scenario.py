"""The shape every fault scenario shares, written once.

Half the messages are published and a quarter answered (answers are streaming), then the fault
strikes; the other half is published meanwhile (the publisher retries through the fault) while the
system recovers; then every accepted message must be answered by the budget (or it is late, or lost:
`ChatLoad.settle`), and a quiet window lets a late second reply show. The scenario's own checks
come after (how it stopped, what its components logged).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from tests.faults.budget import QUIET
from tests.faults.load import ChatLoad
from tests.support.antler_up import AntlerUp


async def _nothing() -> None:
    return None


async def through_a_fault(
    up: AntlerUp,
    load: ChatLoad,
    deadline: float,
    fault: Callable[[], Awaitable[None]],
    recover: Callable[[], Awaitable[None]] = _nothing,
    *,
    mid_publish: bool = False,
) -> int:
    """Run the load through `fault` and `recover` (see the module); the runs delivered more than once.

    `mid_publish`: every message is being published from the start, so the fault strikes while
    runs are certainly in flight (a runner killed must be holding some; half the load published
    first may be all answered by the time a quarter is).
    """
    if not mid_publish:
        return await through_faults(up, load, deadline, [(fault, recover)])
    publishing = asyncio.create_task(load.publish(load.messages, deadline))
    assert await load.wait_answered(len(load.messages) // 4, deadline), up.tail()
    await fault()
    try:
        await recover()
    finally:
        await publishing
    return await _settled(load, deadline)


async def through_faults(
    up: AntlerUp,
    load: ChatLoad,
    deadline: float,
    faults: list[tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]],
) -> int:
    """`through_a_fault` with several `(fault, recover)` in turn, on one stack: the load in
    `len(faults) + 1` equal parts; the first is published, and each fault strikes once half of
    what was published so far beyond the last fault's share is answered, while the next part is
    published; so each strikes with runs in flight. One fault: as the module says."""
    parts = len(faults) + 1
    messages = len(load.messages)
    await load.publish(load.part(0, 1 / parts), deadline)
    for n, (fault, recover) in enumerate(faults):
        answered = round(messages * (n + 0.5) / parts)
        assert await load.wait_answered(answered, deadline), up.tail()
        await fault()
        publishing = asyncio.create_task(load.publish(load.part((n + 1) / parts, (n + 2) / parts), deadline))
        try:
            await recover()
        finally:
            await publishing
    return await _settled(load, deadline)


async def _settled(load: ChatLoad, deadline: float) -> int:
    """Until every accepted message is answered (late or lost past `deadline`: `ChatLoad.settle`),
    then the quiet window; the runs delivered twice."""
    await load.settle(deadline)
    await asyncio.sleep(QUIET)  # a late second reply would land in this window
    return await load.redelivered_runs()
