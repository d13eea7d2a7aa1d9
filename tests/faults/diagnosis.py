"""What a lost answer's run was doing when the scenario gave up on it: the assertion message says
it, so a loss seen once on a busy machine (or in CI) can be understood without running it again.

For each lost message: its run (the router's id for it), the run's record (status, attempt, when it
started and ended, its error), the thread's record (which run holds it, which wait), the run's last
stored event, and the runners' durable on the runs stream (pending, waiting for an ack, redelivered).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterable

from bus import Bus
from bus.messages import InboundMessage, RunRecord, ThreadRecord
from bus.records import RecordStore
from channels.router.inbound import RUN_NAMESPACE


async def explain_lost(bus: Bus, lost: Iterable[InboundMessage], limit: int = 4) -> list[str]:
    """A line per lost message (at most `limit`), and one for the runs stream's durables."""
    s = bus.subjects
    runs = RecordStore(await bus.kv(s.runs_bucket), RunRecord)
    threads = RecordStore(await bus.kv(s.threads_bucket), ThreadRecord)
    lines: list[str] = []
    for message in list(lost)[:limit]:
        run_id = str(uuid.uuid5(RUN_NAMESPACE, message.dedupe_id()))
        parts = [f"  why {message.message_id}: run {run_id}"]
        try:
            run = await runs.get(run_id)
            if run is None:
                parts.append("no run record (the router never recorded it)")
            else:
                error = f" error={run.error.message!r}" if run.error else ""
                parts.append(
                    f"record status={run.status} attempt={run.attempt} started={run.started_at} "
                    f"ended={run.ended_at}{error}"
                )
                thread = await threads.get(run.thread_id)
                if thread is not None:
                    queue = [q.run_id for q in thread.queue]
                    parts.append(
                        f"thread {run.thread_id} active={thread.active_run_id} "
                        f"attempt={thread.active_attempt} queue={queue}"
                    )
            with contextlib.suppress(Exception):
                last = await bus.js.get_last_msg(s.run_events_stream, s.run_events(run_id))
                event = json.loads(last.data or b"{}")
                parts.append(
                    f"last event {event.get('event')} seq={event.get('seq')} attempt={event.get('attempt')}"
                )
        except Exception as exc:  # a diagnosis must not hide the verdict
            parts.append(f"(could not read: {exc!r})")
        lines.append("; ".join(parts))
    with contextlib.suppress(Exception):
        for info in await bus.js.consumers_info(s.runs_stream):
            lines.append(
                f"  runs durable {info.name}: pending={info.num_pending} ack_pending={info.num_ack_pending} "
                f"redelivered={info.num_redelivered} waiting={info.num_waiting}"
            )
    return lines
