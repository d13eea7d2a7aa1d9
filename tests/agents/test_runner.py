"""The agent runner on a real bus, with ChatOpenAI talking HTTP to the scripted fake model."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from bus import Bus
from bus.messages import RunControl, RunEvent, RunRecord, RunStatus, ThreadRecord
from bus.records import RecordStore
from bus.runs import collect_run, follow_run, submit_run
from tests.conftest import both_checkpointers
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCall
from tests.support.ports import free_port
from tests.support.runner import StartRunner, a_slow_run, ask, submit_and_collect
from tests.support.runs import streamed_text

pytestmark = pytest.mark.asyncio


def names(events: list[RunEvent]) -> list[str]:
    return [e.event for e in events]


async def run_record(bus: Bus, run_id: str) -> RunRecord:
    store = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    record = await store.get(run_id)
    assert record is not None
    return record


async def thread_record(bus: Bus, thread_id: str) -> ThreadRecord:
    store = RecordStore(await bus.kv(bus.subjects.threads_bucket), ThreadRecord)
    record = await store.get(thread_id)
    assert record is not None
    return record


async def test_a_plain_question_streams_deltas_then_values_then_end(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    fake_model.script(Reply(text="Paris is the capital of France.", chunk_delay=0.06))  # streamed over time
    request = ask("t-plain", "What is the capital of France?")
    events = await submit_and_collect(bus, request)

    assert names(events)[0] == "metadata"
    assert events[0].data == {"run_id": request.run_id, "thread_id": "t-plain", "attempt": 1}
    assert names(events)[-1] == "end"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    deltas = [e for e in events if e.event == "messages"]
    assert len(deltas) > 1, "the answer arrives in pieces"
    assert streamed_text(events) == "Paris is the capital of France."
    final_values = [e for e in events if e.event == "values"][-1].data
    assert final_values["messages"][-1]["content"] == "Paris is the capital of France."
    assert final_values["title"] == "Chat about What is the"

    record = await run_record(bus, request.run_id)
    assert record.status == RunStatus.SUCCESS
    assert record.usage.total_tokens > 0
    assert record.ended_at is not None
    thread = await thread_record(bus, "t-plain")
    assert thread.title == "Chat about What is the"
    assert thread.status == "idle"
    assert thread.active_run_id is None


@both_checkpointers
async def test_the_model_gets_our_system_prompt_and_the_conversation_continues(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    await submit_and_collect(bus, ask("t-two", "first question"))
    events = await submit_and_collect(bus, ask("t-two", "second question"))
    assert names(events)[-1] == "end"
    sent = fake_model.agent_requests[-1]["messages"]
    assert sent[0]["role"] == "system"
    assert "ask_clarification" in sent[0]["content"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["first question", "second question"]


@both_checkpointers
async def test_a_tool_call_and_its_result_appear_once_each_then_the_final_answer(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    fake_model.script(
        Reply(
            text="Let me present it.",
            tool_calls=[ToolCall("present_files", {"filepaths": ["/mnt/user-data/outputs/r.md"]})],
        ),
        Reply(text="Here is your report."),
    )
    events = await submit_and_collect(bus, ask("t-tools", "make me a report"))
    messages = [e.data[0] for e in events if e.event == "messages"]
    with_calls = [m for m in messages if m.get("tool_call_chunks")]
    assert len(with_calls) == 1, "the tool call is sent once, whole"
    call = with_calls[0]["tool_call_chunks"][0]
    assert call["name"] == "present_files"
    assert call["args"] == '{"filepaths": ["/mnt/user-data/outputs/r.md"]}'
    results = [m for m in messages if m["type"] == "tool"]
    assert len(results) == 1
    assert results[0]["content"] == "Presented 1 file(s) to the user."
    first_ai = with_calls[0]["id"]
    assert streamed_text(events, first_ai) == "Let me present it."
    assert streamed_text(events).endswith("Here is your report.")
    final = [e for e in events if e.event == "values"][-1].data
    assert final["artifacts"] == ["/mnt/user-data/outputs/r.md"]
    assert names(events)[-1] == "end"


async def test_a_failing_tool_is_reported_to_the_model_and_the_run_goes_on(
    bus: Bus, fake_model: FakeOpenAI, config_data: dict[str, Any], start_runner: StartRunner
) -> None:
    config_data["tools"] = [{"name": "explode", "use": "tests.components.tools:explode"}]
    fake_model.script(
        Reply(tool_calls=[ToolCall("explode", {"reason": "bad input"})]), Reply(text="That tool failed.")
    )
    async with start_runner():
        events = await submit_and_collect(bus, ask("t-err", "use the tool"))
    tool_results = [e.data[0] for e in events if e.event == "messages" and e.data[0]["type"] == "tool"]
    assert "RuntimeError: exploded: bad input" in tool_results[0]["content"]
    assert tool_results[0]["status"] == "error"
    assert streamed_text(events) == "That tool failed."
    assert (await run_record(bus, events[0].run_id)).status == RunStatus.SUCCESS


async def test_clarification_ends_the_run_with_the_question(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    fake_model.script(
        Reply(
            tool_calls=[
                ToolCall("ask_clarification", {"question": "Which city?", "options": ["Paris", "Rome"]})
            ]
        )
    )
    events = await submit_and_collect(bus, ask("t-clar", "what's the weather"))
    final = [e for e in events if e.event == "values"][-1].data
    last = final["messages"][-1]
    assert last["type"] == "tool"
    assert last["name"] == "ask_clarification"
    assert last["content"] == "Which city?\n1. Paris\n2. Rome"
    asked = last["artifact"]["human_input"]  # what DeerFlow's UI turns into a card with buttons
    assert asked["kind"] == "human_input_request"
    assert asked["input_mode"] == "choice_with_other"
    assert [o["value"] for o in asked["options"]] == ["Paris", "Rome"]
    assert asked["tool_call_id"] == last["tool_call_id"]
    assert len(fake_model.agent_requests) == 1, "the model is not called again after asking"


async def test_two_runs_on_two_threads_at_once_both_finish(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    fake_model.script(
        Reply(text="alpha one two three", when="alpha", chunk_delay=0.05),
        Reply(text="beta one two three", when="beta", chunk_delay=0.05),
    )
    a, b = ask("t-a", "alpha"), ask("t-b", "beta")
    results = await asyncio.gather(submit_and_collect(bus, a), submit_and_collect(bus, b))
    assert streamed_text(results[0]) == "alpha one two three"
    assert streamed_text(results[1]) == "beta one two three"
    first_end = min(e.ts for e in results[0] + results[1] if e.event == "end")
    last_start = max(e.ts for e in results[0] + results[1] if e.event == "metadata")
    assert last_start < first_end, "they ran at the same time"


async def test_a_second_run_on_a_busy_thread_is_rejected_with_reject(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    first = await a_slow_run(bus, fake_model, "t-busy", "slow answer")
    second = ask("t-busy", "me too", multitask_strategy="reject")
    events = await submit_and_collect(bus, second)
    errors = [e.data for e in events if e.event == "error"]
    assert errors[0]["error"] == "ThreadBusyError"
    assert first.run_id in errors[0]["message"]
    assert (await run_record(bus, second.run_id)).status == RunStatus.ERROR
    first_events = await collect_run(bus, first.run_id)
    assert streamed_text(first_events) == "slow answer", "the running one is unharmed"


@both_checkpointers
async def test_enqueued_runs_on_a_busy_thread_run_after_it_in_order(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    fake_model.script(
        Reply(text="one", when="q1", delay=1), Reply(text="two", when="q2"), Reply(text="three", when="q3")
    )
    runs = [ask("t-queue", f"q{i}", multitask_strategy="enqueue") for i in (1, 2, 3)]
    for request in runs:
        await submit_run(bus, request)
    results = [await collect_run(bus, r.run_id) for r in runs]
    assert [streamed_text(r) for r in results] == ["one", "two", "three"]
    seen_by_each = [
        [m["content"] for m in request["messages"] if m["role"] in ("user", "assistant")]
        for request in fake_model.agent_requests
    ]
    assert seen_by_each == [["q1"], ["q1", "one", "q2"], ["q1", "one", "q2", "two", "q3"]], (
        "each run started after the one before it had finished"
    )


async def test_interrupt_strategy_stops_the_running_run_and_takes_over(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    fake_model.script(Reply(text="never finished", delay=30), Reply(text="new answer"))
    first = ask("t-int", "long job")
    await submit_run(bus, first)
    await fake_model.wait_for_requests(1)  # the first run is waiting on the model
    second = ask("t-int", "never mind", multitask_strategy="interrupt")
    events = await submit_and_collect(bus, second)
    assert streamed_text(events) == "new answer"
    assert (await run_record(bus, first.run_id)).status == RunStatus.INTERRUPTED


async def test_two_runs_sent_to_go_next_at_once_both_run_and_the_thread_goes_on(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    """Two `interrupt`/`rollback` runs sent while a run goes on (a user pressing send twice) take the
    thread one after the other; neither waits for the other forever."""
    fake_model.script(Reply(text="never finished", delay=30), Reply(text="next answer"))
    first = ask("t-next", "long job")
    await submit_run(bus, first)
    await fake_model.wait_for_requests(1)
    rollback = ask("t-next", "never mind", multitask_strategy="rollback")
    interrupt = ask("t-next", "actually, this", multitask_strategy="interrupt")
    await asyncio.gather(submit_run(bus, rollback), submit_run(bus, interrupt))
    later = ask("t-next", "and then", multitask_strategy="enqueue")
    await submit_run(bus, later)
    ends = [await collect_run(bus, r.run_id) for r in (rollback, interrupt, later)]
    assert all(any(e.event == "end" for e in events) for events in ends)
    assert (await run_record(bus, later.run_id)).status == RunStatus.SUCCESS, "the thread went on"


async def test_cancel_mid_stream_stops_the_run_and_records_interrupted(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    words = " ".join(f"w{i}" for i in range(100))
    fake_model.script(Reply(text=words, chunk_delay=0.1))
    request = ask("t-cancel", "talk a lot")
    await submit_run(bus, request)
    seen: list[RunEvent] = []
    async for event in follow_run(bus, request.run_id, timeout=10):
        seen.append(event)
        if event.event == "messages" and len(seen) == 3:
            await bus.publish_core(
                bus.subjects.run_control(request.run_id), RunControl(run_id=request.run_id)
            )
    assert seen[-1].event == "end"
    assert seen[-1].data["status"] == "interrupted"
    assert len(streamed_text(seen).split()) < 50, "it stopped long before the model finished"
    assert (await run_record(bus, request.run_id)).status == RunStatus.INTERRUPTED
    thread = await thread_record(bus, "t-cancel")
    assert thread.active_run_id is None, "the thread is free for the next run"

    fake_model.script(Reply(text="fresh start"))
    after = await submit_and_collect(bus, ask("t-cancel", "again"))
    assert streamed_text(after) == "fresh start"


async def test_a_missing_api_key_fails_the_run_naming_the_variable_and_the_next_run_works(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    start_runner: StartRunner,
) -> None:
    monkeypatch.delenv("ANTLER_TEST_MODEL_KEY", raising=False)
    config_data["models"][0]["api_key"] = "$ANTLER_TEST_MODEL_KEY"
    async with start_runner():
        events = await submit_and_collect(bus, ask("t-key", "hello"))
        error = next(e.data for e in events if e.event == "error")
        assert error["error"] == "MissingEnvError"
        assert "ANTLER_TEST_MODEL_KEY" in error["message"]
        assert "models[0].api_key" in error["message"]
        assert names(events)[-1] == "end"
        assert (await run_record(bus, events[0].run_id)).status == RunStatus.ERROR

        monkeypatch.setenv("ANTLER_TEST_MODEL_KEY", "sk-test")
        events = await submit_and_collect(bus, ask("t-key", "hello again"))
        assert streamed_text(events) == "You said: hello again"


async def test_a_wrong_api_key_is_an_error_event_not_a_hang(
    bus: Bus, fake_model: FakeOpenAI, config_data: dict[str, Any], start_runner: StartRunner
) -> None:
    config_data["models"][0]["api_key"] = "sk-wrong"
    async with start_runner():
        events = await submit_and_collect(bus, ask("t-wrong", "hello"))
    error = next(e.data for e in events if e.event == "error")
    assert error["error"].endswith("AuthenticationError")
    assert "Incorrect API key" in error["message"]


async def test_a_model_outage_is_an_error_run_with_a_readable_message(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    fake_model.script(*[Reply(text="upstream overloaded", status=503)] * 5)  # every try (model_calls)
    events = await submit_and_collect(bus, ask("t-503", "hello"))
    error = next(e.data for e in events if e.event == "error")
    assert error["error"] == "ModelUnavailable"
    # the model as configured (the name users pick it by), not the provider's id 'fake-1'
    assert error["message"].startswith("the model 'fake' could not be reached (")
    assert "503 - upstream overloaded" in error["message"]
    assert events[-1].data["status"] == "error"
    assert (await run_record(bus, events[0].run_id)).status == RunStatus.ERROR


async def test_an_unreachable_model_is_an_error_run_not_an_answer(
    bus: Bus, fake_model: FakeOpenAI, config_data: dict[str, Any], start_runner: StartRunner
) -> None:
    closed = free_port()  # a port nothing listens on
    config_data["models"][0]["base_url"] = f"http://127.0.0.1:{closed}/v1"
    async with start_runner():
        events = await submit_and_collect(bus, ask("t-down", "hello"))
    error = next(e.data for e in events if e.event == "error")
    assert "could not be reached (" in error["message"]
    assert "Connection error" in error["message"]
    assert not [e for e in events if e.event == "messages"], "no made-up answer is streamed"
    assert (await run_record(bus, events[0].run_id)).status == RunStatus.ERROR


async def test_a_malformed_run_request_goes_to_the_dlq_and_the_runner_keeps_running(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    dead = asyncio.Event()

    async def on_dlq(msg: Any) -> None:
        dead.set()

    await bus.nc.subscribe(bus.subjects.dlq_all, cb=on_dlq)
    await bus.publish(bus.subjects.runs_submit, b'{"input": "no thread id"}')
    await asyncio.wait_for(dead.wait(), 10)
    events = await submit_and_collect(bus, ask("t-after", "still there?"))
    assert streamed_text(events) == "You said: still there?"


@pytest.mark.parametrize(
    "thread_id", ["../../etc", "a.b", "", "x" * 200], ids=["dots", "dot", "empty", "long"]
)
async def test_a_run_with_an_unusable_thread_id_ends_at_once_and_is_dead_lettered(
    bus: Bus, fake_model: FakeOpenAI, runner: None, thread_id: str
) -> None:
    dead: asyncio.Queue[Any] = asyncio.Queue()

    async def on_dlq(msg: Any) -> None:
        dead.put_nowait(msg)

    await bus.nc.subscribe(bus.subjects.dlq_all, cb=on_dlq)
    run_id = str(uuid.uuid4())
    payload = {"run_id": run_id, "thread_id": thread_id, "input": {"messages": []}}
    await bus.publish(bus.subjects.runs_submit, json.dumps(payload).encode(), msg_id=run_id)
    events = await collect_run(bus, run_id, timeout=10)
    assert [e.event for e in events] == ["metadata", "error", "end"]
    assert "thread_id" in events[1].data["message"]
    letter = await asyncio.wait_for(dead.get(), 10)
    assert letter.headers.get("Antler-Dlq-Deliveries") == "1", "refused at once, never retried"
    assert fake_model.agent_requests == []


@pytest.mark.parametrize(
    "change",
    [{"config": {"recursion_limit": "many"}}, {"command": {"no_such_field": 1}, "input": None}],
    ids=["recursion-limit", "command"],
)
async def test_a_run_request_that_can_never_run_ends_as_an_error_at_once(
    bus: Bus, fake_model: FakeOpenAI, runner: None, change: dict[str, Any]
) -> None:
    request = ask("t-never", "hello")
    payload = {**request.model_dump(mode="json"), **change}  # as a script would write it
    await bus.publish(bus.subjects.runs_submit, json.dumps(payload).encode(), msg_id=request.run_id)
    events = await collect_run(bus, request.run_id, timeout=15)
    error = next(e.data for e in events if e.event == "error")
    assert error["error"] == "InvalidRunRequest"
    assert events[-1].data["status"] == "error"
    assert fake_model.agent_requests == []


async def test_a_finished_run_delivered_again_is_not_run_twice(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    request = ask("t-dup", "once")
    await submit_and_collect(bus, request)
    calls = len(fake_model.agent_requests)
    # The same request again, past the dedupe window (a replayed dead letter, say).
    await bus.publish(bus.subjects.runs_submit, request, msg_id=request.run_id + ":again")
    marker = ask("t-dup-marker", "after")
    await submit_and_collect(bus, marker)
    assert len(fake_model.agent_requests) == calls + 1, "only the marker run called the model"


async def test_a_finished_run_queues_a_memory_update(bus: Bus, fake_model: FakeOpenAI, runner: None) -> None:
    got: asyncio.Queue[Any] = asyncio.Queue()

    async def on_update(msg: Any) -> None:
        got.put_nowait(msg)

    await bus.nc.subscribe(bus.subjects.memory_update("t-mem"), cb=on_update)
    await submit_and_collect(bus, ask("t-mem", "I live in Lisbon", user_id="ana"))
    request = ask("t-mem", "and I work in a bakery", user_id="ana")
    await submit_and_collect(bus, request)
    from bus import decode
    from bus.messages import MemoryUpdate

    await asyncio.wait_for(got.get(), 10)
    update = decode(MemoryUpdate, (await asyncio.wait_for(got.get(), 10)).data)
    assert update.user_id == "ana"
    assert update.run_id == request.run_id
    # The whole conversation so far: a newer update replaces an older one waiting for the updater.
    assert [t.role for t in update.messages] == ["user", "assistant", "user", "assistant"]
    assert [update.messages[0].content, update.messages[2].content] == [
        "I live in Lisbon",
        "and I work in a bakery",
    ]


async def test_a_script_publishing_a_bare_run_request_gets_a_run_record_too(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    request = ask("t-raw", "from a script")
    await bus.publish(bus.subjects.runs_submit, request, msg_id=request.run_id)
    events = await collect_run(bus, request.run_id)
    assert streamed_text(events) == "You said: from a script"
    assert (await run_record(bus, request.run_id)).status == RunStatus.SUCCESS
