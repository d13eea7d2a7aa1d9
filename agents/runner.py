"""The agent runner: RunRequests in, run events out.

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
from functools import partial
from typing import Any

from langchain_core.tools import BaseTool

from agents.active_run import ActiveRun, finish_run
from agents.agent_tools import make_agent_tools, tool_group_map
from agents.assembly import PromptAssembly
from agents.browser_tools import make_browser_tools
from agents.checkpoints import checkpointer_ready, rollback
from agents.context import RunOptions
from agents.errors import AgentError, ModelConfigError
from agents.event_log import EventLog, request_chat
from agents.goal import GoalLoop
from agents.lead import AgentCache
from agents.mcp_tools import McpServers
from agents.patches import inline_trace_bookkeeping
from agents.run_endings import end_given_up, end_refused_request, ensure_ended
from agents.run_input import run_timeout
from agents.run_setup import CannotRun, Ready, ready_to_run
from agents.sandbox_tools import make_sandbox_tools, make_view_image_tool
from agents.schedule_tools import make_schedule_tools
from agents.task_tool import make_task_tool
from agents.thread_claims import Outcome, ThreadClaims
from agents.thread_files import ThreadFiles
from agents.upload_tools import make_upload_tools
from bus import Bus, Consumer, Delivery, EnvelopeError, NotStored, Retry, decode, run_consumers
from bus.capacity import Capacity, default_memory_mb
from bus.health import component_degraded
from bus.messages import (
    ErrorInfo,
    MemoryDocument,
    RunControl,
    RunRecord,
    RunRequest,
    RunStatus,
    ThreadRecord,
    utcnow,
)
from bus.metrics import RUNS_RUNNING
from bus.records import RecordStore, repair_by_key
from bus.runs import thread_run_key
from bus.tasks import cancel_and_wait
from config import AppConfig, ConfigError, MissingEnvError
from llm.guard import ModelCalls
from llm.usable import model_problem

log = logging.getLogger(__name__)

DURABLE = "runner"


def own_tools(bus: Bus, config: AppConfig) -> list[BaseTool]:
    """The runner's built-in tools, bound to its bus connection (the task tool aside)."""
    return [
        *make_sandbox_tools(bus),
        make_view_image_tool(bus),
        *make_agent_tools(bus, config),
        *make_schedule_tools(bus),
        *make_upload_tools(bus),
        *make_browser_tools(bus, config),
    ]


