"""Background commands in the broker: a command the agent runs without waiting for it.

`start_job` (a service endpoint: any one broker takes it) starts the command and answers at once;
the command runs as any other (same provider, egress policy, disk quota, limits) but under
`sandbox.background_timeout_seconds`, and outside the user's command slots (`sandbox.fairness`),
which it would otherwise hold for as long as it runs; `sandbox.max_background_commands` per
thread bounds them instead (counted where they are started, `agents.subagents.background_commands`).

Whoever waits for it (the subagent executor) asks `<prefix>.sandbox.job.<job id>`, to which every
broker listens and only the one running the job answers: `wait` (its end, or `running` after a
while) or `kill` (it stops with all its processes). An ended job's result is kept here for
`RETAIN_SECONDS`, so a waiter that died and came back still gets it. A broker that stops kills its
jobs, telling their waiters so; one that dies answers nothing more, and its waiters, hearing no
broker answer for the job, say so instead of waiting for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bus import Bus, decode, encode
from bus.messages import ExecReply, ExecRequest, JobControl, JobReply, JobStartRequest
from bus.messages.base import ErrorInfo
from bus.tasks import cancel_and_wait
from sandbox.errors import SandboxError

log = logging.getLogger(__name__)

RETAIN_SECONDS = 3600.0  # an ended job's result, for a waiter that comes back
KILL_WAIT_SECONDS = 10.0  # how long a `kill` answer waits for the job's processes to be gone
STOPPED = "the sandbox broker running the command stopped before it ended (its processes went with it)"

# Runs a request under a time limit, as the exec endpoint does (`Broker.run_command`).
RunCommand = Callable[[ExecRequest, float], Awaitable[ExecReply]]


@dataclass
class Job:
    request: JobStartRequest
    task: asyncio.Task[ExecReply]
    killed: bool = False
    ended_at: float | None = None
    waiters: set[asyncio.Task[None]] = field(default_factory=set)

    def reply(self) -> JobReply:
        if not self.task.done():
            return JobReply(job_id=self.request.job_id, state="running")
        if self.task.cancelled():  # its broker stops
            gone = ErrorInfo(code="unavailable", message=STOPPED)
            return JobReply(job_id=self.request.job_id, state="ended", result=ExecReply(error=gone))
        return JobReply(
            job_id=self.request.job_id, state="ended", result=self.task.result(), killed=self.killed
        )


class Jobs:
    """This broker's background commands, by job id."""

    def __init__(self, bus: Bus, run: RunCommand, limit: float) -> None:
        self.bus = bus
        self.run = run
        self.limit = limit
        self.jobs: dict[str, Job] = {}
        self._subscription: Any = None

    async def start_listening(self) -> None:
        self._subscription = await self.bus.nc.subscribe(
            self.bus.subjects.sandbox("job.*"), cb=self.on_control
        )

    async def stop(self) -> None:
        """Stop hearing requests, and kill every job still running; those waiting for one are told
        its broker stopped."""
        if self._subscription is not None:
            with contextlib.suppress(Exception):
                await self._subscription.unsubscribe()
        await cancel_and_wait(*(job.task for job in self.jobs.values()), every=0.5)
        answers = [answer for job in self.jobs.values() for answer in job.waiters]
        await asyncio.gather(*answers, return_exceptions=True)

    async def start(self, request: JobStartRequest) -> JobReply:
        """Start the job (once: a job already known here is answered as it is)."""
        self._forget_old()
        known = self.jobs.get(request.job_id)
        if known is not None:
            return known.reply()
        limit = min(request.timeout_seconds, self.limit) if request.timeout_seconds else self.limit
        job = Job(request, asyncio.create_task(self._run(request, limit), name=f"job:{request.job_id}"))
        self.jobs[request.job_id] = job
        job.task.add_done_callback(lambda _: setattr(job, "ended_at", time.monotonic()))
        log.info(
            "background command %s started for thread %s of %s (limit %gs)",
            request.job_id,
            request.thread_id,
            request.user_id,
            limit,
        )
        return job.reply()

    async def _run(self, request: JobStartRequest, limit: float) -> ExecReply:
        try:
            return await self.run(request, limit)
        except SandboxError as exc:  # refused, or stopped over the disk quota: said in its result
            return ExecReply(error=ErrorInfo(code=exc.code, message=exc.message))
        except asyncio.CancelledError:
            if self.jobs.get(request.job_id) is not None and self.jobs[request.job_id].killed:
                return ExecReply(warnings=["cancelled: the command was killed with all its processes"])
            raise  # the broker stops: its jobs go with it
        except Exception as exc:  # nothing a command does may end the broker's bookkeeping
            log.exception("background command %s failed", request.job_id)
            return ExecReply(error=ErrorInfo(code="internal", message=f"{type(exc).__name__}: {exc}"))

    def _forget_old(self) -> None:
        now = time.monotonic()
        for job_id, job in list(self.jobs.items()):
            if job.ended_at is not None and now - job.ended_at > RETAIN_SECONDS:
                del self.jobs[job_id]

    async def on_control(self, msg: Any) -> None:
        """`wait` or `kill` (answered if asked), for a job this broker knows; silence for one it
        does not."""
        job = self.jobs.get(msg.subject.rsplit(".", 1)[-1])
        if job is None:
            return
        try:
            control = decode(JobControl, msg.data)
        except Exception:
            return
        # Answered in a task of its own: a subscription's callbacks run one after another.
        answer = asyncio.create_task(self._answer(job, control, msg))
        job.waiters.add(answer)
        answer.add_done_callback(job.waiters.discard)

    async def _answer(self, job: Job, control: JobControl, msg: Any) -> None:
        try:
            if control.action == "kill" and not job.task.done():
                log.info("background command %s: killed on request", job.request.job_id)
                job.killed = True
                # Cancelled again until it ends: a cancel that lands as one of its awaits completes
                # can be lost (3.11's wait_for, inside the NATS client), and the command would run on.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(KILL_WAIT_SECONDS):
                        await cancel_and_wait(job.task, every=0.5)
            elif control.action == "wait":
                await asyncio.wait([job.task], timeout=control.wait_seconds)
            if msg.reply:  # not for a kill published without asking for an answer
                await msg.respond(encode(job.reply()))
        except Exception:  # the asker gave up (its inbox is gone): nothing to answer
            log.debug("background command %s: answer not sent", job.request.job_id, exc_info=True)
