"""A run's event log: its events published in order on `<prefix>.runs.ev.<run_id>`, numbered across
attempts, stored for sure before anything depends on them.

Events are pipelined (a streamed answer does not wait a round trip per token) and
confirmed in bulk; an event whose store is not confirmed in time — the server went
away with it — is published again, deduplicated by its id (`ev:<run_id>:<attempt>:<seq>`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from nats.js.errors import NotFoundError

from bus import Bus, NotStored, decode
from bus.messages import RunEvent

log = logging.getLogger(__name__)

CONFIRM_TIMEOUT = 10.0  # seconds to wait for JetStream to confirm published events


class EventLog:
    """Publishes one run's events in order, numbering them across attempts."""

    def __init__(self, bus: Bus, run_id: str, thread_id: str, attempt: int, start_seq: int = 0) -> None:
        self.bus = bus
        self.run_id = run_id
        self.thread_id = thread_id
        self.attempt = attempt
        self.seq = start_seq
        self.subject = bus.subjects.run_events(run_id)
        self._unconfirmed: list[tuple[RunEvent, asyncio.Future[Any]]] = []
        self.confirm_timeout = CONFIRM_TIMEOUT

    @classmethod
    async def resume(cls, bus: Bus, run_id: str, thread_id: str, attempt: int) -> EventLog:
        """Continue numbering after what an earlier attempt already published."""
        seq = 0
        if attempt > 1:
            try:
                last = await bus.js.get_last_msg(
                    bus.subjects.run_events_stream, bus.subjects.run_events(run_id)
                )
                seq = decode(RunEvent, last.data or b"{}").seq
            except (NotFoundError, Exception) as exc:  # nothing published yet, or unreadable
                log.debug("no earlier events for run %s: %s", run_id, exc)
        return cls(bus, run_id, thread_id, attempt, seq)

    async def emit(self, event: str, data: Any = None) -> None:
        """Publish the next event. Stores are confirmed in bulk (`confirm`), not one by one:
        a streamed answer does not wait a round trip per token."""
        if event == "end":
            await self.confirm()  # everything before `end` is stored (and in order) before it
        self.seq += 1
        message = RunEvent(
            run_id=self.run_id,
            thread_id=self.thread_id,
            seq=self.seq,
            event=event,
            data=data,
            attempt=self.attempt,
        )
        future = await self.bus.publish_pipelined(self.subject, message, msg_id=self._msg_id(message.seq))
        self._unconfirmed.append((message, future))
        if event == "end" or len(self._unconfirmed) >= 256:
            await self.confirm()

    def _msg_id(self, seq: int) -> str:
        # Per attempt: publishing again within an attempt is deduplicated, but a later attempt's
        # events are never taken for an earlier one's (whose last ones the server may have lost).
        return f"ev:{self.run_id}:{self.attempt}:{seq}"

    async def confirm(self) -> None:
        """Wait until every event so far is stored.

        An event whose store is not confirmed in time (the server went away with it,
        or with its acknowledgement) is published again, deduplicated by its id.

        Raises:
            NotStored: the events could still not be stored; the request is retried later.
        """
        pending, self._unconfirmed = self._unconfirmed, []
        if not pending:
            return
        futures = [future for _, future in pending]
        await asyncio.wait(futures, timeout=self.confirm_timeout)
        lost = [
            message
            for message, future in pending
            if not future.done() or future.cancelled() or future.exception() is not None
        ]
        for future in futures:
            future.cancel()  # frees the client's slot for a reply that may never come
        if not lost:
            return
        log.warning(
            "run %s: %d event(s) not confirmed as stored; publishing them again", self.run_id, len(lost)
        )
        for message in lost:
            try:
                await self.bus.publish(
                    self.subject, message, msg_id=self._msg_id(message.seq), timeout=self.confirm_timeout
                )
            except Exception as exc:
                raise NotStored(self.subject, len(lost), f"{type(exc).__name__}: {exc}") from exc

    async def error(self, error: str, message: str) -> None:
        await self.emit("error", {"error": error, "message": message})
