"""One run this runner process is running, and how it ends.

`ActiveRun` is everything the process keeps about a run while it handles its delivery: made in one
place when the handler takes the run (`Runner._handle`) and dropped in one place when it lets go, so
no per-run map can outlive the run or be forgotten in one of several clean-ups.

`finish_run` ends it: every event confirmed stored, then the run's record, the thread's record (the
thread is free) and the run's journal written side by side, then `end`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agents.context import RunOptions
from agents.runner.event_log import DELTA_WINDOW, EventLog
from agents.runner.journal import JournalRecorder
from agents.runner.thread_claims import ThreadClaims
from agents.telemetry import invoke_agent
from bus import Abandon, Bus
from bus.log_context import with_run
from bus.messages import ErrorInfo, RunRecord, RunRequest, RunStatus, SubagentCancel, Usage, utcnow
from bus.metrics import RUN_DURATION, RUN_QUEUE_WAIT, RUNS_FINISHED, labelled
from bus.records import RecordStore
from config import AppConfig
from llm.pace import QUIET_WINDOW, STREAM_WINDOW, Pace

T = TypeVar("T")


@dataclass
class ActiveRun:
    request: RunRequest
    attempt: int  # this delivery's number: a later one may take the run over
    events: EventLog
    done: asyncio.Event = field(default_factory=asyncio.Event)  # this delivery let go of the run
    cancel: str | None = None  # cancel | interrupt | rollback, once asked (first ask wins)
    stream: asyncio.Task[None] | None = None  # the agent's stream, while it runs
    revision: Any = None  # the run record as last written here, (record, revision): no re-read
    model: str | None = None  # the model it runs on, once known
    journal: JournalRecorder | None = None  # what its journal will hold, once it streams
    taken_at: float = field(default_factory=time.monotonic)  # when this delivery took it (its duration)
    # Messages steered into the run (`steer` runs), added before its next model call; taken only
    # while `steerable` (the stream runs and will look at them again).
    steering: list[dict[str, Any]] = field(default_factory=list)
    steerable: bool = False
    waiting: bool = False  # it ended waiting for a person (an approval): the thread is `interrupted`
    held: list[str] = field(default_factory=list)  # ids of the thread's held steering it took
    thread_seen: Any = None  # the thread's (record, revision) as read when the run was taken
    # How often its model streams pass text up (its stream task's, `llm.streaming.pace_streams`).
    pace: Pace = field(default_factory=Pace)

    # Seconds between the stored deltas of a run nobody follows live (`followed`): its one reader,
    # a chat's router, edits the chat's reply at most every `channels.stream_update_seconds`; stored
    # at half that, each edit has new text (`quiet_window`).
    quiet_window: float = QUIET_WINDOW

    def followed(self, live: bool) -> None:
        """Whether a reader follows its text live: deltas go out live at once and are stored every
        `DELTA_WINDOW`, the model's text comes up every `STREAM_WINDOW`; else only the stored deltas,
        every `quiet_window`, and the model's text comes up at their pace."""
        self.events.live = live
        self.events.delta_window = DELTA_WINDOW if live else self.quiet_window
        self.pace.window = STREAM_WINDOW if live else self.quiet_window

    def take_held_steering(self, messages: list[dict[str, Any]]) -> None:
        """Messages steered in while its thread waited for a person (`ThreadRecord.steering`)."""
        self.steering.extend(messages)
        self.held = [str(m.get("id")) for m in messages]

    def added_steering(self) -> list[str]:
        """The held messages the run has added to its thread (its model call has seen them)."""
        pending = {m.get("id") for m in self.steering}
        return [i for i in self.held if i not in pending]

    def steer(self, messages: list[dict[str, Any]]) -> bool:
        """Take messages into the running turn; False when the run will make no model call any more."""
        if not self.steerable or self.cancel is not None:
            return False
        self.steering.extend(messages)
        return True

    def __post_init__(self) -> None:
        with_run(self.request.run_id)  # made in the run's handler task: its log lines name the run
        if self.attempt == 1:  # the queue wait of its first attempt (later ones wait for a redelivery)
            RUN_QUEUE_WAIT.observe(max((utcnow() - self.request.created_at).total_seconds(), 0.0))

    def traced(self, work: Awaitable[T]) -> Awaitable[T]:
        """`work` in the run's `invoke_agent` span, when tracing is on (`agents.telemetry`)."""
        request = self.request
        return invoke_agent(
            work, request.assistant_id, request.thread_id, request.run_id, **{"antler.attempt": self.attempt}
        )

    @property
    def run_id(self) -> str:
        return self.request.run_id

    @property
    def thread_id(self) -> str:
        return self.request.thread_id

    def ask_to_stop(self, action: str) -> None:
        if self.cancel is None:
            self.cancel = action

    def model_name(self, config: AppConfig) -> str | None:
        """The model the run uses (known once it started; else from its request)."""
        if self.model is not None:
            return self.model
        options = RunOptions.from_run(
            dict(self.request.config.get("configurable") or {}), self.request.context
        )
        return options.model_name or (default.name if (default := config.get_model()) else None)


