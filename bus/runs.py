"""Reading a run's event log: every event from the first (or after a given one) until `end`.

Reads the run's `RUN_EVENTS_<k>` stream (`bus.run_events`) with an ordered consumer, so nothing is missed even
when the reader starts late or reconnects: that is what SSE resume, `join` and
chat replies are built on.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncGenerator
from datetime import datetime

from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy

from bus.connection import Bus
from bus.deltas import rest_of
from bus.messages import RunControl, RunEvent, RunRecord, RunRequest, RunStatus, decode, utcnow
from bus.run_events import events_streams, with_events_partition
from bus.tasks import cancel_and_wait, wait_for

END = "end"
GAP_WAIT = 2.0  # seconds an out-of-order event is held back for a missing earlier one
EARLY_KEPT = 1000  # live parts kept while the log catches up with them (a reader far behind drops them)


async def follow_run(
    bus: Bus,
    run_id: str,
    *,
    after_seq: int = 0,
    timeout: float | None = None,
    live: bool = False,
    shown_parts: int = 0,
) -> AsyncGenerator[RunEvent, None]:
    """Yield the run's events in order of their `seq`, from `after_seq + 1`, ending after `end`.

    Events are normally stored in order. After a server restart, an event the
    runner had to publish again can be stored after later ones: it is held back
    and put in its place; a gap that stays open for `GAP_WAIT` seconds (or at
    `end`, when only one stream is read) is skipped. A run whose `end` is at or
    before `after_seq` yields nothing.

    With `live`, the reader says it follows (`RunControl` `follow`: a run nobody followed, a chat's,
    sends its deltas live from then on), and text the runner sends live (`RunEvent.part`, not stored
    yet) is yielded as it comes, once the reader has caught up with the log: the live parts of the
    next stored event, in order (a part lost on the way stops them until that event). The stored
    event then yields only the parts not shown (`bus.deltas.rest_of`), or nothing if all were.
    `shown_parts`: a reader resuming after `after_seq` had shown that many live parts of the event
    after it (an SSE client's last event id names them).

    Raises:
        TimeoutError: `timeout` seconds passed without the next event.
    """
    queue: asyncio.Queue[RunEvent] = asyncio.Queue()

    async def on_msg(msg: Msg) -> None:
        queue.put_nowait(decode(RunEvent, msg.data))

    # Live first: a delta sent while the stored log is being subscribed to is not missed.
    live_sub = await bus.nc.subscribe(bus.subjects.run_live(run_id), cb=on_msg) if live else None
    if live:  # a run nobody followed (a chat's) sends its text live from now on
        await bus.publish_core(bus.subjects.run_control(run_id), RunControl(run_id=run_id, action="follow"))
    # Its partition's stream, and during an upgrade the unsplit one too: the `seq` order below merges them.
    subs = [
        await bus.js.subscribe(
            bus.subjects.run_events(run_id),
            stream=stream,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.ALL,
            cb=on_msg,
        )
        for stream in await events_streams(bus, run_id, wait=timeout)
    ]
    loop = asyncio.get_running_loop()
    expected = after_seq + 1
    held: dict[int, RunEvent] = {}
    gap_since = 0.0
    # The next stored event's live parts shown: its seq, the attempt they came from, how many, and
    # whether one went missing (the rest then waits for the stored event).
    shown: tuple[int, int | None, int, bool] = (expected, None, shown_parts, False)

    def rest(event: RunEvent) -> RunEvent | None:
        """`event` without the live parts already shown of it (None: nothing left)."""
        seq, attempt, count, _ = shown
        if event.seq != seq or event.parts is None or attempt not in (None, event.attempt):
            return event
        data = rest_of(event.data, event.parts, count)
        if data is None:
            return None
        return event.model_copy(update={"data": data, "parts": None}) if count else event

    early: dict[int, list[RunEvent]] = {}  # live parts of stored events not reached yet

    def take_live(event: RunEvent) -> bool:
        """Whether the live part of the next stored event is to be shown now (the next in order)."""
        nonlocal shown
        seq, attempt, count, stopped = shown if shown[0] == event.seq else (event.seq, None, 0, False)
        if stopped or attempt not in (None, event.attempt) or (event.part or 0) < count:
            return False
        if (event.part or 0) > count:  # one went missing: the rest comes with the stored event
            shown = (seq, attempt, count, True)
            return False
        shown = (seq, event.attempt, count + 1, False)
        return True

    try:
        while True:
            wait = timeout
            if held:
                left = max(gap_since + GAP_WAIT - loop.time(), 0.0)
                wait = left if wait is None else min(wait, left)
            try:
                event = await wait_for(queue.get(), wait)
            except TimeoutError:
                if not held:
                    raise
                for seq in sorted(held):  # the gap did not fill: go on without it
                    if (kept := rest(held[seq])) is not None:
                        yield kept
                    if held[seq].event == END:
                        return
                expected, held = max(held) + 1, {}
                continue
            if event.part is not None:  # live: the next stored event's, in order, once caught up
                if event.seq < expected:
                    continue  # its stored event came already
                if held or event.seq > expected:  # the log is behind the live text: keep it a moment
                    if sum(len(parts) for parts in early.values()) < EARLY_KEPT:
                        early.setdefault(event.seq, []).append(event)
                    continue
                if take_live(event):
                    yield event
                continue
            if event.seq < expected:
                if event.event == END:
                    return  # over before the reader's position
                continue  # already yielded, or skipped with its gap
            held[event.seq] = event
            if len(held) == 1:
                gap_since = loop.time()
            # With two streams read (an upgrade), an earlier event may come after `end` from the other.
            ended = event.event == END and len(subs) == 1
            while expected in held or (ended and held):
                seq = expected if expected in held else min(held)
                current = held.pop(seq)
                expected = seq + 1
                gap_since = loop.time()
                if (kept := rest(current)) is not None:
                    yield kept
                if current.event == END:
                    return
            if not held:  # caught up: live parts that came before the log reached them
                for seq in [seq for seq in early if seq < expected]:
                    del early[seq]
                for part in sorted(early.pop(expected, []), key=lambda e: e.part or 0):
                    if take_live(part):
                        yield part
    finally:
        for sub in subs:
            await sub.unsubscribe()
        if live_sub is not None:
            await live_sub.unsubscribe()


async def follow_run_with_keepalives(
    bus: Bus, run_id: str, every: float, *, after_seq: int = 0, live: bool = False, shown_parts: int = 0
) -> AsyncGenerator[RunEvent | None, None]:
    """`follow_run`, with a None each time `every` seconds pass without an event: the moment to tell
    whoever waits on the other end (an HTTP client, a protocol caller) that the run goes on."""
    events = follow_run(bus, run_id, after_seq=after_seq, live=live, shown_parts=shown_parts)
    waiter: asyncio.Task[RunEvent | None] | None = None
    try:
        while True:
            waiter = waiter or asyncio.create_task(anext(events, None))
            done, _ = await asyncio.wait([waiter], timeout=every)
            if not done:
                yield None
                continue
            event, waiter = waiter.result(), None
            if event is None:
                return
            yield event
    finally:
        if waiter is not None:
            await cancel_and_wait(waiter)
        await events.aclose()


async def collect_run(bus: Bus, run_id: str, *, timeout: float = 30.0) -> list[RunEvent]:
    """All of a run's events up to and including `end`."""
    return [event async for event in follow_run(bus, run_id, timeout=timeout)]


async def cancel_run(bus: Bus, run_id: str, action: str = "cancel", reason: str | None = None) -> None:
    """Stop a run wherever it is: running (its runner gets the signal) or not yet started.

    A run still pending is marked interrupted in its record, so a runner that
    fetches it later ends it at once instead of starting it.
    """
    from bus.messages import RunControl, utcnow
    from bus.records import RecordStore

    store = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)

    def interrupt_pending(record: RunRecord | None) -> RunRecord | None:
        if record is None or record.status != RunStatus.PENDING:
            return None
        now = utcnow()
        return record.model_copy(update={"status": RunStatus.INTERRUPTED, "ended_at": now, "updated_at": now})

    await store.update(run_id, interrupt_pending)
    await bus.publish_core(
        bus.subjects.run_control(run_id), RunControl(run_id=run_id, action=action, reason=reason)
    )


