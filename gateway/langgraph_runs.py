"""The LangGraph-compatible runs API: create, stream (SSE), wait, join, cancel, list.

Part of the router in `gateway.langgraph_api`. A run is recorded and published
on the bus for the runners; streams and waits read its event log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, Response
from fastapi.responses import StreamingResponse

from bus.approvals import answer_run_id
from bus.messages import (
    LEAD_AGENT,
    MultitaskStrategy,
    Reply,
    RunCommand,
    RunRecord,
    RunRequest,
    RunStatus,
    ThreadCreateReply,
    ThreadCreateRequest,
    ThreadStateReply,
    ThreadStateRequest,
    is_known_assistant,
    unknown_assistant,
)
from bus.records import drop_keys, keys_matching
from bus.runs import cancel_run, follow_run, follow_run_with_keepalives, submit_run, thread_run_key
from gateway.approval_cards import answers_an_approval, approval_answer
from gateway.deps import GW, Gateway, Me
from gateway.goal_stream import stream_with_continuations
from gateway.ids import is_valid_id, unusable_thread_id
from gateway.langgraph_assistants import custom_agent
from gateway.run_bodies import SSE_BODY, WAIT_BODY, RunCreate, run_json
from gateway.schemas import Body, Run, errors
from gateway.sse import HEARTBEAT_SECONDS, START, InvalidLastEventId, Resume, seq_of, stream_events

log = logging.getLogger(__name__)
router = APIRouter()

CHECK_RUN_SECONDS = 10.0  # a runner's answer whether a run can run; without one it is checked as it starts


async def refuse_by_role(gw: Gateway, request: RunRequest) -> None:
    """403 naming the field when the caller's role may not use the run's model or custom agent."""
    merged = {**request.config.get("configurable", {}), **request.context}
    default = gw.config.get_model()
    model = merged.get("model_name") or merged.get("model") or (default.name if default else None)
    agent = merged.get("agent_name")
    permissions = await gw.run_access.permissions(request.user_id)
    if isinstance(model, str) and (reason := permissions.refusal_for_model(model)):
        await gw.audit.record(
            "run_refused",
            user_id=request.user_id,
            thread_id=request.thread_id,
            outcome="refused",
            detail={"role": permissions.role, "model": model, "reason": reason},
        )
        raise HTTPException(403, reason)
    if isinstance(agent, str) and agent and not permissions.agent(agent):
        raise HTTPException(403, f"agent_name: your role {permissions.role!r} may not use agent {agent!r}")


async def start_run(
    gw: Gateway, me: str, thread_id: str, body: RunCreate, modes: list[str] | None = None
) -> RunRecord:
    """Check the thread, the run and the strategy, record the run and hand it to the runners."""
    if not is_known_assistant(body.assistant_id):
        body = await _as_custom_agent(gw, me, body)
    record = await gw.threads.get(thread_id) if is_valid_id(thread_id) else None
    creates = body.if_not_exists == "create"
    if (record is None and not (creates and is_valid_id(thread_id))) or (
        record is not None and record.user_id != me
    ):
        # As if the thread did not exist: not found, or (to create it) an id that cannot be used.
        if creates:
            raise unusable_thread_id(thread_id)
        raise HTTPException(404, f"thread {thread_id} not found")
    answer_of = None  # the approval the run answers, when it is DeerFlow's UI answering a card
    if answers_an_approval(body.input):
        body, answer_of = await _as_resume(gw, me, thread_id, body, record is not None)
    config = body.config.model_dump(exclude_none=True) if body.config else {}
    checkpoint_id = body.checkpoint_id or (body.checkpoint.checkpoint_id if body.checkpoint else None)
    request = RunRequest(
        **({"run_id": answer_run_id(thread_id, answer_of)} if answer_of else {}),
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
    await refuse_what_cannot_run(gw, request)  # before a thread is made for it
    await refuse_by_role(gw, request)  # the runner checks again, for runs from every way in
    if record is None:
        # Another caller may create it at this very moment: only the one whose create wins owns it.
        created = await gw.ask(
            "create", ThreadCreateRequest(thread_id=thread_id, user_id=me), ThreadCreateReply
        )
        record = created.thread
        if record is None or record.user_id != me:
            raise unusable_thread_id(thread_id)
    if body.multitask_strategy == MultitaskStrategy.REJECT and record.active_run_id:
        active = await gw.runs.get(record.active_run_id)
        if active is not None and not active.status.finished:
            raise HTTPException(409, f"thread {thread_id} is busy with run {record.active_run_id}")
    submitted = await submit_run(gw.bus, gw.order.stamp(request))
    if submitted is None and answer_of:  # another answer to it (a chat's, a second click) came first
        raise HTTPException(
            409,
            f"input.messages.0.additional_kwargs.human_input_response.request_id: approval {answer_of} "
            "was answered already",
        )
    if submitted is None:  # a run id of our own making, taken already: never seen
        raise HTTPException(409, f"run {request.run_id} was submitted before")
    return submitted


async def _as_custom_agent(gw: Gateway, me: str, body: RunCreate) -> RunCreate:
    """A run of an assistant that is the caller's custom agent (as DeerFlow lists them) runs the lead
    agent with that `agent_name` (unless the run names one itself); any other id is a 404."""
    agent = await custom_agent(gw, me, body.assistant_id)
    if agent is None:
        raise HTTPException(404, f"assistant_id: {unknown_assistant(body.assistant_id)}")
    context = dict(body.context or {})
    configurable = body.config.configurable if body.config else None
    given = (configurable.model_extra or {}) if configurable else {}
    if not (context.get("agent_name") or given.get("agent_name")):
        context["agent_name"] = agent.name
    return body.model_copy(update={"assistant_id": LEAD_AGENT, "context": context})


async def _as_resume(
    gw: Gateway, me: str, thread_id: str, body: RunCreate, exists: bool
) -> tuple[RunCreate, str]:
    """The run that answers an approval card as `command.resume` would (`gateway.approval_cards`),
    and the approval's id; 422 naming the field for an answer to nothing that waits."""
    state = None
    if exists:
        ask = ThreadStateRequest(thread_id=thread_id, user_id=me)
        state = (await gw.ask("state", ask, ThreadStateReply)).state
    answer = approval_answer(body.input, state, thread_id, me)
    assert answer is not None  # the input answers an approval: the caller checked
    ident, resume = answer
    log.info("approval %s on thread %s answered from DeerFlow's card", ident, thread_id)
    return body.model_copy(update={"input": None, "command": RunCommand(resume=resume)}), ident


