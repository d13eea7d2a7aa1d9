"""Edit-in-place replies, the same on every platform: the delivery policy all four adapters share.

The first partial answer of a run posts a message; later partials edit it;
the final text (any kind but partial) replaces it, its overflow follows in
more messages, then its files. What the platform shows is all that matters,
so:

- Only the newest partial text is shown. Partials are taken off the bus at
  once and kept per run; a run's newest is shown when the adapter has caught
  up with its backlog (after a restart or a long wait, a pile of stale
  partials becomes one edit, not a burst of them).
- A rate limit is obeyed, never counted as a failure: the run's reply makes
  no call before the platform's `retry after` has passed; a partial waits
  (newer text may replace it meanwhile), a final waits as told, as long as
  `MAX_RATE_WAIT`, then goes back to the bus for later.
- The visible text never steps back: a partial that is only the beginning of
  what the user already sees (a resumed run streaming its answer again) is not
  shown; the text continues from there. An edit that would change nothing is
  not sent.
- Each step of a final answer is done once: after a wait, a restart or a
  redelivery it goes on where it stopped, and a redelivered partial or final
  never posts the answer twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bus import Bus, Delivery, Retry
from bus.messages import OutboundMessage
from channels.live import LiveReplies, RateLimited, Surface

log = logging.getLogger(__name__)

# How long one delivery of a final answer waits out a platform's rate limit before it is
# handed back to the bus for later (a rate limit is never a reason to lose an answer).
MAX_RATE_WAIT = 300.0
PARTIAL_RETRY = 2.0  # after a partial failed for another reason than a rate limit
_IDLE_RUNS = 1000  # runs kept in memory whose final never came (their partials are long shown)


@dataclass
class _Run:
    """One run's reply while its answer streams: the newest partial not shown yet, and when the
    platform lets us call again."""

    newest: OutboundMessage | None = None
    not_before: float = 0.0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: asyncio.Task[None] | None = None


class ReplyStream:
    def __init__(self, bus: Bus, channel: str, surface: Surface) -> None:
        self.channel = channel
        self.live = LiveReplies(bus, channel)
        self.surface = surface
        self._runs: dict[str, _Run] = {}
        self._held: set[str] = set()  # runs with a partial held back while the backlog drains

    async def deliver(self, out: OutboundMessage, delivery: Delivery) -> None:
        """The reply consumer's handler."""
        try:
            if out.kind != "partial":
                await self._deliver_final(out)
            elif out.run_id and self.surface.streams:
                self._hold(out, out.run_id)
        finally:
            if not _backlog(delivery):  # caught up: show what the backlog held back, newest only
                for run_id in self._held:
                    self._show_soon(run_id)
                self._held.clear()

    async def _deliver_final(self, out: OutboundMessage) -> None:
        run = await self._stop_partials(out.run_id) if out.run_id else None
        deadline = time.monotonic() + MAX_RATE_WAIT
        wait = (run.not_before - time.monotonic()) if run else 0.0
        while True:
            if wait > 0:
                if time.monotonic() + wait > deadline:
                    raise Retry(f"{self.channel}: rate limited for {wait:g}s more", delay=wait)
                log.info("%s: the reply of run %s waits %.1fs (rate limit)", self.channel, out.run_id, wait)
                await asyncio.sleep(wait)
            try:
                await self._final(out)
                return
            except RateLimited as exc:
                log.info("%s: %s", self.channel, exc)
                wait = exc.delay

    # ------------------------------------------------------------------ partial answers

    def _hold(self, out: OutboundMessage, run_id: str) -> None:
        run = self._runs.get(run_id)
        if run is None:
            run = self._runs[run_id] = _Run()
            self._forget_idle()
        run.newest = out  # messages come in the order they were sent: this one is the newest
        self._held.add(run_id)

    def _show_soon(self, run_id: str) -> None:
        run = self._runs.get(run_id)
        if run is not None and run.newest is not None and (run.task is None or run.task.done()):
            run.task = asyncio.create_task(self._show_partials(run_id, run), name=f"partial-{run_id}")

    async def _show_partials(self, run_id: str, run: _Run) -> None:
        """Show the run's newest partial, again while newer ones come, each when the platform lets us."""
        while run.newest is not None:
            wait = run.not_before - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            async with run.lock:
                out, run.newest = run.newest, None
                if out is None:
                    break
                try:
                    await self._partial(out, run_id)
                except RateLimited as exc:
                    log.info("%s: partial reply of run %s waits: %s", self.channel, run_id, exc)
                    run.not_before = time.monotonic() + exc.delay
                    run.newest = run.newest or out
                except Exception as exc:  # the platform failed: a newer partial, or the final, follows
                    log.warning("%s: partial reply of run %s not shown: %s", self.channel, run_id, exc)
                    run.not_before = time.monotonic() + PARTIAL_RETRY

    async def _partial(self, out: OutboundMessage, run_id: str) -> None:
        entry = await self.live.get(run_id) or {}
        if entry.get("done"):
            return  # the final answer is out already
        text = self.surface.split(out.text)[0]
        shown = str(entry.get("shown", ""))
        if "ref" not in entry:
            ref = await self.surface.post(out, text)
            await self.live.put(run_id, ref=ref, shown=text)
            return
        if text == shown or (len(text) < len(shown) and shown.startswith(text)):
            return  # nothing new, or a resumed run repeating what the user has read already
        await self.surface.edit(entry["ref"], text)
        await self.live.put(run_id, **{**entry, "shown": text})

    async def _stop_partials(self, run_id: str) -> _Run | None:
        """The final answer is here: no partial of its run is shown any more (one being shown now
        finishes first, so the final edits the message it posted)."""
        self._held.discard(run_id)
        run = self._runs.pop(run_id, None)
        if run is None:
            return None
        async with run.lock:
            run.newest = None
            if run.task is not None:
                run.task.cancel()
        if run.task is not None:
            await asyncio.gather(run.task, return_exceptions=True)
        return run

    def _forget_idle(self) -> None:
        while len(self._runs) > _IDLE_RUNS:
            oldest = next(iter(self._runs))
            run = self._runs.pop(oldest)
            if run.task is not None:
                run.task.cancel()

    # ------------------------------------------------------------------ the final answer

    async def _final(self, out: OutboundMessage) -> None:
        """Each step once: after a rate-limit wait, a restart or a redelivery it goes on where it stopped."""
        run_id = out.run_id
        entry = (await self.live.get(run_id) if run_id else None) or {}
        if entry.get("done"):
            return  # delivered before; this is a redelivery
        pieces = self.surface.split(out.text or "(empty reply)")

        async def first() -> None:
            # Read again: a post of this step that went through before a failure left its ref behind.
            current = (await self.live.get(run_id) if run_id else None) or {}
            if "ref" not in current:
                ref = await self.surface.post(out, pieces[0])
                current = {**current, "ref": ref, "shown": pieces[0] if self.surface.streams else ""}
                if run_id:
                    await self.live.put(run_id, **current)
                if not self.surface.streams:
                    return
            await self.surface.finish(current["ref"], pieces[0], out, str(current.get("shown", "")))

        steps: list[Callable[[], Awaitable[Any]]] = [first]
        steps += [lambda piece=piece: self.surface.post_more(out, piece) for piece in pieces[1:]]
        steps += [lambda file=file: self.surface.send_file(out, file) for file in out.files]
        done = int(entry.get("steps_done", 0))
        for number, step in enumerate(steps[done:], start=done + 1):
            await step()
            if run_id:
                entry = (await self.live.get(run_id)) or {}
                await self.live.put(run_id, **{**entry, "steps_done": number})
        if run_id:
            await self.live.put(run_id, done=True)


def _backlog(delivery: Delivery) -> bool:
    """Whether more replies wait on the bus behind this one (so a newer text may be among them)."""
    metadata = getattr(delivery.msg, "metadata", None)
    return bool(metadata is not None and (metadata.num_pending or 0) > 0)