def build_tool_schemas(config: AppConfig) -> None:
    """Build the built-in tools' argument schemas once (`agents.tool_decorator`), bound to no bus:
    `antler.forkserver` does it before forking, so no runner process builds its own."""
    unbound: Any = None
    own_tools(unbound, config)
    make_task_tool(unbound, config)


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
        self._own_tools = own_tools(bus, config)
        task = make_task_tool(bus, config)
        self.calls = ModelCalls(bus, config)  # the models' cluster budgets, and retries
        files = ThreadFiles(bus)
        self.agents = AgentCache(
            config, checkpointer, extra_tools=self._own_tools, task_tool=task, calls=self.calls, files=files
        )
        reserved = {t.name for t in self._own_tools} | {"task", "ask_clarification", "present_files"}
        self.mcp = McpServers(bus, reserved=reserved, role="runner")
        self._mcp_version = 0
        self._tool_groups = tool_group_map(config, [])
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.claims = ThreadClaims(bus, threads, runs)
        self.goals = GoalLoop(bus, config, threads)
        self.memory_and_prompt = PromptAssembly(bus, config, memory)
        self._runs: dict[str, ActiveRun] = {}  # the runs this process handles now, by run id
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
        await runner.mcp.start()
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

    async def _current_tools(self) -> None:
        """MCP tools as configured now: a changed set recompiles the agents (once per change)."""
        version, tools = await self.mcp.current()
        if version != self._mcp_version:
            deferred = self.config.tool_search.enabled
            self.agents.extra_tools = [*self._own_tools, *([] if deferred else tools)]
            self.agents.deferred_tools = list(tools) if deferred else []
            self.agents.clear()
            self._tool_groups = tool_group_map(self.config, list(tools))
            self._mcp_version = version

    # ------------------------------------------------------------------ control

    async def on_control(self, msg: Any) -> None:
        try:
            control = decode(RunControl, msg.data)
        except Exception:
            log.warning("ignoring unreadable run control message on %s", msg.subject)
            return
        run = self._runs.get(control.run_id)
        if run is None:
            return  # another runner's run (or already over)
        log.info("run %s: %s requested", control.run_id, control.action)
        run.ask_to_stop(control.action)
        if run.stream is not None:
            stopper = asyncio.create_task(cancel_and_wait(run.stream, every=0.1))
            self._stoppers.add(stopper)
            stopper.add_done_callback(self._stoppers.discard)
        self.claims.wake(run.thread_id)  # a run waiting for its thread notices at once
        if msg.reply:
            await self.bus.nc.publish(msg.reply, b'{"ok": true}')

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

        known = await self.runs.update_with_revision(request.run_id, pending_record)
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
            return
        chat = request_chat(request)
        events = await EventLog.resume(self.bus, request.run_id, request.thread_id, attempt, chat)
        run = self._runs[request.run_id] = ActiveRun(request, attempt, events)
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
        just_read = [known[0]]  # the first check before taking the thread needs no second read
        claim = await self.claims.take(
            request,
            delivery,
            lambda: self._cancel_requested(run, just_read.pop() if just_read else None),
            run.attempt,
        )
        if claim.outcome is Outcome.CANCELLED:
            await self._interrupted(run)
            return
        if claim.outcome is Outcome.REJECTED:
            await run.events.emit("metadata", {"run_id": request.run_id, "thread_id": request.thread_id})
            message = (
                f"thread {request.thread_id} is busy with run {claim.holder}; wait for it, "
                "or send the run with multitask_strategy enqueue or interrupt"
            )
            await self._fail(run, "ThreadBusyError", message)
            return
        try:
            await self._execute(run, known)
        except BaseException:
            # A later delivery of this run may hold the thread now (same run id): leave it to it.
            if not await self._superseded(request.run_id, run.attempt):
                await self.claims.release(request)
            raise
        else:
            await self.claims.release(request)

    async def _superseded(self, run_id: str, attempt: int) -> bool:
        """Whether a later delivery of the run has started it (after a NATS outage, say)."""
        try:
            record = await self.runs.get(run_id)
        except Exception:  # the bus is away: releasing the thread would fail anyway
            return False
        return record is not None and record.attempt > attempt

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

    async def _interrupted(self, run: ActiveRun) -> None:
        if run.cancel == "rollback":
            await rollback(self.checkpointer, run.thread_id, run.run_id)
        await self._finish(run, RunStatus.INTERRUPTED)
        await self.claims.leave_queue(run.request)

    # ------------------------------------------------------------------ a run, step by step

    async def _execute(self, run: ActiveRun, known: tuple[RunRecord, int]) -> None:
        """Mark it running (its agent prepared meanwhile), make it ready, stream it, conclude."""
        request = run.request
        configurable = dict(request.config.get("configurable") or {})
        options = RunOptions.from_run(configurable, request.context)
        # The prompt (the user's memory, the agent's settings) is read while the record is written.
        preparing = asyncio.ensure_future(self._prepare(request, options, configurable))
        # Left unawaited when the run ends early: its failure, if any, is the run's to report, not the loop's.
        preparing.add_done_callback(lambda task: task.cancelled() or task.exception())
        try:
            still_ours = await self._mark_running(run, known)
        except BaseException:
            preparing.cancel()
            raise
        if not still_ours:
            preparing.cancel()
            return
        resumed = known[0].started_at is not None and run.attempt > 1
        try:
            setup, failure = await preparing
            if failure is not None:
                raise CannotRun(type(failure).__name__, str(failure))
            first_start = known[0].started_at is None
            ready = await ready_to_run(
                run, setup, self.agents, self.config, configurable, resumed, self._tool_groups, first_start
            )
        except CannotRun as exc:
            metadata = {"run_id": run.run_id, "thread_id": run.thread_id, "attempt": run.attempt}
            await run.events.emit("metadata", metadata)
            await self._fail(run, exc.code, exc.message)
            return
        if run.cancel is not None:
            await self._interrupted(run)
            return
        if await self._stream(run, ready):
            await self._conclude(run, ready)

    async def _prepare(self, request: RunRequest, options: RunOptions, configurable: dict) -> tuple[Any, Any]:
        try:
            await self._current_tools()
            return await self.memory_and_prompt.prepare(request, options, configurable), None
        except (MissingEnvError, ConfigError, AgentError, ModelConfigError) as exc:
            return None, exc

    async def _mark_running(self, run: ActiveRun, known: tuple[RunRecord, int]) -> bool:
        """The run's record says running (this attempt); False if an earlier delivery finished it."""
        started = utcnow()

        def running(rec: RunRecord | None) -> RunRecord | None:
            if rec is None or rec.status.finished:
                return None  # cancelled while pending: noticed below
            update = {"status": RunStatus.RUNNING, "attempt": run.attempt, "updated_at": started}
            return rec.model_copy(update={**update, "started_at": rec.started_at or started})

        now_running = await self.runs.update_with_revision(run.run_id, running, known=known)
        if now_running is not None and now_running[0].status.finished:
            if now_running[0].status != RunStatus.INTERRUPTED:
                # An earlier delivery finished it meanwhile (it went on through a NATS outage).
                log.info("run %s was finished by an earlier delivery", run.run_id)
                await ensure_ended(self.bus, run.request, now_running[0], run.attempt)
                return False
            run.ask_to_stop("cancel")  # cancelled while it was pending
        run.revision = now_running
        return True

    async def _stream(self, run: ActiveRun, ready: Ready) -> bool:
        """The agent's stream as run events, within the run's time limit; True if it ran to the end
        (otherwise the run has been ended here, or is left to the next delivery by raising)."""
        request, translator, journal = run.request, ready.translator, run.journal
        assert journal is not None

        async def stream() -> None:
            async for part in ready.agent.astream(
                ready.graph_input,
                ready.graph_config,
                context=ready.context,
                stream_mode=translator.graph_modes,
                subgraphs=request.stream_subgraphs,
                durability="sync",  # a finished step is on disk before the next begins
            ):
                ns, mode, chunk = part if request.stream_subgraphs else ((), *part)
                journal.observe(mode, chunk, tuple(ns))
                for event, data in translator.translate(mode, chunk, tuple(ns)):
                    await run.events.emit(event, data)

        run.stream = asyncio.create_task(stream(), name=f"run:{run.run_id}")
        try:
            async with asyncio.timeout(
                run_timeout(ready.configurable, self.config.runner.run_timeout_seconds)
            ):
                await run.stream
        except TimeoutError:
            await run.events.error("TimeoutError", "the run took longer than its time limit and was stopped")
            await self._finish(
                run, RunStatus.TIMEOUT, usage=translator.usage, subagent_tokens=translator.subagent_tokens
            )
            return False
        except asyncio.CancelledError:
            if run.cancel is None:
                raise  # the process is stopping: leave the request to the next runner
            await self._interrupted(run)
            return False
        except NotStored:
            raise  # the bus, not the run, failed: the request is delivered again and the run resumes
        except Exception as exc:
            log.warning("run %s failed: %s: %s", run.run_id, type(exc).__name__, exc, exc_info=True)
            await self._fail(run, type(exc).__name__, str(exc) or type(exc).__name__, translator.usage)
            return False
        finally:
            run.stream = None
        return True

    async def _conclude(self, run: ActiveRun, ready: Ready) -> None:
        """A run that streamed to its end: judged against its goal, ended, its memory update queued."""
        translator = ready.translator
        values = translator.final_values or {}
        if not values.get("messages"):  # resumed with nothing left to run: the thread's state has them
            values = (await ready.agent.aget_state(ready.graph_config)).values or {}
        # Goal mode: judged before `end`, which carries the outcome to the chat and the UI.
        goal = await self.goals.after_run(
            run.request, list(values.get("messages") or []), lambda: run.cancel is not None
        )
        await self._finish(
            run,
            RunStatus.SUCCESS,
            usage=translator.usage,
            title=values.get("title"),
            subagent_tokens=translator.subagent_tokens,
            goal=goal,
        )
        await self.memory_and_prompt.queue_memory_update(run.request, ready.options, values)

    # ------------------------------------------------------------------ ending

    async def _fail(
        self, run: ActiveRun, error: str, message: str, usage: dict[str, int] | None = None
    ) -> None:
        await run.events.error(error, message)
        info = ErrorInfo(code=error, message=message)
        await self._finish(run, RunStatus.ERROR, usage=usage, error=info)

    async def _finish(self, run: ActiveRun, status: RunStatus, **ending: Any) -> None:
        await finish_run(self.bus, self.config, self.runs, self.claims, run, status, **ending)
        log.info("run %s on thread %s: %s", run.run_id, run.thread_id, status.value)


