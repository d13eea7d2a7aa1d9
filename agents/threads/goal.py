"""Goal mode on the runner side: judge each run of a thread with a goal, and go on by itself.

A thread's goal lives on its ThreadRecord (`goal`), written only by runners:
set and cleared through the threads service (`threads.goal`, for the gateway's
`/goal` routes and the router's `/goal` command), and judged here at the end
of each successful run, before the run's `end` is published:

1. The evaluator model reads the goal and the thread's visible conversation
   and answers, as structured output, one of `done`, `continue` (with the
   next step) or `blocked` (with a question for the user).
2. The decision is written onto the goal (compare-and-set, only if the goal
   is still the one judged: clearing or replacing it meanwhile wins), then,
   for `continue`, the next run is submitted: an ordinary RunRequest on the
   bus with the same chat origin and stream modes, whose input is a hidden
   message asking for the next step. Its run id is derived from the judged
   run's, and the decision is kept with that run's id on the goal: a
   redelivered run (its runner died after judging) takes the recorded
   decision again and submits the same run id, which the runs stream's
   dedupe and the run record's create turn into at most one continuation.
3. The outcome goes into the run's `end` event (`data.goal`), where the
   chat projection and the web UI read it: a short status for a run that
   continues, the answer (once) for the last one, the question when blocked.

The loop stops when the goal is done (it is then cleared), blocked (kept: the
user's answer is judged again), after `goal.max_continuations` runs started by
itself since the user's last message, after `goal.max_no_progress` evaluations
in a row whose run left the same last answer, when a run is cancelled (only
successful runs are judged), or when the goal is cleared. A message the user
sends meanwhile is judged as a new start; a continuation queued before it is
then not judged, so one loop goes on, never two.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections.abc import Callable
from typing import Any, Literal

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, ValidationError

from agents.follow_up import follow_up_run
from bus import Bus
from bus.content import text_of
from bus.messages import (
    GoalEvaluation,
    MultitaskStrategy,
    RunRequest,
    ThreadGoal,
    ThreadGoalRequest,
    ThreadRecord,
    utcnow,
)
from bus.records import RecordStore
from bus.runs import submit_run
from config import AppConfig

log = logging.getLogger(__name__)

CONTINUATION_NAMESPACE = uuid.UUID("0b7f6a0e-2d4c-4f51-9a53-6a8f1c0d9e21")
VERDICT_SCHEMA_NAME = "goal_verdict"  # the structured output's name (the test model answers by it)
_CONVERSATION_MESSAGES = 30
_CONVERSATION_CHARS = 12_000

EVALUATOR_PROMPT = (
    "You judge whether an AI agent has reached the goal its user set, using ONLY the conversation "
    "shown. Answer `done` when the conversation shows the goal fully reached; `continue` when useful "
    "work can go on without the user, with `next_step` saying what to do next in one sentence; "
    "`blocked` when only the user can unblock it, with `question` asking them. Give a short `reason`."
)


class Verdict(BaseModel):
    """The evaluator's structured answer."""

    verdict: Literal["done", "continue", "blocked"]
    reason: str = ""
    next_step: str = ""
    question: str = ""


VERDICT_SCHEMA: dict[str, Any] = {
    **Verdict.model_json_schema(),
    "title": VERDICT_SCHEMA_NAME,
    "description": "Whether the goal is reached, and what comes next.",
}


class GoalEvaluationFailed(Exception):
    """The evaluator model could not be created, failed, or did not answer with a verdict."""


def continuation_run_id(run_id: str) -> str:
    """The run id of the continuation of `run_id`: the same on every delivery of that run."""
    return str(uuid.uuid5(CONTINUATION_NAMESPACE, f"goal:{run_id}"))


def _kind(message: Any) -> str:
    kind = getattr(message, "type", None) or (message.get("type") if isinstance(message, dict) else None)
    return str(kind or "")


def _hidden(message: Any) -> bool:
    extra = getattr(message, "additional_kwargs", None) or {}
    return bool(extra.get("hide_from_ui"))


def _text(message: Any) -> str:
    content = getattr(message, "content", None)
    if content is None and isinstance(message, dict):
        content = message.get("content")
    return text_of(content).strip()


def visible_conversation(messages: list[Any]) -> str:
    """The user's and the assistant's words (no tool traffic, no hidden continuation prompts)."""
    lines = []
    for message in messages[-_CONVERSATION_MESSAGES * 3 :]:
        kind = _kind(message)
        if kind not in ("human", "ai") or _hidden(message) or not (text := _text(message)):
            continue
        lines.append(f"{'User' if kind == 'human' else 'Assistant'}: {text}")
    return "\n\n".join(lines[-_CONVERSATION_MESSAGES:])[-_CONVERSATION_CHARS:]


