"""Chat traffic for the fault tests: publish messages, collect the replies, count what happened to each.

Every message is `chat C message K` with its own message id; the fake model
answers `You said: <the last user text>`, so each message's final reply must be
exactly `You said: chat C message K` — a reply built from another run's answer
shows up as wrong.

Replies are read from the CHAT_OUT stream through a durable pull consumer of the
test's own (as a chat adapter reads them), so a reply published while the test's
connection was down is still seen, and a duplicate means a second reply really
stored in the stream (told apart by stream sequence, not by redelivery).

A scenario has a budget for its answers; an answer still missing then is waited for
a while longer (`settle`): one that comes meanwhile is `late` (by how much is
reported), one that never comes is `lost`. Late is a figure to watch, lost a defect.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import APIError

from bus import Bus, EnvelopeError, decode
from bus.chat_partitions import chat_partitions, publish_inbound
from bus.messages import InboundMessage, OutboundMessage, RunEvent
from tests.faults.diagnosis import explain_lost

log = logging.getLogger(__name__)

CHANNEL = "script"
COLLECTOR = "faults-collector"


@dataclass(frozen=True)
class Sent:
    chat_id: str
    message_id: str
    text: str

    @property
    def expected_reply(self) -> str:
        return f"You said: {self.text}"

    def inbound(self) -> InboundMessage:
        return InboundMessage(
            channel=CHANNEL, chat_id=self.chat_id, message_id=self.message_id, text=self.text
        )


@dataclass
class Counts:
    """What happened to the messages of one scenario."""

    sent: int = 0
    accepted: int = 0  # stored by JetStream (the publish was acked)
    answered: int = 0  # exactly one final reply
    duplicated: int = 0  # more than one final reply
    wrong: int = 0  # a final reply that is not the answer to this message
    lost: int = 0  # accepted, and no final reply by the end of the grace after the budget
    late: int = 0  # answered (counted in `answered` too), but only after the budget
    late_by: float = 0.0  # seconds past the budget of the latest first final reply
    stray: int = 0  # final replies to no message of ours
    out_of_order: int = 0  # answered before a message sent earlier in the same chat

    def line(self, scenario: str, seconds: float, **extra: object) -> str:
        """One line for the report: the counts, then anything the scenario adds (`name=value`)."""
        more = "".join(f" {name}={value}" for name, value in extra.items())
        return (
            f"faults[{scenario}]: sent={self.sent} accepted={self.accepted} answered={self.answered} "
            f"duplicated={self.duplicated} wrong={self.wrong} lost={self.lost} late={self.late} "
            f"late_by={self.late_by:.1f}s stray={self.stray} "
            f"out_of_order={self.out_of_order}{more} ({seconds:.1f}s)"
        )

    def acceptable(self, late_bound: float) -> bool:
        """Every message stored, and answered exactly once with its own answer, in its chat's order,
        none more than `late_bound` seconds after the budget."""
        return (
            self.accepted == self.sent
            and self.answered == self.accepted
            and self.late_by <= late_bound
            and not (self.duplicated or self.wrong or self.lost or self.stray or self.out_of_order)
        )

    @property
    def perfect(self) -> bool:
        """`acceptable`, and no answer late either."""
        return self.acceptable(0.0) and not self.late


@dataclass
class ChatLoad:
    """`chats` chats of `per_chat` messages each on channel `script`, with their replies.

    `grace`: seconds `settle` waits past the budget for answers still missing; `late_bound`: how
    late (seconds past the budget) an answer may be and the scenario still pass.
    """

    bus: Bus
    chats: int
    per_chat: int
    grace: float = 40.0
    late_bound: float = 20.0
    messages: list[Sent] = field(init=False)
    accepted: set[str] = field(default_factory=set)
    finals: dict[str, list[OutboundMessage]] = field(default_factory=lambda: defaultdict(list))
    final_seq: dict[str, int] = field(default_factory=dict)  # message id -> CHAT_OUT seq of its 1st final
    answered_at: dict[str, float] = field(default_factory=dict)  # message id -> when its 1st final came
    accepted_at: dict[str, float] = field(default_factory=dict)  # message id -> when the bus stored it
    budget_end: float | None = None  # time.monotonic when the answers were due (`settle`)
    publish_errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    diagnosis: list[str] = field(default_factory=list)  # what the lost answers' runs were doing
    _seen: set[int] = field(default_factory=set)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _collector: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.messages = [
            Sent(chat_id=f"chat-{c}", message_id=f"m-{c}-{k}", text=f"chat {c} message {k}")
            for k in range(self.per_chat)
            for c in range(self.chats)
        ]

    # ------------------------------------------------------------------ publishing

    def part(self, first: float, last: float) -> list[Sent]:
        """The messages from fraction `first` to `last` of each chat's sequence (in chat order)."""
        lo, hi = round(first * self.per_chat), round(last * self.per_chat)
        return [m for m in self.messages if lo <= int(m.message_id.rsplit("-", 1)[1]) < hi]

    async def publish(self, messages: list[Sent], deadline: float) -> None:
        """Publish each chat's messages in order (chats side by side), retrying each until stored.

        A message still not stored at `deadline` (time.monotonic) is given up: not accepted.
        """
        by_chat: dict[str, list[Sent]] = defaultdict(list)
        for message in messages:
            by_chat[message.chat_id].append(message)
        await asyncio.gather(*(self._publish_chat(chat, deadline) for chat in by_chat.values()))

    async def _publish_chat(self, messages: list[Sent], deadline: float) -> None:
        for sent in messages:
            await self._publish_one(sent, deadline)

    async def _publish_one(self, sent: Sent, deadline: float) -> None:
        inbound = sent.inbound()
        while time.monotonic() < deadline:
            try:
                await publish_inbound(self.bus, CHANNEL, inbound, timeout=2.0)
            except Exception as exc:  # NATS down or restarting: the same msg id again is safe
                self.publish_errors[type(exc).__name__] += 1
                await asyncio.sleep(0.2)
                continue
            self.accepted.add(sent.message_id)
            self.accepted_at.setdefault(sent.message_id, time.monotonic())
            return

    async def publish_steadily(
        self, every: float, until: asyncio.Event, deadline: float, backlog: int = 4
    ) -> None:
        """Steady traffic: each chat sends its next message every `every` seconds (whether or not
        the last one is answered yet, as users do) until `until` is set or its messages run out;
        but not while `backlog` of its messages are unanswered (a user waits for the bot at some
        point), so a machine too busy to keep up gets a longer wait, not an ever-growing queue.

        The messages never sent are dropped from `messages`, so the counts are of what was sent.
        """
        sent: set[str] = set()

        async def chat(messages: list[Sent]) -> None:
            tick = time.monotonic()
            mine: list[str] = []  # this chat's messages sent so far

            def caught_up() -> bool:
                return until.is_set() or sum(1 for m in mine if m not in self.finals) < backlog

            for message in messages:
                await self._wait_until(caught_up, deadline)
                if until.is_set():
                    return
                sent.add(message.message_id)
                mine.append(message.message_id)
                await self._publish_one(message, deadline)
                tick += every
                # A publish that took longer than a tick (NATS failing over) sends the next at once.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(until.wait(), max(0.0, tick - time.monotonic()))

        by_chat: dict[str, list[Sent]] = defaultdict(list)
        for message in self.messages:
            by_chat[message.chat_id].append(message)
        await asyncio.gather(*(chat(messages) for messages in by_chat.values()))
        self.messages = [m for m in self.messages if m.message_id in sent]

    def longest_pause(self) -> tuple[float, str, float]:
        """The longest a chat waited with a message outstanding and no answer coming, the message,
        and when that wait began (time.monotonic).

        For each message: from when it was accepted, or from its chat's previous first final reply
        if that came later, to its own first final reply (a message still unanswered counts up to
        now). So a chat that keeps getting answers sees short pauses however long its queue, and a
        chat whose answers stall for 20 s while a component restarts sees 20 s.
        """
        longest, which, since = 0.0, "", 0.0
        previous: dict[str, float] = {}
        now = time.monotonic()
        for message in self.messages:  # in each chat's send order
            accepted = self.accepted_at.get(message.message_id)
            if accepted is None:
                continue
            answered = self.answered_at.get(message.message_id, now)
            began = max(accepted, previous.get(message.chat_id, accepted))
            previous[message.chat_id] = answered
            if answered - began > longest:
                longest, which, since = answered - began, message.message_id, began
        return longest, which, since

    # ------------------------------------------------------------------ collecting

    async def start_collecting(self) -> None:
        """Read CHAT_OUT from its start (call once antler up has created the streams)."""
        self._collector = asyncio.create_task(self._collect(), name="faults-collector")

    async def stop_collecting(self) -> None:
        if self._collector is not None:
            self._collector.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._collector
            self._collector = None

    async def _collect(self) -> None:
        subject, stream = self.bus.subjects.chat_out(CHANNEL), self.bus.subjects.chat_out_stream
        config = ConsumerConfig(
            deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.EXPLICIT, ack_wait=2.0, max_deliver=-1
        )
        sub = None
        try:
            while True:
                try:
                    if sub is None:
                        sub = await self.bus.js.pull_subscribe(
                            subject, durable=COLLECTOR, stream=stream, config=config
                        )
                    batch = await sub.fetch(256, timeout=0.5)
                except (TimeoutError, NatsTimeoutError):
                    continue
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the server is away (or lost the consumer): subscribe again
                    log.debug("collector: %r", exc)
                    if sub is not None:
                        with contextlib.suppress(Exception):
                            await sub.unsubscribe()
                    sub = None
                    await asyncio.sleep(0.2)
                    continue
                for msg in batch:
                    self._take(msg.metadata.sequence.stream, msg.data)
                    with contextlib.suppress(Exception):
                        await msg.ack()
        finally:
            if sub is not None:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()

    def _take(self, stream_seq: int, data: bytes) -> None:
        if stream_seq in self._seen:
            return  # a redelivery to the collector, not a second reply
        self._seen.add(stream_seq)
        try:
            reply = decode(OutboundMessage, data)
        except EnvelopeError:
            return
        if reply.is_final:
            self.finals[reply.reply_to or ""].append(reply)
            self.final_seq.setdefault(reply.reply_to or "", stream_seq)
            self.answered_at.setdefault(reply.reply_to or "", time.monotonic())
            self._changed.set()

    def answered_count(self) -> int:
        return sum(1 for m in self.messages if self.finals.get(m.message_id))

    async def wait_answered(self, count: int, deadline: float) -> bool:
        """Until `count` messages have a final reply, or `deadline` (time.monotonic) passes."""
        return await self._wait_until(lambda: self.answered_count() >= count, deadline)

    async def wait_all_accepted_answered(self, deadline: float) -> bool:
        """Until every accepted message has a final reply, or `deadline` passes."""
        return await self._wait_until(lambda: all(self.finals.get(m) for m in self.accepted), deadline)

    async def settle(self, deadline: float) -> None:
        """Until every accepted message has a final reply: due by `deadline` (the budget), then
        waited for `grace` seconds more, so that `counts` tells a late answer from a lost one."""
        self.budget_end = deadline
        if not await self.wait_all_accepted_answered(deadline + self.grace):
            lost = [
                m
                for m in self.messages
                if m.message_id in self.accepted and not self.finals.get(m.message_id)
            ]
            self.diagnosis = await explain_lost(self.bus, [m.inbound() for m in lost])
        overtaken = self.overtaken()
        if overtaken and not self.diagnosis:  # both messages of the first pair: which end came when
            first, earlier = overtaken[0]
            self.diagnosis = await explain_lost(self.bus, [earlier.inbound(), first.inbound()])

    def lateness(self) -> dict[str, float]:
        """message id -> seconds past the budget its first final reply came (late ones only)."""
        if self.budget_end is None:
            return {}
        end = self.budget_end
        return {m: at - end for m, at in self.answered_at.items() if at > end}

    async def _wait_until(self, done: Callable[[], bool], deadline: float) -> bool:
        while not done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return True

    # ------------------------------------------------------------------ counting

    def counts(self) -> Counts:
        counts = Counts(sent=len(self.messages), accepted=len(self.accepted))
        ours = {m.message_id for m in self.messages}
        counts.stray = sum(len(replies) for reply_to, replies in self.finals.items() if reply_to not in ours)
        for message in self.messages:
            replies = self.finals.get(message.message_id, [])
            if len(replies) == 1:
                counts.answered += 1
            elif len(replies) > 1:
                counts.duplicated += 1
            elif message.message_id in self.accepted:
                counts.lost += 1
            if any(r.kind != "final" or r.text != message.expected_reply for r in replies):
                counts.wrong += 1
        counts.out_of_order = len(self.overtaken())
        ours_late = [seconds for m, seconds in self.lateness().items() if m in ours]
        counts.late, counts.late_by = len(ours_late), max(ours_late, default=0.0)
        return counts

    def overtaken(self) -> list[tuple[Sent, Sent]]:
        """`(message, earlier)` for each message whose final reply was stored before the final reply
        of a message sent earlier in the same chat (`messages` is in each chat's send order)."""
        found = []
        latest: dict[str, Sent] = {}  # per chat: the earlier message answered last so far
        for message in self.messages:
            seq = self.final_seq.get(message.message_id)
            if seq is None:
                continue
            earlier = latest.get(message.chat_id)
            if earlier is not None and seq < self.final_seq[earlier.message_id]:
                found.append((message, earlier))
                continue
            latest[message.chat_id] = message
        return found

    async def redelivered_runs(self, attempts: int = 10) -> int:
        """Runs with events from a second delivery of their request (a runner died holding it).

        In a cluster, a node just restarted can leave the new reading consumer without a
        leader for a moment (the server answers 503): read again from the start.
        """
        resumed: set[str] = set()
        for attempt in range(1, attempts + 1):
            try:
                await self._read_resumed(resumed)
            except (APIError, NoRespondersError) as exc:
                if attempt == attempts:
                    raise
                log.debug("reading run events: %r; again", exc)
                await asyncio.sleep(0.5)
                continue
            return len(resumed)
        raise AssertionError("unreachable")

    async def _read_resumed(self, resumed: set[str]) -> None:
        s = self.bus.subjects
        for k in range(await chat_partitions(self.bus)):
            await self._read_resumed_in(s.run_events_partition_stream(k), resumed)

    async def _read_resumed_in(self, stream: str, resumed: set[str]) -> None:
        s = self.bus.subjects
        sub = await self.bus.js.pull_subscribe(
            s.run_events_all,
            stream=stream,
            config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.NONE),
        )
        try:
            while True:
                try:
                    batch = await sub.fetch(512, timeout=1.0)
                except (TimeoutError, NatsTimeoutError):
                    return
                for msg in batch:
                    with contextlib.suppress(EnvelopeError):
                        event = decode(RunEvent, msg.data)
                        if event.attempt > 1:
                            resumed.add(event.run_id)
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    def problems(self, limit: int = 8) -> str:
        """A few examples of what went wrong, for the assertion message."""
        lines = []
        late = self.lateness()
        for message in self.messages:
            replies = self.finals.get(message.message_id, [])
            if message.message_id in self.accepted and not replies:
                waited = f" in {self.grace:g}s past the budget" if self.budget_end is not None else ""
                lines.append(f"  lost: {message.message_id} ({message.text!r}): no final reply{waited}")
            elif late.get(message.message_id, 0.0) > self.late_bound:
                seconds = late[message.message_id]
                lines.append(
                    f"  late: {message.message_id} answered {seconds:.1f}s past the budget "
                    f"(more than the {self.late_bound:g}s allowed)"
                )
            elif len(replies) > 1:
                runs = [r.run_id for r in replies]
                lines.append(f"  duplicated x{len(replies)}: {message.message_id} (runs {runs})")
            for reply in replies:
                if reply.kind != "final" or reply.text != message.expected_reply:
                    lines.append(f"  wrong: {message.message_id} got {reply.kind} {reply.text[:80]!r}")
        for message, earlier in self.overtaken():
            lines.append(f"  out of order: {message.message_id} answered before {earlier.message_id}")
        not_accepted = len(self.messages) - len(self.accepted)
        if not_accepted:
            lines.append(f"  not accepted: {not_accepted} (publish errors: {dict(self.publish_errors)})")
        more = [f"  ... {len(lines) - limit} more"] if len(lines) > limit else []
        return "\n".join(lines[:limit] + more + self.diagnosis)
