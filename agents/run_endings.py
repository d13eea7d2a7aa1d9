"""Runs that end without running: a refused request, and a run ended before a runner reached it.

Whoever follows `runs.ev.<run_id>` must always see an `end`, never wait forever.
"""

from __future__ import annotations

import json

from nats.js.errors import NotFoundError

from agents.event_log import EventLog, chat_of, request_chat
from bus import Bus, decode
from bus.messages import ErrorInfo, RunEvent, RunRecord, RunRequest, RunStatus, is_valid_id, utcnow
from bus.records import RecordStore
from bus.runs import thread_run_key


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
    events = await EventLog.resume(bus, run_id, thread_id, attempt=2, chat=chat)
    await events.emit("metadata", {"run_id": run_id, "thread_id": thread_id})
    await events.error("InvalidRunRequest", message)
    await events.emit("end", {"status": RunStatus.ERROR.value, "usage": {}})


async def ensure_ended(bus: Bus, request: RunRequest, record: RunRecord, attempt: int) -> None:
    """A run that ended without reaching a runner (cancelled while pending) still gets its `end`."""
    try:
        last = await bus.js.get_last_msg(
            bus.subjects.run_events_stream, bus.subjects.run_events(request.run_id)
        )
        if decode(RunEvent, last.data or b"{}").event == "end":
            return
    except NotFoundError:
        pass
    events = await EventLog.resume(bus, request.run_id, request.thread_id, attempt, request_chat(request))
    await events.emit(
        "metadata", {"run_id": request.run_id, "thread_id": request.thread_id, "attempt": attempt}
    )
    await events.emit("end", {"status": record.status.value, "usage": record.usage.model_dump()})
