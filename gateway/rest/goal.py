"""A thread's goal (goal mode), in DeerFlow's shapes: `GET/PUT/DELETE /api/threads/{id}/goal`.

The goal is part of the thread's record, which the runners own: it is read
from KV here and changed through the threads service (`threads.goal`). What
the runner does with it after each run is `agents.threads.goal`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field, StrictInt, StrictStr

from bus.messages import MAX_OBJECTIVE_CHARS, ThreadGoalReply, ThreadGoalRequest
from gateway.answers import goal_json
from gateway.deps import GW, Me
from gateway.schemas import Body, errors

router = APIRouter()


class GoalBody(Body):
    """DeerFlow's request: the completion condition, and how many runs may start by themselves."""

    objective: StrictStr = Field(min_length=1, max_length=MAX_OBJECTIVE_CHARS)
    max_continuations: StrictInt | None = Field(
        None, ge=0, description="At most `goal.max_continuations` of config.yaml (its value if unset)."
    )


class GoalAnswer(BaseModel):
    """The thread's active goal, or null."""

    goal: dict[str, Any] | None = Field(
        None, description="DeerFlow's GoalState: objective, status, counters, last_evaluation"
    )


@router.get("/threads/{thread_id}/goal", response_model=GoalAnswer, responses=errors(404))
async def get_goal(gw: GW, me: Me, thread_id: str) -> GoalAnswer:
    """The thread's goal while it is active (a reached goal is cleared)."""
    record = await gw.own_thread(thread_id, me)
    return GoalAnswer(goal=goal_json(record.goal))


@router.put("/threads/{thread_id}/goal", response_model=GoalAnswer, responses=errors(404, 422))
async def set_goal(gw: GW, me: Me, thread_id: str, body: GoalBody) -> GoalAnswer:
    """Set or replace the goal (its counters start at zero). A thread not created yet is created, as
    DeerFlow's UI holds a new chat's id before its first run. The next run's end is judged."""
    limit = gw.config.goal.max_continuations
    if body.max_continuations is not None and body.max_continuations > limit:
        raise HTTPException(422, f"max_continuations: at most {limit} (goal.max_continuations)")
    if not body.objective.strip():
        raise HTTPException(422, "objective: the goal must not be empty")
    await gw.own_or_new_thread(thread_id, me)
    request = ThreadGoalRequest(
        thread_id=thread_id, user_id=me, objective=body.objective, max_continuations=body.max_continuations
    )
    reply = await gw.ask("goal", request, ThreadGoalReply)
    return GoalAnswer(goal=goal_json(reply.goal))


@router.delete("/threads/{thread_id}/goal", response_model=GoalAnswer, responses=errors(404))
async def clear_goal(gw: GW, me: Me, thread_id: str) -> GoalAnswer:
    """Clear the goal: no run is judged or started for it any more (one already running finishes)."""
    await gw.own_thread(thread_id, me)
    await gw.ask("goal", ThreadGoalRequest(thread_id=thread_id, user_id=me), ThreadGoalReply)
    return GoalAnswer(goal=None)
