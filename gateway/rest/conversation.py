"""Follow-up suggestions, a thread's messages (all, or paged by thread-wide sequence) and its token usage."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request
from pydantic import BaseModel, Field, StrictInt

from bus.messages import (
    ThreadRunStartsReply,
    ThreadRunStartsRequest,
    ThreadStateReply,
    ThreadStateRequest,
    ThreadSuggestionsReply,
    ThreadSuggestionsRequest,
)
from gateway.deps import GW, Gateway, Me
from gateway.rest.feedback import feedback_counts, feedback_json
from gateway.schemas import errors

router = APIRouter()
# The runner gives up on a slow model before this (agents.suggestions.MODEL_TIMEOUT_SECONDS).
SUGGESTIONS_TIMEOUT = 60.0


class SuggestionRequest(BaseModel):
    messages: list[dict[str, Any]] = Field(default_factory=list)
    n: StrictInt = Field(3, ge=1, le=10)
    model_name: str | None = None


class Suggestions(BaseModel):
    suggestions: list[str]


class SuggestionsConfig(BaseModel):
    enabled: bool
    max_suggestions: int


@router.get("/suggestions/config", response_model=SuggestionsConfig)
async def suggestions_config(gw: GW, me: Me) -> SuggestionsConfig:
    """Whether the UI should ask for follow-up suggestions, and how many it may ask for."""
    return SuggestionsConfig(enabled=bool(gw.config.models), max_suggestions=10)


class Feature(BaseModel):
    enabled: bool


class Features(BaseModel):
    agents_api: Feature
    browser_control: Feature
    mcp_tasks: Feature


@router.get("/features", response_model=Features)
async def features(gw: GW, me: Me) -> Features:
    """DeerFlow UI features this backend offers: custom agents (`/api/agents`), browser control when
    the browser is enabled (`gateway/rest/browser.py`), not MCP tasks."""
    off = Feature(enabled=False)
    browser = Feature(enabled=gw.config.browser.enabled)
    return Features(agents_api=Feature(enabled=True), browser_control=browser, mcp_tasks=off)


@router.post("/threads/{thread_id}/suggestions", response_model=Suggestions, responses=errors(404, 413, 502))
async def suggestions(gw: GW, me: Me, thread_id: str, body: SuggestionRequest) -> Suggestions:
    """Follow-up questions, written by a model on the runner side (the threads service)."""
    await gw.own_thread(thread_id, me)
    request = ThreadSuggestionsRequest(
        thread_id=thread_id, user_id=me, messages=body.messages, n=body.n, model_name=body.model_name
    )
    reply = await gw.ask("suggestions", request, ThreadSuggestionsReply, timeout=SUGGESTIONS_TIMEOUT)
    return Suggestions(suggestions=reply.suggestions)


@router.get("/threads/{thread_id}/messages", responses=errors(404))
async def thread_messages(gw: GW, me: Me, thread_id: str) -> dict[str, Any]:
    await gw.own_thread(thread_id, me)
    reply = await gw.ask("state", ThreadStateRequest(thread_id=thread_id, user_id=me), ThreadStateReply)
    messages = reply.state.values.get("messages", []) if reply.state else []
    return {"data": messages, "has_more": False}


# Runs told apart in a page: the newest this many (older messages have run_id "").
MAX_RUNS_ATTRIBUTED = 100


class MessageRow(BaseModel):
    run_id: str = Field(description="The run that added the message; empty when too old to tell.")
    seq: int = Field(ge=1, description="Its place in the thread: 1 is the first message.")
    content: dict[str, Any]
    metadata: dict[str, Any]
    created_at: str | None
    feedback: dict[str, Any] | None = Field(
        None, description="On a run's last answer: the owner's rating of that run (`.../feedback`)."
    )


class MessagesPage(BaseModel):
    data: list[MessageRow]
    has_more: bool
    next_before_seq: int | None


async def run_starts(gw: Gateway, thread_id: str, user_id: str) -> list[tuple[int, str, str | None]]:
    """Where each run's messages begin: (messages before it, run id, when), oldest first.

    Every run that brought input has an `input` checkpoint (LangGraph's, tagged with our run id)
    whose messages are the ones before it; the runner counts them (no state crosses the bus)."""
    request = ThreadRunStartsRequest(thread_id=thread_id, user_id=user_id, limit=MAX_RUNS_ATTRIBUTED)
    reply = await gw.ask("run_starts", request, ThreadRunStartsReply)
    return [(start.messages_before, start.run_id, start.created_at) for start in reply.starts]


@router.get("/threads/{thread_id}/messages/page", response_model=MessagesPage, responses=errors(404))
async def thread_messages_page(
    gw: GW,
    me: Me,
    request: Request,
    thread_id: str,
    limit: int = Query(50, ge=1, le=200),
    before_seq: int | None = Query(None, ge=1, description="Only messages before this one."),
) -> MessagesPage:
    """The thread's messages, newest page first, numbered through the whole thread (`seq`); the next
    page is `before_seq=next_before_seq`. `after_seq` is refused: pages only go backwards."""
    if "after_seq" in request.query_params:
        raise HTTPException(422, "after_seq is not supported: this endpoint pages backwards (before_seq)")
    record = await gw.own_thread(thread_id, me)
    reply = await gw.ask("state", ThreadStateRequest(thread_id=thread_id, user_id=me), ThreadStateReply)
    messages: list[Any] = (reply.state.values.get("messages") or []) if reply.state else []
    end = len(messages) if before_seq is None else min(before_seq - 1, len(messages))
    start = max(0, end - limit)
    starts = await run_starts(gw, thread_id, me) if end > start else []
    rows = []
    for index in range(start, end):
        owner = next((s for s in reversed(starts) if s[0] <= index), None)
        rows.append(
            MessageRow(
                run_id=owner[1] if owner else "",
                seq=index + 1,
                content=messages[index]
                if isinstance(messages[index], dict)
                else {"content": messages[index]},
                metadata={"caller": "lead_agent"},
                created_at=(owner[2] if owner else None) or record.created_at.isoformat(),
            )
        )
    await attach_feedback(gw, rows)
    has_more = start > 0
    return MessagesPage(data=rows, has_more=has_more, next_before_seq=start + 1 if has_more else None)


async def attach_feedback(gw: Gateway, rows: list[MessageRow]) -> None:
    """Each run's rating on its last answer in the page, as DeerFlow's UI reads it there."""
    last_answer = {row.run_id: row for row in rows if row.run_id and row.content.get("type") == "ai"}
    records = await asyncio.gather(*(gw.runs.get(run_id) for run_id in last_answer))
    for record in records:
        if record is not None and record.feedback is not None:
            last_answer[record.run_id].feedback = feedback_json(record)


@router.get("/threads/{thread_id}/token-usage", responses=errors(404))
async def token_usage(gw: GW, me: Me, thread_id: str) -> dict[str, Any]:
    """DeerFlow's shape (`total_*`, `by_model`, `by_caller`), with the plain names too."""
    record = await gw.own_thread(thread_id, me)
    used = record.usage
    return {
        "thread_id": thread_id,
        "total_tokens": used.total_tokens,
        "total_input_tokens": used.input_tokens,
        "total_output_tokens": used.output_tokens,
        "total_runs": record.finished_runs,
        "by_model": {name: tokens.model_dump() for name, tokens in record.tokens_by_model.items()},
        "by_caller": {
            "lead_agent": used.total_tokens - record.subagent_tokens,
            "subagent": record.subagent_tokens,
            "middleware": 0,
        },
        "context_usage": None,
        "feedback": await feedback_counts(gw, thread_id),
        **used.model_dump(),
        "runs": record.finished_runs,
    }
