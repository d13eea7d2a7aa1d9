"""A run's event log: its events published in order on `<prefix>.runs.ev.<run_id>.…` (stored in its
partition's `RUN_EVENTS_<k>`, `bus.run_events`), numbered across attempts, stored for sure before
anything depends on them.

Events are pipelined (a streamed answer does not wait a round trip per token) and
confirmed in bulk; an event whose store is not confirmed in time — the server went
away with it — is published again, deduplicated by its id (`ev:<run_id>:<attempt>:<seq>`).

Streamed text goes two ways. The first delta after a quiet spell is stored at once, so the first
words are not delayed for anyone. A delta that follows within `DELTA_WINDOW` is published live at
once on core NATS (`<prefix>.runs.live.<run>…`: no store, no ack, nothing for the chat router) and
held for the durable record, merged with the deltas after it (`bus.deltas.merge_deltas`) until the
window has passed since the last stored one (the windows end on a grid shared by the process's runs,
`bus.ticks`, so their held deltas are stored together), `DELTA_MAX_CHARS` have gathered, or any
other event comes; the stored `messages` event then carries the chunks it merged (`RunEvent.parts`).
Live deltas go out only while someone follows the run (`live`, `ActiveRun.followed`: a chat's run,
read by its router from the log alone, sends none until a reader says it follows). Each live delta
says which stored event it will be part of (`seq`) and where in it (`part`): a
reader that follows both (`bus.runs.follow_run(live=True)`) shows live text as it comes and, when
the stored event arrives, only the parts it has not shown; a reader of the log alone (a resumed
stream, history) gets the same text, in order, in ~4 stored events a second of streaming. A run
nobody follows stores its deltas at half its chat's reply-edit cadence instead (`delta_window`,
`ActiveRun.followed`: every 0.5 s with `channels.stream_update_seconds` 1): its chat's router, its
one reader, edits the reply no more often than that.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from bus import Bus, NotStored, decode
from bus.deltas import delta_size, merge_deltas
from bus.messages import RunEvent
from bus.run_events import chat_of, last_stored_event, request_chat
from bus.ticks import window_end

__all__ = ["EventLog", "chat_of", "request_chat"]

log = logging.getLogger(__name__)

CONFIRM_TIMEOUT = 10.0  # seconds to wait for JetStream to confirm published events
DELTA_WINDOW = 0.25  # seconds between stored text deltas (live ones go at once)
DELTA_MAX_CHARS = 2000  # held text that goes out at once, window or not


class EventLog:
    """Publishes one run's events in order, numbering them across attempts."""

    def __init__(
        self,
        bus: Bus,
        run_id: str,
        thread_id: str,
        attempt: int,
        start_seq: int = 0,
        chat: tuple[str, str] | None = None,
        *,
        partition: int,
    ) -> None:
        self.bus = bus
        self.run_id = run_id
        self.thread_id = thread_id
        self.attempt = attempt
        self.seq = start_seq
        # In the run's partition (`bus.run_events`): a chat's run's, the chat's, which its router reads.
        self.partition = partition
        self.subject = bus.subjects.run_events_for(run_id, chat, partition)
        self.live_subject = bus.subjects.run_live_for(run_id, chat)
        self.live = True  # held deltas go out live at once (False: only stored, merged)
        self._unconfirmed: list[tuple[RunEvent, asyncio.Future[Any]]] = []
        self.confirm_timeout = CONFIRM_TIMEOUT
        self.delta_window = DELTA_WINDOW
        self.published = 0  # events stored, for the curious (benchmarks, tests)
        self.published_live = 0  # live deltas sent
        self._lock = asyncio.Lock()  # one publisher at a time: the timer's flush and emit()
        # (event, merged deltas, characters, the chunks merged: each went out live as it came)
        self._held: tuple[str, Any, int, list[Any]] | None = None
        self._last_delta_at = float("-inf")  # loop time a delta last went out
        self._timer: asyncio.TimerHandle | None = None
        self._flushes: set[asyncio.Task[None]] = set()
        self._failure: BaseException | None = None  # a timed flush that could not publish

    @classmethod
    async def resume(
        cls,
        bus: Bus,
        run_id: str,
        thread_id: str,
        attempt: int,
        chat: tuple[str, str] | None,
        partition: int,
    ) -> EventLog:
        """Continue numbering after what an earlier attempt already published."""
        seq = 0
        if attempt > 1:
            try:
                last = await last_stored_event(bus, run_id, partition)
                seq = decode(RunEvent, last.data or b"{}").seq if last is not None else 0
            except Exception as exc:  # unreadable
                log.debug("no earlier events for run %s: %s", run_id, exc)
        return cls(bus, run_id, thread_id, attempt, seq, chat, partition=partition)

    async def emit(self, event: str, data: Any = None) -> None:
        """Publish the next event. Stores are confirmed in bulk (`confirm`), not one by one:
        a streamed answer does not wait a round trip per token; streamed deltas may be held
        back a moment and merged (see the module docstring).

        Raises:
            NotStored: an earlier held delta could not be published.
        """
        if event == "end":
            await self.confirm()  # everything before `end` is stored (and in order) before it
        async with self._lock:
            self._raise_failure()
            size = delta_size(data) if self.delta_window > 0 and event.startswith("messages") else None
            if size is not None and await self._hold(event, data, size):
                return
            await self._flush_held()
            await self._publish(event, data)
        if event == "end" or len(self._unconfirmed) >= 256:
            await self.confirm()

    async def _hold(self, event: str, data: Any, size: int) -> bool:
        """Keep a delta back to merge it with the next ones (it goes out live meanwhile); False: it
        is stored now (alone)."""
        loop = asyncio.get_running_loop()
        if self._held is not None:
            held_event, held_data, held_size, parts = self._held
            merged = merge_deltas(held_data, data) if held_event == event else None
            if merged is None:
                await self._flush_held()
            else:
                self._held = (event, merged, held_size + size, [*parts, data[0]])
                await self._send_live(event, data, len(parts))
                if held_size + size >= DELTA_MAX_CHARS:
                    await self._flush_held()
                return True
        now = loop.time()
        if now - self._last_delta_at >= self.delta_window:
            self._last_delta_at = now  # the first words after a quiet spell: at once
            return False
        self._held = (event, data, size, [data[0]])
        await self._send_live(event, data, 0)
        # On the process-wide grid: the held deltas of every answer under way go out together.
        self._timer = loop.call_at(window_end(self._last_delta_at, self.delta_window), self._on_timer)
        return True

    async def _send_live(self, event: str, data: Any, part: int) -> None:
        """A held delta, at once on core NATS: the `part`-th of the stored event numbered next."""
        if not self.live:
            return
        message = RunEvent(
            run_id=self.run_id,
            thread_id=self.thread_id,
            seq=self.seq + 1,
            event=event,
            data=data,
            attempt=self.attempt,
            part=part,
        )
        try:
            await self.bus.publish_core(self.live_subject, message)
        except Exception as exc:  # live text is a courtesy: the stored event brings it all
            log.debug("run %s: live delta not sent: %s", self.run_id, exc)
            return
        self.published_live += 1

    def _on_timer(self) -> None:
        self._timer = None
        task = asyncio.get_running_loop().create_task(self._timed_flush())
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def _timed_flush(self) -> None:
        async with self._lock:
            try:
                await self._flush_held()
            except Exception as exc:  # told to whoever emits or confirms next
                log.warning("run %s: held deltas not published: %s", self.run_id, exc)
                self._failure = exc

    async def _flush_held(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._held is None:
            return
        event, data, _, parts = self._held
        self._held = None
        self._last_delta_at = asyncio.get_running_loop().time()
        await self._publish(event, data, parts if self.live else None)

    async def _publish(self, event: str, data: Any, parts: list[Any] | None = None) -> None:
        self.seq += 1
        message = RunEvent(
            run_id=self.run_id,
            thread_id=self.thread_id,
            seq=self.seq,
            event=event,
            data=data,
            attempt=self.attempt,
            parts=parts,
        )
        future = await self.bus.publish_pipelined(self.subject, message, msg_id=self._msg_id(message.seq))
        self._unconfirmed.append((message, future))
        self.published += 1

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise NotStored(self.subject, 1, f"{type(failure).__name__}: {failure}") from failure

    def close(self) -> None:
        """Drop what is held and stop the timer (the run is left to another delivery)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._held = None
        for task in self._flushes:
            task.cancel()

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
        async with self._lock:
            self._raise_failure()
            await self._flush_held()
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
