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
from typing import Any

from agents.agent_tools import make_agent_tools, tool_group_map
from agents.assembly import PromptAssembly
from agents.checkpoints import checkpointer_ready, rollback
from agents.context import RunContext, RunOptions
from agents.errors import AgentError, ModelConfigError
from agents.event_log import EventLog
from agents.events import StreamTranslator, jsonable
from agents.lead import AgentCache
from agents.mcp_tools import McpServers
from agents.patches import inline_trace_bookkeeping
from agents.run_endings import end_refused_request, ensure_ended
from agents.run_input import graph_config, graph_input_of, run_timeout
from agents.sandbox_tools import make_sandbox_tools, make_view_image_tool
from agents.schedule_tools import make_schedule_tools
from agents.task_tool import make_task_tool
from agents.thread_claims import Outcome, ThreadClaims
from bus import Abandon, Bus, Consumer, Delivery, NotStored, Retry, decode, run_consumers
from bus.consumer import cancel_until_done
from bus.messages import (
    ErrorInfo,
    MemoryDocument,
    RunControl,
    RunRecord,
    RunRequest,
    RunStatus,
    SubagentCancel,
    ThreadRecord,
    Usage,
    utcnow,
)
from bus.records import RecordStore
from bus.runs import thread_run_key
from config import AppConfig, ConfigError, MissingEnvError

log = logging.getLogger(__name__)

DURABLE = "runner"


