"""One run per thread, across runner processes: taking a thread, waiting in its queue, giving it back.

The thread's KV record says which run holds it (`active_run_id`) and which wait
(`queue`, in submission order); every change is a compare-and-set, so two runner
processes never both take a thread. A run sent to a busy thread follows its
`multitask_strategy`: `reject`, `enqueue` (wait in order), or `interrupt`/`rollback`
(ask the holder to stop, then go next).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from bus import Bus, Delivery
from bus.messages import (
    ModelTokens,
    MultitaskStrategy,
    QueuedRun,
    RunControl,
    RunRecord,
    RunRequest,
    RunStatus,
    ThreadRecord,
    Usage,
    utcnow,
)
from bus.records import RecordStore, repair_by_key
from bus.run_events import chat_of
from bus.tasks import wait_for

log = logging.getLogger(__name__)

WAIT_POLL = 0.5  # seconds between checks of a busy thread held by another process
AFTER_WAIT = 60.0  # seconds an enqueued run waits for the run sent before it to take its turn
_GOES_NEXT = (MultitaskStrategy.INTERRUPT, MultitaskStrategy.ROLLBACK)


class Outcome(Enum):
    TAKEN = "taken"  # the run holds the thread now
    REJECTED = "rejected"  # busy, and the run's strategy is reject
    CANCELLED = "cancelled"  # the run was cancelled while it waited


@dataclass(frozen=True)
class Claim:
    outcome: Outcome
    holder: str | None = None  # the run holding the thread, when it was not taken


class ThreadClaims:
    """The thread claims of one runner process."""

    def __init__(self, bus: Bus, threads: RecordStore[ThreadRecord], runs: RecordStore[RunRecord]) -> None:
        self.bus = bus
        self.threads = threads
        self.runs = runs
        # Last known (record, revision) of a thread this process just took: saves re-reading it.
        self._revisions: dict[str, Any] = {}
        self._released: set[str] = set()  # runs that gave their thread back already
        self._attempts: dict[str, int] = {}  # run id -> the delivery of it handled here
        self._freed: dict[str, asyncio.Event] = {}  # thread id -> set when it may be free
        # Runs of one thread delivered here at once claim it in stream order (see `_in_stream_order`).
        self._arriving: dict[str, dict[str, int]] = {}
        self._arrived: dict[str, asyncio.Event] = {}
        self._since: dict[str, float] = {}  # run id -> when it began waiting for the run sent before it

    async def take(
        self,
        request: RunRequest,
        delivery: Delivery,
        cancelled: Callable[[], Awaitable[bool]],
        attempt: int | None = None,
        seen: tuple[ThreadRecord | None, int] | None = None,
    ) -> Claim:
        """Make this run the thread's active run, following its multitask strategy.

        Waits (without holding the consumer's slot) while the thread is busy; `cancelled` is
        asked before each try. `attempt`: this delivery's attempt at the run (default: the server's
        delivery count; the runner's `attempt_of`). `seen`: the thread's record and revision as the
        caller just read them (a steer run's look): the first try writes on them without a read (a
        record changed since costs one more try).
        """
        thread_id = request.thread_id
        self._attempts[request.run_id] = attempt or delivery.num_delivered
        self.arrive(request, delivery)
        try:
            await self._in_stream_order(thread_id, request.run_id)
            return await self._claim(request, delivery, cancelled, seen)
        finally:
            self._left(thread_id, request.run_id)

    def arrive(self, request: RunRequest, delivery: Delivery) -> None:
        """Note a delivery the moment it arrives, before its handler awaits anything: runs of the
        same thread delivered later wait for it to claim first (`_in_stream_order`)."""
        self._arriving.setdefault(request.thread_id, {})[request.run_id] = delivery.stream_seq

    def gone(self, request: RunRequest) -> None:
        """A delivery noted by `arrive` that will not (or no longer) claim: later runs go on."""
        self._left(request.thread_id, request.run_id)

    def wake(self, thread_id: str) -> None:
        """A run waiting for this thread looks again at once (it was cancelled, say)."""
        freed = self._freed.get(thread_id)
        if freed is not None:
            freed.set()

    async def release(
        self,
        request: RunRequest,
        outcome: RunStatus | None = None,
        title: str | None = None,
        usage: Usage | None = None,
        model_name: str | None = None,
        subagent_tokens: int = 0,
        waiting: bool = False,
        steering_added: list[str] | None = None,
    ) -> None:
        """Give the thread back if this run holds it (once per run), recording title, outcome and the
        tokens the run used; `waiting`: the run stopped for a person's answer (LangGraph's
        `interrupted` thread); `steering_added`: ids of held steering messages the run added (kept
        on the record until then: a run that dies first leaves them to its next delivery)."""
        if request.run_id in self._released:
            return
        status = "error" if outcome == RunStatus.ERROR else "interrupted" if waiting else "idle"
        mine = self._attempts.get(request.run_id)

        def release(rec: ThreadRecord | None) -> ThreadRecord | None:
            if rec is None or rec.active_run_id != request.run_id:
                return None
            if mine is not None and rec.active_attempt not in (None, mine):
                return None  # a later delivery of the run took the thread over (after a NATS outage)
            update: dict[str, Any] = {
                "active_run_id": None,
                "active_attempt": None,
                "status": status,
                "updated_at": utcnow(),
            }
            if title:
                update["title"] = title
            if steering_added:
                update["steering"] = [m for m in rec.steering if m.get("id") not in steering_added]
            if outcome is not None:
                used = usage or Usage()
                update["finished_runs"] = rec.finished_runs + 1
                update["usage"] = Usage(
                    input_tokens=rec.usage.input_tokens + used.input_tokens,
                    output_tokens=rec.usage.output_tokens + used.output_tokens,
                    total_tokens=rec.usage.total_tokens + used.total_tokens,
                )
                update["subagent_tokens"] = rec.subagent_tokens + subagent_tokens
                if model_name:
                    before = rec.tokens_by_model.get(model_name, ModelTokens())
                    now_used = ModelTokens(tokens=before.tokens + used.total_tokens, runs=before.runs + 1)
                    update["tokens_by_model"] = {**rec.tokens_by_model, model_name: now_used}
            return rec.model_copy(update=update)

        await self.threads.update(request.thread_id, release, known=self._revisions.pop(request.run_id, None))
        self._released.add(request.run_id)
        freed = self._freed.pop(request.thread_id, None)
        if freed is not None:
            freed.set()

    async def leave_queue(self, request: RunRequest) -> None:
        """Take the run out of the thread's queue (it was cancelled), and give the thread back."""

        def drop(rec: ThreadRecord | None) -> ThreadRecord | None:
            if rec is None or all(q.run_id != request.run_id for q in rec.queue):
                return None
            return rec.model_copy(update={"queue": [q for q in rec.queue if q.run_id != request.run_id]})

        await self.threads.update(request.thread_id, drop)
        await self.release(request)

    def steered_while_waiting(self, run_id: str) -> list[dict[str, Any]]:
        """The messages steered in while the thread waited for an answer, as the run found the thread
        when it took it (`ThreadRecord.steering`)."""
        known = self._revisions.get(run_id)
        return [dict(m) for m in known[0].steering] if known else []

    def forget(self, run_id: str) -> None:
        """The run's handling here is over."""
        self._released.discard(run_id)
        self._revisions.pop(run_id, None)
        self._attempts.pop(run_id, None)
        self._since.pop(run_id, None)

    # ------------------------------------------------------------------ internals

    async def _in_stream_order(self, thread_id: str, run_id: str) -> None:
        """Wait while a run of the same thread submitted earlier, delivered here too, has not claimed it yet.

        Deliveries are handled concurrently, so a later run could otherwise find the thread idle and
        take it before the earlier one gets to the thread record.
        """
        arriving = self._arriving[thread_id]
        mine = arriving[run_id]
        while any(seq < mine for other, seq in arriving.items() if other != run_id):
            event = self._arrived.setdefault(thread_id, asyncio.Event())
            try:
                await wait_for(event.wait(), WAIT_POLL)
            except TimeoutError:
                pass
            event.clear()

    def _left(self, thread_id: str, run_id: str) -> None:
        """This run made its first claim (or gave up): runs behind it may claim now."""
        arriving = self._arriving.get(thread_id)
        if arriving is not None:
            arriving.pop(run_id, None)
            if not arriving:
                self._arriving.pop(thread_id, None)
        event = self._arrived.pop(thread_id, None) if not arriving else self._arrived.get(thread_id)
        if event is not None:
            event.set()

    async def _claim(
        self,
        request: RunRequest,
        delivery: Delivery,
        cancelled: Callable[[], Awaitable[bool]],
        seen: tuple[ThreadRecord | None, int] | None = None,
    ) -> Claim:
        strategy = request.multitask_strategy
        signalled = False
        waiting = False
        while True:
            if await cancelled():
                return Claim(Outcome.CANCELLED)
            result = await self._try(request, delivery, seen)
            seen = None
            self._left(request.thread_id, request.run_id)  # in the thread record now: later runs may claim
            if result.outcome is not None:
                return Claim(result.outcome, result.holder)
            holder = result.holder
            if (
                strategy in (MultitaskStrategy.INTERRUPT, MultitaskStrategy.ROLLBACK)
                and not signalled
                and holder
            ):
                control = RunControl(
                    run_id=holder, action=strategy.value, reason=f"superseded by run {request.run_id}"
                )
                await self.bus.publish_core(self.bus.subjects.run_control(holder), control)
                signalled = True
            if not waiting:
                waiting = True
                delivery.yield_slot()
                log.info(
                    "run %s waits for thread %s (busy with %s)", request.run_id, request.thread_id, holder
                )
            freed = self._freed.setdefault(request.thread_id, asyncio.Event())
            try:
                await wait_for(freed.wait(), WAIT_POLL)
            except TimeoutError:
                pass

    async def _try(
        self, request: RunRequest, delivery: Delivery, seen: tuple[ThreadRecord | None, int] | None = None
    ) -> _Try:
        """One compare-and-set on the thread record: taken, refused, or queued (outcome None)."""
        result = _Try()
        strategy = request.multitask_strategy
        me = request.run_id

        async def claim(rec: ThreadRecord | None) -> ThreadRecord | None:
            result.outcome, result.holder = None, None
            now = utcnow()
            rec = rec or new_thread(request, now)
            queue = list(rec.queue)
            # Runs queued ahead whose requests are gone can never come: drop them.
            while queue and queue[0].run_id != me and await self._finished(queue[0].run_id):
                queue.pop(0)
            holder = rec.active_run_id
            free = holder in (None, me) or await self._finished(holder)
            result.holder = holder
            queued = next((q for q in queue if q.run_id == me), None)
            if queued is None:
                order = -1 if strategy in _GOES_NEXT else delivery.stream_seq
                queued = QueuedRun(run_id=me, order=order)
            # Those queued ahead: submitted earlier (or sent to go next); later ones wait behind this run.
            # Once queued, its place in the queue decides: two runs sent to go next share an order, and
            # each counting the other as ahead would leave the thread idle with both waiting forever.
            place = next((i for i, q in enumerate(queue) if q.run_id == me), None)
            if place is not None:
                ahead = queue[:place]
            else:
                ahead = [q for q in queue if q.order <= queued.order]
            # An earlier delivery of this run holds the thread (given up in a NATS outage, say): this
            # one goes on with it. Runs queued meanwhile, even ones submitted before it (they waited
            # for it to end), wait on: queued behind them it would wait for itself, and none would run.
            resuming = holder == me
            if resuming or (free and not ahead and not await self._after_pending(request, rec, queue)):
                result.outcome = Outcome.TAKEN
                self._since.pop(me, None)
                rest = [q for q in queue if q.run_id != me]
                update = {
                    "active_run_id": me,
                    "last_run_id": me,
                    "active_attempt": self._attempts.get(me, delivery.num_delivered),
                    "status": "busy",
                    "queue": rest,
                    "updated_at": now,
                }
                return rec.model_copy(update=update)
            if any(q.run_id == me for q in queue):
                return rec.model_copy(update={"queue": queue}) if queue != rec.queue else None
            if strategy == MultitaskStrategy.REJECT:  # busy, or others wait ahead of it
                result.outcome = Outcome.REJECTED
                return None
            # Enqueue: in submission order, whichever runner process got to the record first;
            # interrupt / rollback: next in line.
            position = sum(1 for q in queue if q.order <= queued.order)
            return rec.model_copy(update={"queue": [*queue[:position], queued, *queue[position:]]})

        taken = await self.threads.update_with_revision(request.thread_id, claim, known=seen)
        if result.outcome == Outcome.TAKEN:
            self._revisions[me] = taken
        return result

    async def _after_pending(self, request: RunRequest, rec: ThreadRecord, queue: list[QueuedRun]) -> bool:
        """Whether the run sent to this thread just before this one (`request.after`) has yet to take
        its turn: it is not active, not queued, not the last to have run, and its record says pending.

        Only enqueued runs wait so; and at most `AFTER_WAIT` seconds, in case that run's request was
        lost with its submitter (a stuck chat is worse than one answer out of order).
        """
        after = request.after
        if (
            after is None
            or request.multitask_strategy != MultitaskStrategy.ENQUEUE
            or after in (rec.active_run_id, rec.last_run_id)
            or any(q.run_id == after for q in queue)
        ):
            return False
        record = await self.runs.get(after)
        if record is None or record.status != RunStatus.PENDING:
            return False
        loop = asyncio.get_running_loop()
        since = self._since.setdefault(request.run_id, loop.time())
        if loop.time() - since > AFTER_WAIT:
            log.warning(
                "run %s takes thread %s although run %s, sent before it, has not started in %.0f s",
                request.run_id,
                request.thread_id,
                after,
                AFTER_WAIT,
            )
            return False
        return True

    async def _finished(self, run_id: str) -> bool:
        record = await self.runs.get(run_id)
        return record is None or record.status.finished


