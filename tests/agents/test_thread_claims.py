"""One run per thread, across deliveries and outages (`agents/runner/thread_claims.py`), with a real
runner."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bus import Bus
from bus.messages import MultitaskStrategy, QueuedRun, RunRecord, RunStatus, ThreadRecord, utcnow
from bus.records import RecordStore
from bus.runs import collect_run
from tests.fakes.openai_server import FakeOpenAI
from tests.support.runner import StartRunner, ask
from tests.support.runs import streamed_text

pytestmark = pytest.mark.asyncio


async def test_a_run_whose_lost_delivery_holds_its_thread_goes_on_before_the_runs_queued_behind_it(
    bus: Bus, fake_model: FakeOpenAI, start_runner: StartRunner
) -> None:
    """What a NATS outage left behind (seen in the repeated external-restart fault test): run two
    holds the thread by a delivery that is gone, and run one, submitted before it, waits in the
    thread's queue for run two to end. Run two's next delivery takes its thread back and finishes;
    then run one goes. (Before, run two's delivery queued itself behind run one, which waits for run
    two: neither ever ran, and the chat's every later message went unanswered.)"""
    one = ask("t-held", "message one", multitask_strategy=MultitaskStrategy.ENQUEUE)
    two = ask("t-held", "message two", multitask_strategy=MultitaskStrategy.ENQUEUE, after=one.run_id)
    one = one.model_copy(update={"created_at": two.created_at - timedelta(seconds=1)})
    runs = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    threads = RecordStore(await bus.kv(bus.subjects.threads_bucket), ThreadRecord)
    started = utcnow()
    await runs.put(one.run_id, RunRecord.pending(one))
    running = {"status": RunStatus.RUNNING, "attempt": 1, "started_at": started, "updated_at": started}
    await runs.put(two.run_id, RunRecord.pending(two).model_copy(update=running))
    held = ThreadRecord(
        thread_id="t-held",
        status="busy",
        active_run_id=two.run_id,
        active_attempt=1,
        last_run_id=two.run_id,
        queue=[QueuedRun(run_id=one.run_id, order=1)],  # its request was stored before run two's
    )
    await threads.put("t-held", held)

    async with start_runner():
        # Run two's request comes again (as after ack_wait), then run one's.
        await bus.publish(bus.subjects.runs_submit, two, msg_id=f"{two.run_id}:again")
        await bus.publish(bus.subjects.runs_submit, one, msg_id=one.run_id)
        events_two = await collect_run(bus, two.run_id, timeout=30)
        events_one = await collect_run(bus, one.run_id, timeout=30)

    assert streamed_text(events_two).endswith("You said: message two")
    assert streamed_text(events_one).endswith("You said: message one")
    assert [e.data["status"] for e in (events_two[-1], events_one[-1])] == ["success", "success"]
    thread = await threads.get("t-held")
    assert thread is not None
    assert (thread.active_run_id, thread.queue, thread.last_run_id) == (None, [], one.run_id)
