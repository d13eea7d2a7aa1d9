"""Follow-up suggestions, a thread's messages and its token usage."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from bus.messages import (
    ThreadStateReply,
    ThreadStateRequest,
    ThreadSuggestionsReply,
    ThreadSuggestionsRequest,
)
from gateway.deps import GW, Me
from gateway.schemas import errors

router = APIRouter()
# The runner gives up on a slow model before this (agents.suggestions.MODEL_TIMEOUT_SECONDS).
SUGGESTIONS_TIMEOUT = 60.0


class SuggestionRequest(BaseModel):
    messages: list[dict[str, Any]] = Field(default_factory=list)
    n: int = Field(3, ge=1, le=10)
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
    """DeerFlow UI features this backend offers: custom agents (`/api/agents`), not the others."""
    off = Feature(enabled=False)
    return Features(agents_api=Feature(enabled=True), browser_control=off, mcp_tasks=off)


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
        **used.model_dump(),
        "runs": record.finished_runs,
    }
