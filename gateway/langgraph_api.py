"""The LangGraph-compatible runtime API: threads here, assistants in `gateway.langgraph_assistants`, runs
in `gateway.langgraph_runs`.

Mounted at /api and /api/langgraph, so the unmodified `langgraph-sdk` clients
(Python, and `@langchain/langgraph-sdk` in a browser) work against Antler. The
gateway only publishes run requests and reads records, event logs and the
runners' threads service: it runs nothing itself.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Response
from pydantic import Field, StrictBool, StrictInt, StringConstraints

from bus.files import UPLOADS, list_objects, thread_prefix
from bus.messages import (
    ThreadCreateReply,
    ThreadCreateRequest,
    ThreadDeleteReply,
    ThreadDeleteRequest,
    ThreadHistoryReply,
    ThreadHistoryRequest,
    ThreadPatchReply,
    ThreadPatchRequest,
    ThreadRecord,
    ThreadStateReply,
    ThreadStateRequest,
    ThreadUpdateStateReply,
    ThreadUpdateStateRequest,
)
from bus.runs import cancel_run
from gateway import answers
from gateway.approval_cards import with_approval_cards
from gateway.deps import GW, Gateway, Me
from gateway.ids import ID_PATTERN, is_valid_id, unusable_thread_id
from gateway.langgraph_assistants import router as assistants_router
from gateway.langgraph_runs import router as runs_router
from gateway.langgraph_unsupported import router as unsupported_router
from gateway.schemas import (
    Body,
    CheckpointAnswer,
    Thread,
    ThreadField,
    ThreadPart,
    ThreadState,
    errors,
)

router = APIRouter()

# ------------------------------------------------------------------ threads


def thread_json(record: ThreadRecord, values: dict[str, Any] | None = None) -> Thread:
    return Thread(**answers.thread_json(record, values))


class ThreadCreate(Body):
    thread_id: str | None = Field(
        None,
        description="Omit (or leave empty) for a new UUID.",
        json_schema_extra={"pattern": f"^$|{ID_PATTERN}"},
    )
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"


@router.post("/threads", responses=errors(409, 413))
async def create_thread(gw: GW, me: Me, body: ThreadCreate) -> Thread:
    """Create a thread; with `thread_id`, the caller's own thread of that id is a 409 (`if_exists:
    raise`) or returned (`do_nothing`). An id another user's thread has is answered exactly as an id
    that breaks the id rule (422 "cannot be used"), so creating tells nobody that thread exists.

    With `if_exists` left out, a thread that an upload made and no run has used yet is returned
    (200), not refused: DeerFlow's UI uploads a new chat's attachments first (which creates the
    thread) and then creates the thread, sending no `if_exists`. Any other existing thread is a 409,
    LangGraph's default."""
    thread_id = body.thread_id or str(uuid.uuid4())
    if not is_valid_id(thread_id):
        raise unusable_thread_id(thread_id)
    request = ThreadCreateRequest(thread_id=thread_id, user_id=me, metadata=body.metadata or {})
    reply = await gw.ask("create", request, ThreadCreateReply)
    record = reply.thread
    if record is None or record.user_id != me:
        raise unusable_thread_id(thread_id)  # someone else's: told apart from nothing else
    if not reply.created and body.if_exists == "raise":
        explicit = "if_exists" in body.model_fields_set
        if explicit or not await _made_by_an_upload(gw, record):
            raise HTTPException(409, f"thread {thread_id} already exists")
    gw.view.put(record)
    return thread_json(record)


async def _made_by_an_upload(gw: Gateway, record: ThreadRecord) -> bool:
    """No run has used the thread yet and it holds uploads: a new chat's attachments made it."""
    if record.last_run_id or record.active_run_id or record.queue or record.finished_runs:
        return False
    prefix = thread_prefix(UPLOADS, record.user_id, record.thread_id)
    return bool(await list_objects(await gw.bus.files(), prefix))


@router.get("/threads/{thread_id}", responses=errors(404))
async def get_thread(gw: GW, me: Me, thread_id: str) -> Thread:
    record = await gw.own_thread(thread_id, me)
    reply = await gw.ask("state", ThreadStateRequest(thread_id=thread_id, user_id=me), ThreadStateReply)
    return thread_json(record, reply.state.values if reply.state else {})


class ThreadSearch(Body):
    metadata: dict[str, Any] | None = None
    ids: list[str] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: StrictInt = Field(10, ge=1, le=1000)
    offset: StrictInt = Field(0, ge=0)
    sort_by: Literal["thread_id", "status", "created_at", "updated_at"] = "updated_at"
    sort_order: Literal["asc", "desc"] = "desc"
    select: list[ThreadField] | None = Field(None, description="Only these fields of each thread.")


@router.post(
    "/threads/search",
    responses=errors(413),
    response_model=list[ThreadPart],
    response_model_exclude_unset=True,
)
async def search_threads(gw: GW, me: Me, body: ThreadSearch) -> list[ThreadPart]:
    """The caller's threads, each with `values.title` when it has one (what a sidebar shows)."""
    ids = set(body.ids) if body.ids is not None else None

    def keep(record: ThreadRecord) -> bool:
        return (
            (ids is None or record.thread_id in ids)
            and (not body.status or record.status == body.status)
            and not (body.metadata and any(record.metadata.get(k) != v for k, v in body.metadata.items()))
        )

    found = await gw.view.search(
        me,
        keep=keep,
        sort_by=body.sort_by,
        descending=body.sort_order == "desc",
        offset=body.offset,
        limit=body.limit,
    )
    fields: set[str] = set(body.select) if body.select else set(Thread.model_fields)
    return [
        ThreadPart(**thread_json(r, {"title": r.title} if r.title else None).model_dump(include=fields))
        for r in found
    ]


class ThreadCount(Body):
    metadata: dict[str, Any] | None = None
    values: dict[str, Any] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None


@router.post("/threads/count", responses=errors(413))
async def count_threads(gw: GW, me: Me, body: ThreadCount) -> int:
    """How many of the caller's threads match; `values` as search reads them (only `title` is known
    without asking a runner for each thread's state)."""

    def keep(record: ThreadRecord) -> bool:
        shown = {"title": record.title} if record.title else {}
        return (
            (not body.status or record.status == body.status)
            and not (body.metadata and any(record.metadata.get(k) != v for k, v in body.metadata.items()))
            and not (body.values and any(shown.get(k) != v for k, v in body.values.items()))
        )

    found = await gw.view.search(me, keep=keep, sort_by="thread_id", descending=False, offset=0, limit=10**9)
    return len(found)


class ThreadPatch(Body):
    metadata: dict[str, Any] = Field(default_factory=dict)


@router.patch("/threads/{thread_id}", responses=errors(404, 413))
async def patch_thread(gw: GW, me: Me, thread_id: str, body: ThreadPatch) -> Thread:
    await gw.own_thread(thread_id, me)
    request = ThreadPatchRequest(thread_id=thread_id, user_id=me, metadata=body.metadata)
    reply = await gw.ask("patch", request, ThreadPatchReply)
    assert reply.thread is not None
    gw.view.put(reply.thread)
    return thread_json(reply.thread)


@router.delete("/threads/{thread_id}", status_code=204, responses=errors(404))
async def delete_thread(gw: GW, me: Me, thread_id: str) -> Response:
    record = await gw.own_thread(thread_id, me)
    if record.active_run_id:
        await cancel_run(gw.bus, record.active_run_id, reason="thread deleted")
    # The runners own the thread (record, checkpoints) and announce its end: chats bound to it
    # start afresh (the router's part). The files in the object store are the gateway's.
    await gw.ask("delete", ThreadDeleteRequest(thread_id=thread_id, user_id=me), ThreadDeleteReply)
    gw.view.deleted(thread_id)
    await delete_thread_files(gw, me, thread_id)
    return Response(status_code=204)


async def delete_thread_files(gw: Gateway, user_id: str, thread_id: str) -> None:
    from bus.files import OUTPUTS, UPLOADS, list_objects, thread_prefix
    from bus.journal import JOURNALS

    store = await gw.bus.files()
    for kind in (UPLOADS, OUTPUTS, JOURNALS):
        for info in await list_objects(store, thread_prefix(kind, user_id, thread_id)):
            with contextlib.suppress(Exception):
                await store.delete(info.name)


@router.get("/threads/{thread_id}/state", responses=errors(404))
@router.get("/threads/{thread_id}/state/{checkpoint_id}", responses=errors(404))
async def get_thread_state(
    gw: GW,
    me: Me,
    thread_id: str,
    checkpoint_id: str | None = None,
    subgraphs: bool = False,
) -> ThreadState:
    await gw.own_thread(thread_id, me)
    request = ThreadStateRequest(
        thread_id=thread_id, user_id=me, checkpoint_id=checkpoint_id, subgraphs=subgraphs
    )
    reply = await gw.ask("state", request, ThreadStateReply)
    if reply.state is None:
        return ThreadState()
    return with_approval_cards(reply.state) if checkpoint_id is None else reply.state  # the newest waits


class CheckpointRef(Body):
    checkpoint_id: str | None = None
    checkpoint_ns: str | None = None
    thread_id: str | None = None


class StateAtCheckpoint(Body):
    checkpoint: CheckpointRef
    subgraphs: StrictBool = False


@router.post("/threads/{thread_id}/state/checkpoint", responses=errors(404, 413))
async def get_thread_state_at(gw: GW, me: Me, thread_id: str, body: StateAtCheckpoint) -> ThreadState:
    """The SDK's `get_state(thread_id, checkpoint={...})`: the state at that checkpoint (the newest
    without a `checkpoint_id`)."""
    return await get_thread_state(
        gw=gw,
        me=me,
        thread_id=thread_id,
        checkpoint_id=body.checkpoint.checkpoint_id,
        subgraphs=body.subgraphs,
    )


class StateUpdate(Body):
    values: dict[str, Any] | list[Any] | None = None
    as_node: str | None = None
    checkpoint_id: str | None = None
    checkpoint: dict[str, Any] | None = None


@router.post("/threads/{thread_id}/state", responses=errors(404, 413))
async def update_thread_state(gw: GW, me: Me, thread_id: str, body: StateUpdate) -> CheckpointAnswer:
    await gw.own_thread(thread_id, me)
    checkpoint_id = body.checkpoint_id or (body.checkpoint or {}).get("checkpoint_id")
    request = ThreadUpdateStateRequest(
        thread_id=thread_id, user_id=me, values=body.values, as_node=body.as_node, checkpoint_id=checkpoint_id
    )
    reply = await gw.ask("update_state", request, ThreadUpdateStateReply)
    return CheckpointAnswer(checkpoint=reply.checkpoint)


# The checkpointer puts metadata filter keys into its SQL (langgraph-checkpoint-sqlite refuses others).
FilterKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]+$")]


class HistoryQuery(Body):
    limit: StrictInt = Field(10, ge=1, le=1000)
    before: str | dict[str, Any] | None = None
    metadata: dict[FilterKey, Any] | None = None


@router.post("/threads/{thread_id}/history", responses=errors(404, 413))
async def thread_history(gw: GW, me: Me, thread_id: str, body: HistoryQuery) -> list[ThreadState]:
    await gw.own_thread(thread_id, me)
    before = (
        body.before.get("configurable", body.before).get("checkpoint_id")
        if isinstance(body.before, dict)
        else body.before
    )
    request = ThreadHistoryRequest(
        thread_id=thread_id, user_id=me, limit=body.limit, before=before, metadata=body.metadata
    )
    reply: ThreadHistoryReply = await gw.ask("history", request, ThreadHistoryReply)
    states = reply.states
    if states and before is None and not body.metadata:  # the newest: the only one that can still wait
        states = [with_approval_cards(states[0]), *states[1:]]
    return states


@router.get("/threads/{thread_id}/history", responses=errors(404))
async def thread_history_get(
    gw: GW,
    me: Me,
    thread_id: str,
    limit: int = Query(10, ge=1, le=1000),
) -> list[ThreadState]:
    return await thread_history(gw=gw, me=me, thread_id=thread_id, body=HistoryQuery(limit=limit))


router.include_router(assistants_router)
router.include_router(runs_router)
router.include_router(unsupported_router)  # last: what Antler does not offer, answered 501
