"""The agent runner: RunRequests in, run events out (the consumer's handlers; `component.run`
wires them to the bus, `steps` runs a run once its thread is taken).

One durable consumer on `<prefix>.runs.submit`, shared by every runner process.
For each request it takes the thread (at most one active run per thread, across
processes, through a compare-and-set on the thread's KV record), runs the lead
agent with the checkpointer, publishes every event to `<prefix>.runs.ev.<run_id>`
in order, and keeps the run and thread records current. The request is acked
only when the run has ended; if this process dies mid-run, the request is
redelivered and the next runner resumes from the last checkpoint.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from typing import Any

from agents.context import RunOptions
from agents.graph.assembly import PromptAssembly
from agents.graph.lead import AgentCache
from agents.runner.active_run import ActiveRun
from agents.runner.endings import end_given_up, end_refused_request, ensure_ended
from agents.runner.event_log import EventLog, request_chat
from agents.runner.steering import steer
from agents.runner.steps import RunSteps
from agents.runner.thread_claims import Outcome, ThreadClaims
from agents.runner.toolset import RunnerTools
from agents.threads.goal import GoalLoop
from agents.tools.thread_files import ThreadFiles
from bus import Bus, Delivery, EnvelopeError, Retry, decode
from bus.messages import (
    MemoryDocument,
    MultitaskStrategy,
    RunControl,
    RunRecord,
    RunRequest,
    RunStatus,
    ThreadRecord,
)
from bus.metrics import RUNS_RUNNING
from bus.records import RecordStore, repair_by_key
from bus.run_events import events_partition
from bus.runs import thread_run_key
from bus.tasks import cancel_and_wait
from config import AppConfig
from llm.guard import ModelCalls
from llm.pace import QUIET_WINDOW

log = logging.getLogger(__name__)

# `follow`s heard for runs not taken here (yet): kept this long, at most this many.
FOLLOW_KEPT_SECONDS = 120.0
FOLLOWS_KEPT = 10_000


def attempt_of(delivery: Delivery, record: RunRecord) -> int:
    """This delivery's attempt at the run: the server's delivery count, but never one an earlier
    delivery already ran as (the run's record keeps the last).

    A nats-server that was SIGKILLed can forget that it handed a request out (it writes its
    consumers' state down lazily) and hand it out again as a first delivery. Numbered 1 again, the
    new attempt's events would be taken for the first one's (their ids `ev:<run>:<attempt>:<seq>`)
    and dropped as duplicates, its `end` among them, and it would run the run's input a second time
    instead of resuming from the checkpoint.
    """
    if record.attempt and delivery.num_delivered <= record.attempt:
        return record.attempt + 1
    return delivery.num_delivered


class Runner:
    """Executes runs for one process; `run()` below wires it to the bus. Made by `open()`."""

    def __init__(
        self,
        bus: Bus,
        config: AppConfig,
        checkpointer: Any,
        runs: RecordStore[RunRecord],
        threads: RecordStore[ThreadRecord],
        memory: RecordStore[MemoryDocument],
    ) -> None:
        self.bus = bus
        self.config = config
        self.checkpointer = checkpointer
        self.runs = runs
        self.threads = threads
        self.tools = RunnerTools(bus, config)
        self.calls = ModelCalls(bus, config)  # the models' cluster budgets, and retries
        files = ThreadFiles(bus)
        self.agents = AgentCache(
            config,
            checkpointer,
            extra_tools=self.tools.own,
            task_tools=self.tools.task,
            calls=self.calls,
            files=files,
        )
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.claims = ThreadClaims(bus, threads, runs)
        self.goals = GoalLoop(bus, config, threads)
        self.memory_and_prompt = PromptAssembly(bus, config, memory)
        self.steps = RunSteps(
            bus,
            config,
            checkpointer,
            runs,
            self.claims,
            self.agents,
            self.tools,
            self.goals,
            self.memory_and_prompt,
        )
        self._runs: dict[str, ActiveRun] = {}  # the runs this process handles now, by run id
        # Runs a reader said it follows live before this process took them (`follow`), with when.
        self._follows: dict[str, float] = {}
        self._stoppers: set[asyncio.Task[None]] = set()

    @classmethod
    async def open(cls, bus: Bus, config: AppConfig, checkpointer: Any) -> Runner:
        """A runner with its stores open and its followers (prompt inputs, MCP, model budget) started."""
        s = bus.subjects
        runner = cls(
            bus,
            config,
            checkpointer,
            RecordStore(await bus.kv(s.runs_bucket), RunRecord),
            # A thread record that no longer validates (a value only a newer Antler knows, a hand edit)
            # must not stop the thread, every run of it failing to take it until dead-lettered: it is
            # read as far as it can be and written back repaired with the thread's next change.
            RecordStore(
                await bus.kv(s.threads_bucket), ThreadRecord, repair=repair_by_key(ThreadRecord, "thread_id")
            ),
            RecordStore(await bus.kv(s.memory_bucket), MemoryDocument),
        )
        await runner.memory_and_prompt.start()
        await runner.tools.mcp.start()
        await runner.calls.start()
        return runner

    def warm_up(self) -> None:
        """Import the model provider and compile the default agent now, not on the first run.

        That work blocks the event loop for a moment; during a run it would also
        stall the heartbeats of every other run in this process.
        """
        try:
            self.agents.get(RunOptions())
        except Exception as exc:  # reported properly, per run, when a run needs it
            log.info("default agent not ready yet (%s: %s)", type(exc).__name__, exc)

    # ------------------------------------------------------------------ control

    async def on_control(self, msg: Any) -> None:
        try:
            control = decode(RunControl, msg.data)
        except Exception:
            log.warning("ignoring unreadable run control message on %s", msg.subject)
            return
        run = self._runs.get(control.run_id)
        if control.action == "follow":
            if run is not None:
                run.followed(True)
            else:  # not taken yet (a stream that began with its run), by this process or another
                self._note_follow(control.run_id)
            return
        if run is None:
            return  # another runner's run (or already over)
        if control.action == "steer":
            taken = run.steer(control.messages)
            log.info(
                "run %s: %d message(s) from run %s %s",
                run.run_id,
                len(control.messages),
                control.by_run,
                "taken in" if taken else "refused (no model call to come)",
            )
            if msg.reply:
                await self.bus.nc.publish(msg.reply, b'{"ok": true}' if taken else b'{"ok": false}')
            return
        if not control.stops:
            return
        log.info("run %s: %s requested", control.run_id, control.action)
        run.ask_to_stop(control.action)
        if run.stream is not None:
            stopper = asyncio.create_task(cancel_and_wait(run.stream, every=0.1))
            self._stoppers.add(stopper)
            stopper.add_done_callback(self._stoppers.discard)
        self.claims.wake(run.thread_id)  # a run waiting for its thread notices at once
        if msg.reply:
            await self.bus.nc.publish(msg.reply, b'{"ok": true}')

    def _note_follow(self, run_id: str) -> None:
        """Remember for a while that a reader follows `run_id` (every runner process hears it; the
        one that takes the run sends its text live)."""
        now = time.monotonic()
        if len(self._follows) >= FOLLOWS_KEPT:
            self._follows = {r: at for r, at in self._follows.items() if now - at < FOLLOW_KEPT_SECONDS}
            while len(self._follows) >= FOLLOWS_KEPT:
                del self._follows[next(iter(self._follows))]  # the oldest
        self._follows[run_id] = now

    # ------------------------------------------------------------------ handling

    async def on_invalid(self, msg: Any, error: Exception) -> None:
        await end_refused_request(self.bus, self.runs, msg.data, error)

    async def on_dead_letter(self, msg: Any, reason: str) -> None:
        """A request given up (dead-lettered: it failed `max_deliver` times, or its runners died or
        hung in it past that) still ends its run, and lets go of its thread.

        Raises:
            Exception: it could not be ended; the consumer hands the request out again to try again.
        """
        try:
            request = decode(RunRequest, msg.data)
        except EnvelopeError:
            return  # refused as bad input: `on_invalid` ended its run
        await end_given_up(
            self.bus, self.runs, self.threads, request, reason, deliveries=msg.metadata.num_delivered or 0
        )
        self.claims.wake(request.thread_id)  # a run of this process waiting for the thread looks again

    async def handle(self, request: RunRequest, delivery: Delivery) -> None:
        # Before any await: a later run of the same thread, delivered in the same batch, must not
        # take the thread while this one is still reading its records.
        self.claims.arrive(request, delivery)
        try:
            await self._handle(request, delivery)
        finally:
            self.claims.gone(request)

    async def _handle(self, request: RunRequest, delivery: Delivery) -> None:
        created: list[bool] = []

        def pending_record(current: RunRecord | None) -> RunRecord | None:
            if current is not None:
                return None  # its submitter recorded it (and indexed it)
            created.append(True)
            return RunRecord.pending(request)

        # The thread's record is read while the run's is: the claim (or a steer run's look) writes on
        # what it saw without a read of its own, one round trip less before the run starts (a record
        # changed meanwhile costs the claim one more try).
        known, found = await asyncio.gather(
            self.runs.update_with_revision(request.run_id, pending_record),
            self.threads.get_with_revision(request.thread_id),
        )
        assert known is not None
        if created:  # a bare RunRequest from a script: list it with its thread's runs too
            index = await self.bus.kv(self.bus.subjects.thread_runs_bucket)
            await index.put(thread_run_key(request.thread_id, request.run_id, request.created_at), b"")
        record = known[0]
        attempt = attempt_of(delivery, record)
        if record.status.finished:
            log.info("run %s already %s; not running it again", request.run_id, record.status.value)
            await ensure_ended(self.bus, request, record, attempt)
            return
        earlier = self._runs.get(request.run_id)
        if earlier is not None:
            # Redelivered while this process still runs it (the loop stalled past ack_wait):
            # the first handler owns the run; this delivery just waits and acks with it.
            log.warning("run %s redelivered while still running here; waiting for it", request.run_id)
            await earlier.done.wait()
            finished = await self.runs.get(request.run_id)
            if finished is None or not finished.status.finished:
                raise Retry("the earlier delivery stopped before the run ended", delay=0.5)
            # Its record says ended, but the earlier delivery may have been given up (NATS away past
            # ack_wait) between the record and its `end`: whoever follows the run must see one.
            await ensure_ended(self.bus, request, finished, attempt)
            return
        chat, partition = request_chat(request), await events_partition(self.bus, request)
        events = await EventLog.resume(self.bus, request.run_id, request.thread_id, attempt, chat, partition)
        run = self._runs[request.run_id] = ActiveRun(request, attempt, events)
        run.thread_seen = found if found is not None else (None, 0)
        run.quiet_window = max(QUIET_WINDOW, self.config.channels.stream_update_seconds / 2)
        followed = request.followed if request.followed is not None else request.origin is None
        run.followed(self._follows.pop(request.run_id, None) is not None or followed)
        try:
            with RUNS_RUNNING.track_inprogress():
                await run.traced(self._claim_and_execute(run, delivery, known))
        finally:
            events.close()  # deltas still held belong to a run left to another delivery
            del self._runs[request.run_id]
            run.done.set()
            self.claims.forget(request.run_id)

    async def _claim_and_execute(
        self, run: ActiveRun, delivery: Delivery, known: tuple[RunRecord, int]
    ) -> None:
        request = run.request
        if request.multitask_strategy == MultitaskStrategy.STEER:
            steered = await steer(self.bus, self.threads, run)
            if steered is not None:
                await self.steps.steered(run, *steered)
                return
        just_read = [known[0]]  # the first check before taking the thread needs no second read
        claim = await self.claims.take(
            request,
            delivery,
            lambda: self._cancel_requested(run, just_read.pop() if just_read else None),
            run.attempt,
            seen=run.thread_seen,
        )
        if claim.outcome is Outcome.CANCELLED:
            await self.steps.interrupted(run)
            return
        if claim.outcome is Outcome.REJECTED:
            await run.events.emit("metadata", {"run_id": request.run_id, "thread_id": request.thread_id})
            message = (
                f"thread {request.thread_id} is busy with run {claim.holder}; wait for it, "
                "or send the run with multitask_strategy enqueue or interrupt"
            )
            await self.steps.fail(run, "ThreadBusyError", message)
            return
        # Messages steered in while the thread waited for an answer: before this run's next model call.
        run.take_held_steering(self.claims.steered_while_waiting(request.run_id))
        # Not ended here (given up in a NATS outage, stopped with the process, failed on the bus):
        # the thread stays this run's, as when its process dies. Its request comes again and that
        # delivery resumes it holding the thread (or, dead-lettered, lets the thread go); a run sent
        # after it waits meanwhile. Given back here, the thread looked free with this run as its
        # last, and the next run of the chat took it and answered first.
        await self.steps.execute(run, known)
        await self.claims.release(request)

    async def _cancel_requested(self, run: ActiveRun, record: RunRecord | None = None) -> bool:
        """Cancelled by a control message to this process, or marked interrupted while pending
        (`record`: the run's record as just read, if it was)."""
        if run.cancel is not None:
            return True
        if record is None:
            record = await self.runs.get(run.run_id)
        if record is not None and record.status == RunStatus.INTERRUPTED:
            run.ask_to_stop("cancel")
            return True
        return False
