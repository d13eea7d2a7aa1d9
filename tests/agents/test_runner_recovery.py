"""Runs survive their runner: SIGKILL mid-run, resume from the checkpoint; rollback undoes a run.

Each runs on both checkpoint savers; on Postgres the resuming runner has a data directory of
its own, as a runner on another machine would.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bus import Bus
from bus.messages import (
    RunControl,
    RunRecord,
    RunStatus,
    ThreadHistoryReply,
    ThreadHistoryRequest,
    ThreadStateReply,
    ThreadStateRequest,
)
from bus.records import RecordStore
from bus.runs import cancel_run, collect_run, submit_run
from tests.conftest import another_machine, both_checkpointers
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall, unfenced
from tests.support.runner import KillRunner, StartRunner, a_slow_run, ask, submit_and_collect
from tests.support.runs import streamed_text

pytestmark = [pytest.mark.asyncio, both_checkpointers]


async def test_a_runner_killed_mid_run_is_finished_by_another_from_its_checkpoint(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    tmp_path: Path,
    runner_killed_mid_run: KillRunner,
    start_runner: StartRunner,
    counted_calls: Callable[[], list[str]],
) -> None:
    config_data["bus"]["ack_wait_seconds"] = 1.0
    fake_model.script(
        Reply(tool_calls=[ToolCall("count_calls", {"note": "step one"})]),
        Reply(text="never arrives", delay=60),
        Reply(text="Finished after the restart."),
    )
    request = ask("t-crash", "do the job")
    await runner_killed_mid_run(request, 2)  # the tool ran; the second model call hangs

    if config_data["runner"].get("checkpointer") == "postgres":
        # Only the database is shared.
        config_data["bus"]["data_dir"] = another_machine(config_data["bus"]["data_dir"], tmp_path / "other")
    async with start_runner():
        events = await collect_run(bus, request.run_id, timeout=30)

    assert counted_calls() == ["step one"], "the finished tool step was not run again"
    assert len(fake_model.agent_requests) == 3
    resumed_call = fake_model.agent_requests[2]["messages"]
    assert [m["role"] for m in resumed_call] == ["system", "user", "assistant", "tool"]
    assert unfenced(resumed_call[-1]["content"]) == "counted: step one"
    metadata = [e.data for e in events if e.event == "metadata"]
    assert metadata[0]["attempt"] == 1
    assert metadata[-1] == {"run_id": request.run_id, "thread_id": "t-crash", "attempt": 2, "resumed": True}
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), "one log, numbered across attempts"
    assert streamed_text(events).endswith("Finished after the restart.")
    store = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    record = await store.get(request.run_id)
    assert record is not None
    assert record.status == RunStatus.SUCCESS
    assert record.attempt == 2


async def test_a_started_runs_request_handed_out_again_as_a_first_delivery_resumes_it(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    runner_killed_mid_run: KillRunner,
    start_runner: StartRunner,
) -> None:
    """A SIGKILLed nats-server can forget that it handed a request out (it writes its consumers'
    state down lazily) and hands it out again as delivery 1, though a runner had started the run
    and published its events. Here the request is stored a second time, with an ack wait long
    enough that the first copy is not handed out again meanwhile. The run goes on as attempt 2
    from its checkpoint. (Numbered 1 again, it took its input a second time, and its events were
    taken for the first attempt's and dropped: when the first had published more, its `end` too,
    and the chat never got an answer.)"""
    config_data["bus"]["ack_wait_seconds"] = 600.0
    fake_model.script(
        Reply(text="never arrives", delay=60),  # the first attempt, cut off with its runner
        Reply(text="Finished by the second attempt."),
    )
    request = ask("t-forgotten", "do the job")
    await runner_killed_mid_run(request, 1)

    await bus.publish(bus.subjects.runs_submit, request, msg_id=f"{request.run_id}:again")
    async with start_runner():
        events = await collect_run(bus, request.run_id, timeout=30)

    assert streamed_text(events).endswith("Finished by the second attempt.")
    assert {e.attempt for e in events} == {1, 2}
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), "one log, numbered across attempts"
    second_call = fake_model.agent_requests[1]["messages"]
    assert [m["role"] for m in second_call] == ["system", "user"], "its input once, not twice"


async def test_rollback_removes_the_interrupted_run_from_the_thread(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    fake_model.script(Reply(text="first answer"), Reply(text="half", delay=30))
    await submit_and_collect(bus, ask("t-roll", "first question"))
    second = ask("t-roll", "second question")
    await submit_run(bus, second)
    await fake_model.wait_for_requests(2)
    await bus.publish_core(
        bus.subjects.run_control(second.run_id), RunControl(run_id=second.run_id, action="rollback")
    )
    events = await collect_run(bus, second.run_id)
    assert events[-1].data["status"] == "interrupted"
    reply = await bus.request(
        bus.subjects.threads("state"), ThreadStateRequest(thread_id="t-roll"), ThreadStateReply, timeout=10
    )
    assert reply.state is not None
    contents = [m["content"] for m in reply.state.values["messages"]]
    assert contents == ["first question", "first answer"], "the rolled-back question is gone"

    fake_model.script(Reply(text="third answer"))
    await submit_and_collect(bus, ask("t-roll", "third question"))
    history = await bus.request(
        bus.subjects.threads("history"),
        ThreadHistoryRequest(thread_id="t-roll"),
        ThreadHistoryReply,
        timeout=10,
    )
    latest = [m["content"] for m in history.states[0].values["messages"]]
    assert latest == ["first question", "first answer", "third question", "third answer"]
    assert len(fake_model.agent_requests) == 3
    third_call = [m["content"] for m in fake_model.agent_requests[2]["messages"][1:]]
    assert third_call == ["first question", "first answer", "third question"], "the model never saw it"


async def test_waiting_runs_can_be_cancelled_before_they_start(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    first = await a_slow_run(bus, fake_model, "t-wait", "slow")
    queued = ask("t-wait", "two", multitask_strategy="enqueue")
    await submit_run(bus, queued)
    await cancel_run(bus, queued.run_id)  # whether or not a runner has picked it up yet
    seen = await collect_run(bus, queued.run_id)
    assert seen[-1].data["status"] == "interrupted"
    first_events = await collect_run(bus, first.run_id)
    assert streamed_text(first_events) == "slow"
    assert len(fake_model.agent_requests) == 1, "the cancelled run never called the model"
