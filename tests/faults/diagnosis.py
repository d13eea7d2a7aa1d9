"""What a lost or overtaken answer's run was doing when the scenario judged it: the assertion
message says it, so a fault seen once on a busy machine (or in CI) can be understood without
running it again.

For each message: its run (the router's id for it), the run's record (status, attempt, when it
started and ended, its error), the thread's record (which run holds it, which wait), every event of
the run stored in its partition's stream (event, seq, attempt, stream sequence, when stored), and
its final replies stored in CHAT_OUT; then the runners' durable on the runs stream and the routers'
durables on the run-event streams (pending, waiting for an ack, redelivered).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterable

from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from bus import Bus
from bus.chat_partitions import chat_partitions
from bus.messages import InboundMessage, RunRecord, ThreadRecord
from bus.records import RecordStore
from bus.run_events import events_streams
from channels.router.inbound import RUN_NAMESPACE

READ_WAIT = 1.0  # seconds a read of a stream waits for more


async def explain_lost(bus: Bus, lost: Iterable[InboundMessage], limit: int = 4) -> list[str]:
    """A few lines per message (at most `limit` messages), and one per durable that carries runs."""
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
            parts.append("events " + await _events(bus, run_id))
            parts.append("replies " + await _replies(bus, run_id))
        except Exception as exc:  # a diagnosis must not hide the verdict
            parts.append(f"(could not read: {exc!r})")
        lines.append("; ".join(parts))
    lines.extend(await _durables(bus))
    return lines


async def _read(bus: Bus, stream: str, subject: str) -> list[tuple[int, str, dict[str, object]]]:
    """(stream sequence, stored at, payload) of every message on `subject` in `stream`."""
    sub = await bus.js.pull_subscribe(
        subject,
        stream=stream,
        config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.NONE),
    )
    found: list[tuple[int, str, dict[str, object]]] = []
    try:
        while True:
            try:
                batch = await sub.fetch(256, timeout=READ_WAIT)
            except Exception:  # nothing more within the wait
                return found
            for msg in batch:
                meta = msg.metadata
                at = meta.timestamp.strftime("%H:%M:%S.%f")[:-3] if meta.timestamp else "?"
                with contextlib.suppress(ValueError):
                    found.append((meta.sequence.stream, at, json.loads(msg.data or b"{}")))
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()


async def _events(bus: Bus, run_id: str) -> str:
    shown = []
    for stream in await events_streams(bus, run_id):
        for seq, at, event in await _read(bus, stream, bus.subjects.run_events(run_id)):
            shown.append(
                f"{event.get('event')}#{event.get('seq')}/a{event.get('attempt')}@{stream}:{seq} {at}"
            )
    return "[" + ", ".join(shown) + "]" if shown else "none stored"


async def _replies(bus: Bus, run_id: str) -> str:
    s = bus.subjects
    shown = []
    for seq, at, reply in await _read(bus, s.chat_out_stream, s.chat_out_all):
        if reply.get("run_id") == run_id and reply.get("kind") != "partial":
            shown.append(f"{reply.get('kind')}@{seq} {at}")
    return "[" + ", ".join(shown) + "]" if shown else "no final stored"


async def _durables(bus: Bus) -> list[str]:
    s = bus.subjects
    streams = [s.runs_stream] + [s.run_events_partition_stream(k) for k in range(await chat_partitions(bus))]
    lines = []
    for stream in streams:
        with contextlib.suppress(Exception):
            for info in await bus.js.consumers_info(stream):
                if info.config.ack_policy != AckPolicy.EXPLICIT:
                    continue  # a reader's, not a component's
                floor = info.ack_floor.stream_seq if info.ack_floor else "?"
                lines.append(
                    f"  {stream} durable {info.name}: pending={info.num_pending} "
                    f"ack_pending={info.num_ack_pending} redelivered={info.num_redelivered} "
                    f"waiting={info.num_waiting} acked_to={floor}"
                )
    return lines
