"""A component's stop ends its background tasks even when one lost its first cancellation (what
Python 3.11's `asyncio.wait_for`, under every nats-py request, does when the reply comes with it)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

import pytest

from bus.tasks import cancel_and_wait, until_cancelled, wait_for


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


async def _a_loop_cancelled_as_its_event_is_set(wait: Any) -> asyncio.Task[None]:
    """A worker loop like the metrics feed's, cancelled in the same instant the event it waits on
    is set (a stop that comes as the component turns ready)."""
    poked = asyncio.Event()

    async def loop() -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await wait(poked.wait(), 3600)
            poked.clear()

    task = asyncio.create_task(loop())
    await asyncio.sleep(0.01)
    poked.set()
    task.cancel()
    await asyncio.wait({task}, timeout=1)
    return task


async def test_our_wait_for_never_drops_a_cancellation_that_comes_as_the_wait_ends() -> None:
    task = await _a_loop_cancelled_as_its_event_is_set(wait_for)
    assert task.cancelled(), "the loop stopped when it was cancelled"


async def test_python_3_11s_wait_for_drops_it_which_is_why_ours_exists() -> None:
    task = await _a_loop_cancelled_as_its_event_is_set(asyncio.wait_for)
    still_running = not task.done()
    await cancel_and_wait(task)
    if sys.version_info >= (3, 12):
        pytest.skip("Python 3.12's wait_for keeps the cancellation")
    assert still_running, "3.11's wait_for went on waiting after it was cancelled"


async def test_serving_until_stopped_ends_at_once_after_a_cancellation_lost_while_starting() -> None:
    """A SIGTERM as a component starts: its cancellation came while a start-up request was answered
    and was dropped; serving until cancelled must not then wait for a second one."""
    starting = asyncio.Event()

    async def component() -> None:
        try:
            starting.set()
            await asyncio.sleep(3600)  # creating its consumers
        except asyncio.CancelledError:
            pass  # dropped, as wait_for does when the reply arrives with it
        await until_cancelled()

    task = asyncio.create_task(component())
    await starting.wait()
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=5)
    assert done, "it served on, waiting for a cancellation it already had"
    assert task.cancelled()
