"""Goal mode: a thread's goal (kept on its ThreadRecord), the evaluator's verdicts, the threads
service's `goal` request.

The goal's JSON is DeerFlow's GoalState (`objective`, `status`, counters, `last_evaluation`), with
Antler's own additions (`goal_id`, the verdict's `next_step` and `question`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bus.messages.base import Envelope, Reply, new_id, utcnow

DEFAULT_MAX_CONTINUATIONS = 8
DEFAULT_MAX_NO_PROGRESS = 2
MAX_OBJECTIVE_CHARS = 4000

Verdict = Literal["done", "continue", "blocked"]
# Why a loop stopped without its goal being reached (`GoalEvaluation.stand_down_reason`).
StandDown = Literal["max_continuations", "no_progress", "cancelled", "blocked", "run_failed"]


class GoalEvaluation(BaseModel):
    """What the evaluator said after one run, and what the loop did with it."""

    model_config = ConfigDict(extra="ignore")

    verdict: Verdict
    reason: str = ""
    next_step: str = Field("", description="With `continue`: what the next run is asked to do.")
    question: str = Field("", description="With `blocked`: what the user is asked.")
    run_id: str = Field(description="The run that was judged.")
    next_run_id: str | None = Field(None, description="The continuation started for it, if one was.")
    progress_key: str = Field("", description="Digest of the run's last answer: unchanged = no progress.")
    stand_down_reason: StandDown | None = None
    evaluated_at: datetime = Field(default_factory=utcnow)

    # DeerFlow's names for the same verdict, so its UI and clients read it.
    @property
    def satisfied(self) -> bool:
        return self.verdict == "done"

    @property
    def blocker(self) -> str:
        return {"done": "none", "continue": "goal_not_met_yet", "blocked": "needs_user_input"}[self.verdict]


class ThreadGoal(BaseModel):
    """A thread's active goal: the runner judges each run's outcome against it and goes on by itself."""

    model_config = ConfigDict(extra="ignore")

    goal_id: str = Field(default_factory=new_id, description="New each time a goal is set.")
    objective: str = Field(min_length=1, max_length=MAX_OBJECTIVE_CHARS)
    status: Literal["active"] = "active"
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    continuation_count: int = Field(0, ge=0, description="Continuations since the user's last message.")
    max_continuations: int = Field(DEFAULT_MAX_CONTINUATIONS, ge=0)
    no_progress_count: int = Field(0, ge=0, description="Evaluations in a row that saw no progress.")
    max_no_progress_continuations: int = Field(DEFAULT_MAX_NO_PROGRESS, ge=1)
    last_evaluation: GoalEvaluation | None = None

    def goal_state(self) -> dict[str, Any]:
        """As DeerFlow's GoalState JSON (its API and its UI's `values.goal`): ours, with the verdict
        also under DeerFlow's names (`satisfied`, `blocker`, `evidence_summary`)."""
        data = self.model_dump(mode="json")
        if self.last_evaluation is not None:
            data["last_evaluation"] |= {
                "satisfied": self.last_evaluation.satisfied,
                "blocker": self.last_evaluation.blocker,
                "evidence_summary": self.last_evaluation.reason,
            }
        return data


class ThreadGoalRequest(Envelope):
    """Set, replace or clear the caller's thread goal: `<prefix>.threads.goal`.

    `objective` set: a new goal (counters from zero); None: the goal is cleared.
    """

    thread_id: str
    user_id: str = "default"
    objective: str | None = Field(None, max_length=MAX_OBJECTIVE_CHARS)
    max_continuations: int | None = Field(None, ge=0)
    goal_id: str | None = Field(
        None, description="The new goal's id; the thread's goal already having it is left as it is."
    )


class ThreadGoalReply(Reply):
    """The thread's goal after a `threads.goal` request (None: no goal)."""

    goal: ThreadGoal | None = None
