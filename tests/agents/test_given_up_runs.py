"""Runs whose request is given up (dead-lettered) still end: the record says error, the log gets
`error` and one `end`, and the thread is free for the chat's next message.

A request is given up when every delivery of it failed (`max_deliver` times), or when it was delivered
past `max_deliver` without ever being settled (its runners died or hung). Before, such a run stayed
`running` for good: whoever followed it (SSE clients, the chat router, `antler send`) waited forever,
and a thread its dead runner held kept every later run of the thread waiting.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable
from typing import Any

import pytest

from agents.runner.endings import GIVEN_UP, end_given_up
from bus import Bus, list_dead_letters
from bus.messages import ErrorInfo, MemoryDocument, RunRecord, RunStatus, ThreadRecord
from bus.records import RecordStore
from bus.runs import collect_run, submit_run
from config import AppConfig
from tests.conftest import component_login, finished
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.support.runner import AntlerCli, KillRunner, StartRunner, ask, submit_and_collect
from tests.support.runs import stored_events, streamed_text

pytestmark = pytest.mark.asyncio

# What a newer Antler could have written: an envelope version this one does not know.
NEWER_MEMORY = b'{"v": 2, "user_id": "default", "facts": []}'


async def unreadable_memory(bus: Bus) -> Any:
    """The default user's memory as a newer Antler wrote it: every run of theirs fails as its prompt
    is put together, until the memory bucket (returned) loses it."""
    memory = await bus.kv(bus.subjects.memory_bucket)
    await memory.put(MemoryDocument.key("default"), NEWER_MEMORY)
    return memory


async def run_record(bus: Bus, run_id: str) -> RunRecord:
    record = await RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord).get(run_id)
    assert record is not None
    return record


def assert_ended_given_up(events: list[Any], stored: list[Any], record: RunRecord, *tries: str) -> str:
    """The run ended once, as an error saying it was given up; the message, for more checks."""
    assert events[-1].event == "end"
    assert events[-1].data["status"] == "error"
    errors = [e.data for e in events if e.event == "error"]
    assert len(errors) == 1, errors
    message = str(errors[0]["message"])
    assert message.startswith("the run was given up:"), message
    assert any(t in message for t in tries), message
    assert "antler dlq" in message
    assert [e.event for e in stored].count("end") == 1, "one end, also past what readers read"
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1)), "one log, numbered on"
    assert record.status == RunStatus.ERROR
    assert record.error is not None
    assert record.error.message == message
    assert record.ended_at is not None
    return message


async def test_a_run_that_fails_every_delivery_ends_as_an_error_and_its_thread_answers_the_next(
    bus: Bus, fake_model: FakeOpenAI, config_data: dict[str, Any], start_runner: StartRunner
) -> None:
    """Every delivery fails the same way (the user's memory, written by a newer Antler, cannot be read
    as the prompt is put together): after `max_deliver` tries the request is dead-lettered and the
    run ends, saying so."""
    config_data["bus"]["max_deliver"] = 2
    memory = await unreadable_memory(bus)
    async with start_runner():
        doomed = ask("t-given-up", "remember that I have a cat")
        events = await submit_and_collect(bus, doomed, timeout=20)
        record = await run_record(bus, doomed.run_id)
        message = assert_ended_given_up(
            events, await stored_events(bus, doomed.run_id), record, "failed 2 times"
        )
        assert "MemoryDocument" in message, "the last error says what failed"
        letters = [letter for letter in await list_dead_letters(bus) if letter.consumer == "runner"]
        assert [json.loads(letter.data)["run_id"] for letter in letters] == [doomed.run_id]
        thread = await RecordStore(await bus.kv(bus.subjects.threads_bucket), ThreadRecord).get("t-given-up")
        assert thread is not None
        assert thread.active_run_id is None

        await memory.delete(MemoryDocument.key("default"))  # the operator fixes the cause
        fake_model.script(Reply(text="Noted: a cat."))
        following = await submit_and_collect(bus, ask("t-given-up", "I have a cat"), timeout=20)
    assert streamed_text(following) == "Noted: a cat."
    assert len(fake_model.agent_requests) == 1, "the given-up run never reached the model"


async def test_a_run_whose_runners_keep_dying_ends_as_an_error_and_frees_its_thread(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    runner_killed_mid_run: KillRunner,
    start_runner: StartRunner,
) -> None:
    """Each runner that takes the run dies in it (SIGKILL: the OOM killer, a crash in a native
    library); past `max_deliver` deliveries the next runner gives the request up instead of dying
    too. The dead runner still held the thread: given up, the run lets it go."""
    config_data["bus"].update(max_deliver=2, ack_wait_seconds=1.0)
    fake_model.script(Reply(text="never arrives", delay=60), Reply(text="never arrives", delay=60))
    request = ask("t-dying", "do the job")
    await submit_run(bus, request)
    for delivery in (1, 2):
        await runner_killed_mid_run(None, delivery)

    async with start_runner():
        events = await collect_run(bus, request.run_id, timeout=30)
        record = await run_record(bus, request.run_id)
        assert_ended_given_up(
            events,
            await stored_events(bus, request.run_id),
            record,
            "delivered 2 times without being settled",
        )
        fake_model.script(Reply(text="Back on track."))
        following = await submit_and_collect(bus, ask("t-dying", "are you there?"), timeout=20)
    assert streamed_text(following) == "Back on track."
    assert record.attempt > 2, "the ending is not taken for either delivery's attempt"


async def test_a_run_given_up_while_its_runner_hangs_stays_ended_when_the_runner_wakes(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    start_runner: StartRunner,
    antler_cli: AntlerCli,
) -> None:
    """A runner stalls mid-run (SIGSTOP: a machine swapping, a blocked event loop) past `ack_wait`,
    and another runner gives the request up. When the stalled runner wakes, it is told to stop and
    finds the run ended: it neither changes the run's outcome nor ends it a second time."""
    config_data["bus"].update(max_deliver=1, ack_wait_seconds=1.0)
    answer = asyncio.Event()
    fake_model.script(Reply(text="too late", hold=answer))
    request = ask("t-hung", "do the job")
    stalled = await antler_cli("run", "runner")
    try:
        await submit_run(bus, request)
        await fake_model.wait_for_requests(1, timeout=30)
        stalled.send_signal(signal.SIGSTOP)
        async with start_runner():
            events = await collect_run(bus, request.run_id, timeout=30)
            record = await run_record(bus, request.run_id)
            assert_ended_given_up(
                events, await stored_events(bus, request.run_id), record, "without being settled"
            )

            stalled.send_signal(signal.SIGCONT)
            answer.set()
            assert stalled.stderr is not None
            async with asyncio.timeout(30):  # the woken runner lets go of its delivery
                while b"leaving seq" not in (line := await stalled.stderr.readline()):
                    assert line, "the stalled runner ended"
            assert await run_record(bus, request.run_id) == record, "its outcome stands"
            assert [e.event for e in await stored_events(bus, request.run_id)].count("end") == 1
            fake_model.script(Reply(text="Here now."))
            following = await submit_and_collect(bus, ask("t-hung", "still there?"), timeout=20)
    finally:
        stalled.send_signal(signal.SIGCONT)
        stalled.kill()
        await finished(stalled)
    assert streamed_text(following) == "Here now."