async def refuse_what_cannot_run(gw: Gateway, request: RunRequest) -> None:
    """A runner's threads service checks the run against the agent's graph and the thread: a `goto`
    to a node the agent lacks, an update or input the state cannot hold, a `resume` nothing waits
    for (422, naming the field). With no answer (no runner is up, none answers in time, or the
    check itself failed) the run goes ahead: the runner that takes it checks it again, and ends it
    with that error."""
    try:
        await gw.ask("check_run", request, Reply, timeout=CHECK_RUN_SECONDS)
    except HTTPException as exc:
        if exc.status_code in (404, 422):
            raise
        log.info("run %s goes unchecked to the runners: %s %s", request.run_id, exc.status_code, exc.detail)


def _run_path(record: RunRecord, stateless: bool) -> str:
    return f"/runs/{record.run_id}" if stateless else f"/threads/{record.thread_id}/runs/{record.run_id}"


def deerflows_path(request: Request, context: Any = None) -> bool:
    """A call of DeerFlow's UI, whose run streams carry a goal's continuations: made under
    `/api/langgraph` (its path, when a proxy passes it on unchanged), or a run whose `context` holds
    the UI's options (`mode`, `thinking_enabled`: Next.js' rewrite strips the path to `/api`)."""
    from_ui = isinstance(context, dict) and "mode" in context and "thinking_enabled" in context
    return from_ui or request.url.path.startswith("/api/langgraph/")


def sse_response(
    gw: Gateway,
    record: RunRecord,
    *,
    after: Resume = START,
    cancel_on_disconnect: bool = False,
    stateless: bool = False,
    follow_goal: bool = False,
) -> StreamingResponse:
    """The run's events as SSE; with `follow_goal` (DeerFlow's path) its goal continuations too."""
    running = [record.run_id]

    async def body() -> AsyncIterator[bytes]:
        ended = False
        frames = (
            stream_with_continuations(gw.bus, record.run_id, after, on_run=lambda run: running.append(run))
            if follow_goal
            else stream_events(gw.bus, record.run_id, after)
        )
        try:
            async for chunk in frames:
                if chunk.startswith(b"event: end\n"):
                    ended = True
                yield chunk
        finally:
            if cancel_on_disconnect and not ended:
                await asyncio.shield(cancel_run(gw.bus, running[-1], reason="the client disconnected"))

    path = _run_path(record, stateless)
    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={
            "Content-Location": path,
            "Location": f"{path}/stream",
            # Proxies and compressing front ends (Next.js, nginx) stream instead of buffering the run.
            "Cache-Control": "no-cache, no-transform",
            "X-Accel-Buffering": "no",
        },
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
        events = follow_run_with_keepalives(gw.bus, record.run_id, HEARTBEAT_SECONDS)
        try:
            async for event in events:
                if event is None:
                    yield b"\n"  # keepalive while the run goes on
                elif event.event == "end":
                    break
        finally:
            await events.aclose()
        yield json.dumps(await final_output(gw, record, me), default=str).encode()

    path = _run_path(record, stateless)
    return StreamingResponse(body(), media_type="application/json", headers={"Location": f"{path}/join"})


