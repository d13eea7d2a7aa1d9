"""The threads service (`<prefix>.threads.*`): create, patch, delete, state, history, suggestions, goal,
compact (`compact`).

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

import logging
from collections.abc import Callable
from typing import Any

from langgraph.errors import InvalidUpdateError

from agents.background_stop import stop_thread_tasks
from agents.context import RunOptions
from agents.graph.middleware.person_budget import PersonMeter
from agents.graph.run_check import InvalidRun, check_run
from agents.graph.state_update import InvalidStateUpdate, check_state_update
from agents.threads.compact import compact_thread
from agents.threads.goal import change_goal
from agents.threads.graph_shape import drawable_graph, schemas, subgraph_schemas
from agents.threads.snapshots import checkpoint_config, state_graph, to_thread_state
from agents.threads.suggestions import SuggestionFailed, suggest, turns_of
from bus import Bus
from bus.messages import (
    ID_RULE,
    AssistantGraphReply,
    AssistantGraphRequest,
    Reply,
    RunRecord,
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
    ThreadStateReply,
    ThreadStateRequest,
    ThreadSuggestionsReply,
    ThreadSuggestionsRequest,
    ThreadUpdateStateReply,
    ThreadUpdateStateRequest,
    is_valid_id,
    utcnow,
)
from bus.records import RecordStore, drop_keys, keys_matching
from bus.service import Endpoint, Running, ServiceError, start_service
from config import AppConfig
from llm.guard import ModelCalls

log = logging.getLogger(__name__)


class ThreadService:
    """The service's handlers, over what the runner process holds: the thread records, the
    checkpointer, the compiled agents (to check a run against its own graph) and the model calls'
    budget (for compaction)."""

    def __init__(
        self,
        bus: Bus,
        config: AppConfig,
        checkpointer: Any,
        threads: RecordStore[ThreadRecord],
        graph_for: Callable[[RunOptions], Any],
        calls: ModelCalls,
    ) -> None:
        self.bus = bus
        self.config = config
        self.checkpointer = checkpointer
        self.threads = threads
        self.graph_for = graph_for  # the lead agent compiled for a run's options
        self.calls = calls
        # The person's budget counts the calls made for them here: suggestions, /compact's summary.
        self.meter = PersonMeter(bus, config, getattr(config.get_model(), "name", None))
        self.graph = state_graph(checkpointer)

    async def _own(self, thread_id: str, user_id: str) -> ThreadRecord | None:
        """Refuse another user's thread as if it did not exist (a thread with no record yet is anyone's);
        its record, if it has one."""
        record = await self.threads.get(thread_id) if is_valid_id(thread_id) else None
        if not is_valid_id(thread_id) or (record is not None and record.user_id != user_id):
            raise ServiceError(f"thread {thread_id} not found", "not_found")
        return record

    async def state(self, req: ThreadStateRequest) -> ThreadStateReply:
        record = await self._own(req.thread_id, req.user_id)
        snapshot = await self.graph.aget_state(
            checkpoint_config(req.thread_id, req.checkpoint_id), subgraphs=req.subgraphs
        )
        state = to_thread_state(snapshot)
        if req.checkpoint_id is None and record is not None and record.goal is not None:
            state.values["goal"] = record.goal.goal_state()  # DeerFlow's UI shows it from `values.goal`
        return ThreadStateReply(state=state)

    async def history(self, req: ThreadHistoryRequest) -> ThreadHistoryReply:
        await self._own(req.thread_id, req.user_id)
        before = checkpoint_config(req.thread_id, req.before) if req.before else None
        states = [
            to_thread_state(s)
            async for s in self.graph.aget_state_history(
                checkpoint_config(req.thread_id), filter=req.metadata, before=before, limit=req.limit
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
            checkpoint_config(req.thread_id), filter={"source": "input"}, limit=req.limit
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
            checkpoint_config(req.thread_id, req.checkpoint_id), req.values, as_node=req.as_node
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
            graph = self.graph_for(RunOptions.from_run(configurable, req.context))
        except Exception as exc:  # the run will fail with it when it starts; its nodes are still these
            log.info("check of run %s against the default graph: %s: %s", req.run_id, type(exc).__name__, exc)
            graph = self.graph
        try:
            await check_run(req, graph)
        except InvalidRun as exc:
            raise ServiceError(str(exc), "invalid") from None
        return Reply()

    async def assistant_graph(self, req: AssistantGraphRequest) -> AssistantGraphReply:
        """The lead agent's graph (a custom agent's, with `agent_name`) as runs get it compiled, drawn
        or as JSON schemas (`agents.threads.graph_shape`). Without a usable model the graph cannot be
        compiled for a run: the state graph, which has the same state, context and nodes, is described."""
        options = RunOptions.from_run({}, {"agent_name": req.agent_name} if req.agent_name else {})
        try:
            graph = self.graph_for(options)
        except Exception as exc:
            log.info("graph for %s described from the state graph: %s: %s", options, type(exc).__name__, exc)
            graph = self.graph
        if req.part == "graph":
            return AssistantGraphReply(answer=drawable_graph(graph, req.xray))
        if req.part == "schemas":
            return AssistantGraphReply(answer=schemas(graph))
        return AssistantGraphReply(answer=subgraph_schemas(graph, req.namespace, req.recurse))

    async def _retitle(self, thread_id: str, user_id: str, title: str) -> None:
        """A title set through the state (DeerFlow's UI renames so) is the record's too: thread lists
        and search read it there."""

        def retitled(record: ThreadRecord | None) -> ThreadRecord | None:
            if record is None or record.user_id != user_id or record.title == title:
                return None
            return record.model_copy(update={"title": title, "updated_at": utcnow()})

        await self.threads.update(thread_id, retitled)

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
        if await self.threads.create(req.thread_id, fresh):
            return ThreadCreateReply(thread=fresh, created=True)
        return ThreadCreateReply(thread=await self.threads.get(req.thread_id))

    async def patch(self, req: ThreadPatchRequest) -> ThreadPatchReply:
        owner = req.owner or req.user_id

        def merge(record: ThreadRecord | None) -> ThreadRecord | None:
            if record is None or record.user_id not in (req.user_id, owner):
                raise ServiceError(f"thread {req.thread_id} not found", "not_found")
            changes = {"metadata": {**record.metadata, **req.metadata}, "user_id": owner}
            return record.model_copy(update={**changes, "updated_at": utcnow()})

        thread = await self.threads.update(req.thread_id, merge)
        if owner != req.user_id:
            await self._give_runs(req.thread_id, req.user_id, owner)
            log.info("thread %s given by %s to %s", req.thread_id, req.user_id, owner)
        return ThreadPatchReply(thread=thread)

    async def _give_runs(self, thread_id: str, user_id: str, owner: str) -> None:
        """The thread's run records are its new owner's too (their run history)."""
        runs = RecordStore(await self.bus.kv(self.bus.subjects.runs_bucket), RunRecord)

        def given(record: RunRecord | None) -> RunRecord | None:
            if record is None or record.user_id != user_id:
                return None
            return record.model_copy(update={"user_id": owner})

        for key in await keys_matching(self.bus.js, self.bus.subjects.thread_runs_bucket, f"{thread_id}.>"):
            await runs.update(key.rsplit(".", 1)[1], given)

    async def goal(self, req: ThreadGoalRequest) -> ThreadGoalReply:
        """Set or clear the thread's goal (goal mode: `agents.threads.goal`)."""
        try:
            goal = await change_goal(self.threads, self.config, req)
        except LookupError:
            raise ServiceError(f"thread {req.thread_id} not found", "not_found") from None
        return ThreadGoalReply(goal=goal)

    async def delete(self, req: ThreadDeleteRequest) -> ThreadDeleteReply:
        """Checkpoints, runs, then the record, then the announcement: a failure part way is retried whole."""
        await self._own(req.thread_id, req.user_id)
        await self.checkpointer.adelete_thread(req.thread_id)
        children = {
            checkpoint.config["configurable"]["thread_id"]
            async for checkpoint in self.checkpointer.alist(None, filter={"parent_thread_id": req.thread_id})
        }
        for child in children:  # its subagents' threads
            await self.checkpointer.adelete_thread(child)
        index = self.bus.subjects.thread_runs_bucket
        runs = await self.bus.kv(self.bus.subjects.runs_bucket)
        for key in await keys_matching(self.bus.js, index, f"{req.thread_id}.>"):
            await runs.delete(key.rsplit(".", 1)[1])
        await drop_keys(self.bus.js, index, f"{req.thread_id}.>")
        await stop_thread_tasks(self.bus, req.thread_id)  # its background tasks report nowhere
        await self.threads.delete(req.thread_id)
        announcement = ThreadDeleted(thread_id=req.thread_id, user_id=req.user_id)
        await self.bus.publish(self.bus.subjects.event("thread.deleted"), announcement)
        return ThreadDeleteReply(deleted=True)

    async def suggestions(self, req: ThreadSuggestionsRequest) -> ThreadSuggestionsReply:
        await self._own(req.thread_id, req.user_id)
        if req.model_name is not None and self.config.get_model(req.model_name) is None:
            known = ", ".join(m.name for m in self.config.models)
            message = f"model_name: no model named {req.model_name!r} (configured: {known})"
            raise ServiceError(message, "invalid")
        await self._within_budget(req.user_id, req.thread_id)
        turns = req.messages
        if not turns:
            snapshot = await self.graph.aget_state(checkpoint_config(req.thread_id))
            turns = turns_of((snapshot.values or {}).get("messages", []))
        try:
            async with self.meter.counting(req.user_id):
                found = await suggest(self.config, turns, req.n, req.model_name)
        except SuggestionFailed as exc:
            raise ServiceError(str(exc), "model_failed") from None
        return ThreadSuggestionsReply(suggestions=found)

    async def _within_budget(self, user_id: str, thread_id: str) -> None:
        """Refuse (403, the sentence naming the limit) a person whose budget is used up."""
        reason = await self.meter.refusal(user_id, None, thread_id)
        if reason is not None:
            raise ServiceError(reason, "not_allowed")

    async def compact(self, req: ThreadCompactRequest) -> ThreadCompactReply:
        await self._within_budget(req.user_id, req.thread_id)
        return await compact_thread(
            req, self.config, self.bus, self.threads, self.graph, self.calls, self.meter
        )


async def serve_threads(threads: ThreadService) -> Running:
    """The `threads` micro service, its handlers `threads`' (every runner joins one queue group)."""
    bus = threads.bus
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
        Endpoint("assistant_graph", AssistantGraphRequest, AssistantGraphReply, threads.assistant_graph),
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
