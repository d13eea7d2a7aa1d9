"""A thread's goal (goal mode), as the gateway's `GET/PUT/DELETE /api/threads/{id}/goal`: read from
the thread's record, set and cleared through the runners' `threads.goal` (the record's owners)."""

from __future__ import annotations

from typing import Any

from antler.client._base import Connected
from antler.client.errors import InvalidRequest
from bus.messages import MAX_OBJECTIVE_CHARS, ThreadGoalReply, ThreadGoalRequest
from gateway.answers import goal_json


class Goals(Connected):
    """get_goal / set_goal / clear_goal: `{"goal": GoalState or None}`, the gateway's `GoalAnswer`."""

    async def get_goal(self, thread_id: str) -> dict[str, Any]:
        """The thread's goal while it is active (a reached goal is cleared): `{"goal": ... or None}`.

        Raises:
            NotFound: the user has no such thread.
        """
        record = await self._own_thread(thread_id)
        return {"goal": goal_json(record.goal)}

    async def set_goal(
        self, thread_id: str, objective: str, max_continuations: int | None = None
    ) -> dict[str, Any]:
        """Set or replace the thread's goal (counters from zero; a thread of that id not made yet is
        made). After each run of the thread an evaluator judges it, and Antler goes on by itself
        until it is done: `stream()` follows those runs (`follow_goal`).

        Args:
            objective: the completion condition.
            max_continuations: runs Antler may start by itself, at most config's
                `goal.max_continuations` (its value when None).

        Raises:
            InvalidRequest: an empty objective, or too many continuations.
        """
        if not isinstance(objective, str) or not objective.strip():
            raise InvalidRequest("objective: the goal, not empty")
        if len(objective) > MAX_OBJECTIVE_CHARS:
            raise InvalidRequest(f"objective: at most {MAX_OBJECTIVE_CHARS} characters")
        limit = self.config.goal.max_continuations
        if max_continuations is not None and (
            not isinstance(max_continuations, int)
            or isinstance(max_continuations, bool)
            or not 0 <= max_continuations <= limit
        ):
            raise InvalidRequest(f"max_continuations: 0 to {limit} (goal.max_continuations)")
        await self._own_or_new_thread(thread_id)
        request = ThreadGoalRequest(
            thread_id=thread_id,
            user_id=self.user_id,
            objective=objective,
            max_continuations=max_continuations,
        )
        reply = await self._ask("threads", "goal", request, ThreadGoalReply)
        return {"goal": goal_json(reply.goal)}

    async def clear_goal(self, thread_id: str) -> dict[str, Any]:
        """Clear the goal: no run is judged or started for it any more. `{"goal": None}`."""
        await self._own_thread(thread_id)
        await self._ask(
            "threads", "goal", ThreadGoalRequest(thread_id=thread_id, user_id=self.user_id), ThreadGoalReply
        )
        return {"goal": None}
