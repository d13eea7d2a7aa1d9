"""The shape every fault scenario shares, written once.

Half the messages are published and a quarter answered (answers are streaming), then the fault
strikes; the other half is published meanwhile (the publisher retries through the fault) while the
system recovers; then every accepted message must be answered, and a quiet window lets a late second
reply show. The scenario's own checks come after (how it stopped, what its components logged).
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
    if mid_publish:
        publishing = asyncio.create_task(load.publish(load.messages, deadline))
    else:
        await load.publish(load.part(0, 0.5), deadline)
    assert await load.wait_answered(len(load.messages) // 4, deadline), up.tail()
    await fault()
    if not mid_publish:
        publishing = asyncio.create_task(load.publish(load.part(0.5, 1), deadline))
    try:
        await recover()
    finally:
        await publishing
    await load.wait_all_accepted_answered(deadline)
    await asyncio.sleep(QUIET)  # a late second reply would land in this window
    return await load.redelivered_runs()
