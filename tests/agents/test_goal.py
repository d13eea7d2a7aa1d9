"""Goal mode in the runner: after each run an evaluator model judges the thread's goal, and the runner
starts the next run itself (scripted model over HTTP, real nats-server)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from agents.threads.goal import continuation_run_id
from bus import Bus
from bus.messages import (
    RunEvent,
    RunRecord,
    RunRequest,
    RunStatus,
    ThreadCreateReply,
    ThreadCreateRequest,
    ThreadGoalReply,
    ThreadGoalRequest,
    ThreadRecord,
)
from bus.records import RecordStore
from bus.runs import cancel_run, collect_run, follow_run, submit_run
from bus.service import call
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.runner import ask

pytestmark = pytest.mark.asyncio


async def thread_with_goal(bus: Bus, objective: str, **limits: Any) -> str:
    thread_id = f"goal-{uuid.uuid4().hex[:8]}"
    await call(
        bus, "threads", "create", ThreadCreateRequest(thread_id=thread_id), ThreadCreateReply, timeout=10
    )
    reply = await call(
        bus,
        "threads",
        "goal",
        ThreadGoalRequest(thread_id=thread_id, objective=objective, **limits),
        ThreadGoalReply,
        timeout=10,
    )
    assert reply.goal is not None
    assert reply.goal.objective == objective
    return thread_id


async def a_continuation_held(
    bus: Bus, fake_model: FakeOpenAI, objective: str, first: str, step: str, second: str
) -> tuple[RunRequest, asyncio.Event]:
    """A thread with `objective` as its goal is asked to work on it (the request returned): the run
    answers `first`, the verdict asks for `step`, and the continuation answering `second` is held in
    its model call until the event returned is set."""
    thread_id = await thread_with_goal(bus, objective)
    held = asyncio.Event()
    fake_model.script(Reply(text=first), Reply(text=second, when=f"Next step: {step}", hold=held))
    fake_model.verdicts({"verdict": "continue", "next_step": step}, {"verdict": "continue"})
    request = ask(thread_id, "Work on it")
    await submit_run(bus, request)
    return request, held


def goal_of(end: RunEvent) -> dict[str, Any] | None:
    assert end.event == "end"
    found = end.data.get("goal")
    return found if isinstance(found, dict) else None


def answer_of(events: list[RunEvent]) -> str:
    return "".join(
        e.data[0]["content"]
        for e in events
        if e.event == "messages"
        and e.data[0]["type"] == "AIMessageChunk"
        and isinstance(e.data[0]["content"], str)
    )


async def the_loop(bus: Bus, first_run: str) -> list[tuple[str, list[RunEvent]]]:
    """Every run of the goal's loop from `first_run`, following each `end`'s next run."""
    runs = []
    run_id: str | None = first_run
    while run_id is not None:
        events = await collect_run(bus, run_id, timeout=30)
        runs.append((run_id, events))
        goal = goal_of(events[-1])
        run_id = goal.get("next_run_id") if goal else None
        assert len(runs) <= 10, "the loop does not stop"
    return runs


async def record_of(bus: Bus, bucket: str, key: str, model: Any) -> Any:
    return await RecordStore(await bus.kv(bucket), model).get(key)


async def test_a_goal_reached_after_two_continuations_stops_by_itself(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    thread_id = await thread_with_goal(bus, "Write parts one, two and three of the poem")
    fake_model.script(
        Reply(text="Part one."),
        Reply(text="Part two.", when="Next step: write part two"),
        Reply(text="Part three. The poem is complete.", when="Next step: write part three"),
    )
    fake_model.verdicts(
        {"verdict": "continue", "reason": "only part one", "next_step": "write part two"},
        {"verdict": "continue", "reason": "part three missing", "next_step": "write part three"},
        {"verdict": "done", "reason": "all three parts are there"},
    )
    request = ask(thread_id, "Write me a poem in three parts")
    await submit_run(bus, request)

    runs = await the_loop(bus, request.run_id)

    assert [answer_of(events) for _, events in runs] == [
        "Part one.",
        "Part two.",
        "Part three. The poem is complete.",
    ]
    outcomes = [goal_of(events[-1]) for _, events in runs]
    assert [(o["verdict"], o["continuation"]) for o in outcomes if o] == [
        ("continue", 1),
        ("continue", 2),
        ("done", 2),
    ]
    assert outcomes[0] is not None
    assert outcomes[0]["next_step"] == "write part two"
    # The continuations are ordinary runs of the thread, each recorded as successful.
    for run_id, _ in runs:
        record = await record_of(bus, bus.subjects.runs_bucket, run_id, RunRecord)
        assert record.status == RunStatus.SUCCESS
        assert record.thread_id == thread_id
    # Done: no fourth run was started, and the goal is cleared.
    last = runs[-1][0]
    assert await record_of(bus, bus.subjects.runs_bucket, continuation_run_id(last), RunRecord) is None
    thread = await record_of(bus, bus.subjects.threads_bucket, thread_id, ThreadRecord)
    assert thread.goal is None
    assert len(fake_model.verdict_requests) == 3
    # The evaluator saw the goal and the conversation, not the hidden continuation prompts.
    judged = fake_model.verdict_requests[-1]["messages"][-1]["content"]
    assert "Write parts one, two and three" in judged
    assert "Part two." in judged
    assert "goal_continuation" not in judged


async def test_a_goal_that_makes_no_progress_stops_at_the_breaker(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    thread_id = await thread_with_goal(bus, "Prove the conjecture")
    fake_model.script(*(Reply(text="I am still thinking about it.") for _ in range(5)))
    fake_model.verdicts(
        *({"verdict": "continue", "reason": "no proof yet", "next_step": "try harder"} for _ in range(5))
    )
    request = ask(thread_id, "Prove it")
    await submit_run(bus, request)

    runs = await the_loop(bus, request.run_id)

    # The first run and two continuations; their answers never changed: two evaluations without progress.
    assert len(runs) == 3
    last = goal_of(runs[-1][1][-1])
    assert last is not None
    assert last["verdict"] == "continue"
    assert last["stopped"] == "no_progress"
    assert last["next_run_id"] is None
    assert len(fake_model.verdict_requests) == 3
    thread = await record_of(bus, bus.subjects.threads_bucket, thread_id, ThreadRecord)
    assert thread.goal is not None  # kept: the user's next message is judged again
    assert thread.goal.last_evaluation is not None
    assert thread.goal.last_evaluation.stand_down_reason == "no_progress"


async def test_a_goal_stops_at_its_maximum_of_continuations(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    thread_id = await thread_with_goal(bus, "Count to a million", max_continuations=1)
    fake_model.script(Reply(text="1, 2, 3"), Reply(text="4, 5, 6", when="Next step"))
    fake_model.verdicts(
        {"verdict": "continue", "next_step": "count on"}, {"verdict": "continue", "next_step": "count on"}
    )
    request = ask(thread_id, "Count")
    await submit_run(bus, request)

    runs = await the_loop(bus, request.run_id)

    assert [answer_of(events) for _, events in runs] == ["1, 2, 3", "4, 5, 6"]
    last = goal_of(runs[-1][1][-1])
    assert last is not None
    assert last["stopped"] == "max_continuations"
    assert last["continuation"] == 1


async def test_cancelling_a_continuation_stops_the_loop(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    request, stuck = await a_continuation_held(
        bus,
        fake_model,
        "Translate the whole book",
        "Chapter one is translated.",
        "chapter two",
        "Chapter two ...",
    )
    first = await collect_run(bus, request.run_id)
    goal = goal_of(first[-1])
    assert goal is not None
    assert goal["next_run_id"] == continuation_run_id(request.run_id)
    continuation = goal["next_run_id"]

    await fake_model.wait_for_requests(2)  # the continuation is at work (its model call hangs)
    await cancel_run(bus, continuation)
    events = [e async for e in follow_run(bus, continuation, timeout=30)]
    stuck.set()

    assert events[-1].data["status"] == "interrupted"
    assert goal_of(events[-1]) is None  # not judged: nothing goes on after it
    assert (
        await record_of(bus, bus.subjects.runs_bucket, continuation_run_id(continuation), RunRecord) is None
    )
    assert len(fake_model.verdict_requests) == 1


async def test_clearing_the_goal_while_a_continuation_works_stops_the_loop_after_it(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    request, working = await a_continuation_held(
        bus, fake_model, "Plan the trip", "Day one: Lisbon.", "day two", "Day two: Sintra."
    )
    thread_id = request.thread_id
    continuation = continuation_run_id(request.run_id)
    await fake_model.wait_for_requests(2)  # the continuation is at work

    cleared = await call(
        bus, "threads", "goal", ThreadGoalRequest(thread_id=thread_id), ThreadGoalReply, timeout=10
    )
    working.set()
    events = await collect_run(bus, continuation)

    assert cleared.goal is None
    assert answer_of(events) == "Day two: Sintra."  # the step under way finishes
    assert events[-1].data["status"] == "success"
    assert goal_of(events[-1]) is None  # and nothing is judged or started after it
    after = continuation_run_id(continuation)
    assert await record_of(bus, bus.subjects.runs_bucket, after, RunRecord) is None
    assert len(fake_model.verdict_requests) == 1


async def test_setting_a_goal_on_another_users_thread_is_refused(bus: Bus, runner: None) -> None:
    from bus.service import ServiceError

    thread_id = await thread_with_goal(bus, "Mine")
    with pytest.raises(ServiceError) as refused:
        await call(
            bus,
            "threads",
            "goal",
            ThreadGoalRequest(thread_id=thread_id, user_id="mallory", objective="Theirs"),
            ThreadGoalReply,
            timeout=10,
        )
    assert refused.value.code == "not_found"
    thread = await record_of(bus, bus.subjects.threads_bucket, thread_id, ThreadRecord)
    assert thread.goal is not None
    assert thread.goal.objective == "Mine"


async def test_a_message_sent_while_the_goal_goes_on_takes_the_loop_over_and_only_one_loop_goes_on(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    thread_id = await thread_with_goal(bus, "Finish the report")
    busy = asyncio.Event()
    fake_model.script(
        Reply(text="Outline.", when="Start the report"),
        Reply(text="Section one.", when="Next step: step one", hold=busy),
        Reply(text="Noted, adding charts.", when="Add charts too"),
        Reply(text="Section two.", when="Next step: step two"),
        Reply(text="The report with charts is complete.", when="Next step: step three"),
    )
    fake_model.verdicts(
        {"verdict": "continue", "next_step": "step one"},  # the first run
        {"verdict": "continue", "next_step": "step two"},  # its continuation
        {"verdict": "continue", "next_step": "step three"},  # the user's second message
        {"verdict": "done"},  # that message's continuation
    )
    first = ask(thread_id, "Start the report")
    await submit_run(bus, first)
    continuation = continuation_run_id(first.run_id)
    await fake_model.wait_for_requests(2)  # the continuation is at work
    second = ask(thread_id, "Add charts too")
    await submit_run(bus, second)  # queued behind the continuation
    busy.set()

    step_two = continuation_run_id(continuation)  # started by the continuation, queued after the message
    step_three = continuation_run_id(second.run_id)
    ends = {
        run: (await collect_run(bus, run, timeout=30))[-1] for run in (second.run_id, step_two, step_three)
    }

    assert goal_of(ends[second.run_id])["next_run_id"] == step_three  # type: ignore[index]
    assert goal_of(ends[step_two]) is None, "the older loop's step ran, and was not judged"
    assert goal_of(ends[step_three])["verdict"] == "done"  # type: ignore[index]
    assert await record_of(bus, bus.subjects.runs_bucket, continuation_run_id(step_two), RunRecord) is None
    assert len(fake_model.verdict_requests) == 4