async def run(bus: Bus, config: AppConfig) -> None:
    """The runner component: consume RunRequests until cancelled, then drain."""
    from agents.threads import serve_threads

    inline_trace_bookkeeping()
    async with checkpointer_ready(config) as checkpointer:
        runner = await Runner.open(bus, config, checkpointer)
        service = await serve_threads(bus, config, runner)
        control = await bus.nc.subscribe(bus.subjects.run_control_all, cb=runner.on_control)
        try:
            # In a worker thread: the event loop keeps answering signals and requests meanwhile.
            await asyncio.to_thread(runner.warm_up)
            # No usable model: it serves (the rest of Antler works), but /health says why it cannot answer.
            problem = await asyncio.to_thread(partial(model_problem, config, build=True))
            component_degraded(problem.reason if problem is not None else None)
            s = bus.subjects
            consumer = Consumer(
                bus,
                stream=s.runs_stream,
                durable=DURABLE,
                filter_subjects=[s.runs_submit],
                model=RunRequest,
                handler=runner.handle,
                on_invalid=runner.on_invalid,
                on_dead_letter=runner.on_dead_letter,
                concurrency=config.runner.concurrency,
                # Runs mostly wait on models: how many at once is what the process can carry.
                capacity=Capacity(
                    config.runner.max_loop_lag_ms / 1000,
                    config.runner.max_memory_mb
                    or default_memory_mb(config.runner.processes or min(4, os.cpu_count() or 1)),
                ),
                # Runs that cannot finish by then go back to the bus and resume elsewhere (or after a
                # restart) from their checkpoints; within `antler up`'s grace for its runner children.
                drain_timeout=15.0,
            )
            await run_consumers(consumer)
        finally:
            await service.stop()
            await control.unsubscribe()
            await runner.mcp.close()
            await runner.memory_and_prompt.close()
            await runner.calls.close()