class Runner:
    """Executes runs for one process; `run()` below wires it to the bus."""

    def __init__(self, bus: Bus, config: AppConfig, checkpointer: Any) -> None:
        self.bus = bus
        self.config = config
        self.checkpointer = checkpointer
        self._own_tools = [
            *make_sandbox_tools(bus),
            make_view_image_tool(bus),
            *make_agent_tools(bus, config),
            *make_schedule_tools(bus),
        ]
        task = make_task_tool(bus, config)
        self.agents = AgentCache(config, checkpointer, extra_tools=self._own_tools, task_tool=task)
        reserved = {t.name for t in self._own_tools} | {"task", "ask_clarification", "present_files"}
        self.mcp = McpServers(bus, reserved=reserved, role="runner")
        self._mcp_version = 0
        self._tool_groups = tool_group_map(config, [])
        self._run_models: dict[str, str | None] = {}  # run id -> the model it runs on
        self.runs: RecordStore[RunRecord] | None = None
        self.threads: RecordStore[ThreadRecord] | None = None
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self._active: dict[str, str] = {}  # run id -> thread id, for runs this process handles
        self._streams: dict[str, asyncio.Task[None]] = {}
        self._stoppers: set[asyncio.Task[None]] = set()
        self._run_done: dict[str, asyncio.Event] = {}
        # Last known (record, revision) of records this process just wrote: saves re-reading them.
        self._run_revisions: dict[str, Any] = {}
        self._cancel_actions: dict[str, str] = {}  # run id -> cancel | interrupt | rollback

    def warm_up(self) -> None:
        """Import the model provider and compile the default agent now, not on the first run.

        That work blocks the event loop for a moment; during a run it would also
        stall the heartbeats of every other run in this process.
        """
        try:
            self.agents.get(RunOptions())
        except Exception as exc:  # reported properly, per run, when a run needs it
            log.info("default agent not ready yet (%s: %s)", type(exc).__name__, exc)

    async def open(self) -> None:
        s = self.bus.subjects
        self.runs = RecordStore(await self.bus.kv(s.runs_bucket), RunRecord)
        self.threads = RecordStore(await self.bus.kv(s.threads_bucket), ThreadRecord)
        self.claims = ThreadClaims(self.bus, self.threads, self.runs)
        memory = RecordStore(await self.bus.kv(s.memory_bucket), MemoryDocument)
        self.memory_and_prompt = PromptAssembly(self.bus, self.config, memory)
        await self.memory_and_prompt.start()
        await self.mcp.start()

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
        thread_id = self._active.get(control.run_id)
        if thread_id is None:
            return  # another runner's run (or already over)
        log.info("run %s: %s requested", control.run_id, control.action)
        self._cancel_actions.setdefault(control.run_id, control.action)
        stream = self._streams.get(control.run_id)
        if stream is not None:
            stopper = asyncio.create_task(cancel_until_done(stream))
            self._stoppers.add(stopper)
            stopper.add_done_callback(self._stoppers.discard)
        self.claims.wake(thread_id)  # a run waiting for its thread notices at once
        if msg.reply:
            await self.bus.nc.publish(msg.reply, b'{"ok": true}')

    # ------------------------------------------------------------------ handling

    async def on_invalid(self, msg: Any, error: Exception) -> None:
        assert self.runs is not None
        await end_refused_request(self.bus, self.runs, msg.data, error)

    async def handle(self, request: RunRequest, delivery: Delivery) -> None:
        # Before any await: a later run of the same thread, delivered in the same batch, must not
        # take the thread while this one is still reading its records.
        self.claims.arrive(request, delivery)
        try:
            await self._handle(request, delivery)
        finally:
            self.claims.gone(request)

    async def _handle(self, request: RunRequest, delivery: Delivery) -> None:
        assert self.runs is not None
        attempt = delivery.num_delivered

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
        if record.status.finished:
            log.info("run %s already %s; not running it again", request.run_id, record.status.value)
            await ensure_ended(self.bus, request, record, attempt)
            return
        if request.run_id in self._active:
            # Redelivered while this process still runs it (the loop stalled past ack_wait):
            # the first handler owns the run; this delivery just waits and acks with it.
            log.warning("run %s redelivered while still running here; waiting for it", request.run_id)
            await self._run_done[request.run_id].wait()
            finished = await self.runs.get(request.run_id)
            if finished is None or not finished.status.finished:
                raise Retry("the earlier delivery stopped before the run ended", delay=0.5)
            return
        events = await EventLog.resume(self.bus, request.run_id, request.thread_id, attempt)
        self._active[request.run_id] = request.thread_id
        self._run_done[request.run_id] = asyncio.Event()
        try:
            just_read = [record]  # the first check before taking the thread needs no second read
            claim = await self.claims.take(
                request,
                delivery,
                lambda: self._cancel_requested(request.run_id, just_read.pop() if just_read else None),
            )
            if claim.outcome is Outcome.CANCELLED:
                await self._interrupted(request, events)
                return
            if claim.outcome is Outcome.REJECTED:
                await events.emit("metadata", {"run_id": request.run_id, "thread_id": request.thread_id})
                message = (
                    f"thread {request.thread_id} is busy with run {claim.holder}; wait for it, "
                    "or send the run with multitask_strategy enqueue or interrupt"
                )
                await self._fail(request, events, "ThreadBusyError", message)
                return
            try:
                await self._execute(request, events, attempt, known)
            except BaseException:
                # A later delivery of this run may hold the thread now (same run id): leave it to it.
                if not await self._superseded(request.run_id, attempt):
                    await self.claims.release(request)
                raise
            else:
                await self.claims.release(request)
        finally:
            events.close()  # deltas still held belong to a run left to another delivery
            self._active.pop(request.run_id, None)
            self._cancel_actions.pop(request.run_id, None)
            self._run_done.pop(request.run_id).set()
            self._run_revisions.pop(request.run_id, None)
            self.claims.forget(request.run_id)

    async def _superseded(self, run_id: str, attempt: int) -> bool:
        """Whether a later delivery of the run has started it (after a NATS outage, say)."""
        assert self.runs is not None
        try:
            record = await self.runs.get(run_id)
        except Exception:  # the bus is away: releasing the thread would fail anyway
            return False
        return record is not None and record.attempt > attempt

    async def _cancel_requested(self, run_id: str, record: RunRecord | None = None) -> bool:
        """Cancelled by a control message to this process, or marked interrupted while pending
        (`record`: the run's record as just read, if it was)."""
        if run_id in self._cancel_actions:
            return True
        assert self.runs is not None
        if record is None:
            record = await self.runs.get(run_id)
        if record is not None and record.status == RunStatus.INTERRUPTED:
            self._cancel_actions.setdefault(run_id, "cancel")
            return True
        return False

    async def _interrupted(self, request: RunRequest, events: EventLog) -> None:
        action = self._cancel_actions.get(request.run_id, "cancel")
        if action == "rollback":
            await rollback(self.checkpointer, request.thread_id, request.run_id)
        await self._finish(request, events, RunStatus.INTERRUPTED)
        await self.claims.leave_queue(request)

    async def _execute(
        self, request: RunRequest, events: EventLog, attempt: int, known: tuple[RunRecord, int]
    ) -> None:
        assert self.runs is not None
        configurable = dict(request.config.get("configurable") or {})
        options = RunOptions.from_run(configurable, request.context)
        started = utcnow()

        def running(rec: RunRecord | None) -> RunRecord | None:
            if rec is None or rec.status.finished:
                return None  # cancelled while pending: noticed below
            return rec.model_copy(
                update={
                    "status": RunStatus.RUNNING,
                    "attempt": attempt,
                    "started_at": rec.started_at or started,
                    "updated_at": started,
                }
            )

        resumed = known[0].started_at is not None and attempt > 1

        async def prepare() -> tuple[Any, Exception | None]:
            try:
                await self._current_tools()
                return await self.memory_and_prompt.prepare(request, options, configurable), None
            except (MissingEnvError, ConfigError, AgentError, ModelConfigError) as exc:
                return None, exc

        # The prompt (the user's memory, the agent's settings) is read while the record is written.
        preparing = asyncio.ensure_future(prepare())
        # Left unawaited when the run ends early: its failure, if any, is the run's to report, not the loop's.
        preparing.add_done_callback(lambda task: task.cancelled() or task.exception())
        try:
            now_running = await self.runs.update_with_revision(request.run_id, running, known=known)
        except BaseException:
            preparing.cancel()
            raise
        if now_running is not None and now_running[0].status.finished:
            if now_running[0].status != RunStatus.INTERRUPTED:
                # An earlier delivery finished it meanwhile (it went on through a NATS outage).
                log.info("run %s was finished by an earlier delivery", request.run_id)
                preparing.cancel()
                await ensure_ended(self.bus, request, now_running[0], attempt)
                return
            self._cancel_actions.setdefault(request.run_id, "cancel")  # cancelled while it was pending
        self._run_revisions[request.run_id] = now_running
        metadata: dict[str, Any] = {
            "run_id": request.run_id,
            "thread_id": request.thread_id,
            "attempt": attempt,
        }
        try:
            setup, failure = await preparing
            if failure is not None:
                raise failure
            options = setup.options
            agent = self.agents.get(options)
        except (MissingEnvError, ConfigError, AgentError, ModelConfigError) as exc:
            await events.emit("metadata", metadata)
            await self._fail(request, events, type(exc).__name__, str(exc))
            return
        try:
            config = graph_config(request, configurable, self.config.runner.recursion_limit)
            graph_input, done_so_far = await graph_input_of(request, agent, resumed)
        except (TypeError, ValueError) as exc:  # a request that can never run: say so, do not retry
            await events.emit("metadata", metadata)
            await self._fail(request, events, "InvalidRunRequest", f"the run request cannot run: {exc}")
            return
        if resumed:
            metadata["resumed"] = graph_input is None
        await events.emit("metadata", metadata)
        if resumed:
            log.info("run %s: attempt %d resumes from the last checkpoint", request.run_id, attempt)
        translator = StreamTranslator(request.stream_mode)
        if translator.wants_messages:
            # What the earlier attempt streamed may not all have been stored before it stopped:
            # the run's finished messages again, whole, so readers hold the complete text.
            for message in done_so_far:
                await events.emit("messages", [jsonable(message), {"resumed": True}])
        model_name = options.model_name or (default.name if (default := self.config.get_model()) else None)
        self._run_models[request.run_id] = model_name
        context = RunContext(
            run_id=request.run_id,
            thread_id=request.thread_id,
            user_id=request.user_id,
            agent_name=options.agent_name,
            system_prompt=setup.system_prompt,
            model_name=model_name,
            is_bootstrap=setup.is_bootstrap,
            allowed_tools=setup.allowed_tools,
            tool_groups=setup.tool_groups,
            tool_group_of=self._tool_groups,
            origin=request.origin,
        )

        async def stream() -> None:
            async for part in agent.astream(
                graph_input,
                config,
                context=context,
                stream_mode=translator.graph_modes,
                subgraphs=request.stream_subgraphs,
                durability="sync",  # a finished step is on disk before the next begins
            ):
                ns, mode, chunk = part if request.stream_subgraphs else ((), *part)
                for event, data in translator.translate(mode, chunk, tuple(ns)):
                    await events.emit(event, data)

        if request.run_id in self._cancel_actions:
            await self._interrupted(request, events)
            return
        task = asyncio.create_task(stream(), name=f"run:{request.run_id}")
        self._streams[request.run_id] = task
        try:
            async with asyncio.timeout(run_timeout(configurable, self.config.runner.run_timeout_seconds)):
                await task
        except TimeoutError:
            await events.error("TimeoutError", "the run took longer than its time limit and was stopped")
            await self._finish(
                request,
                events,
                RunStatus.TIMEOUT,
                usage=translator.usage,
                subagent_tokens=translator.subagent_tokens,
            )
            return
        except asyncio.CancelledError:
            if request.run_id not in self._cancel_actions:
                raise  # the process is stopping: leave the request to the next runner
            await self._interrupted(request, events)
            return
        except NotStored:
            raise  # the bus, not the run, failed: the request is delivered again and the run resumes
        except Exception as exc:
            log.warning("run %s failed: %s: %s", request.run_id, type(exc).__name__, exc, exc_info=True)
            await self._fail(
                request, events, type(exc).__name__, str(exc) or type(exc).__name__, translator.usage
            )
            return
        finally:
            self._streams.pop(request.run_id, None)
        values = translator.final_values or {}
        await self._finish(
            request,
            events,
            RunStatus.SUCCESS,
            usage=translator.usage,
            title=values.get("title"),
            subagent_tokens=translator.subagent_tokens,
        )
        await self.memory_and_prompt.queue_memory_update(request, options, values)

    # ------------------------------------------------------------------ ending

    async def _fail(
        self,
        request: RunRequest,
        events: EventLog,
        error: str,
        message: str,
        usage: dict[str, int] | None = None,
    ) -> None:
        await events.error(error, message)
        await self._finish(
            request, events, RunStatus.ERROR, usage=usage, error=ErrorInfo(code=error, message=message)
        )

    async def _finish(
        self,
        request: RunRequest,
        events: EventLog,
        status: RunStatus,
        *,
        usage: dict[str, int] | None = None,
        title: str | None = None,
        error: ErrorInfo | None = None,
        subagent_tokens: int = 0,
    ) -> None:
        assert self.runs is not None
        assert self.threads is not None
        # Every event so far is stored before the record says the run ended: a later delivery that
        # finds it ended only adds a missing `end`, never leaves a hole.
        await events.confirm()
        now = utcnow()
        superseded: list[int] = []

        def ended(rec: RunRecord | None) -> RunRecord | None:
            if rec is not None and rec.attempt > events.attempt:
                superseded.append(rec.attempt)  # a later delivery runs it now: its outcome counts
                return None
            if rec is not None and rec.status.finished and rec.status != RunStatus.INTERRUPTED:
                superseded.append(rec.attempt)  # another delivery finished it already
                return None
            base = rec or RunRecord(
                run_id=request.run_id, thread_id=request.thread_id, user_id=request.user_id
            )
            return base.model_copy(
                update={
                    "status": status,
                    "ended_at": now,
                    "updated_at": now,
                    "error": error,
                    "usage": Usage(**usage) if usage else base.usage,
                }
            )

        if request.run_id in self._run_models:
            model = self._run_models.pop(request.run_id)
        else:
            options = RunOptions.from_run(dict(request.config.get("configurable") or {}), request.context)
            model = options.model_name or (default.name if (default := self.config.get_model()) else None)
        used = Usage(**usage) if usage else None
        # The run's record and the thread's, written side by side (one round trip of waiting, not two);
        # the thread is free before `end`: whoever sees the end may start the next run at once. A
        # release by a superseded delivery changes nothing (the thread records the delivery holding it).
        await asyncio.gather(
            self.runs.update(request.run_id, ended, known=self._run_revisions.pop(request.run_id, None)),
            self.claims.release(request, status, title, used, model, subagent_tokens),
        )
        if superseded:
            raise Abandon(f"run {request.run_id} belongs to delivery {superseded[0]}, not {events.attempt}")
        if status != RunStatus.SUCCESS:  # subagents still at work for it stop (its tool waits no more)
            stop = SubagentCancel(
                parent_run_id=request.run_id, reason=f"the parent run ended: {status.value}"
            )
            await self.bus.publish_core(self.bus.subjects.subagent_cancel(request.run_id), stop)
        await events.emit("end", {"status": status.value, "usage": usage or {}})
        log.info("run %s on thread %s: %s", request.run_id, request.thread_id, status.value)


async def run(bus: Bus, config: AppConfig) -> None:
    """The runner component: consume RunRequests until cancelled, then drain."""
    from agents.threads import serve_threads

    inline_trace_bookkeeping()
    async with checkpointer_ready(config) as checkpointer:
        runner = Runner(bus, config, checkpointer)
        await runner.open()
        service = await serve_threads(bus, config, runner)
        control = await bus.nc.subscribe(bus.subjects.run_control_all, cb=runner.on_control)
        try:
            # In a worker thread: the event loop keeps answering signals and requests meanwhile.
            await asyncio.to_thread(runner.warm_up)
            s = bus.subjects
            consumer = Consumer(
                bus,
                stream=s.runs_stream,
                durable=DURABLE,
                filter_subjects=[s.runs_submit],
                model=RunRequest,
                handler=runner.handle,
                on_invalid=runner.on_invalid,
                concurrency=config.runner.concurrency,
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
