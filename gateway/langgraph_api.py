"""The LangGraph-compatible runtime API: assistants, threads, runs, SSE streams.

Mounted at /api and /api/langgraph, so the unmodified `langgraph-sdk` clients
(Python, and `@langchain/langgraph-sdk` in a browser) work against Antler. The
gateway only publishes run requests and reads records, event logs and the
runners' threads service: it runs nothing itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from bus.messages import (
    MultitaskStrategy,
    RunEvent,
    RunRecord,
    RunRequest,
    RunStatus,
    ThreadDeleteReply,
    ThreadDeleteRequest,
    ThreadHistoryReply,
    ThreadHistoryRequest,
    ThreadRecord,
    ThreadStateReply,
    ThreadStateRequest,
    ThreadUpdateStateReply,
    ThreadUpdateStateRequest,
    utcnow,
)
from bus.runs import cancel_run, follow_run, submit_run
from gateway.deps import GW, Gateway, Me
from gateway.ids import ID_PATTERN, is_valid_id, unusable_thread_id
from gateway.sse import HEARTBEAT_SECONDS, InvalidLastEventId, seq_of, stream_events
from gateway.state_update import check_state_update

router = APIRouter()

ASSISTANT_ID = "lead_agent"
ASSISTANT_NAMESPACE = uuid.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8")


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


class Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


# ------------------------------------------------------------------ assistants


def assistant(assistant_id: str = ASSISTANT_ID) -> dict[str, Any]:
    created = "2026-01-01T00:00:00+00:00"
    return {
        "assistant_id": assistant_id,
        "graph_id": ASSISTANT_ID,
        "name": assistant_id,
        "description": "Antler's lead agent: sandbox, skills, memory, subagents and tools",
        "config": {},
        "context": {},
        "metadata": {"created_by": "system"},
        "version": 1,
        "created_at": created,
        "updated_at": created,
    }


class AssistantSearch(Body):
    metadata: dict[str, Any] | None = None
    graph_id: str | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0)


@router.post("/assistants/search")
async def search_assistants(body: AssistantSearch) -> list[dict[str, Any]]:
    found = [assistant()]
    if body.graph_id not in (None, ASSISTANT_ID):
        found = []
    return found[body.offset : body.offset + body.limit]


@router.get("/assistants/{assistant_id}")
async def get_assistant(assistant_id: str) -> dict[str, Any]:
    if assistant_id not in (ASSISTANT_ID, str(uuid.uuid5(ASSISTANT_NAMESPACE, ASSISTANT_ID))):
        raise HTTPException(404, f"assistant {assistant_id} not found")
    return assistant(assistant_id)


# ------------------------------------------------------------------ threads


def thread_json(record: ThreadRecord, values: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "thread_id": record.thread_id,
        "created_at": _iso(record.created_at),
        "updated_at": _iso(record.updated_at),
        "metadata": record.metadata,
        "status": record.status,
        "values": values or {},
        "interrupts": {},
    }


class ThreadCreate(Body):
    thread_id: str | None = Field(
        None, description="Omit (or leave empty) for a new UUID.", json_schema_extra={"pattern": ID_PATTERN}
    )
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"


@router.post("/threads")
async def create_thread(gw: GW, me: Me, body: ThreadCreate) -> Any:
    """Create a thread; with `thread_id`, the caller's own thread of that id is a 409 (`if_exists:
    raise`) or returned (`do_nothing`). An id another user's thread has is answered exactly as an id
    that breaks the id rule (422 "cannot be used"), so creating tells nobody that thread exists."""
    thread_id = body.thread_id or str(uuid.uuid4())
    if not is_valid_id(thread_id):
        raise unusable_thread_id(thread_id)
    now = utcnow()
    record = ThreadRecord(
        thread_id=thread_id, user_id=me, metadata=body.metadata or {}, created_at=now, updated_at=now
    )
    if not await gw.threads.create(thread_id, record):
        existing = await gw.threads.get(thread_id)
        if existing is None or existing.user_id != me:
            raise unusable_thread_id(thread_id)  # someone else's: told apart from nothing else
        if body.if_exists == "raise":
            raise HTTPException(409, f"thread {thread_id} already exists")
        return thread_json(existing)
    return thread_json(record)


@router.get("/threads/{thread_id}")
async def get_thread(gw: GW, me: Me, thread_id: str) -> Any:
    record = await gw.own_thread(thread_id, me)
    reply = await gw.ask("state", ThreadStateRequest(thread_id=thread_id, user_id=me), ThreadStateReply)
    return thread_json(record, reply.state.values if reply.state else {})


class ThreadSearch(Body):
    metadata: dict[str, Any] | None = None
    ids: list[str] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0)
    sort_by: Literal["thread_id", "status", "created_at", "updated_at"] = "updated_at"
    sort_order: Literal["asc", "desc"] = "desc"


@router.post("/threads/search")
async def search_threads(gw: GW, me: Me, body: ThreadSearch) -> Any:
    # An id that breaks the rule in gateway/ids.py names no thread, like an unknown one.
    keys = [i for i in body.ids if is_valid_id(i)] if body.ids is not None else await gw.threads.keys()
    found = []
    for key in keys:
        record = await gw.threads.get(key)
        if record is None or record.user_id != me:
            continue
        if body.status and record.status != body.status:
            continue
        if body.metadata and any(record.metadata.get(k) != v for k, v in body.metadata.items()):
            continue
        found.append(record)
    found.sort(key=lambda r: getattr(r, body.sort_by), reverse=body.sort_order == "desc")
    return [thread_json(r) for r in found[body.offset : body.offset + body.limit]]


class ThreadPatch(Body):
    metadata: dict[str, Any] = Field(default_factory=dict)


@router.patch("/threads/{thread_id}")
async def patch_thread(gw: GW, me: Me, thread_id: str, body: ThreadPatch) -> Any:
    await gw.own_thread(thread_id, me)

    def merge(record: ThreadRecord | None) -> ThreadRecord | None:
        if record is None:
            return None
        return record.model_copy(
            update={"metadata": {**record.metadata, **body.metadata}, "updated_at": utcnow()}
        )

    updated = await gw.threads.update(thread_id, merge)
    assert updated is not None
    return thread_json(updated)


@router.delete("/threads/{thread_id}", status_code=204)
async def delete_thread(gw: GW, me: Me, thread_id: str) -> Response:
    record = await gw.own_thread(thread_id, me)
    if record.active_run_id:
        await cancel_run(gw.bus, record.active_run_id, reason="thread deleted")
    with contextlib.suppress(HTTPException):  # no runner up: the checkpoints stay, the thread still goes
        await gw.ask("delete", ThreadDeleteRequest(thread_id=thread_id, user_id=me), ThreadDeleteReply)
    await gw.threads.delete(thread_id)
    await delete_thread_files(gw, me, thread_id)
    await delete_chat_mappings(gw, thread_id)
    return Response(status_code=204)


async def delete_chat_mappings(gw: Gateway, thread_id: str) -> None:
    """Chats bound to a deleted thread start a fresh one with their next message."""
    from bus.messages import ChatBinding
    from bus.records import RecordStore

    chats = RecordStore(await gw.bus.kv(gw.bus.subjects.chats_bucket), ChatBinding)
    for key in await chats.keys():
        binding = await chats.get(key)
        if binding is not None and binding.thread_id == thread_id:
            await chats.delete(key)


async def delete_thread_files(gw: Gateway, user_id: str, thread_id: str) -> None:
    from bus.files import OUTPUTS, UPLOADS, list_objects, thread_prefix

    store = await gw.bus.files()
    for kind in (UPLOADS, OUTPUTS):
        for info in await list_objects(store, thread_prefix(kind, user_id, thread_id)):
            with contextlib.suppress(Exception):
                await store.delete(info.name)


@router.get("/threads/{thread_id}/state")
@router.get("/threads/{thread_id}/state/{checkpoint_id}")
async def get_thread_state(
    gw: GW,
    me: Me,
    thread_id: str,
    checkpoint_id: str | None = None,
    subgraphs: bool = False,
) -> Any:
    await gw.own_thread(thread_id, me)
    request = ThreadStateRequest(
        thread_id=thread_id, user_id=me, checkpoint_id=checkpoint_id, subgraphs=subgraphs
    )
    reply = await gw.ask("state", request, ThreadStateReply)
    return reply.state.model_dump() if reply.state else {}


class StateUpdate(Body):
    values: dict[str, Any] | list[Any] | None = None
    as_node: str | None = None
    checkpoint_id: str | None = None
    checkpoint: dict[str, Any] | None = None


@router.post("/threads/{thread_id}/state")
async def update_thread_state(gw: GW, me: Me, thread_id: str, body: StateUpdate) -> Any:
    await gw.own_thread(thread_id, me)
    check_state_update(body.values, body.as_node)
    checkpoint_id = body.checkpoint_id or (body.checkpoint or {}).get("checkpoint_id")
    request = ThreadUpdateStateRequest(
        thread_id=thread_id, user_id=me, values=body.values, as_node=body.as_node, checkpoint_id=checkpoint_id
    )
    reply = await gw.ask("update_state", request, ThreadUpdateStateReply)
    return {"checkpoint": reply.checkpoint}


class HistoryQuery(Body):
    limit: int = Field(10, ge=1, le=1000)
    before: str | dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None


@router.post("/threads/{thread_id}/history")
async def thread_history(gw: GW, me: Me, thread_id: str, body: HistoryQuery) -> Any:
    await gw.own_thread(thread_id, me)
    before = (
        body.before.get("configurable", body.before).get("checkpoint_id")
        if isinstance(body.before, dict)
        else body.before
    )
    request = ThreadHistoryRequest(
        thread_id=thread_id, user_id=me, limit=body.limit, before=before, metadata=body.metadata
    )
    reply = await gw.ask("history", request, ThreadHistoryReply)
    return [state.model_dump() for state in reply.states]


@router.get("/threads/{thread_id}/history")
async def thread_history_get(
    gw: GW,
    me: Me,
    thread_id: str,
    limit: int = Query(10, ge=1, le=1000),
) -> Any:
    return await thread_history(gw=gw, me=me, thread_id=thread_id, body=HistoryQuery(limit=limit))


# ------------------------------------------------------------------ runs


def run_json(record: RunRecord) -> dict[str, Any]:
    return {
        "run_id": record.run_id,
        "thread_id": record.thread_id,
        "assistant_id": record.assistant_id,
        "created_at": _iso(record.created_at),
        "updated_at": _iso(record.updated_at),
        "status": record.status.value,
        "metadata": record.metadata,
        "multitask_strategy": record.multitask_strategy.value,
        "kwargs": {},
    }


class RunCreate(Body):
    assistant_id: str = ASSISTANT_ID
    input: dict[str, Any] | None = None
    command: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    stream_mode: str | list[str] = "values"
    stream_subgraphs: bool = False
    stream_resumable: bool = False
    multitask_strategy: MultitaskStrategy = MultitaskStrategy.ENQUEUE
    if_not_exists: Literal["reject", "create"] = "reject"
    on_disconnect: Literal["cancel", "continue"] = "continue"
    checkpoint_id: str | None = None
    checkpoint: dict[str, Any] | None = None
    interrupt_before: list[str] | Literal["*"] | None = None
    interrupt_after: list[str] | Literal["*"] | None = None

    def modes(self) -> list[str]:
        modes = [self.stream_mode] if isinstance(self.stream_mode, str) else list(self.stream_mode)
        return modes or ["values"]


async def start_run(
    gw: Gateway, me: str, thread_id: str, body: RunCreate, modes: list[str] | None = None
) -> RunRecord:
    """Check the thread and the strategy, record the run and hand it to the runners."""
    record = await gw.threads.get(thread_id) if is_valid_id(thread_id) else None
    creates = body.if_not_exists == "create"
    if record is None and creates and is_valid_id(thread_id):
        now = utcnow()
        fresh = ThreadRecord(thread_id=thread_id, user_id=me, created_at=now, updated_at=now)
        # Another caller may create it at this very moment: only the one whose create wins owns it.
        record = fresh if await gw.threads.create(thread_id, fresh) else await gw.threads.get(thread_id)
    if record is None or record.user_id != me:
        # As if the thread did not exist: not found, or (to create it) an id that cannot be used.
        if creates:
            raise unusable_thread_id(thread_id)
        raise HTTPException(404, f"thread {thread_id} not found")
    if body.multitask_strategy == MultitaskStrategy.REJECT and record.active_run_id:
        active = await gw.runs.get(record.active_run_id)
        if active is not None and not active.status.finished:
            raise HTTPException(409, f"thread {thread_id} is busy with run {record.active_run_id}")
    config = dict(body.config or {})
    checkpoint_id = body.checkpoint_id or (body.checkpoint or {}).get("checkpoint_id")
    request = RunRequest(
        thread_id=thread_id,
        assistant_id=body.assistant_id,
        user_id=me,
        input=body.input,
        command=body.command,
        config=config,
        context=body.context or {},
        metadata=body.metadata or {},
        stream_mode=modes or body.modes(),
        stream_subgraphs=body.stream_subgraphs,
        multitask_strategy=body.multitask_strategy,
        checkpoint_id=checkpoint_id,
        interrupt_before=body.interrupt_before,
        interrupt_after=body.interrupt_after,
    )
    return await submit_run(gw.bus, request)


def _run_path(record: RunRecord, stateless: bool) -> str:
    return f"/runs/{record.run_id}" if stateless else f"/threads/{record.thread_id}/runs/{record.run_id}"


def sse_response(
    gw: Gateway,
    record: RunRecord,
    *,
    after_seq: int = 0,
    cancel_on_disconnect: bool = False,
    stateless: bool = False,
) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        ended = False
        try:
            async for chunk in stream_events(gw.bus, record.run_id, after_seq):
                if chunk.startswith(b"event: end\n"):
                    ended = True
                yield chunk
        finally:
            if cancel_on_disconnect and not ended:
                await asyncio.shield(cancel_run(gw.bus, record.run_id, reason="the client disconnected"))

    path = _run_path(record, stateless)
    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"Content-Location": path, "Location": f"{path}/stream", "Cache-Control": "no-store"},
    )


async def final_output(gw: Gateway, record: RunRecord, me: str) -> dict[str, Any]:
    """What /wait and /join answer: the thread's values, or `__error__` for a failed run."""
    done = await gw.runs.get(record.run_id)
    if done is not None and done.status == RunStatus.ERROR and done.error is not None:
        return {"__error__": {"error": done.error.code, "message": done.error.message}}
    reply = await gw.ask(
        "state", ThreadStateRequest(thread_id=record.thread_id, user_id=me), ThreadStateReply
    )
    return reply.state.values if reply.state else {}


def wait_response(gw: Gateway, record: RunRecord, me: str, stateless: bool = False) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        events = follow_run(gw.bus, record.run_id)
        waiter: asyncio.Task[RunEvent | None] | None = None
        try:
            while True:
                waiter = waiter or asyncio.create_task(anext(events, None))
                done, _ = await asyncio.wait([waiter], timeout=HEARTBEAT_SECONDS)
                if not done:
                    yield b"\n"  # keepalive while the run goes on
                    continue
                event, waiter = waiter.result(), None
                if event is None or event.event == "end":
                    break
        finally:
            if waiter is not None:
                waiter.cancel()
            await events.aclose()
        yield json.dumps(await final_output(gw, record, me), default=str).encode()

    path = _run_path(record, stateless)
    return StreamingResponse(body(), media_type="application/json", headers={"Location": f"{path}/join"})


@router.post("/threads/{thread_id}/runs/stream")
async def stream_run(gw: GW, me: Me, thread_id: str, body: RunCreate) -> StreamingResponse:
    record = await start_run(gw, me, thread_id, body)
    return sse_response(gw, record, cancel_on_disconnect=body.on_disconnect == "cancel")


@router.post("/threads/{thread_id}/runs/wait")
async def wait_run(gw: GW, me: Me, thread_id: str, body: RunCreate) -> StreamingResponse:
    record = await start_run(gw, me, thread_id, body, modes=["values"])
    return wait_response(gw, record, me)


@router.post("/threads/{thread_id}/runs")
async def create_run(gw: GW, me: Me, thread_id: str, body: RunCreate) -> Any:
    record = await start_run(gw, me, thread_id, body)
    return run_json(record)


@router.post("/runs/stream")
async def stream_stateless(gw: GW, me: Me, body: RunCreate) -> Any:
    body.if_not_exists = "create"
    record = await start_run(gw, me, str(uuid.uuid4()), body)
    return sse_response(gw, record, cancel_on_disconnect=body.on_disconnect == "cancel", stateless=True)


@router.post("/runs/wait")
async def wait_stateless(gw: GW, me: Me, body: RunCreate) -> Any:
    body.if_not_exists = "create"
    record = await start_run(gw, me, str(uuid.uuid4()), body, modes=["values"])
    return wait_response(gw, record, me, stateless=True)


@router.get("/threads/{thread_id}/runs")
async def list_runs(
    gw: GW,
    me: Me,
    thread_id: str,
    limit: int = Query(10, ge=1, le=1000),
    offset: int = Query(0, ge=0),
    status: str | None = None,
) -> Any:
    await gw.own_thread(thread_id, me)
    runs = []
    for key in await gw.runs.keys():
        record = await gw.runs.get(key)
        if record and record.thread_id == thread_id and (status is None or record.status.value == status):
            runs.append(record)
    runs.sort(key=lambda r: r.created_at, reverse=True)
    return [run_json(r) for r in runs[offset : offset + limit]]


@router.get("/threads/{thread_id}/runs/{run_id}")
async def get_run(gw: GW, me: Me, thread_id: str, run_id: str) -> Any:
    return run_json(await gw.own_run(thread_id, run_id, me))


@router.delete("/threads/{thread_id}/runs/{run_id}", status_code=204)
async def delete_run(gw: GW, me: Me, thread_id: str, run_id: str) -> Response:
    record = await gw.own_run(thread_id, run_id, me)
    if not record.status.finished:
        raise HTTPException(409, f"run {run_id} is still {record.status.value}; cancel it first")
    await gw.runs.delete(run_id)
    return Response(status_code=204)


@router.post("/threads/{thread_id}/runs/{run_id}/cancel")
async def cancel(
    gw: GW,
    me: Me,
    thread_id: str,
    run_id: str,
    wait: bool = False,
    action: Literal["interrupt", "rollback"] = "interrupt",
) -> Any:
    record = await gw.own_run(thread_id, run_id, me)
    await cancel_run(gw.bus, run_id, action=action)
    if not wait:
        return Response(status_code=202)
    async for _event in follow_run(gw.bus, record.run_id, timeout=60):
        pass
    done = await gw.runs.get(run_id)
    return run_json(done or record)


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(gw: GW, me: Me, thread_id: str, run_id: str) -> Any:
    record = await gw.own_run(thread_id, run_id, me)
    return wait_response(gw, record, me)


def resume_after(last_event_id: Annotated[str | None, Header()] = None) -> int:
    """The sequence number to resume after, from `Last-Event-ID`; 400 for one that is not ours."""
    try:
        return seq_of(last_event_id)
    except InvalidLastEventId as exc:
        raise HTTPException(400, str(exc)) from None


ResumeAfter = Annotated[int, Depends(resume_after)]


@router.get("/threads/{thread_id}/runs/{run_id}/stream")
async def join_stream(
    gw: GW,
    me: Me,
    thread_id: str,
    run_id: str,
    after_seq: ResumeAfter,
    cancel_on_disconnect: bool = False,
) -> StreamingResponse:
    record = await gw.own_run(thread_id, run_id, me)
    return sse_response(gw, record, after_seq=after_seq, cancel_on_disconnect=cancel_on_disconnect)


@router.get("/runs/{run_id}/stream")
async def join_stream_stateless(gw: GW, me: Me, run_id: str, after_seq: ResumeAfter) -> StreamingResponse:
    record = await gw.own_run(None, run_id, me)
    return sse_response(gw, record, after_seq=after_seq, stateless=True)


@router.get("/runs/{run_id}/join")
async def join_stateless(gw: GW, me: Me, run_id: str, request: Request) -> Any:
    record = await gw.own_run(None, run_id, me)
    return wait_response(gw, record, me, stateless=True)
