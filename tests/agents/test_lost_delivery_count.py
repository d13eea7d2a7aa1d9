"""A run comes again with its delivery count lost: it is still a later attempt.

nats-server keeps a consumer's state (how often each message was delivered) without fsync, so
after a power cut a run's request can come again as if delivered for the first time (the power-
loss fault scenario saw it: replies built from a few words). Here the runner's consumer is made
again from scratch while the run is unfinished, which loses the count the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bus import Bus
from bus.messages import RunRecord, RunStatus
from bus.records import RecordStore
from bus.runs import collect_run
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.runner import KillRunner, StartRunner, ask
from tests.support.runs import streamed_text

pytestmark = pytest.mark.asyncio


async def test_a_run_whose_delivery_count_was_lost_resumes_as_a_later_attempt(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    runner_killed_mid_run: KillRunner,
    start_runner: StartRunner,
    counted_calls: Callable[[], list[str]],
) -> None:
    config_data["bus"]["ack_wait_seconds"] = 1.0
    fake_model.script(
        Reply(tool_calls=[ToolCall("count_calls", {"note": "step one"})]),
        Reply(text="never arrives", delay=60),
    )
    # The first attempt runs a tool, then its runner dies in the model call after it.
    request = ask("t-lost-count", "say something")
    await runner_killed_mid_run(request, 2)
    stream = bus.subjects.runs_stream
    durable = next(c.name for c in await bus.js.consumers_info(stream) if c.name == "runner")
    config = (await bus.js.consumer_info(stream, durable)).config
    await bus.js.delete_consumer(stream, durable)  # its count of deliveries goes with it
    await bus.js.add_consumer(stream, config)

    fake_model.script(Reply(text="The second attempt answers in full."))
    async with start_runner():
        events = await collect_run(bus, request.run_id, timeout=60)

    attempts = [e.data["attempt"] for e in events if e.event == "metadata"]
    assert attempts[0] == 1
    assert attempts[-1] == 2, "the second delivery counted as a second attempt"
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), "one log, numbered across attempts"
    assert events[-1].event == "end"
    assert streamed_text([e for e in events if e.attempt == 2]) == "The second attempt answers in full."
    record = await RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord).get(request.run_id)
    assert record is not None
    assert (record.status, record.attempt) == (RunStatus.SUCCESS, 2)