async def submit_run(bus: Bus, request: RunRequest) -> RunRecord | None:
    """Record a run as pending, index it under its thread, then publish its request.

    With the record in place first, the run can be cancelled, listed and joined from the moment
    this returns, even before a runner has picked it up; a new run costs no read.

    Safe to call again for the same run id, as a request made before must be (a chat message
    delivered again, a handler retried after a failure part-way): the record already there is
    kept, and its request is published again while the run is still pending and younger than half
    the server's dedupe window, which drops a second copy of a request that did arrive. (A record
    alone does not prove the request was stored: its submitter may have died in between, or, in a
    cluster, the publish failed while the runs stream elected a new leader.) Later, or once the
    run has started or ended, a second copy could start the run twice, so it is left alone.

    Returns:
        The run's pending record once its request is published; None when it was submitted before
        and is not published again.
    """
    from bus.records import RecordStore

    request = await with_events_partition(bus, request)
    record = RunRecord.pending(request)
    store = RecordStore(await bus.kv(bus.subjects.runs_bucket), RunRecord)
    if not await store.create(request.run_id, record):
        existing = await store.get(request.run_id)
        if existing is not None:  # the same index key, request and events' stream as the first time
            update: dict[str, object] = {"created_at": existing.created_at}
            if existing.events_partition is not None:
                update["events_partition"] = existing.events_partition
            request = request.model_copy(update=update)
        window = bus.config.dedupe_window_seconds / 2  # to spare: the clocks of two processes
        if (
            existing is None
            or existing.status != RunStatus.PENDING
            or (utcnow() - existing.created_at).total_seconds() > window
        ):
            if existing is not None:  # listed, in case the first try stopped before that
                await _list_with_thread(bus, request)
            return None
        record = existing
    # Listed with its thread and published side by side (one round trip of waiting, not two).
    await asyncio.gather(
        _list_with_thread(bus, request), bus.publish(bus.subjects.runs_submit, request, msg_id=request.run_id)
    )
    return record


