"""The threads service (`<prefix>.threads.*`): state, history, update state, delete and suggestions.

A NATS micro service in the runner process (which owns the checkpointer and the
models), so the gateway can serve LangGraph's thread endpoints and DeerFlow's
follow-up suggestions without touching storage or calling a model itself.
Every runner joins the same queue group; `$SRV` discovery lists them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langgraph.errors import InvalidUpdateError
from nats.micro import add_service
from nats.micro.request import Request
from nats.micro.service import Service
from pydantic import BaseModel

from agents.context import RunContext
from agents.events import jsonable
from agents.state import ThreadState as ThreadStateSchema
from agents.state_update import InvalidStateUpdate, check_state_update
from agents.suggestions import SuggestionFailed, suggest, turns_of
from agents.tools import ask_clarification, present_files
from bus import Bus, EnvelopeError, decode, encode
from bus.messages import (
    ErrorInfo,
    Reply,
    ThreadDeleteReply,
    ThreadDeleteRequest,
    ThreadHistoryReply,
    ThreadHistoryRequest,
    ThreadState,
    ThreadStateReply,
    ThreadStateRequest,
    ThreadSuggestionsReply,
    ThreadSuggestionsRequest,
    ThreadUpdateStateReply,
    ThreadUpdateStateRequest,
)
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
            {"id": t.id, "name": t.name, "error": t.error, "interrupts": jsonable(t.interrupts)}
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

    async def _owned(self, thread_id: str, user_id: str) -> bool:
        assert self.runner.threads is not None
        record = await self.runner.threads.get(thread_id)
        return record is None or record.user_id == user_id

    @staticmethod
    def _config(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
        configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
        if checkpoint_id:
            configurable["checkpoint_id"] = checkpoint_id
        return {"configurable": configurable}

    async def state(self, req: ThreadStateRequest) -> ThreadStateReply:
        if not await self._owned(req.thread_id, req.user_id):
            return ThreadStateReply(
                error=ErrorInfo(code="not_found", message=f"thread {req.thread_id} not found")
            )
        snapshot = await self.graph.aget_state(
            self._config(req.thread_id, req.checkpoint_id), subgraphs=req.subgraphs
        )
        return ThreadStateReply(state=to_thread_state(snapshot))

    async def history(self, req: ThreadHistoryRequest) -> ThreadHistoryReply:
        if not await self._owned(req.thread_id, req.user_id):
            return ThreadHistoryReply(
                error=ErrorInfo(code="not_found", message=f"thread {req.thread_id} not found")
            )
        before = self._config(req.thread_id, req.before) if req.before else None
        states = [
            to_thread_state(s)
            async for s in self.graph.aget_state_history(
                self._config(req.thread_id), filter=req.metadata, before=before, limit=req.limit
            )
        ]
        return ThreadHistoryReply(states=states)

    async def update_state(self, req: ThreadUpdateStateRequest) -> ThreadUpdateStateReply:
        if not await self._owned(req.thread_id, req.user_id):
            return ThreadUpdateStateReply(
                error=ErrorInfo(code="not_found", message=f"thread {req.thread_id} not found")
            )
        try:
            check_state_update(req.values, req.as_node, self.graph.nodes)
        except InvalidStateUpdate as exc:
            return ThreadUpdateStateReply(error=ErrorInfo(code="invalid", message=str(exc)))
        config = await self.graph.aupdate_state(
            self._config(req.thread_id, req.checkpoint_id), req.values, as_node=req.as_node
        )
        conf = config.get("configurable", {})
        return ThreadUpdateStateReply(
            checkpoint={k: conf.get(k) for k in ("thread_id", "checkpoint_ns", "checkpoint_id")}
        )

    async def delete(self, req: ThreadDeleteRequest) -> ThreadDeleteReply:
        if not await self._owned(req.thread_id, req.user_id):
            return ThreadDeleteReply(
                error=ErrorInfo(code="not_found", message=f"thread {req.thread_id} not found")
            )
        await self.runner.checkpointer.adelete_thread(req.thread_id)
        return ThreadDeleteReply(deleted=True)

    async def suggestions(self, req: ThreadSuggestionsRequest) -> ThreadSuggestionsReply:
        if not await self._owned(req.thread_id, req.user_id):
            return ThreadSuggestionsReply(
                error=ErrorInfo(code="not_found", message=f"thread {req.thread_id} not found")
            )
        if req.model_name is not None and self.config.get_model(req.model_name) is None:
            known = ", ".join(m.name for m in self.config.models)
            message = f"model_name: no model named {req.model_name!r} (configured: {known})"
            return ThreadSuggestionsReply(error=ErrorInfo(code="invalid", message=message))
        turns = req.messages
        if not turns:
            snapshot = await self.graph.aget_state(self._config(req.thread_id))
            turns = turns_of((snapshot.values or {}).get("messages", []))
        try:
            found = await suggest(self.config, turns, req.n, req.model_name)
        except SuggestionFailed as exc:
            return ThreadSuggestionsReply(error=ErrorInfo(code="model_failed", message=str(exc)))
        return ThreadSuggestionsReply(suggestions=found)


def _endpoint(
    model: type[BaseModel], reply: type[Reply], work: Callable[[Any], Awaitable[Reply]]
) -> Callable[[Request], Awaitable[None]]:
    async def handle(request: Request) -> None:
        try:
            message = decode(model, request.data)
        except EnvelopeError as exc:
            await request.respond(encode(reply(error=ErrorInfo(code="invalid", message=str(exc)))))
            return
        try:
            answer = await work(message)
        except (InvalidUpdateError, ValueError, NotImplementedError) as exc:
            # LangGraph refusing what was asked (an update that does not fit the state, a message
            # id that is not there): the caller's mistake, said as such.
            answer = reply(error=ErrorInfo(code="invalid", message=f"{type(exc).__name__}: {exc}"))
        except Exception as exc:  # a reply with the reason, never a silent timeout for the caller
            log.exception("threads service: %s failed", model.__name__)
            answer = reply(error=ErrorInfo(code="internal", message=f"{type(exc).__name__}: {exc}"))
        await request.respond(encode(answer))

    return handle


def _concurrently(
    handle: Callable[[Request], Awaitable[None]], tasks: set[asyncio.Task[None]]
) -> Callable[[Request], Awaitable[None]]:
    """Handle each request in its own task: an endpoint's requests otherwise wait for one another
    (one subscription, one callback at a time), and a model call takes seconds."""

    def done(task: asyncio.Task[None]) -> None:
        tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("threads service: a request failed", exc_info=task.exception())

    async def start(request: Request) -> None:
        task = asyncio.create_task(handle(request))
        tasks.add(task)
        task.add_done_callback(done)

    return start


async def serve_threads(bus: Bus, config: AppConfig, runner: Runner) -> Service:
    threads = ThreadService(bus, config, runner)
    service = await add_service(
        bus.nc,
        name=bus.subjects.service_name("threads"),
        version="0.1.0",
        description="Thread state, history, deletion and follow-up suggestions from the agent runners",
        queue_group=bus.subjects.service_name("threads"),
    )
    s = bus.subjects
    endpoints = [
        ("state", ThreadStateRequest, ThreadStateReply, threads.state),
        ("history", ThreadHistoryRequest, ThreadHistoryReply, threads.history),
        ("update_state", ThreadUpdateStateRequest, ThreadUpdateStateReply, threads.update_state),
        ("delete", ThreadDeleteRequest, ThreadDeleteReply, threads.delete),
    ]
    for name, model, reply, work in endpoints:
        await service.add_endpoint(name=name, subject=s.threads(name), handler=_endpoint(model, reply, work))
    suggesting: set[asyncio.Task[None]] = set()  # kept referenced until done
    await service.add_endpoint(
        name="suggestions",
        subject=s.threads("suggestions"),
        handler=_concurrently(
            _endpoint(ThreadSuggestionsRequest, ThreadSuggestionsReply, threads.suggestions), suggesting
        ),
    )
    return service