async def finish_run(
    bus: Bus,
    config: AppConfig,
    runs: RecordStore[RunRecord],
    claims: ThreadClaims,
    run: ActiveRun,
    status: RunStatus,
    *,
    usage: dict[str, int] | None = None,
    title: str | None = None,
    error: ErrorInfo | None = None,
    subagent_tokens: int = 0,
    goal: dict[str, Any] | None = None,
) -> None:
    """End the run with `status`.

    Raises:
        Abandon: a later delivery runs it now, or another finished it: its outcome counts.
    """
    request, events = run.request, run.events
    # Every event so far is stored before the record says the run ended: a later delivery that
    # finds it ended only adds a missing `end`, never leaves a hole.
    await events.confirm()
    now = utcnow()
    superseded: list[int] = []

    def ended(rec: RunRecord | None) -> RunRecord | None:
        if rec is not None and rec.attempt > events.attempt:
            superseded.append(rec.attempt)  # a later delivery runs it now: its outcome counts
            return None
        if rec is not None and rec.status.finished and rec.status != RunStatus.INTERRUPTED:
            superseded.append(rec.attempt)  # another delivery finished it already
            return None
        base = rec or RunRecord(run_id=request.run_id, thread_id=request.thread_id, user_id=request.user_id)
        return base.model_copy(
            update={
                "status": status,
                "ended_at": now,
                "updated_at": now,
                "error": error,
                "usage": Usage(**usage) if usage else base.usage,
            }
        )

    used = Usage(**usage) if usage else None
    journal, run.journal = run.journal, None
    # The journal is kept before `end`: whoever sees the run end can read its history.
    keep_journal = journal.write(bus, status, error) if journal else asyncio.sleep(0)
    known, run.revision = run.revision, None
    # The run's record and the thread's, written side by side (one round trip of waiting, not two);
    # the thread is free before `end`: whoever sees the end may start the next run at once. A
    # release by a superseded delivery changes nothing (the thread records the delivery holding it).
    await asyncio.gather(
        runs.update(request.run_id, ended, known=known),
        claims.release(
            request,
            status,
            title,
            used,
            run.model_name(config),
            subagent_tokens,
            waiting=run.waiting,
            steering_added=run.added_steering(),
        ),
        keep_journal,
    )
    if superseded:
        raise Abandon(f"run {request.run_id} belongs to delivery {superseded[0]}, not {events.attempt}")
    labelled(RUNS_FINISHED, status.value).inc()
    labelled(RUN_DURATION, status.value).observe(time.monotonic() - run.taken_at)
    if status != RunStatus.SUCCESS:  # subagents still at work for it stop (its tool waits no more)
        stop = SubagentCancel(parent_run_id=request.run_id, reason=f"the parent run ended: {status.value}")
        await bus.publish_core(bus.subjects.subagent_cancel(request.run_id), stop)
    end: dict[str, Any] = {"status": status.value, "usage": usage or {}}
    if goal is not None:
        end["goal"] = goal
    await events.emit("end", end)