async def release_given_up(threads: RecordStore[ThreadRecord], request: RunRequest) -> None:
    """A run given up (its request dead-lettered) lets go of its thread, whichever delivery of it
    held the thread: every one of them is over, or left to be stopped. Taken out of the queue too.

    Repeating it changes nothing. A thread record that cannot be read is repaired (`bus.records.salvage`)
    and written back with the change, whatever store `threads` is.
    """
    me = request.run_id
    threads = RecordStore(threads.kv, ThreadRecord, repair=repair_by_key(ThreadRecord, "thread_id"))

    def let_go(rec: ThreadRecord | None) -> ThreadRecord | None:
        if rec is None:
            return None
        holding = rec.active_run_id == me
        if not holding and all(q.run_id != me for q in rec.queue):
            return None
        update: dict[str, Any] = {"queue": [q for q in rec.queue if q.run_id != me], "updated_at": utcnow()}
        if holding:
            update.update(
                active_run_id=None, active_attempt=None, status="error", finished_runs=rec.finished_runs + 1
            )
        return rec.model_copy(update=update)

    await threads.update(request.thread_id, let_go)


def new_thread(request: RunRequest, now: datetime) -> ThreadRecord:
    """The record of a thread its first run makes: a chat's says which chat (`channel`, `chat_id`:
    the router leaves a new chat's thread for its first run to record)."""
    chat = chat_of(request.origin)
    metadata = {"channel": chat[0], "chat_id": chat[1]} if chat is not None else {}
    return ThreadRecord(
        thread_id=request.thread_id, user_id=request.user_id, metadata=metadata, created_at=now
    )


@dataclass
class _Try:
    outcome: Outcome | None = None
    holder: str | None = None
