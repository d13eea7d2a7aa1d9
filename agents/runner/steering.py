"""A `steer` run: its messages go into the thread's running run instead of waiting for it to end.

The runner taking a steer run looks at the thread: if another run holds it, the messages are sent to
that run (`runs.ctl.<run>`, action `steer`, a request) and its runner replies once the run has them
(`ActiveRun.steer`); the steer run then ends at once, its log saying which run took it in
(`steered`). When the thread's run has stopped to wait for a person's answer (an approval), the
messages are kept on the thread record (`ThreadRecord.steering`) for the run that answers it, which
adds them before its next model call; running the steer run then would throw the waiting request
away. When nobody answers yes (the run is ending, its runner is gone) the steer run runs as an
enqueued run would: a message is never lost, at worst it is answered on its own.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from agents.runner.active_run import ActiveRun
from bus import Bus
from bus.messages import RunControl, ThreadRecord
from bus.records import RecordStore

log = logging.getLogger(__name__)

STEER_TIMEOUT = 5.0  # seconds the holder's runner has to say it took the messages in
STEERED = "steered"  # the steer run's event: {"run_id": the run that took its messages in}


def steering_messages(request_input: Any) -> list[dict[str, Any]]:
    """The messages a steer run brings (its input's), as dicts."""
    messages = request_input.get("messages") if isinstance(request_input, dict) else None
    found = []
    for message in messages or []:
        if isinstance(message, dict):
            found.append(message)
        elif isinstance(message, str):
            found.append({"role": "user", "content": message})
    return found


async def steer(bus: Bus, threads: RecordStore[ThreadRecord], run: ActiveRun) -> tuple[str, bool] | None:
    """Hand the run's messages to the run holding its thread, or keep them for the run that answers
    the approval the thread waits for: (that run's id, whether it waits), once done; None when the
    steer run is to run on its own."""
    if not steering_messages(run.request.input):
        return None
    if run.thread_seen is None:
        found = await threads.get_with_revision(run.request.thread_id)
        # Its claim, if it runs on its own, writes on what it saw (a new thread's: none) without a read.
        run.thread_seen = found if found is not None else (None, 0)
    else:  # read as the run was taken (`Runner._handle`)
        found = run.thread_seen if run.thread_seen[0] is not None else None
    if found is not None and found[0].status == "interrupted" and found[0].active_run_id is None:
        waiting = await hold_for_waiting_thread(threads, run, found)
        return (waiting, True) if waiting is not None else None
    taken = await steer_into_active_run(bus, run, found[0] if found else None)
    return (taken, False) if taken is not None else None


async def steer_into_active_run(bus: Bus, run: ActiveRun, thread: ThreadRecord | None) -> str | None:
    """Hand the run's messages to the run holding its thread; that run's id once it took them in."""
    request = run.request
    messages = steering_messages(request.input)
    holder = thread.active_run_id if thread is not None else None
    if holder is None or holder == request.run_id or thread is None or thread.user_id != request.user_id:
        return None
    control = RunControl(run_id=holder, action="steer", messages=messages, by_run=request.run_id)
    try:
        reply = await bus.nc.request(
            bus.subjects.run_control(holder), control.model_dump_json().encode(), timeout=STEER_TIMEOUT
        )
        taken = bool(json.loads(reply.data).get("ok"))
    except Exception as exc:  # nobody took it (the run just ended, its runner is gone): run it ourselves
        log.info("run %s could not steer run %s (%s); it runs on its own", request.run_id, holder, exc)
        return None
    if not taken:
        log.info("run %s: run %s takes no more messages; it runs on its own", request.run_id, holder)
        return None
    log.info("run %s steered into run %s on thread %s", request.run_id, holder, request.thread_id)
    return holder


async def hold_for_waiting_thread(
    threads: RecordStore[ThreadRecord], run: ActiveRun, known: tuple[ThreadRecord, int]
) -> str | None:
    """Keep the run's messages on its thread while the thread waits for a person's answer; the run
    that waits, once they are kept (None: the thread does not wait any more, nothing was kept)."""
    request = run.request
    messages = [
        # Ids from the steer run: a run that adds them again (resumed after a crash) replaces them.
        {**message, "id": message.get("id") or f"steer-{request.run_id}-{n}"}
        for n, message in enumerate(steering_messages(request.input))
    ]
    kept: list[str] = []

    def keep(rec: ThreadRecord | None) -> ThreadRecord | None:
        kept.clear()
        if rec is None or rec.status != "interrupted" or rec.active_run_id is not None or not messages:
            return None
        if rec.user_id != request.user_id:
            return None
        kept.append(rec.last_run_id or "")
        known = {m.get("id") for m in rec.steering}
        fresh = [m for m in messages if m["id"] not in known]  # this request delivered again
        return rec.model_copy(update={"steering": [*rec.steering, *fresh]}) if fresh else None

    found = await threads.update(request.thread_id, keep, known=known)
    if not kept or found is None:
        return None
    log.info(
        "run %s: thread %s waits for an answer; its messages wait with it", request.run_id, request.thread_id
    )
    return kept[0]
