"""The subagent executor: SubagentTasks in, results out (`antler run subagents`, whose entry,
`agents.subagents.run`, loads it on the first task).

One durable consumer on `<prefix>.subagents.submit`, shared by every executor
process. Each task runs as an agent of its type on a child thread of its own
(`<parent run>:<task>`, checkpointed, so an executor killed mid-task is
resumed by the next delivery), in the parent's sandbox directories, as the
parent's user. Each finished model turn is published on
`<prefix>.subagents.progress.<parent run>` for the parent's `task` tool to
relay; the outcome (completed, failed, cancelled, timed_out, with a stop
reason when the turn cap ended it) goes to KV `<prefix>_subagent_results`,
where the tool waits for it, and where a parent that resumes finds it without
running the task again.

A parent run's cancel, interrupt or rollback (`<prefix>.runs.ctl.<run>`)
cancels its subagents here at once; a task whose parent has already ended is
not started. A background task (`agents.subagents.background`) is the exception: it outlives its
parent run, only its own cancel stops it, and its outcome is reported back as a run on its thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ToolErrorMiddleware
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.errors import GraphRecursionError

from access.egress import egress_policy
from access.runner import RunAccess, tool_filter
from agents.context import RunContext
from agents.events import jsonable
from agents.graph.guardrails import GuardrailMiddleware, make_provider
from agents.graph.lead import tool_error
from agents.graph.middleware import (
    DanglingToolCallMiddleware,
    FinishReasonMiddleware,
    LLMErrorHandlingMiddleware,
    LoopDetectionMiddleware,
    RunPromptMiddleware,
    ToolTelemetryMiddleware,
    ViewImageMiddleware,
)
from agents.graph.middleware.person_budget import PersonBudgetMiddleware
from agents.graph.middleware.read_before_write import ReadBeforeWriteMiddleware
from agents.graph.middleware.tool_audit import ToolAuditMiddleware
from agents.graph.middleware.tool_output import ToolOutputBudgetMiddleware
from agents.graph.middleware.untrusted import UntrustedContentMiddleware
from agents.graph.patches import middleware_spans
from agents.graph.prompt import skills_section
from agents.graph.state import ThreadState, thread_data
from agents.subagents import background, background_commands
from agents.subagents.outcomes import ended_outcome, outcome_from_state, store_outcome, stored_outcome
from agents.subagents.stops import REMEMBER_STOPS, Stops
from agents.subagents.types import SubagentType, subagent_types
from agents.telemetry import invoke_subagent
from agents.tools import config_tools
from agents.tools.custom_agents import mcp_server_map, tool_group_map
from agents.tools.mcp import McpServers
from agents.tools.sandbox import make_sandbox_tools, make_view_image_tool
from agents.tools.thread_files import ThreadFiles
from bus import Bus, Delivery, decode
from bus.messages import (
    RunControl,
    RunRecord,
    SubagentCancel,
    SubagentProgress,
    SubagentResult,
    SubagentTask,
    utcnow,
)
from bus.records import RecordStore
from config import AppConfig
from llm.guard import ModelCalls
from llm.models import create_chat_model
from llm.tracing_services import enabled_services, with_tracing
from skills import SkillsFollower

log = logging.getLogger(__name__)


class SubagentExecutor:
    def __init__(self, bus: Bus, config: AppConfig, checkpointer: Any, stopped: Stops | None = None) -> None:
        self.bus = bus
        self.config = config
        self.checkpointer = checkpointer
        self.types = subagent_types(config)
        self.skills = SkillsFollower(bus, config)
        self.files = ThreadFiles(bus)
        self._own_tools = [*make_sandbox_tools(bus), make_view_image_tool(bus), *config_tools(config)]
        self.tools: dict[str, BaseTool] = {t.name: t for t in self._own_tools}
        self.calls = ModelCalls(bus, config)  # the models' cluster budgets, and retries
        self.access = RunAccess(bus, config)  # the person's role: their model and tools here too
        self.mcp = McpServers(
            bus,
            reserved=set(self.tools) | {"task", "ask_clarification", "present_files"},
            role="subagent executor",
        )
        self._mcp_version = 0
        self._agents: dict[tuple[str, str | None], Any] = {}
        self._jobs: dict[str, dict[str, asyncio.Task[SubagentResult]]] = {}  # parent run -> task -> job
        self._cancelled: dict[tuple[str, str], str] = {}  # (parent run, task) stopped on purpose -> why
        self._background: set[tuple[str, str]] = set()  # (parent run, task) running in the background
        # (parent run, task or None for all) -> (when, why): stops that may reach a task just starting
        self._stopped: Stops = dict(stopped or {})
        self.runs: RecordStore[RunRecord] | None = None
        self.results: Any = None

    async def open(self) -> None:
        s = self.bus.subjects
        self.runs = RecordStore(await self.bus.kv(s.runs_bucket), RunRecord)
        self.results = await self.bus.kv(s.subagent_results_bucket)
        await self.mcp.start()
        await self.skills.start()
        await self.calls.start()

    async def close(self) -> None:
        await self.mcp.close()
        await self.skills.close()
        await self.calls.close()

    # ------------------------------------------------------------------ the agent of a type

    def agent(self, kind: SubagentType, model_name: str | None) -> Any:
        """The compiled agent for a type and model (cached).

        Raises:
            llm.errors.ModelConfigError, ProviderNotInstalled, config.MissingEnvError
        """
        found = self._agents.get((kind.name, model_name))
        if found is not None:
            return found
        model = create_chat_model(self.config, model_name)
        model_config = self.config.get_model(model_name)
        sees = model_config is not None and model_config.supports_vision
        tools = [t for name, t in self.tools.items() if kind.allows(name) and (sees or name != "view_image")]
        budget = self.config.tool_output
        middleware: list[AgentMiddleware[Any, Any]] = [
            *([ToolAuditMiddleware(self.calls.bus, self.config)] if self.calls.bus else []),
            RunPromptMiddleware(),
            *([ToolOutputBudgetMiddleware(budget, self.files)] if budget.enabled else []),
            ReadBeforeWriteMiddleware(self.files),
            DanglingToolCallMiddleware(),
            # The person's own budget counts their subagents' calls too.
            *([PersonBudgetMiddleware(self.calls.bus, self.config, model_name)] if self.calls.bus else []),
            LLMErrorHandlingMiddleware(
                (model_config.display_name or model_config.name) if model_config else None,
                self.calls,
                model_config.name if model_config else None,
            ),
            ToolTelemetryMiddleware(),
            ToolErrorMiddleware(aon_error=tool_error),
            *([ViewImageMiddleware()] if sees else []),
            FinishReasonMiddleware(),
            LoopDetectionMiddleware(),
            *(
                [GuardrailMiddleware(make_provider(self.config.guardrails))]
                if self.config.guardrails.enabled
                else []
            ),
            UntrustedContentMiddleware(),  # innermost, as the lead's
        ]
        # As the lead's (agents.graph.lead).
        with middleware_spans("langsmith" in enabled_services(self.config)):
            agent = create_agent(
                model,
                tools,
                middleware=middleware,
                state_schema=ThreadState,
                context_schema=RunContext,
                checkpointer=self.checkpointer,
                name=f"subagent_{kind.name}",
            )
        self._agents[(kind.name, model_name)] = agent
        return agent

    async def system_prompt(self, kind: SubagentType) -> str:
        if not kind.skills:
            return kind.system_prompt
        skills = await self.skills.enabled(list(kind.skills))
        return kind.system_prompt + "\n\n" + skills_section(skills, self.config.skills.container_path)

    # ------------------------------------------------------------------ control

    async def on_control(self, msg: Any) -> None:
        """A parent run cancelled, interrupted or rolled back (`runs.ctl.<run>`): its tasks stop."""
        try:
            control = decode(RunControl, msg.data)
        except Exception:
            return
        if not control.stops:  # steered, or followed live: its tasks go on
            return
        self._stop(control.run_id, None, f"the parent run was {control.action}led")

    async def on_cancel(self, msg: Any) -> None:
        """A task given up by its tool, or every task of a parent run that ended (`subagents.cancel`)."""
        try:
            cancel = decode(SubagentCancel, msg.data)
        except Exception:
            return
        self._stop(cancel.parent_run_id, cancel.task_id, cancel.reason)

    def _stop(self, parent_run_id: str, task_id: str | None, reason: str) -> None:
        now = time.monotonic()
        self._stopped = {k: v for k, v in self._stopped.items() if now - v[0] < REMEMBER_STOPS}
        # Remembered: a task of this parent that is just starting here is stopped as it registers.
        self._stopped[(parent_run_id, task_id)] = (now, reason)
        for running_id, job in list(self._jobs.get(parent_run_id, {}).items()):
            if task_id is None and (parent_run_id, running_id) in self._background:
                continue  # a background task outlives its parent run; only its own cancel stops it
            if task_id in (None, running_id):
                log.info("subagent %s of run %s stops: %s", running_id, parent_run_id, reason)
                self._cancelled[(parent_run_id, running_id)] = reason
                job.cancel()

    def _stop_reason(self, task: SubagentTask) -> str | None:
        # A background task outlives its parent run: only a stop of the task itself holds for it.
        whole_run: list[tuple[str, str | None]] = [] if task.background else [(task.parent_run_id, None)]
        for key in [*whole_run, (task.parent_run_id, task.task_id)]:
            found = self._stopped.get(key)
            if found is not None and time.monotonic() - found[0] < REMEMBER_STOPS:
                return found[1]
        return None

    # ------------------------------------------------------------------ a task

    async def handle(self, task: SubagentTask, delivery: Delivery) -> None:
        assert self.runs is not None
        key = SubagentResult.key(task.parent_run_id, task.task_id)
        running = self._jobs.get(task.parent_run_id, {}).get(task.task_id)
        if running is not None:
            # Delivered again while this process still runs it (its loop stalled past ack_wait):
            # the first delivery owns the task; this one ends with it.
            await asyncio.wait([running])
            return
        stored = await stored_outcome(self.results, key)
        if stored is not None:  # finished by an earlier delivery (which may not have reported it)
            await self._report(task, stored)
            return
        stop = await self._stopped_before_start(task)
        if stop is not None:
            if task.kind == "command":  # it may run at a broker already (its executor died)
                await background_commands.kill(self.bus, task)
            await self._report(
                task, await store_outcome(self.results, key, ended_outcome(task, "cancelled", stop))
            )
            return
        job = asyncio.create_task(invoke_subagent(task, self._run(task)), name=f"subagent:{task.task_id}")
        self._jobs.setdefault(task.parent_run_id, {})[task.task_id] = job
        if task.background is not None:
            self._background.add((task.parent_run_id, task.task_id))
        reason = self._stop_reason(task)
        if reason is not None:  # stopped while this delivery was on its way in
            self._cancelled[(task.parent_run_id, task.task_id)] = reason
            job.cancel()
        try:
            result = await job
        except asyncio.CancelledError:
            me = asyncio.current_task()
            stopped = self._cancelled.get((task.parent_run_id, task.task_id))
            if stopped is None or (me and me.cancelling()):
                raise  # this process is stopping: the next delivery resumes the task
            result = ended_outcome(task, "cancelled", stopped)
        finally:
            jobs = self._jobs.get(task.parent_run_id, {})
            jobs.pop(task.task_id, None)
            if not jobs:
                self._jobs.pop(task.parent_run_id, None)
            self._cancelled.pop((task.parent_run_id, task.task_id), None)
            self._background.discard((task.parent_run_id, task.task_id))
        result = await store_outcome(self.results, key, result)
        log.info("subagent %s of run %s: %s", task.task_id, task.parent_run_id, result.status)
        await self._report(task, result)

    async def _stopped_before_start(self, task: SubagentTask) -> str | None:
        """Why a task is not to start: its parent ended (a background task goes on without it), or
        a background task's cancel was asked for while it waited for an executor."""
        if task.background is not None:
            record = await background.record_of(self.bus, task)
            if record is None:
                return "its thread was deleted"
            return "cancelled on request" if record.cancel_requested_at else None
        assert self.runs is not None
        parent = await self.runs.get(task.parent_run_id)
        if parent is not None and parent.status.finished:
            return f"the parent run is {parent.status.value}"
        return None

    async def _report(self, task: SubagentTask, result: SubagentResult) -> None:
        if task.background is not None:  # nobody waits for it: it comes back as a run on its thread
            await background.report(self.bus, task, result)

    async def on_dead_letter(self, msg: Any, reason: str) -> None:
        """A task that cannot be run still ends: its parent gets `failed` instead of waiting."""
        try:
            task = decode(SubagentTask, msg.data)
        except Exception:
            return  # not a task at all: nobody waits for it
        failed = ended_outcome(task, "failed", f"the task could not be run: {reason}")
        key = SubagentResult.key(task.parent_run_id, task.task_id)
        await self._report(task, await store_outcome(self.results, key, failed))

    async def _run(self, task: SubagentTask) -> SubagentResult:
        if task.kind == "command":  # a background command, run at a sandbox broker
            stopped = (task.parent_run_id, task.task_id)  # in `_cancelled`: stopped on purpose, killed
            return await background_commands.run_to_end(self.bus, task, lambda: stopped in self._cancelled)
        kind = self.types.get(task.subagent_type)
        if kind is None:
            return ended_outcome(task, "failed", f"no subagent type {task.subagent_type!r}")
        model_name = kind.model_name or task.model_name
        version, mcp_tools = await self.mcp.current()
        if version != self._mcp_version:  # MCP tools changed: agents are built again with them
            self.tools = {t.name: t for t in [*self._own_tools, *mcp_tools]}
            self._agents.clear()
            self._mcp_version = version
        # The person's role holds in their subagents as in their runs: a model it lacks is refused,
        # the tools it lacks are not offered.
        permissions = await self.access.permissions(task.user_id)
        default = self.config.get_model()
        refusal = permissions.refusal_for_model(model_name or (default.name if default else ""))
        if refusal is not None and (model_name or default is not None):
            return ended_outcome(task, "failed", refusal)
        try:
            # Compiling takes a moment of CPU: in a thread, so the loop keeps every task's delivery
            # alive (a blocked loop misses the in-progress acks of the tasks it already runs).
            agent: Any = self._agents.get((kind.name, model_name)) or await asyncio.to_thread(
                self.agent, kind, model_name
            )
        except Exception as exc:  # a model that cannot be built: the task fails, saying why
            return ended_outcome(task, "failed", f"{type(exc).__name__}: {exc}")
        max_turns = task.max_turns or kind.max_turns or self.config.subagents.max_turns
        config = {
            "configurable": {"thread_id": f"{task.parent_run_id}:{task.task_id}"},
            # parent_thread_id: deleting the parent's thread deletes this one too.
            "metadata": {
                "parent_run_id": task.parent_run_id,
                "parent_thread_id": task.thread_id,
                "task_id": task.task_id,
            },
            "recursion_limit": 2 * max_turns,  # a turn is a model step, then a tools step
        }
        await with_tracing(  # LangSmith, Langfuse: a trace of its own, in the parent's thread (session)
            config,
            self.config,
            thread_id=task.thread_id,
            user_id=task.user_id,
            run_id=task.parent_run_id,
            agent=f"subagent:{task.subagent_type}",
            model=model_name or getattr(self.config.get_model(), "name", None),
        )
        context = RunContext(
            run_id=task.task_id,
            thread_id=task.thread_id,  # the parent's: its sandbox directories, its uploads
            user_id=task.user_id,
            system_prompt=await self.system_prompt(kind),
            model_name=model_name,
            tool_group_of=tool_group_map(self.config, mcp_tools),
            tool_server_of=mcp_server_map(mcp_tools),
            tool_filter=tool_filter(permissions),
            egress=egress_policy(self.config, permissions.role),
        )
        snapshot = await agent.aget_state(config)
        if snapshot.values.get("messages") and not snapshot.next:
            return outcome_from_state(task, snapshot.values, started=None)  # done before the process died
        graph_input = None if snapshot.values.get("messages") else self._input(task)
        turns = sum(isinstance(m, AIMessage) for m in snapshot.values.get("messages", []))
        started = utcnow()
        # From when the task was submitted: waiting for an executor and earlier deliveries count.
        timeout = task.timeout_seconds or kind.timeout_seconds or self.config.subagents.timeout_seconds
        left = timeout - (started - task.created_at).total_seconds()
        stop_reason = error = None
        status = "completed"
        limit = asyncio.timeout(max(left, 0.0))
        try:
            async with limit:
                async for mode, chunk in agent.astream(
                    graph_input, config, context=context, stream_mode=["updates", "custom"], durability="sync"
                ):
                    if mode == "custom":
                        await self._notice(task, chunk, turns)
                    else:
                        turns = await self._progress(task, chunk, turns)
        except TimeoutError as exc:
            if not limit.expired():
                status, error = "failed", f"{type(exc).__name__}: {exc}"
            else:
                status, error = "timed_out", f"the subagent ran longer than {timeout:g}s and was stopped"
        except GraphRecursionError:
            stop_reason = "turn_capped"
        except Exception as exc:
            log.warning("subagent %s failed: %s: %s", task.task_id, type(exc).__name__, exc)
            status, error = "failed", f"{type(exc).__name__}: {exc}"
        state = (await agent.aget_state(config)).values
        return outcome_from_state(task, state, started, status, error, stop_reason)

    @staticmethod
    def _input(task: SubagentTask) -> dict[str, Any]:
        return {
            "messages": [HumanMessage(task.prompt)],
            "thread_data": thread_data(task.user_id),
            "sandbox": {"sandbox_id": f"{task.user_id}:{task.thread_id}"},
        }

    async def _notice(self, task: SubagentTask, event: Any, turns: int) -> None:
        """A model retry of the subagent (`llm_retry`), relayed as its latest message: the parent's
        task card and events say "retrying (2/5)…" while the subagent waits."""
        if not isinstance(event, dict) or event.get("type") != "llm_retry":
            return
        text = f"The model is busy; retrying ({event.get('attempt')}/{event.get('max_attempts')})…"
        progress = SubagentProgress(
            task_id=task.task_id,
            parent_run_id=task.parent_run_id,
            turn=turns,
            message={"type": "ai", "content": text, "llm_retry": event},
        )
        await self.bus.publish_core(self.bus.subjects.subagent_progress(task.parent_run_id), progress)

    async def _progress(self, task: SubagentTask, update: Any, turns: int) -> int:
        """Each finished model turn, for the parent's task tool to relay; the turns so far."""
        for value in update.values() if isinstance(update, dict) else ():
            messages = value.get("messages", []) if isinstance(value, dict) else []
            for message in messages if isinstance(messages, list) else []:
                if isinstance(message, AIMessage):
                    turns += 1
                    progress = SubagentProgress(
                        task_id=task.task_id,
                        parent_run_id=task.parent_run_id,
                        turn=turns,
                        message=jsonable(message),
                    )
                    subject = self.bus.subjects.subagent_progress(task.parent_run_id)
                    await self.bus.publish_core(subject, progress)
        return turns
