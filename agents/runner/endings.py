"""Runs that end without running to their end: a refused request, a run ended before a runner
reached it, and a run whose request was given up (dead-lettered).

Whoever follows `runs.ev.<run_id>` must always see an `end`, never wait forever.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from agents.runner.event_log import EventLog, chat_of, request_chat
from agents.runner.thread_claims import release_given_up
from bus import Bus, decode
from bus.connection import MSG_ID
from bus.messages import (
    ErrorInfo,
    RunControl,
    RunEvent,
    RunRecord,
    RunRequest,
    RunStatus,
    SubagentCancel,
    ThreadRecord,
    is_valid_id,
    utcnow,
)
from bus.metrics import RUNS_FINISHED, labelled
from bus.records import RecordStore, salvage
from bus.run_events import events_partition, last_stored_event, run_partition
from bus.runs import thread_run_key

log = logging.getLogger(__name__)

GIVEN_UP = "RunGivenUp"  # the error code of a run whose request was dead-lettered


async def end_refused_request(bus: Bus, runs: RecordStore[RunRecord], data: bytes, error: Exception) -> None:
    """A request that is not a valid RunRequest still ends its run, if it names a usable run id:
    its record (made here for a request no submitter recorded, when it names a usable thread) says
    error, and its log gets `error` and `end`."""
    try:
        raw = json.loads(data)
    except ValueError:
        return
    run_id = raw.get("run_id") if isinstance(raw, dict) else None
    if not isinstance(run_id, str) or not is_valid_id(run_id):
        return
    thread_id = raw.get("thread_id")
    thread_id = thread_id if isinstance(thread_id, str) and is_valid_id(thread_id) else ""
    user_id = raw.get("user_id")
    message = f"the run request was refused: {error}"
    now = utcnow()

    def failed(rec: RunRecord | None) -> RunRecord | None:
        if rec is None and thread_id:  # a script's request: listed with its thread's runs, failed
            rec = RunRecord(
                run_id=run_id,
                thread_id=thread_id,
                user_id=user_id if isinstance(user_id, str) and user_id else "default",
                created_at=now,
            )
        if rec is None or rec.status.finished:
            return None
        info = ErrorInfo(code="InvalidRunRequest", message=message)
        update = {"status": RunStatus.ERROR, "ended_at": now, "updated_at": now, "error": info}
        return rec.model_copy(update=update)

    record = await runs.update(run_id, failed) or await runs.get(run_id)
    if record is not None and record.created_at == now:  # made here: index it as submitters do
        index = await bus.kv(bus.subjects.thread_runs_bucket)
        await index.put(thread_run_key(thread_id, run_id, now), b"")
    chat = chat_of(record.metadata.get("origin")) if record is not None else None
    known = record.events_partition if record is not None else None
    partition = known if known is not None else await run_partition(bus, run_id, chat)
    events = await EventLog.resume(bus, run_id, thread_id, 2, chat, partition)
    await events.emit("metadata", {"run_id": run_id, "thread_id": thread_id})
    await events.error("InvalidRunRequest", message)
    await events.emit("end", {"status": RunStatus.ERROR.value, "usage": {}})


async def ensure_ended(bus: Bus, request: RunRequest, record: RunRecord, attempt: int) -> None:
    """A run that ended without reaching a runner (cancelled while pending), or whose ending a
    delivery did not finish (it died between the record and `end`), still gets its `end`."""
    if is_given_up(record):  # its ending's own events, which a process ending it may be publishing
        await _end_given_up_log(bus, request, record)
        return
    partition = await events_partition(bus, request)
    last = await last_stored_event(bus, request.run_id, partition)
    if last is not None and decode(RunEvent, last.data or b"{}").event == "end":
        return
    events = await EventLog.resume(
        bus, request.run_id, request.thread_id, attempt, request_chat(request), partition
    )
    await events.emit(
        "metadata", {"run_id": request.run_id, "thread_id": request.thread_id, "attempt": attempt}
    )
    await events.emit("end", {"status": record.status.value, "usage": record.usage.model_dump()})


async def end_given_up(
    bus: Bus,
    runs: RecordStore[RunRecord],
    threads: RecordStore[ThreadRecord],
    request: RunRequest,
    reason: str,
    deliveries: int = 0,
) -> RunRecord:
    """End a run whose request was dead-lettered (`reason`: the consumer's), once, whichever process
    does it and however many do it at once; safe to repeat (a process that failed part-way).

    Its record says error with the reason (unless the run had finished: a finished run is never
    changed); whatever delivery may still run it is told to stop; its thread is let go; and its log
    ends with `metadata`, `error` and `end`, numbered on. None of it needs the thread's record (nor
    the run's) to be readable. `deliveries`: how often the request was handed out.

    Returns the run's record as it stands.
    """
    message = f"the run was given up: {reason}; see `antler dlq`"
    now = utcnow()
    made: list[bool] = []
    gave_up: list[bool] = []

    def given_up(rec: RunRecord | None) -> RunRecord | None:
        made.clear()
        gave_up.clear()
        if rec is not None and rec.status.finished:
            return None
        if rec is None:  # a script's request no runner got to record: listed with its thread's runs too
            made.append(True)
        base = rec or RunRecord.pending(request)
        gave_up.append(True)
        update = {
            "status": RunStatus.ERROR,
            "ended_at": now,
            "updated_at": now,
            "error": ErrorInfo(code=GIVEN_UP, message=message),
            # The ending's events are told apart from every delivery's (a stalled one may still publish).
            "attempt": max(base.attempt, deliveries) + 1,
        }
        return base.model_copy(update=update)

    def repair_run(run_id: str, stored: bytes) -> RunRecord:
        return salvage(RunRecord, stored, RunRecord.pending(request), fixed=("run_id",))

    repairing = RecordStore(runs.kv, RunRecord, repair=repair_run)
    found = await repairing.update_with_revision(request.run_id, given_up)
    assert found is not None
    record = found[0]
    if made:
        index = await bus.kv(bus.subjects.thread_runs_bucket)
        await index.put(thread_run_key(request.thread_id, request.run_id, request.created_at), b"")
    if gave_up:
        log.warning("run %s on thread %s given up: %s", request.run_id, request.thread_id, reason)
        # A delivery that stalled past ack_wait may still be running it: it stops, and, superseded by
        # the ending's attempt, neither ends the run again nor lets go of a thread that is not its own.
        s = bus.subjects
        stop = RunControl(run_id=request.run_id, action="cancel", reason="the run was given up")
        await bus.publish_core(s.run_control(request.run_id), stop)
        tasks = SubagentCancel(parent_run_id=request.run_id, reason="the parent run was given up")
        await bus.publish_core(s.subagent_cancel(request.run_id), tasks)
    await release_given_up(threads, request)
    # Given up (here or by a process racing this one), or finished by a delivery meanwhile, which
    # may have died before its `end`.
    await ensure_ended(bus, request, record, record.attempt + 1)
    if gave_up:
        labelled(RUNS_FINISHED, RunStatus.ERROR.value).inc()
    return record


def is_given_up(record: RunRecord) -> bool:
    """Whether the run ended because its request was given up (`end_given_up`)."""
    return record.status == RunStatus.ERROR and record.error is not None and record.error.code == GIVEN_UP


async def _end_given_up_log(bus: Bus, request: RunRequest, record: RunRecord) -> None:
    """The given-up run's `metadata`, `error` and `end`, each published once.

    Each has an id of its own for the ending's attempt (not its place in the log), and whatever is
    published is what the record says: a process racing another, or repeating what it did part-way,
    publishes the same event under the same id at the same place, which the stream drops as a
    duplicate, and goes on from the last one stored.
    """
    assert record.error is not None
    run_id, thread_id, attempt = request.run_id, request.thread_id, record.attempt
    ending: list[tuple[str, Any]] = [
        ("metadata", {"run_id": run_id, "thread_id": thread_id, "attempt": attempt}),
        ("error", {"error": record.error.code, "message": record.error.message}),
        ("end", {"status": record.status.value, "usage": record.usage.model_dump()}),
    ]
    ids = [f"ev:{run_id}:{attempt}:{event}" for event, _ in ending]
    seq, last_id = 0, None
    partition = await events_partition(bus, request)
    last = await last_stored_event(bus, run_id, partition)
    if last is not None:
        event = decode(RunEvent, last.data or b"{}")
        if event.event == "end":
            return
        seq, last_id = event.seq, (last.headers or {}).get(MSG_ID)
    done = ids.index(last_id) + 1 if last_id in ids else 0
    subject = bus.subjects.run_events_for(run_id, request_chat(request), partition)
    for (event_name, data), msg_id in list(zip(ending, ids, strict=True))[done:]:
        seq += 1
        event = RunEvent(
            run_id=run_id, thread_id=thread_id, seq=seq, event=event_name, data=data, attempt=attempt
        )
        await bus.publish(subject, event, msg_id=msg_id)
