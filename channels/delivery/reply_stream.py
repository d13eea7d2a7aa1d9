"""Edit-in-place replies, the same on every platform: the delivery policy all four adapters share.

The first partial answer of a run posts a message; later partials edit it;
the final text (any kind but partial) replaces it, its overflow follows in
more messages, then its files. What the platform shows is all that matters,
so:

- Only the newest partial text is shown. Partials are taken off the bus at
  once and kept per run; a run's newest is shown when the adapter has caught
  up with its backlog (after a restart or a long wait, a pile of stale
  partials becomes one edit, not a burst of them).
- A rate limit is obeyed, never counted as a failure, and holds only what the
  platform limited: a chat's limit holds that chat's replies (in their order),
  the bot's or app's limit every chat's; other chats' replies go out
  meanwhile. No call is made before the platform's `retry after` has passed:
  a partial waits (newer text may replace it meanwhile), a final waits as long
  as told, holding no consumer slot. The limit is kept in KV, so an adapter
  stopped meanwhile hands the chat's replies back to the bus in their order,
  and the one that takes them up calls no sooner than the platform said.
- The visible text never steps back: a partial that is only the beginning of
  what the user already sees (a resumed run streaming its answer again) is not
  shown; the text continues from there. An edit that would change nothing is
  not sent.
- Each step of a final answer is done once: after a wait, a restart or a
  redelivery it goes on where it stopped, and a redelivered partial or final
  never posts the answer twice.

A chat's platform calls are made one at a time (`_Chat.calls`): a final
answer's steps, then the next reply's, so a chat's messages appear in the
order its replies were sent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from nats.js.errors import NotFoundError, ObjectDeletedError, ObjectNotFoundError

from bus import Bus, Delivery
from bus.messages import FileRef, OutboundMessage
from bus.metrics import CHAT_RATE_LIMITED, CHAT_REPLIES, labelled
from channels.delivery.bookkeeping import LiveReplies, ReplyEntry
from channels.delivery.surface import Surface
from channels.errors import RateLimited

log = logging.getLogger(__name__)

PARTIAL_RETRY = 2.0  # after a partial failed for another reason than a rate limit
_IDLE_RUNS = 1000  # runs kept in memory whose final never came (their partials are long shown)
_IDLE_CHATS = 10_000  # chats kept in memory with no reply going out and no limit in force


@dataclass
class _Run:
    """One run's reply while its answer streams: its chat, the newest partial not shown yet, and
    when to try again after a failed partial."""

    chat_id: str
    newest: OutboundMessage | None = None
    not_before: float = 0.0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: asyncio.Task[None] | None = None


@dataclass
class _Chat:
    """One chat: when its platform limit lets us call for it again, and its calls one at a time."""

    not_before: float = 0.0
    calls: asyncio.Lock = field(default_factory=asyncio.Lock)
    loaded: bool = False  # a limit an earlier adapter process was told of has been read


class ReplyStream:
    def __init__(self, bus: Bus, channel: str, surface: Surface) -> None:
        self.bus = bus
        self.channel = channel
        self.live = LiveReplies(bus, channel)
        self.surface = surface
        self._runs: dict[str, _Run] = {}
        self._held: set[str] = set()  # runs with a partial held back while the backlog drains
        self._chats: OrderedDict[str, _Chat] = OrderedDict()
        self._platform_not_before = 0.0  # a limit on the whole bot or app: every chat waits
        self._platform_loaded = False

    async def deliver(self, out: OutboundMessage, delivery: Delivery) -> None:
        """The reply consumer's handler."""
        try:
            if out.kind != "partial":
                await self._deliver_final(out, delivery)
            elif out.run_id and self.surface.streams:
                self._hold(out, out.run_id)
        finally:
            if not _backlog(delivery):  # caught up: show what the backlog held back, newest only
                for run_id in self._held:
                    self._show_soon(run_id)
                self._held.clear()

    async def _deliver_final(self, out: OutboundMessage, delivery: Delivery) -> None:
        if out.run_id:
            await self._stop_partials(out.run_id)
        chat = self._chat(out.chat_id)
        async with chat.calls:
            await self._load(out.chat_id, chat)
            while True:
                wait = self._wait(chat)
                if wait > 0:
                    log.info(
                        "%s: the reply of run %s to chat %s waits %.1fs (rate limit)",
                        self.channel,
                        out.run_id,
                        out.chat_id,
                        wait,
                    )
                    # Stopping meanwhile hands it back to the bus at once (`Defer(0)`): the chat's
                    # replies are redelivered in the order they were handed back, before any
                    # newer one, and the limit they wait for is in KV.
                    await delivery.wait_out(wait, release=True)
                    continue
                try:
                    await self._final(out)
                except RateLimited as exc:
                    labelled(CHAT_RATE_LIMITED, self.channel).inc()
                    log.info("%s: chat %s: %s", self.channel, out.chat_id, exc)
                    await self._limited(exc, out.chat_id, chat)
                except Exception:  # the consumer tries it again, with backoff
                    labelled(CHAT_REPLIES, self.channel, "failed").inc()
                    raise
                else:
                    labelled(CHAT_REPLIES, self.channel, "delivered").inc()
                    return

    # ------------------------------------------------------------------ rate limits

    def _chat(self, chat_id: str) -> _Chat:
        chat = self._chats.get(chat_id)
        if chat is None:
            chat = self._chats[chat_id] = _Chat()
            now = time.monotonic()
            for name in list(self._chats)[: max(0, len(self._chats) - _IDLE_CHATS)]:
                old = self._chats[name]
                if not old.calls.locked() and old.not_before < now:
                    del self._chats[name]
        self._chats.move_to_end(chat_id)
        return chat

    def _wait(self, chat: _Chat) -> float:
        """Seconds until the platform lets us call for this chat again (0 or less: now)."""
        return max(chat.not_before, self._platform_not_before) - time.monotonic()

    async def _limited(self, exc: RateLimited, chat_id: str, chat: _Chat) -> None:
        until = time.monotonic() + exc.delay
        if exc.scope == "platform":
            self._platform_not_before = max(self._platform_not_before, until)
        else:
            chat.not_before = max(chat.not_before, until)
        try:
            await self.live.hold("platform" if exc.scope == "platform" else chat_id, time.time() + exc.delay)
        except Exception as exc2:  # this process still knows; only a restart would not
            log.warning("%s: could not keep the rate limit of %s: %s", self.channel, chat_id, exc2)

    async def _load(self, chat_id: str, chat: _Chat) -> None:
        """Take in the limits an earlier process of this adapter was told of (once per chat)."""
        if chat.loaded and self._platform_loaded:
            return
        try:
            for scope in (["platform"] if not self._platform_loaded else []) + [chat_id] * (not chat.loaded):
                until = await self.live.limit(scope)
                if until is not None and until > time.time():
                    not_before = time.monotonic() + until - time.time()
                    if scope == "platform":
                        self._platform_not_before = max(self._platform_not_before, not_before)
                    else:
                        chat.not_before = max(chat.not_before, not_before)
        except Exception as exc:  # KV unreachable: the platform tells us again if need be
            log.warning("%s: could not read the rate limits of chat %s: %s", self.channel, chat_id, exc)
        chat.loaded = self._platform_loaded = True

    # ------------------------------------------------------------------ partial answers

    def _hold(self, out: OutboundMessage, run_id: str) -> None:
        run = self._runs.get(run_id)
        if run is None:
            run = self._runs[run_id] = _Run(out.chat_id)
            self._forget_idle()
        run.newest = out  # messages come in the order they were sent: this one is the newest
        self._held.add(run_id)

    def _show_soon(self, run_id: str) -> None:
        run = self._runs.get(run_id)
        if run is not None and run.newest is not None and (run.task is None or run.task.done()):
            run.task = asyncio.create_task(self._show_partials(run_id, run), name=f"partial-{run_id}")

    async def _show_partials(self, run_id: str, run: _Run) -> None:
        """Show the run's newest partial, again while newer ones come, each when the platform lets us
        (and after the chat's earlier replies: its calls are made in turn)."""
        chat = self._chat(run.chat_id)
        await self._load(run.chat_id, chat)
        while run.newest is not None:
            wait = max(self._wait(chat), run.not_before - time.monotonic())
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            async with chat.calls:
                if self._wait(chat) > 0:
                    continue  # the chat's reply before this one was told to wait meanwhile
                async with run.lock:
                    out, run.newest = run.newest, None
                    if out is None:
                        break  # type: ignore[unreachable]  # another task may have taken it meanwhile
                    try:
                        await self._partial(out, run_id)
                    except RateLimited as exc:
                        labelled(CHAT_RATE_LIMITED, self.channel).inc()
                        log.info("%s: partial reply of run %s waits: %s", self.channel, run_id, exc)
                        await self._limited(exc, run.chat_id, chat)
                        run.newest = run.newest or out
                    except Exception as exc:  # the platform failed: a newer partial, or the final, follows
                        log.warning("%s: partial reply of run %s not shown: %s", self.channel, run_id, exc)
                        run.not_before = time.monotonic() + PARTIAL_RETRY

    async def _partial(self, out: OutboundMessage, run_id: str) -> None:
        entry = await self.live.get(run_id) or ReplyEntry()
        if entry.done:
            return  # the final answer is out already
        text = self.surface.split(out.text)[0]
        if entry.ref is None:
            ref = await self.surface.post(out, text)
            await self.live.put(run_id, ReplyEntry(ref=ref, shown=text))
            return
        if text == entry.shown or (len(text) < len(entry.shown) and entry.shown.startswith(text)):
            return  # nothing new, or a resumed run repeating what the user has read already
        await self.surface.edit(entry.ref, text)
        await self.live.put(run_id, entry.model_copy(update={"shown": text}))

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
        entry = (await self.live.get(run_id) if run_id else None) or ReplyEntry()
        if entry.done:
            return  # delivered before; this is a redelivery
        pieces = self.surface.split(out.text or "(empty reply)")

        async def first() -> None:
            # Read again: a post of this step that went through before a failure left its ref behind.
            current = (await self.live.get(run_id) if run_id else None) or ReplyEntry()
            if current.ref is None:
                ref = await self.surface.post(out, pieces[0])
                current = current.model_copy(
                    update={"ref": ref, "shown": pieces[0] if self.surface.streams else ""}
                )
                if run_id:
                    await self.live.put(run_id, current)
                if not self.surface.streams:
                    return
            assert current.ref is not None
            await self.surface.finish(current.ref, pieces[0], out, current.shown)

        steps: list[Callable[[], Awaitable[Any]]] = [first]
        steps += [lambda piece=piece: self.surface.post_more(out, piece) for piece in pieces[1:]]  # type: ignore[misc]  # mypy cannot type a lambda's default
        steps += [lambda file=file: self._send_file(out, file) for file in out.files if file.object_name]  # type: ignore[misc]  # mypy cannot type a lambda's default
        for number, step in enumerate(steps[entry.steps_done :], start=entry.steps_done + 1):
            await step()
            if run_id:
                entry = (await self.live.get(run_id)) or ReplyEntry()
                await self.live.put(run_id, entry.model_copy(update={"steps_done": number}))
        if run_id:
            await self.live.put(run_id, ReplyEntry(done=True))

    async def _send_file(self, out: OutboundMessage, file: FileRef) -> None:
        """A file of the answer, read from the object store once for every platform. A file that is
        gone (deleted with its thread, expired) becomes a note in the chat; a store that cannot be
        reached fails the step, which is tried again."""
        try:
            data = (await (await self.bus.files()).get(file.object_name or "")).data or b""
        except (ObjectNotFoundError, ObjectDeletedError, NotFoundError) as exc:
            log.warning("%s: file %s is not in the object store: %s", self.channel, file.object_name, exc)
            await self.surface.post_more(out, f"(I made {file.name}, but could not attach it.)")
            return
        await self.surface.send_file(out, file, data)


def _backlog(delivery: Delivery) -> bool:
    """Whether more replies wait on the bus behind this one (so a newer text may be among them)."""
    metadata = getattr(delivery.msg, "metadata", None)
    return bool(metadata is not None and (metadata.num_pending or 0) > 0)