def progress_key(messages: list[Any]) -> str:
    """A digest of the run's last answer: two runs leaving the same one made no progress."""
    for message in reversed(messages):
        if _kind(message) == "ai" and (text := _text(message)):
            return hashlib.sha256(text.encode()).hexdigest()[:32]
    return ""


async def evaluate(config: AppConfig, goal: ThreadGoal, messages: list[Any]) -> Verdict:
    """Ask the evaluator model for a verdict on `goal` after a run.

    Raises:
        GoalEvaluationFailed: no model, a model error, a timeout, or no usable verdict.
    """
    from llm.models import create_chat_model

    conversation = visible_conversation(messages)
    if not conversation:
        return Verdict(verdict="continue", reason="nothing has been said yet", next_step=goal.objective)
    prompt = [
        SystemMessage(EVALUATOR_PROMPT),
        HumanMessage(f"Goal:\n{goal.objective}\n\nConversation:\n{conversation}\n\nIs the goal reached?"),
    ]
    try:
        model = create_chat_model(config, config.goal.model_name)
        judge = model.with_structured_output(VERDICT_SCHEMA, method="json_schema")
        async with asyncio.timeout(config.goal.timeout_seconds):
            answer = await judge.ainvoke(prompt)
        return Verdict.model_validate(answer)
    except (ValidationError, TypeError) as exc:
        raise GoalEvaluationFailed(f"the evaluator's answer is not a verdict: {exc}") from exc
    except Exception as exc:
        raise GoalEvaluationFailed(f"the evaluator failed: {type(exc).__name__}: {exc}") from exc


def continuation_prompt(goal: ThreadGoal, evaluation: GoalEvaluation) -> str:
    return (
        "<goal_continuation>\n"
        f"Goal: {goal.objective}\n"
        f"Not reached yet: {evaluation.reason or 'no reason given'}\n"
        f"Next step: {evaluation.next_step or 'continue toward the goal'}\n"
        "Carry on toward the goal with the tools and the conversation so far; ask the user only if "
        "you truly cannot go on.\n"
        "</goal_continuation>"
    )


def outcome(goal: ThreadGoal, evaluation: GoalEvaluation) -> dict[str, Any]:
    """What the run's `end` event says about the goal (`data.goal`): the chat and the web UI show it."""
    return {
        "goal_id": goal.goal_id,
        "objective": goal.objective,
        "verdict": evaluation.verdict,
        "reason": evaluation.reason,
        "next_step": evaluation.next_step,
        "question": evaluation.question,
        "next_run_id": evaluation.next_run_id,
        "continuation": goal.continuation_count,
        "max_continuations": goal.max_continuations,
        "stopped": evaluation.stand_down_reason,
    }