@router.post(
    "/threads/{thread_id}/runs/stream",
    response_class=StreamingResponse,
    responses={**SSE_BODY, **errors(404, 409, 413)},
)
async def stream_run(gw: GW, me: Me, thread_id: str, body: RunCreate, request: Request) -> StreamingResponse:
    record = await start_run(gw, me, thread_id, body)
    return sse_response(
        gw,
        record,
        cancel_on_disconnect=body.on_disconnect == "cancel",
        follow_goal=deerflows_path(request, body.context),
    )


@router.post(
    "/threads/{thread_id}/runs/wait",
    response_class=StreamingResponse,
    responses={**WAIT_BODY, **errors(404, 409, 413)},
)
async def wait_run(gw: GW, me: Me, thread_id: str, body: RunCreate) -> StreamingResponse:
    record = await start_run(gw, me, thread_id, body, modes=["values"])
    return wait_response(gw, record, me)


@router.post("/threads/{thread_id}/runs", responses=errors(404, 409, 413))
async def create_run(gw: GW, me: Me, thread_id: str, body: RunCreate) -> Run:
    record = await start_run(gw, me, thread_id, body)
    return run_json(record)


@router.post("/runs/stream", response_class=StreamingResponse, responses={**SSE_BODY, **errors(404, 413)})
async def stream_stateless(gw: GW, me: Me, body: RunCreate) -> StreamingResponse:
    body.if_not_exists = "create"
    record = await start_run(gw, me, str(uuid.uuid4()), body)
    return sse_response(gw, record, cancel_on_disconnect=body.on_disconnect == "cancel", stateless=True)


@router.post("/runs/wait", response_class=StreamingResponse, responses={**WAIT_BODY, **errors(404, 413)})
async def wait_stateless(gw: GW, me: Me, body: RunCreate) -> StreamingResponse:
    body.if_not_exists = "create"
    record = await start_run(gw, me, str(uuid.uuid4()), body, modes=["values"])
    return wait_response(gw, record, me, stateless=True)


@router.post("/runs", responses=errors(404, 413))
async def create_stateless(gw: GW, me: Me, body: RunCreate) -> Run:
    """A background run on a new thread of its own (the SDK's `runs.create(None, ...)`); follow it at
    `/runs/{run_id}/stream` or `/join`, or on its thread."""
    body.if_not_exists = "create"
    return run_json(await start_run(gw, me, str(uuid.uuid4()), body))


class CancelMany(Body):
    thread_id: str | None = None
    run_ids: list[str] | None = None
    status: Literal["pending", "running", "all"] | None = None


@router.post("/runs/cancel", status_code=204, responses=errors(404, 413))
async def cancel_many(
    gw: GW, me: Me, body: CancelMany, action: Literal["interrupt", "rollback"] = "interrupt"
) -> Response:
    """Cancel the caller's runs by id (the SDK's `runs.cancel_many(thread_id=..., run_ids=[...])`), or
    a thread's unfinished runs (`thread_id` with `status`); 404 naming a run that is not the caller's
    (none is cancelled then). Every thread's runs at once by `status` alone is not offered (422)."""
    if body.run_ids:
        records = [await gw.own_run(body.thread_id, run_id, me) for run_id in body.run_ids]
    elif body.thread_id and body.status:
        await gw.own_thread(body.thread_id, me)
        keys = await keys_matching(gw.bus.js, gw.bus.subjects.thread_runs_bucket, f"{body.thread_id}.>")
        found = await asyncio.gather(*(gw.runs.get(key.rsplit(".", 1)[1]) for key in keys))
        wanted = {"pending": {RunStatus.PENDING}, "running": {RunStatus.RUNNING}}.get(body.status)
        records = [
            r
            for r in found
            if r is not None and not r.status.finished and (wanted is None or r.status in wanted)
        ]
    else:
        raise HTTPException(422, "run_ids: name the runs to cancel (or give thread_id with status)")
    for record in records:
        if not record.status.finished:
            await cancel_run(gw.bus, record.run_id, action=action)
    return Response(status_code=204)