class SubmissionOrder:
    """The run a submitter last sent to each thread, stamped on the next as `RunRequest.after`.

    Two runner processes may fetch two queued runs of one thread at once; without this, the later
    one could find the thread idle and take it before the earlier one reached the thread record
    (a chat's answers would come out of order). A runner does not let an enqueued run take an idle
    thread while its `after` is still pending (`agents.runner.thread_claims`). Bounded: the threads seen
    last are kept; a thread forgotten here only loses the stamp, not correctness of anything else.
    """

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._last: OrderedDict[str, str] = OrderedDict()

    def knows(self, thread_id: str) -> bool:
        """Whether this submitter remembers the last run it sent to the thread."""
        return thread_id in self._last

    def stamp(self, request: RunRequest) -> RunRequest:
        """`request` with `after` set to the run sent to its thread before it (if any), noted as last."""
        before = self._last.get(request.thread_id)
        self._last[request.thread_id] = request.run_id
        self._last.move_to_end(request.thread_id)
        while len(self._last) > self.size:
            self._last.popitem(last=False)
        if before is None or before == request.run_id or request.after is not None:
            return request
        return request.model_copy(update={"after": before})


async def latest_run(bus: Bus, thread_id: str) -> str | None:
    """The run submitted last to a thread, by anyone (the per-thread index's newest key), or None.

    For a submitter that does not remember the thread (it took over another's chats): its next run
    goes `after` this one, as if it had submitted it. One read: the last message under the thread's
    keys in the bucket's stream (a key deleted since names a finished run: harmless as `after`).
    """
    from bus.split_kv import last_key

    key = await last_key(bus, bus.subjects.thread_runs_bucket, f"{thread_id}.>")
    return key.rsplit(".", 1)[-1] if key else None


async def _list_with_thread(bus: Bus, request: RunRequest) -> None:
    index = await bus.kv(bus.subjects.thread_runs_bucket)
    await index.put(thread_run_key(request.thread_id, request.run_id, request.created_at), b"")


def thread_run_key(thread_id: str, run_id: str, created_at: datetime) -> str:
    """A run's key in the per-thread index (`Subjects.thread_runs_bucket`): sorted keys are in the
    order the runs were submitted."""
    return f"{thread_id}.{int(created_at.timestamp() * 1000):013d}.{run_id}"
