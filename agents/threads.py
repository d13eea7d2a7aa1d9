"""The threads service (`<prefix>.threads.*`): create, patch, delete, state, history, suggestions, goal,
compact (agents.compact).

The runners own threads: their records (KV `<prefix>_threads`, which the
runner's thread claims also write) and their checkpoints. Everyone else reads
records from KV and changes them only through this service. A NATS micro
service in the runner process (which also has the models), so the gateway can
serve LangGraph's thread endpoints and DeerFlow's follow-up suggestions without
touching storage or calling a model itself. A deleted thread is announced on
`<prefix>.events.thread.deleted` (the router unbinds chats from it). Every
runner joins the same queue group; `$SRV` discovery lists them.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langgraph.errors import InvalidUpdateError

from agents.compact import compact_thread
from agents.context import RunContext, RunOptions
from agents.events import jsonable
from agents.goal import change_goal
from agents.graph.run_check import InvalidRun, check_run
from agents.graph.state import ThreadState as ThreadStateSchema
from agents.graph.state_update import InvalidStateUpdate, check_state_update
from agents.suggestions import SuggestionFailed, suggest, turns_of
from agents.tools import ask_clarification, present_files
from bus import Bus
from bus.messages import (
    ID_RULE,
    Reply,
    RunRequest,
    RunStart,
    ThreadCompactReply,
    ThreadCompactRequest,
    ThreadCreateReply,
    ThreadCreateRequest,
    ThreadDeleted,
    ThreadDeleteReply,
    ThreadDeleteRequest,
    ThreadGoalReply,
    ThreadGoalRequest,
    ThreadHistoryReply,
    ThreadHistoryRequest,
    ThreadPatchReply,
    ThreadPatchRequest,
    ThreadRecord,
    ThreadRunStartsReply,
    ThreadRunStartsRequest,
    ThreadState,
    ThreadStateReply,
    ThreadStateRequest,
    ThreadSuggestionsReply,
    ThreadSuggestionsRequest,
    ThreadUpdateStateReply,
    ThreadUpdateStateRequest,
    is_valid_id,
    utcnow,
)
from bus.records import drop_keys, keys_matching
from bus.service import Endpoint, Running, ServiceError, start_service
from config import AppConfig

if TYPE_CHECKING:
    from agents.runner import Runner

log = logging.getLogger(__name__)


def state_graph(checkpointer: Any) -> Any:
    """A graph with the lead agent's state and nodes but no real model: for reading and writing state."""
    placeholder = GenericFakeChatModel(messages=iter(()))
    return create_agent(
        placeholder,
        [ask_clarification, present_files],
        state_schema=ThreadStateSchema,
        context_schema=RunContext,
        checkpointer=checkpointer,
        name="lead_agent",
    )


def task_error(error: Any) -> str | None:
    """A checkpoint task's error as clients see it; none for a task a stop cancelled.

    LangGraph saves a cancelled task's `CancelledError` as its error (so the super-step can end), but
    a stop is the user's choice, not a failure: DeerFlow's UI (the LangGraph SDK's `useStream`) reads
    the newest checkpoint's task error as the chat's error and shows it as failed after a reload.
    """
    if error is None or isinstance(error, asyncio.CancelledError):
        return None
    text = str(error) if isinstance(error, str) else repr(error)
    return None if text.startswith("CancelledError(") else text


def to_thread_state(snapshot: Any) -> ThreadState:
    conf = snapshot.config.get("configurable", {}) if snapshot.config else {}
    parent = snapshot.parent_config.get("configurable") if snapshot.parent_config else None
    return ThreadState(
        values=jsonable(snapshot.values or {}),
        next=list(snapshot.next or ()),
        checkpoint={k: conf.get(k) for k in ("thread_id", "checkpoint_ns", "checkpoint_id")},
        metadata=jsonable(snapshot.metadata or {}),
        created_at=snapshot.created_at,
        parent_checkpoint={k: parent.get(k) for k in ("thread_id", "checkpoint_ns", "checkpoint_id")}
        if parent
        else None,
        tasks=[
            {"id": t.id, "name": t.name, "error": task_error(t.error), "interrupts": jsonable(t.interrupts)}
            for t in snapshot.tasks or ()
        ],
        interrupts=jsonable(list(getattr(snapshot, "interrupts", ()) or ())),
    )


