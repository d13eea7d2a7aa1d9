"""A run this process took, step by step: marked running (its agent prepared meanwhile), made
ready, streamed within its time limit, then concluded (goal, end, memory update), failed, timed
out or interrupted."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from langgraph.types import Command

from agents.checkpoints import rollback
from agents.context import RunOptions
from agents.errors import AgentError, ModelConfigError
from agents.graph.assembly import PromptAssembly
from agents.graph.lead import AgentCache
from agents.graph.middleware.steering import STEERING_NODE
from agents.runner.active_run import ActiveRun, finish_run
from agents.runner.approvals import announce_approvals
from agents.runner.endings import ensure_ended
from agents.runner.graph_input import run_timeout
from agents.runner.setup import CannotRun, Ready, ready_to_run
from agents.runner.steering import STEERED
from agents.runner.thread_claims import ThreadClaims
from agents.runner.toolset import RunnerTools
from agents.threads.goal import GoalLoop
from bus import Bus, NotStored
from bus.messages import ErrorInfo, RunRecord, RunRequest, RunStatus, utcnow
from bus.records import RecordStore
from config import AppConfig, ConfigError, MissingEnvError
from llm.pace import pace_streams

log = logging.getLogger(__name__)


@dataclass(eq=False)  # a process's one set of steps: compared by identity
class RunSteps:
    """The steps of the runs one runner process executes, over what the process holds."""

    bus: Bus
    config: AppConfig
    checkpointer: Any
    runs: RecordStore[RunRecord]
    claims: ThreadClaims
    agents: AgentCache
    tools: RunnerTools
    goals: GoalLoop
    memory_and_prompt: PromptAssembly

    async def interrupted(self, run: ActiveRun) -> None:
        """A cancelled run (rolled back if so asked) ends interrupted and leaves its thread's queue."""
        if run.cancel == "rollback":
            await rollback(self.checkpointer, run.thread_id, run.run_id)
        await self.finish(run, RunStatus.INTERRUPTED)
        await self.claims.leave_queue(run.request)

    async def steered(self, run: ActiveRun, into: str, waiting: bool = False) -> None:
        """A steer run whose messages another run took in (`waiting`: or will take in, once the
        person it waits for has answered): it ends here, saying which."""
        await run.events.emit("metadata", {"run_id": run.run_id, "thread_id": run.thread_id})
        await run.events.emit(STEERED, {"run_id": into, **({"waiting": True} if waiting else {})})
        await self.finish(run, RunStatus.SUCCESS)

    async def execute(self, run: ActiveRun, known: tuple[RunRecord, int]) -> None:
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
                run,
                setup,
                self.agents,
                self.config,
                configurable,
                resumed,
                self.tools.groups,
                first_start,
                tool_server_of=self.tools.servers,
            )
        except CannotRun as exc:
            metadata = {"run_id": run.run_id, "thread_id": run.thread_id, "attempt": run.attempt}
            await run.events.emit("metadata", metadata)
            await self.fail(run, exc.code, exc.message)
            return
        if run.cancel is not None:
            await self.interrupted(run)
            return
        if await self._stream(run, ready):
            await self._conclude(run, ready)

    async def _prepare(
        self, request: RunRequest, options: RunOptions, configurable: dict[str, Any]
    ) -> tuple[Any, Any]:
        try:
            await self.tools.refresh(self.agents)
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
            # A request published raw says no partition: readers learn its events' stream here.
            partition = run.events.partition if rec.events_partition is None else rec.events_partition
            return rec.model_copy(
                update={**update, "started_at": rec.started_at or started, "events_partition": partition}
            )

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
            pace_streams(run.pace)  # its model streams pass text up at the run's pace
            graph_input = ready.graph_input
            run.steerable = True
            while True:
                async for part in ready.agent.astream(
                    graph_input,
                    ready.graph_config,
                    context=ready.context,
                    stream_mode=translator.graph_modes,
                    subgraphs=request.stream_subgraphs,
                    interrupt_before=request.interrupt_before,
                    interrupt_after=request.interrupt_after,
                    durability="sync",  # a finished step is on disk before the next begins
                ):
                    ns, mode, chunk = part if request.stream_subgraphs else ((), *part)
                    journal.observe(mode, chunk, tuple(ns))
                    for event, data in translator.translate(mode, chunk, tuple(ns)):
                        await run.events.emit(event, data)
                # Messages steered in after the last model call: the agent answers them in this run,
                # going on from its steering node (new input would be taken for this run's resumption
                # and dropped). No await between the look and `steerable`: a later steer is refused.
                if not run.steering:
                    run.steerable = False
                    return
                graph_input = Command(goto=STEERING_NODE)

        run.stream = asyncio.create_task(stream(), name=f"run:{run.run_id}")
        try:
            async with asyncio.timeout(
                run_timeout(ready.configurable, self.config.runner.run_timeout_seconds)
            ):
                await run.stream
        except TimeoutError:
            await run.events.error("TimeoutError", "the run took longer than its time limit and was stopped")
            await self.finish(
                run, RunStatus.TIMEOUT, usage=translator.usage, subagent_tokens=translator.subagent_tokens
            )
            return False
        except asyncio.CancelledError:
            if run.cancel is None:
                raise  # the process is stopping: leave the request to the next runner
            await self.interrupted(run)
            return False
        except NotStored:
            raise  # the bus, not the run, failed: the request is delivered again and the run resumes
        except Exception as exc:
            log.warning("run %s failed: %s: %s", run.run_id, type(exc).__name__, exc, exc_info=True)
            await self.fail(run, type(exc).__name__, str(exc) or type(exc).__name__, translator.usage)
            return False
        finally:
            run.stream = None
            run.steerable = False
        return True

    async def _conclude(self, run: ActiveRun, ready: Ready) -> None:
        """A run that streamed to its end: judged against its goal, ended, its memory update queued."""
        translator = ready.translator
        values = translator.final_values or {}
        resumed = not values.get("messages")
        if resumed:  # resumed with nothing left to run: the thread's state has them
            values = (await ready.agent.aget_state(ready.graph_config)).values or {}
        if resumed or translator.interrupted:  # else nothing waits: no need to read the state back
            await announce_approvals(run, ready)
        # Goal mode: judged before `end`, which carries the outcome to the chat and the UI.
        goal = await self.goals.after_run(
            run.request, list(values.get("messages") or []), lambda: run.cancel is not None
        )
        await self.finish(
            run,
            RunStatus.SUCCESS,
            usage=translator.usage,
            title=values.get("title"),
            subagent_tokens=translator.subagent_tokens,
            goal=goal,
        )
        await self.memory_and_prompt.queue_memory_update(run.request, ready.options, values)

    async def fail(
        self, run: ActiveRun, error: str, message: str, usage: dict[str, int] | None = None
    ) -> None:
        await run.events.error(error, message)
        info = ErrorInfo(code=error, message=message)
        await self.finish(run, RunStatus.ERROR, usage=usage, error=info)

    async def finish(self, run: ActiveRun, status: RunStatus, **ending: Any) -> None:
        await finish_run(self.bus, self.config, self.runs, self.claims, run, status, **ending)
        log.info("run %s on thread %s: %s", run.run_id, run.thread_id, status.value)