@router.get("/threads/{thread_id}/runs", responses=errors(404))
async def list_runs(
    gw: GW,
    me: Me,
    thread_id: str,
    limit: int = Query(10, ge=1, le=1000),
    offset: int = Query(0, ge=0),
    status: str | None = None,
) -> list[Run]:
    await gw.own_thread(thread_id, me)
    keys = await keys_matching(gw.bus.js, gw.bus.subjects.thread_runs_bucket, f"{thread_id}.>")
    newest_first = [key.rsplit(".", 1)[1] for key in reversed(keys)]
    if status is None:  # only the page is read
        page = await asyncio.gather(
            *(gw.runs.get(run_id) for run_id in newest_first[offset : offset + limit])
        )
        return [run_json(r) for r in page if r is not None]
    runs: list[RunRecord] = []
    for run_id in newest_first:  # read until the page is full
        record = await gw.runs.get(run_id)
        if record is not None and record.status.value == status:
            runs.append(record)
            if len(runs) == offset + limit:
                break
    return [run_json(r) for r in runs[offset:]]


@router.get("/threads/{thread_id}/runs/{run_id}", responses=errors(404))
async def get_run(gw: GW, me: Me, thread_id: str, run_id: str) -> Run:
    return run_json(await gw.own_run(thread_id, run_id, me))


@router.delete("/threads/{thread_id}/runs/{run_id}", status_code=204, responses=errors(404, 409))
async def delete_run(gw: GW, me: Me, thread_id: str, run_id: str) -> Response:
    record = await gw.own_run(thread_id, run_id, me)
    if not record.status.finished:
        raise HTTPException(409, f"run {run_id} is still {record.status.value}; cancel it first")
    await gw.runs.delete(run_id)
    index_key = thread_run_key(thread_id, run_id, record.created_at)
    await drop_keys(gw.bus.js, gw.bus.subjects.thread_runs_bucket, index_key)
    return Response(status_code=204)


@router.post(
    "/threads/{thread_id}/runs/{run_id}/cancel",
    response_model=Run,
    responses={202: {"description": "Cancellation requested (without `wait`)"}, **errors(404)},
)
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
    with contextlib.suppress(TimeoutError):  # no end within a minute: answer the run as it is now
        async for _event in follow_run(gw.bus, record.run_id, timeout=60):
            pass
    done = await gw.runs.get(run_id)
    return run_json(done or record)


@router.get(
    "/threads/{thread_id}/runs/{run_id}/join",
    response_class=StreamingResponse,
    responses={**WAIT_BODY, **errors(404)},
)
async def join_run(gw: GW, me: Me, thread_id: str, run_id: str) -> StreamingResponse:
    record = await gw.own_run(thread_id, run_id, me)
    return wait_response(gw, record, me)


def resume_after(
    last_event_id: Annotated[
        str,
        Header(json_schema_extra={"pattern": r"^\s*(-1|[0-9]{1,20}-[0-9]{1,20}(\.[0-9]{1,9})?)?\s*$"}),
    ] = "",
) -> Resume:
    """Where to resume, from `Last-Event-ID`; 400 for one that is not ours."""
    try:
        return seq_of(last_event_id)
    except InvalidLastEventId as exc:
        raise HTTPException(400, str(exc)) from None


ResumeAfter = Annotated[Resume, Depends(resume_after)]


@router.get(
    "/threads/{thread_id}/runs/{run_id}/stream",
    response_class=StreamingResponse,
    responses={**SSE_BODY, **errors(400, 404)},
)
async def join_stream(
    gw: GW,
    me: Me,
    thread_id: str,
    run_id: str,
    after: ResumeAfter,
    request: Request,
    cancel_on_disconnect: bool = False,
) -> StreamingResponse:
    record = await gw.own_run(thread_id, run_id, me)
    return sse_response(
        gw,
        record,
        after=after,
        cancel_on_disconnect=cancel_on_disconnect,
        follow_goal=deerflows_path(request),
    )


@router.get(
    "/runs/{run_id}/stream", response_class=StreamingResponse, responses={**SSE_BODY, **errors(400, 404)}
)
async def join_stream_stateless(gw: GW, me: Me, run_id: str, after: ResumeAfter) -> StreamingResponse:
    record = await gw.own_run(None, run_id, me)
    return sse_response(gw, record, after=after, stateless=True)


@router.get("/runs/{run_id}/join", response_class=StreamingResponse, responses={**WAIT_BODY, **errors(404)})
async def join_stateless(gw: GW, me: Me, run_id: str) -> StreamingResponse:
    record = await gw.own_run(None, run_id, me)
    return wait_response(gw, record, me, stateless=True)