class ThreadService:
    def __init__(self, bus: Bus, config: AppConfig, runner: Runner) -> None:
        self.bus = bus
        self.config = config
        self.runner = runner
        self.graph = state_graph(runner.checkpointer)

    async def _own(self, thread_id: str, user_id: str) -> ThreadRecord | None:
        """Refuse another user's thread as if it did not exist (a thread with no record yet is anyone's);
        its record, if it has one."""
        record = await self.runner.threads.get(thread_id) if is_valid_id(thread_id) else None
        if not is_valid_id(thread_id) or (record is not None and record.user_id != user_id):
            raise ServiceError(f"thread {thread_id} not found", "not_found")
        return record

    @staticmethod
    def _config(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
        configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
        if checkpoint_id:
            configurable["checkpoint_id"] = checkpoint_id
        return {"configurable": configurable}

    async def state(self, req: ThreadStateRequest) -> ThreadStateReply:
        record = await self._own(req.thread_id, req.user_id)
        snapshot = await self.graph.aget_state(
            self._config(req.thread_id, req.checkpoint_id), subgraphs=req.subgraphs
        )
        state = to_thread_state(snapshot)
        if req.checkpoint_id is None and record is not None and record.goal is not None:
            state.values["goal"] = record.goal.goal_state()  # DeerFlow's UI shows it from `values.goal`
        return ThreadStateReply(state=state)

    async def history(self, req: ThreadHistoryRequest) -> ThreadHistoryReply:
        await self._own(req.thread_id, req.user_id)
        before = self._config(req.thread_id, req.before) if req.before else None
        states = [
            to_thread_state(s)
            async for s in self.graph.aget_state_history(
                self._config(req.thread_id), filter=req.metadata, before=before, limit=req.limit
            )
        ]
        return ThreadHistoryReply(states=states)

    async def run_starts(self, req: ThreadRunStartsRequest) -> ThreadRunStartsReply:
        """From the checkpoints tagged `input` (one per run that brought input), newest first as the
        checkpointer lists them; only their message counts leave this process."""
        await self._own(req.thread_id, req.user_id)
        starts = []
        saver = self.graph.checkpointer
        async for found in saver.alist(
            self._config(req.thread_id), filter={"source": "input"}, limit=req.limit
        ):
            messages = found.checkpoint.get("channel_values", {}).get("messages") or []
            starts.append(
                RunStart(
                    messages_before=len(messages),
                    run_id=str(found.metadata.get("run_id") or ""),
                    created_at=found.checkpoint.get("ts"),
                )
            )
        starts.sort(key=lambda start: (start.messages_before, start.created_at or ""))
        return ThreadRunStartsReply(starts=starts)

    async def update_state(self, req: ThreadUpdateStateRequest) -> ThreadUpdateStateReply:
        await self._own(req.thread_id, req.user_id)
        try:
            check_state_update(req.values, req.as_node, self.graph.nodes)
        except InvalidStateUpdate as exc:
            raise ServiceError(str(exc), "invalid") from None
        config = await self.graph.aupdate_state(
            self._config(req.thread_id, req.checkpoint_id), req.values, as_node=req.as_node
        )
        title = req.values.get("title") if isinstance(req.values, dict) else None
        if isinstance(title, str) and title.strip():
            await self._retitle(req.thread_id, req.user_id, title.strip())
        conf = config.get("configurable", {})
        return ThreadUpdateStateReply(
            checkpoint={k: conf.get(k) for k in ("thread_id", "checkpoint_ns", "checkpoint_id")}
        )

    async def check_run(self, req: RunRequest) -> Reply:
        """Whether the run can run, before the gateway accepts it (`agents.graph.run_check`), against the
        agent compiled for its options (plan mode adds a node); a runner checks it again as it starts."""
        await self._own(req.thread_id, req.user_id)
        configurable = dict(req.config.get("configurable") or {})
        try:
            graph = self.runner.agents.get(RunOptions.from_run(configurable, req.context))
        except Exception as exc:  # the run will fail with it when it starts; its nodes are still these
            log.info("check of run %s against the default graph: %s: %s", req.run_id, type(exc).__name__, exc)
            graph = self.graph
        try:
            await check_run(req, graph)
        except InvalidRun as exc:
            raise ServiceError(str(exc), "invalid") from None
        return Reply()

    async def _retitle(self, thread_id: str, user_id: str, title: str) -> None:
        """A title set through the state (DeerFlow's UI renames so) is the record's too: thread lists
        and search read it there."""

        def retitled(record: ThreadRecord | None) -> ThreadRecord | None:
            if record is None or record.user_id != user_id or record.title == title:
                return None
            return record.model_copy(update={"title": title, "updated_at": utcnow()})

        await self.runner.threads.update(thread_id, retitled)

    async def create(self, req: ThreadCreateRequest) -> ThreadCreateReply:
        if not is_valid_id(req.thread_id):
            raise ServiceError(f"thread_id {req.thread_id!r} cannot be used: {ID_RULE}", "invalid")
        now = utcnow()
        fresh = ThreadRecord(
            thread_id=req.thread_id,
            user_id=req.user_id,
            metadata=req.metadata,
            created_at=now,
            updated_at=now,
        )
        if await self.runner.threads.create(req.thread_id, fresh):
            return ThreadCreateReply(thread=fresh, created=True)
        return ThreadCreateReply(thread=await self.runner.threads.get(req.thread_id))

    async def patch(self, req: ThreadPatchRequest) -> ThreadPatchReply:

        def merge(record: ThreadRecord | None) -> ThreadRecord | None:
            if record is None or record.user_id != req.user_id:
                raise ServiceError(f"thread {req.thread_id} not found", "not_found")
            return record.model_copy(
                update={"metadata": {**record.metadata, **req.metadata}, "updated_at": utcnow()}
            )

        return ThreadPatchReply(thread=await self.runner.threads.update(req.thread_id, merge))

    async def goal(self, req: ThreadGoalRequest) -> ThreadGoalReply:
        """Set or clear the thread's goal (goal mode: `agents.goal`)."""
        try:
            goal = await change_goal(self.runner.threads, self.config, req)
        except LookupError:
            raise ServiceError(f"thread {req.thread_id} not found", "not_found") from None
        return ThreadGoalReply(goal=goal)

    async def delete(self, req: ThreadDeleteRequest) -> ThreadDeleteReply:
        """Checkpoints, runs, then the record, then the announcement: a failure part way is retried whole."""
        await self._own(req.thread_id, req.user_id)
        await self.runner.checkpointer.adelete_thread(req.thread_id)
        children = {
            checkpoint.config["configurable"]["thread_id"]
            async for checkpoint in self.runner.checkpointer.alist(
                None, filter={"parent_thread_id": req.thread_id}
            )
        }
        for child in children:  # its subagents' threads
            await self.runner.checkpointer.adelete_thread(child)
        index = self.bus.subjects.thread_runs_bucket
        runs = await self.bus.kv(self.bus.subjects.runs_bucket)
        for key in await keys_matching(self.bus.js, index, f"{req.thread_id}.>"):
            await runs.delete(key.rsplit(".", 1)[1])
        await drop_keys(self.bus.js, index, f"{req.thread_id}.>")
        await self.runner.threads.delete(req.thread_id)
        announcement = ThreadDeleted(thread_id=req.thread_id, user_id=req.user_id)
        await self.bus.publish(self.bus.subjects.event("thread.deleted"), announcement)
        return ThreadDeleteReply(deleted=True)

    async def suggestions(self, req: ThreadSuggestionsRequest) -> ThreadSuggestionsReply:
        await self._own(req.thread_id, req.user_id)
        if req.model_name is not None and self.config.get_model(req.model_name) is None:
            known = ", ".join(m.name for m in self.config.models)
            message = f"model_name: no model named {req.model_name!r} (configured: {known})"
            raise ServiceError(message, "invalid")
        turns = req.messages
        if not turns:
            snapshot = await self.graph.aget_state(self._config(req.thread_id))
            turns = turns_of((snapshot.values or {}).get("messages", []))
        try:
            found = await suggest(self.config, turns, req.n, req.model_name)
        except SuggestionFailed as exc:
            raise ServiceError(str(exc), "model_failed") from None
        return ThreadSuggestionsReply(suggestions=found)

    async def compact(self, req: ThreadCompactRequest) -> ThreadCompactReply:
        return await compact_thread(self, req)


async def serve_threads(bus: Bus, config: AppConfig, runner: Runner) -> Running:
    threads = ThreadService(bus, config, runner)
    endpoints: list[Endpoint[Any, Any]] = [
        Endpoint("state", ThreadStateRequest, ThreadStateReply, threads.state),
        Endpoint("history", ThreadHistoryRequest, ThreadHistoryReply, threads.history),
        Endpoint("run_starts", ThreadRunStartsRequest, ThreadRunStartsReply, threads.run_starts),
        Endpoint("update_state", ThreadUpdateStateRequest, ThreadUpdateStateReply, threads.update_state),
        Endpoint("create", ThreadCreateRequest, ThreadCreateReply, threads.create),
        Endpoint("patch", ThreadPatchRequest, ThreadPatchReply, threads.patch),
        Endpoint("delete", ThreadDeleteRequest, ThreadDeleteReply, threads.delete),
        Endpoint("suggestions", ThreadSuggestionsRequest, ThreadSuggestionsReply, threads.suggestions),
        Endpoint("goal", ThreadGoalRequest, ThreadGoalReply, threads.goal),
        Endpoint("compact", ThreadCompactRequest, ThreadCompactReply, threads.compact),
        Endpoint("check_run", RunRequest, Reply, threads.check_run),
    ]
    # LangGraph refusing what was asked (an update that does not fit the state, a message id
    # that is not there) is the caller's mistake, said as such.
    return await start_service(
        bus,
        "threads",
        endpoints,
        description="Thread state, history, deletion and follow-up suggestions from the agent runners",
        invalid=(InvalidUpdateError, ValueError, NotImplementedError),
    )
