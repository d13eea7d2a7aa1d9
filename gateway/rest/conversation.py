"""Follow-up suggestions, a thread's messages and its token usage."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from fastapi import APIRouter, HTTPException
from langchain_core.messages import HumanMessage
from pydantic import BaseModel, Field

from bus.messages import ThreadStateReply, ThreadStateRequest
from gateway.deps import GW, Me
from gateway.schemas import errors

log = logging.getLogger(__name__)
router = APIRouter()

SUGGEST = (
    "Suggest {n} short follow-up questions the user might ask next, in the user's language. "
    'Answer with a JSON array of strings only, e.g. ["...", "..."].\n\nConversation:\n{conversation}'
)


class SuggestionRequest(BaseModel):
    messages: list[dict[str, Any]] = Field(default_factory=list)
    n: int = Field(3, ge=1, le=10)
    model_name: str | None = None


class Suggestions(BaseModel):
    suggestions: list[str]


def flatten(content: Any) -> str:
    """Rich content (a list of blocks) as plain text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b if isinstance(b, str) else str(b.get("text", "")) for b in content if isinstance(b, str | dict)
        )
    return "" if content is None else str(content)


def parse_suggestions(text: str, n: int) -> list[str]:
    text = re.sub(r"^```(?:json)?\s*|\s*```$", "", text.strip())
    match = re.search(r"\[.*\]", text, re.DOTALL)
    if match:
        try:
            items = json.loads(match.group(0))
            return [str(i).strip() for i in items if str(i).strip()][:n]
        except json.JSONDecodeError:
            pass
    lines = [re.sub(r"^\s*(?:[-*]|\d+[.)])\s*", "", line).strip() for line in text.splitlines()]
    return [line for line in lines if line][:n]


@router.post("/threads/{thread_id}/suggestions", response_model=Suggestions, responses=errors(404, 413, 502))
async def suggestions(gw: GW, me: Me, thread_id: str, body: SuggestionRequest) -> Suggestions:
    from agents import create_chat_model

    await gw.own_thread(thread_id, me)
    if body.model_name is not None and gw.config.get_model(body.model_name) is None:
        known = ", ".join(m.name for m in gw.config.models)
        raise HTTPException(422, f"model_name: no model named {body.model_name!r} (configured: {known})")
    turns = body.messages
    if not turns:
        reply = await gw.ask("state", ThreadStateRequest(thread_id=thread_id, user_id=me), ThreadStateReply)
        turns = [
            {"role": m.get("type"), "content": m.get("content")}
            for m in (reply.state.values.get("messages", []) if reply.state else [])
            if m.get("type") in ("human", "ai")
        ]
    conversation = "\n".join(f"{t.get('role')}: {flatten(t.get('content'))[:2000]}" for t in turns[-8:])
    if not conversation:
        return Suggestions(suggestions=[])
    try:
        model = create_chat_model(gw.config, body.model_name)
        answer = await model.ainvoke([HumanMessage(SUGGEST.format(n=body.n, conversation=conversation))])
    except Exception as exc:
        log.warning("suggestions failed: %s", exc)
        raise HTTPException(502, f"the model could not suggest follow-ups ({type(exc).__name__})") from None
    return Suggestions(suggestions=parse_suggestions(flatten(answer.content), body.n))


@router.get("/threads/{thread_id}/messages", responses=errors(404))
async def thread_messages(gw: GW, me: Me, thread_id: str) -> dict[str, Any]:
    await gw.own_thread(thread_id, me)
    reply = await gw.ask("state", ThreadStateRequest(thread_id=thread_id, user_id=me), ThreadStateReply)
    messages = reply.state.values.get("messages", []) if reply.state else []
    return {"data": messages, "has_more": False}


@router.get("/threads/{thread_id}/token-usage", responses=errors(404))
async def token_usage(gw: GW, me: Me, thread_id: str) -> dict[str, Any]:
    await gw.own_thread(thread_id, me)
    totals = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "runs": 0}
    for key in await gw.runs.keys():
        record = await gw.runs.get(key)
        if record is None or record.thread_id != thread_id or record.user_id != me:
            continue
        totals["runs"] += 1
        totals["input_tokens"] += record.usage.input_tokens
        totals["output_tokens"] += record.usage.output_tokens
        totals["total_tokens"] += record.usage.total_tokens
    return totals