async def test_a_thread_whose_record_cannot_be_read_answers_its_next_message(
    bus: Bus, fake_model: FakeOpenAI, runner: None
) -> None:
    """A thread record that fails validation (a status only a newer Antler knows) is repaired, keeping
    what can still be read, when the runner next writes it: the thread's runs go on. (Before, each
    run failed on it until dead-lettered, and nothing told its followers.)"""
    fake_model.script(Reply(text="first answer"), Reply(text="second answer"))
    await submit_and_collect(bus, ask("t-unreadable", "one"))
    threads = RecordStore(await bus.kv(bus.subjects.threads_bucket), ThreadRecord)
    before = await threads.get("t-unreadable")
    assert before is not None
    assert before.title
    stored = json.loads(before.model_dump_json())
    await threads.kv.put("t-unreadable", json.dumps({**stored, "status": "paused"}).encode())

    events = await submit_and_collect(bus, ask("t-unreadable", "two"), timeout=20)
    assert streamed_text(events) == "second answer"
    after = await threads.get("t-unreadable")  # readable again
    assert after is not None
    assert (after.title, after.user_id, after.created_at) == (before.title, before.user_id, before.created_at)
    assert after.finished_runs == before.finished_runs + 1
    assert (after.status, after.active_run_id) == ("idle", None)


async def test_a_run_given_up_while_its_threads_record_cannot_be_read_still_ends_and_frees_it(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    runner_killed_mid_run: KillRunner,
    start_runner: StartRunner,
) -> None:
    """The ending does not depend on reading the thread's record: the runner holding the thread died,
    and meanwhile the record became unreadable; the run is given up, ends, and the thread is free."""
    config_data["bus"].update(max_deliver=1, ack_wait_seconds=1.0)
    fake_model.script(Reply(text="never arrives", delay=60))
    request = ask("t-both", "do the job")
    await runner_killed_mid_run(request, 1)
    threads = RecordStore(await bus.kv(bus.subjects.threads_bucket), ThreadRecord)
    held = await threads.get("t-both")
    assert held is not None
    assert held.active_run_id == request.run_id
    unreadable = {**json.loads(held.model_dump_json()), "status": "paused"}
    await threads.kv.put("t-both", json.dumps(unreadable).encode())

    async with start_runner():
        events = await collect_run(bus, request.run_id, timeout=30)
        record = await run_record(bus, request.run_id)
        assert_ended_given_up(
            events, await stored_events(bus, request.run_id), record, "without being settled"
        )
        freed = await threads.get("t-both")
        assert freed is not None
        assert (freed.active_run_id, freed.status) == (None, "error")
        fake_model.script(Reply(text="Free again."))
        following = await submit_and_collect(bus, ask("t-both", "hello?"), timeout=20)
    assert streamed_text(following) == "Free again."