class GoalLoop:
    """The runner's goal step: `after_run` at the end of each successful run."""

    def __init__(self, bus: Bus, config: AppConfig, threads: RecordStore[ThreadRecord]) -> None:
        self.bus = bus
        self.config = config
        self.threads = threads

    async def after_run(
        self, request: RunRequest, messages: list[Any], cancelled: Callable[[], bool]
    ) -> dict[str, Any] | None:
        """Judge the run against its thread's goal and start the next run if it should go on.

        Returns the goal outcome for the run's `end` event, or None when the thread has no goal
        (or it was cleared or replaced meanwhile).
        """
        thread = await self.threads.get(request.thread_id)
        goal = thread.goal if thread is not None else None
        if goal is None:
            return None
        last = goal.last_evaluation
        if last is not None and last.run_id == request.run_id:
            judged, evaluation = goal, last  # judged by an earlier delivery of this run: do the same
        elif self._superseded(request, goal):
            log.info("run %s: a newer message took over the goal's loop; not judged", request.run_id)
            return None
        else:
            decided = await self._judge(request, goal, messages, cancelled)
            if decided is None:
                return None
            judged, evaluation = decided
        if evaluation.next_run_id is not None and not cancelled():
            await self._continue(request, judged, evaluation)
        log.info(
            "run %s on thread %s: goal %s (%s)",
            request.run_id,
            request.thread_id,
            evaluation.verdict,
            evaluation.stand_down_reason or evaluation.next_run_id or "-",
        )
        return outcome(judged, evaluation)

    @staticmethod
    def _superseded(request: RunRequest, goal: ThreadGoal) -> bool:
        """A continuation whose loop a later run took over: the user wrote while it was queued, and
        that message's run was judged first (its own continuation carries the loop on)."""
        marker = request.metadata.get("goal")
        if not isinstance(marker, dict) or marker.get("goal_id") != goal.goal_id:
            return False
        last = goal.last_evaluation
        return last is None or last.next_run_id != request.run_id

    async def _judge(
        self, request: RunRequest, goal: ThreadGoal, messages: list[Any], cancelled: Callable[[], bool]
    ) -> tuple[ThreadGoal, GoalEvaluation] | None:
        """The verdict on the run, written onto the goal (a `done` goal is cleared); None when the goal
        was cleared or replaced meanwhile."""
        marker = request.metadata.get("goal")
        continuing = isinstance(marker, dict) and marker.get("goal_id") == goal.goal_id
        # A user's own message starts the count again; a continuation carries it on.
        count = goal.continuation_count if continuing else 0
        key = progress_key(messages)
        try:
            verdict = await evaluate(self.config, goal, messages)
        except GoalEvaluationFailed as exc:
            log.warning("run %s: goal not judged: %s", request.run_id, exc)
            verdict = Verdict(verdict="blocked", reason=str(exc), question="")
            stand_down: str | None = "run_failed"
        else:
            stand_down = None
        last = goal.last_evaluation
        same = continuing and last is not None and last.progress_key == key and verdict.verdict == "continue"
        stalled = goal.no_progress_count + 1 if same else 0
        next_run_id = None
        if verdict.verdict == "blocked":
            stand_down = stand_down or "blocked"
        elif verdict.verdict == "continue":
            if cancelled():
                stand_down = "cancelled"
            elif count >= goal.max_continuations:
                stand_down = "max_continuations"
            elif stalled >= goal.max_no_progress_continuations:
                stand_down = "no_progress"
            else:
                next_run_id = continuation_run_id(request.run_id)
                count += 1
        evaluation = GoalEvaluation(
            verdict=verdict.verdict,
            reason=verdict.reason,
            next_step=verdict.next_step if next_run_id else "",
            question=verdict.question or (verdict.reason if stand_down == "blocked" else ""),
            run_id=request.run_id,
            next_run_id=next_run_id,
            progress_key=key,
            stand_down_reason=stand_down,
        )
        now = utcnow()
        judged = goal.model_copy(
            update={
                "continuation_count": count,
                "no_progress_count": stalled,
                "last_evaluation": evaluation,
                "updated_at": now,
            }
        )
        written: list[bool] = []

        def record(current: ThreadRecord | None) -> ThreadRecord | None:
            if current is None or current.goal is None or current.goal.goal_id != goal.goal_id:
                return None  # cleared or replaced while it was being judged: that wins
            written.append(True)
            kept = None if verdict.verdict == "done" else judged
            return current.model_copy(update={"goal": kept, "updated_at": now})

        await self.threads.update(request.thread_id, record)
        if not written:
            return None
        return judged, evaluation

    async def _continue(self, request: RunRequest, goal: ThreadGoal, evaluation: GoalEvaluation) -> None:
        assert evaluation.next_run_id is not None
        follow_up = follow_up_run(
            request,
            evaluation.next_run_id,
            request.thread_id,
            request.user_id,
            continuation_prompt(goal, evaluation),
            kind="goal",
            marks={"goal_continuation": True},
            metadata={
                "goal": {
                    "goal_id": goal.goal_id,
                    "continuation": goal.continuation_count,
                    "after_run": request.run_id,
                }
            },
            stream_subgraphs=request.stream_subgraphs,
            multitask_strategy=MultitaskStrategy.ENQUEUE,
            after=request.run_id,
        )
        if await submit_run(self.bus, follow_up) is None:
            log.info("run %s: its continuation %s was submitted before", request.run_id, follow_up.run_id)


def new_goal(objective: str, max_continuations: int | None, config: AppConfig) -> ThreadGoal:
    """A fresh goal, its limits from config (`max_continuations` at most the configured one).

    Raises:
        ValueError: an empty objective.
    """
    text = " ".join(objective.split())
    if not text:
        raise ValueError("the goal's objective must not be empty")
    limit = config.goal.max_continuations
    return ThreadGoal(
        objective=text,
        max_continuations=limit if max_continuations is None else min(max_continuations, limit),
        max_no_progress_continuations=config.goal.max_no_progress,
    )


async def change_goal(
    threads: RecordStore[ThreadRecord], config: AppConfig, request: ThreadGoalRequest
) -> ThreadGoal | None:
    """Set (objective given) or clear the caller's thread goal; the goal as it is now.

    Raises:
        LookupError: no such thread of the caller's.
        ValueError: an empty objective.
    """
    goal = new_goal(request.objective, request.max_continuations, config) if request.objective else None
    if request.objective is not None and goal is None:
        raise ValueError("the goal's objective must not be empty")
    if goal is not None and request.goal_id:
        goal.goal_id = request.goal_id

    def change(current: ThreadRecord | None) -> ThreadRecord | None:
        if current is None or current.user_id != request.user_id:
            raise LookupError(f"thread {request.thread_id} not found")
        if goal is None and current.goal is None:
            return None
        if goal is not None and current.goal is not None and current.goal.goal_id == goal.goal_id:
            return None  # set by this same request before (a chat message delivered again)
        return current.model_copy(update={"goal": goal, "updated_at": utcnow()})

    updated = await threads.update(request.thread_id, change)
    return updated.goal if updated is not None else goal
