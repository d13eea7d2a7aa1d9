"""A component's stop ends its background tasks even when one lost its first cancellation (what
Python 3.11's `asyncio.wait_for`, under every nats-py request, does when the reply comes with it)."""

from __future__ import annotations

import asyncio

from bus.tasks import cancel_and_wait


async def test_a_task_that_lost_its_cancellation_is_cancelled_again_and_ends() -> None:
    lost = asyncio.Event()

    async def worker() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            lost.set()  # dropped, as wait_for does when the reply arrives with it
        await asyncio.Event().wait()  # the loop's next wait: forever, unless cancelled again

    task = asyncio.create_task(worker())
    await asyncio.sleep(0)
    await asyncio.wait_for(cancel_and_wait(task, None, every=0.05), 30)
    assert lost.is_set()
    assert task.cancelled()


async def test_finished_and_failed_tasks_are_waited_for_without_errors() -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    done = asyncio.create_task(asyncio.sleep(0))
    failed = asyncio.create_task(fails())
    await asyncio.sleep(0.01)
    await cancel_and_wait(done, failed)
    assert done.done()
    assert isinstance(failed.exception(), RuntimeError)
