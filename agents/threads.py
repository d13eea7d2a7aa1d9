"""The threads service (`<prefix>.threads.*`): state, history, update state and delete, from the checkpointer.

A NATS micro service in the runner process (which owns the checkpointer), so
the gateway can serve LangGraph's thread endpoints without touching storage.
Every runner joins the same queue group; `$SRV` discovery lists them.
"""

from __future__ import annotations

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
    def __init__(self, bus: Bus, runner: Runner) -> None:
        self.bus = bus
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


async def serve_threads(bus: Bus, config: AppConfig, runner: Runner) -> Service:
    threads = ThreadService(bus, runner)
    service = await add_service(
        bus.nc,
        name=bus.subjects.service_name("threads"),
        version="0.1.0",
        description="Thread state, history and deletion from the agent runners' checkpointer",
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
    return service
