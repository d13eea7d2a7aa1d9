"""`POST /api/threads/{id}/compact`: summarise a thread's older messages now, in DeerFlow's shape.

The work is the runner's (`threads.compact`, agents.threads.compact: the same
summarization that runs near the context window, memory first); this route
checks the caller owns the thread and says what happened.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from bus.messages import ThreadCompactReply, ThreadCompactRequest
from gateway.deps import GW, Me
from gateway.schemas import Body, errors

router = APIRouter()
# The summary is a model call on the runner side; give it the time a slow model takes.
COMPACT_TIMEOUT = 120.0


class CompactRequest(Body):
    force: bool = Field(True, description="Compact even below the automatic threshold (always, here).")
    keep: dict[str, Any] | None = Field(None, description="Accepted; summarization.keep applies.")
    agent_name: str | None = Field(None, max_length=128, description="Whose memory the turns go to.")
    model_name: str | None = Field(None, max_length=128, description="Whose context window counts.")


class CompactResponse(BaseModel):
    thread_id: str
    compacted: bool
    reason: str | None = None
    removed_message_count: int = 0
    preserved_message_count: int = 0
    summary_updated: bool = False
    checkpoint_id: str | None = None
    total_tokens: int = 0


@router.post("/threads/{thread_id}/compact", responses=errors(404, 409, 422, 502))
async def compact(gw: GW, me: Me, thread_id: str, body: CompactRequest | None = None) -> CompactResponse:
    """Summarise the thread's older messages into one, keeping the recent ones (409 while a run is on it)."""
    await gw.own_thread(thread_id, me)
    body = body or CompactRequest()
    request = ThreadCompactRequest(
        thread_id=thread_id, user_id=me, agent_name=body.agent_name, model_name=body.model_name
    )
    reply: ThreadCompactReply = await gw.ask("compact", request, ThreadCompactReply, timeout=COMPACT_TIMEOUT)
    return CompactResponse(**reply.model_dump(include=set(CompactResponse.model_fields)))