async def test_runner_processes_racing_to_end_a_given_up_run_end_it_once(
    bus: Bus, app_config: Callable[[], AppConfig], nats_url: str
) -> None:
    """Two processes can give up the same request at once (one whose delivery failed for the last
    time, one handed the next delivery because the first stalled past ack_wait), and a process can
    be told again after a failure part-way: the run still ends once, one log numbered on."""
    config = app_config()
    connections = [await component_login(config, "runner").connect(nats_url, f"racer-{i}") for i in (1, 2)]
    try:
        stores = [
            (
                RecordStore(await c.kv(c.subjects.runs_bucket), RunRecord),
                RecordStore(await c.kv(c.subjects.threads_bucket), ThreadRecord),
            )
            for c in connections
        ]
        for n in range(5):
            request = ask(f"t-race-{n}", "hello")
            await submit_run(bus, request)
            reasons = ["failed 3 times; last error: boom", "delivered 3 times without being settled"]
            await asyncio.gather(
                *(
                    end_given_up(c, runs, threads, request, reason)
                    for c, (runs, threads), reason in zip(connections, stores, reasons, strict=True)
                )
            )
            await end_given_up(connections[0], *stores[0], request, "told again")  # a retried hook
            stored = await stored_events(bus, request.run_id)
            assert [e.event for e in stored] == ["metadata", "error", "end"]
            assert [e.seq for e in stored] == [1, 2, 3]
            record = await run_record(bus, request.run_id)
            assert record.status == RunStatus.ERROR
            assert record.error is not None
            assert stored[1].data["message"] == record.error.message
    finally:
        for c in connections:
            await c.close()


async def test_replaying_a_given_up_request_runs_nothing_unless_the_operator_asks_for_a_rerun(
    bus: Bus,
    fake_model: FakeOpenAI,
    config_data: dict[str, Any],
    start_runner: StartRunner,
    antler_cli: AntlerCli,
) -> None:
    """The run's user was told it failed: `antler dlq replay` of its request would run nothing, and
    says so (the dead letter stays); `--rerun` runs the request again as a new run, which answers."""
    config_data["bus"]["max_deliver"] = 1
    memory = await unreadable_memory(bus)
    async with start_runner():
        doomed = ask("t-replayed", "remember that I have a cat")
        events = await submit_and_collect(bus, doomed, timeout=20)
        assert events[-1].data["status"] == "error"
        [letter] = [letter for letter in await list_dead_letters(bus) if letter.consumer == "runner"]
        await memory.delete(MemoryDocument.key("default"))  # the operator fixes the cause

        code, out, err = await finished(await antler_cli("dlq", "replay", str(letter.seq)))
        assert code == 0, err
        assert f"run {doomed.run_id} has ended (error: the run was given up" in out
        assert "replayed 0 message(s); 1 ended run(s) not replayed" in out
        assert [left.seq for left in await list_dead_letters(bus)] == [letter.seq]

        fake_model.script(Reply(text="Noted: a cat."))
        code, out, err = await finished(await antler_cli("dlq", "replay", "--all", "--rerun"))
        assert code == 0, err
        again = out.split(" runs again as run ", 1)[1].split()[0]
        rerun = await collect_run(bus, again, timeout=20)
    assert streamed_text(rerun) == "Noted: a cat."
    assert await list_dead_letters(bus) == []
    assert (await run_record(bus, again)).metadata["rerun_of"] == doomed.run_id
    assert [e.event for e in await stored_events(bus, doomed.run_id)].count("end") == 1


async def test_a_given_up_run_whose_ending_was_cut_short_is_ended_by_its_requests_next_delivery(
    bus: Bus, runner: None
) -> None:
    """The process ending a given-up run died after writing its record: when the request comes again
    (a replay, or a server that forgot it was terminated), the log gets the ending's `error` and `end`."""
    request = ask("t-cut-short", "hello")
    runs = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    message = "the run was given up: failed 3 times; last error: boom; see `antler dlq`"
    error = ErrorInfo(code=GIVEN_UP, message=message)
    # The record as the ending left it before the request comes (written after it, a runner could
    # take the request first and run it).
    as_left = RunRecord.pending(request).model_copy(
        update={"status": RunStatus.ERROR, "error": error, "attempt": 4}
    )
    assert await runs.create(request.run_id, as_left)
    await bus.publish(bus.subjects.runs_submit, request, msg_id=request.run_id)
    events = await collect_run(bus, request.run_id, timeout=20)
    assert [(e.event, e.attempt) for e in events] == [("metadata", 4), ("error", 4), ("end", 4)]
    assert events[1].data == {"error": GIVEN_UP, "message": message}
