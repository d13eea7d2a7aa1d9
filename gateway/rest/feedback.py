"""Thumbs up or down on a run's answer, with an optional comment (DeerFlow's feedback API).

The rating is kept on the run's record (`RunRecord.feedback`, written here with a
compare-and-set, so a runner ending the run at the same moment loses nothing): it shows in
the run (`GET .../runs/{run}`), in the thread's runs and in its token usage (counts). A run
is its owner's, so each run has at most one rating: its owner's.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from bus.messages import RunFeedback, RunRecord, utcnow
from bus.records import keys_matching
from gateway.deps import GW, Me
from gateway.schemas import Body, errors, iso

router = APIRouter()


class FeedbackUpsert(Body):
    rating: Literal[1, -1] = Field(..., description="1 (thumbs up) or -1 (thumbs down)")
    comment: str | None = Field(None, max_length=4000)


class FeedbackResponse(BaseModel):
    feedback_id: str
    run_id: str
    thread_id: str
    user_id: str | None = None
    message_id: str | None = None
    rating: int
    comment: str | None = None
    created_at: str = ""


def feedback_json(record: RunRecord) -> dict[str, Any] | None:
    """A run's rating as DeerFlow answers it, or None."""
    given = record.feedback
    if given is None:
        return None
    return FeedbackResponse(
        feedback_id=given.feedback_id,
        run_id=record.run_id,
        thread_id=record.thread_id,
        user_id=given.user_id,
        rating=given.rating,
        comment=given.comment,
        created_at=iso(given.created_at) or "",
    ).model_dump()


@router.put(
    "/threads/{thread_id}/runs/{run_id}/feedback", response_model=FeedbackResponse, responses=errors(404)
)
async def give_feedback(gw: GW, me: Me, thread_id: str, run_id: str, body: FeedbackUpsert) -> Any:
    """Rate the run (again: the newer rating replaces the older)."""
    await gw.own_run(thread_id, run_id, me)

    def rated(record: RunRecord | None) -> RunRecord | None:
        if record is None:
            raise HTTPException(404, f"run {run_id} not found")
        kept_id = record.feedback.feedback_id if record.feedback else None
        given = RunFeedback(user_id=me, rating=body.rating, comment=body.comment)
        if kept_id:
            given.feedback_id = kept_id
        return record.model_copy(update={"feedback": given, "updated_at": utcnow()})

    written = await gw.runs.update(run_id, rated)
    assert written is not None
    return feedback_json(written)


@router.delete("/threads/{thread_id}/runs/{run_id}/feedback", responses=errors(404))
async def remove_feedback(gw: GW, me: Me, thread_id: str, run_id: str) -> dict[str, bool]:
    """Take the rating back; 404 when there is none."""
    record = await gw.own_run(thread_id, run_id, me)
    if record.feedback is None:
        raise HTTPException(404, "no feedback found for this run")

    def unrated(current: RunRecord | None) -> RunRecord | None:
        if current is None or current.feedback is None:
            return None
        return current.model_copy(update={"feedback": None, "updated_at": utcnow()})

    await gw.runs.update(run_id, unrated)
    return {"success": True}


@router.get(
    "/threads/{thread_id}/runs/{run_id}/feedback",
    response_model=list[FeedbackResponse],
    responses=errors(404),
)
async def list_feedback(gw: GW, me: Me, thread_id: str, run_id: str) -> list[dict[str, Any]]:
    record = await gw.own_run(thread_id, run_id, me)
    given = feedback_json(record)
    return [given] if given else []


@router.get("/runs/{run_id}/feedback", response_model=list[FeedbackResponse], responses=errors(404))
async def list_run_feedback(gw: GW, me: Me, run_id: str) -> list[dict[str, Any]]:
    """A run's feedback found by the run alone, as DeerFlow's `GET /api/runs/{run_id}/feedback`."""
    given = feedback_json(await gw.own_run(None, run_id, me))
    return [given] if given else []


async def feedback_counts(gw: Any, thread_id: str) -> dict[str, int]:
    """Ratings of the thread's runs: how many, up and down (for its token-usage answer)."""
    keys = await keys_matching(gw.bus.js, gw.bus.subjects.thread_runs_bucket, f"{thread_id}.>")
    records = await asyncio.gather(*(gw.runs.get(key.rsplit(".", 1)[1]) for key in keys))
    ratings = [r.feedback.rating for r in records if r is not None and r.feedback is not None]
    return {"total": len(ratings), "positive": ratings.count(1), "negative": ratings.count(-1)}
