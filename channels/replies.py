"""Run events back as chat replies: the router's projection consumer.

For runs started from a chat (their run record's metadata has an `origin`),
each run's events, in order, become throttled partial replies while the
answer streams, then one final reply (text, presented files, a clarification
question, or a readable error) on `<prefix>.chat.out.<channel>`. A reply is
built only from its own run's events: by the time a run's `end` is handled,
the chat's next run may already have changed the thread. The final reply is
deduplicated by run id; a router that missed some of a run's events (restarted
mid-run, or another router process took them) reads them back from the log
and delivers it once.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from nats.js.api import DeliverPolicy

from bus import Bus, Consumer, Defer, Delivery
from bus.content import text_of
from bus.files import output_key
from bus.layout import output_relative
from bus.messages import ChatOrigin, FileRef, OutboundMessage, RunEvent, RunRecord
from bus.records import RecordStore
from bus.runs import follow_run
from channels.goal_command import reply_for as goal_reply
from config import AppConfig

log = logging.getLogger(__name__)

FINAL_ORDER_WAIT = 30.0  # seconds a final waits for the finals of its thread's earlier runs
FINAL_RETRY = 1.0  # seconds before a final that waits for an earlier one is looked at again
FINISHED_KEPT = 10_000  # runs whose final went out, remembered so their late events send nothing
# The custom events that end a subagent task (as the runner's task tool sends them).
FINAL_TASK_EVENTS = frozenset({"task_completed", "task_failed", "task_cancelled", "task_timed_out"})


@dataclass
class RunReply:
    """One chat run's reply, built only from that run's own events (never from the thread's state,
    which may already hold the chat's next run)."""

    origin: ChatOrigin
    thread_id: str
    texts: dict[str, str] = field(default_factory=dict)  # AI message id -> text so far
    order: list[str] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)  # AI message id -> attempt that streamed it
    pieces: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # AI message id -> (seq, delta)
    tool_calls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)  # call id -> name, args
    files: list[str] = field(default_factory=list)  # presented outputs, in order
    clarification: str | None = None
    applied: set[tuple[int, int]] = field(default_factory=set)  # (attempt, seq) of events taken in
    last_seq: int = 0
    seq: int = 0
    # Never: the first partial goes out at once. (0.0 held it back on a machine up for less than
    # stream_update_seconds, the monotonic clock counting from boot.)
    last_sent: float = float("-inf")
    sent_text: str = ""
    error: str | None = None
    tasks: dict[str, tuple[str, bool]] = field(default_factory=dict)  # subagent task -> (label, done)

    def answer(self, attempt: int | None = None) -> str:
        """The latest assistant text; with `attempt`, the latest that delivery of the run streamed.

        A run redelivered while its first delivery still ran (a process stalled past ack_wait) has
        two attempts streaming at once: the one whose `end` makes the final reply answers with its
        own words, not with the other's text so far.
        """
        texts = [self.texts[m] for m in reversed(self.order) if self.texts[m]]
        if attempt is not None:
            own = [
                self.texts[m] for m in reversed(self.order) if self.texts[m] and self.attempts[m] == attempt
            ]
            texts = own or texts
        return texts[0] if texts else ""

    def task_event(self, data: Any) -> None:
        """A subagent's `custom` task event: only its label and whether it is over, never its output."""
        if not isinstance(data, dict) or not str(data.get("type", "")).startswith("task_"):
            return
        task_id = str(data.get("task_id") or "")
        if task_id:
            label = str(data.get("description") or "a subtask")[:60]
            self.tasks[task_id] = (label, data["type"] in FINAL_TASK_EVENTS)

    def progress(self) -> str:
        """The streamed reply's status line while subagents work (empty when none does)."""
        working = [label for label, done in self.tasks.values() if not done]
        if not working:
            return ""
        done = len(self.tasks) - len(working)
        return f"[subtasks: {done} of {len(self.tasks)} done; working on: {'; '.join(working)}]"

    def collect(self, data: Any, seq: int, attempt: int) -> None:
        """Take one `messages` event: assistant text, the tool calls it makes, their results."""
        if not isinstance(data, list) or not data or not isinstance(data[0], dict):
            return
        chunk = data[0]
        kind = chunk.get("type")
        if kind in ("AIMessageChunk", "ai"):
            self._tool_calls(chunk)
            self._text(chunk, seq, attempt)
        elif kind == "tool":
            self._tool_result(chunk)

    def _text(self, chunk: dict[str, Any], seq: int, attempt: int) -> None:
        text = text_of(chunk.get("content"), sep="")
        message_id = chunk.get("id")
        if not text or not message_id:
            return  # only the assistant's own words reach a chat, never tool results or context
        if attempt < self.attempts.get(message_id, attempt):
            return  # an earlier delivery's late piece: the later attempt's text stands
        if self.attempts.get(message_id) != attempt:  # new, or streamed again by a resumed attempt
            if message_id in self.texts:
                self.order.remove(message_id)
            self.order.append(message_id)
            self.pieces[message_id] = []
            self.attempts[message_id] = attempt
            self.clarification = None  # the agent went on talking after its question
        if chunk.get("type") == "ai":
            self.pieces[message_id] = [(seq, text)]
            self.texts[message_id] = text
            return
        pieces = self.pieces[message_id]
        if not pieces or seq > pieces[-1][0]:
            pieces.append((seq, text))
            self.texts[message_id] = self.texts.get(message_id, "") + text
        elif all(s != seq for s, _ in pieces):  # stored late, after a server restart: put it in its place
            bisect.insort(pieces, (seq, text))
            self.texts[message_id] = "".join(t for _, t in pieces)

    def _tool_calls(self, chunk: dict[str, Any]) -> None:
        for call in chunk.get("tool_calls") or []:
            if isinstance(call, dict) and call.get("id") and call.get("name"):
                args = call.get("args")
                self.tool_calls[call["id"]] = (call["name"], args if isinstance(args, dict) else {})

    def _tool_result(self, chunk: dict[str, Any]) -> None:
        name = chunk.get("name")
        if chunk.get("status") == "error":
            return
        if name == "ask_clarification":
            self.clarification = text_of(chunk.get("content"))
        elif name == "present_files":
            _, args = self.tool_calls.get(chunk.get("tool_call_id") or "", ("", {}))
            for path in args.get("filepaths") or []:
                if isinstance(path, str) and output_relative(path) and path not in self.files:
                    self.files.append(path.rstrip("/"))


class RecentOrigins:
    """The chats of the runs this router process submitted lately, by run id: its projection finds
    where to reply without reading the run's record (a bus round trip per run)."""

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._origins: dict[str, ChatOrigin] = {}

    def remember(self, run_id: str, origin: ChatOrigin) -> None:
        self._origins[run_id] = origin
        while len(self._origins) > self.size:  # the oldest go first
            self._origins.pop(next(iter(self._origins)))

    def pop(self, run_id: str) -> ChatOrigin | None:
        return self._origins.pop(run_id, None)


class FinalsInOrder:
    """The final replies of one thread's runs go out in the order this router submitted the runs.

    A thread's runs run one after another, but the runner frees the thread just before it
    publishes the run's `end`: on a stalled machine the next run's `end` could be stored first. Its
    final is deferred (the message given back for a moment, so the thread's later events, the
    earlier `end` among them, go on) until the finals of the thread's earlier runs from here are
    out, for at most `wait` seconds in case an earlier run's end never comes.
    """

    def __init__(self, wait: float = FINAL_ORDER_WAIT, size: int = 100) -> None:
        self.wait = wait
        self.size = size  # runs remembered per thread
        self._runs: dict[str, list[str]] = {}  # thread id -> runs submitted here, final not yet sent
        self._asked: dict[str, float] = {}  # run id -> when its final stops waiting (time.monotonic)
        # Runs whose final went out from here lately: a chat taken over names its last run as due
        # (`partitions.continue_chat`) while that run's `end` may already have come and gone.
        self._out: collections.OrderedDict[str, None] = collections.OrderedDict()

    def submitted(self, thread_id: str, run_id: str) -> None:
        if run_id in self._out:
            return
        runs = self._runs.setdefault(thread_id, [])
        if run_id not in runs:
            runs.append(run_id)
            del runs[: -self.size]

    def must_wait(self, thread_id: str, run_id: str) -> bool:
        """Whether an earlier run of the thread submitted here still has no final (for at most
        `wait` seconds from the first time this run asked)."""
        runs = self._runs.get(thread_id)
        if not runs or run_id not in runs or runs[0] == run_id:
            self._asked.pop(run_id, None)
            return False
        now = time.monotonic()
        deadline = self._asked.setdefault(run_id, now + self.wait)
        if now < deadline:
            return True
        log.warning("run %s: its final goes out before run %s's, which has not ended", run_id, runs[0])
        self._asked.pop(run_id, None)
        # Given up on: the thread's later finals must not each wait as long again for the same runs.
        del runs[: runs.index(run_id)]
        return False

    def sent(self, thread_id: str, run_id: str) -> None:
        self._out[run_id] = None
        while len(self._out) > FINISHED_KEPT:
            self._out.popitem(last=False)
        runs = self._runs.get(thread_id)
        if runs is None:
            return
        with contextlib.suppress(ValueError):
            runs.remove(run_id)
        if not runs:
            del self._runs[thread_id]


class ReplyProjection:
    """Keeps one `RunReply` per chat run in flight; sends its partial and final replies."""

    def __init__(
        self,
        bus: Bus,
        config: AppConfig,
        runs: RecordStore[RunRecord],
        origins: RecentOrigins | None = None,
        finals: FinalsInOrder | None = None,
    ) -> None:
        self.bus = bus
        self.config = config
        self.runs = runs
        self.origins = origins or RecentOrigins()
        self.finals = finals or FinalsInOrder()
        self._projections: dict[str, RunReply | None] = {}
        # Runs whose final this process sent (the newest FINISHED_KEPT): an event of theirs that comes
        # again afterwards (its partial's send failed in an outage) sends nothing after the final.
        self._finished: collections.OrderedDict[str, None] = collections.OrderedDict()

    async def _projection(self, event: RunEvent) -> RunReply | None:
        if event.run_id in self._projections:
            return self._projections[event.run_id]
        origin = self.origins.pop(event.run_id)
        if origin is None:  # a run this process did not submit (or has forgotten): its record says
            assert self.runs is not None
            record = await self.runs.get(event.run_id)
            found = (record.metadata.get("origin") if record else None) or None
            origin = ChatOrigin.model_validate(found) if found else None
        projection = RunReply(origin, event.thread_id) if origin else None
        self._projections[event.run_id] = projection
        return projection

    async def _catch_up(self, event: RunEvent, projection: RunReply) -> None:
        """Read the run's events this router has not seen before `event` back from the log: it started
        while the run went on, or another router process handled them."""
        try:
            async for earlier in follow_run(
                self.bus, event.run_id, after_seq=projection.last_seq, timeout=10
            ):
                if earlier.seq >= event.seq:
                    break
                self._apply(projection, earlier)
        except TimeoutError:
            log.warning("run %s: could not read its earlier events; the reply may be partial", event.run_id)

    @staticmethod
    def _apply(projection: RunReply, event: RunEvent) -> None:
        # By attempt too: a resumed run may number from where it found the log while its earlier
        # delivery's last events were still arriving; both are taken (the later attempt's win).
        if (event.attempt, event.seq) in projection.applied:
            return
        projection.applied.add((event.attempt, event.seq))
        projection.last_seq = max(projection.last_seq, event.seq)
        if event.event == "messages":
            projection.collect(event.data, event.seq, event.attempt)
        elif event.event == "custom":
            projection.task_event(event.data)
        elif event.event == "error":
            data = event.data if isinstance(event.data, dict) else {}
            projection.error = str(data.get("message") or data.get("error") or "unknown error")

    async def on_event(self, event: RunEvent, delivery: Delivery) -> None:
        if event.event == "end" and self.finals.must_wait(event.thread_id, event.run_id):
            # Not holding the thread's turn: its earlier run's `end` (behind it) goes first.
            raise Defer(FINAL_RETRY)
        if event.run_id in self._finished:
            return
        projection = await self._projection(event)
        if projection is None:
            if event.event == "end":
                self._projections.pop(event.run_id, None)
            return  # not a chat's run (the gateway's, say)
        if event.seq > projection.last_seq + 1:
            await self._catch_up(event, projection)
        self._apply(projection, event)
        if event.event in ("messages", "custom"):
            await self._partial(event.run_id, projection)
        elif event.event == "end":
            await self._final(event, projection)
            # Forgotten only once the final is out: a send that failed (CHAT_OUT's node down) comes
            # again with what was collected, not with what the log can still be read for.
            self._projections.pop(event.run_id, None)
            self._finished[event.run_id] = None
            while len(self._finished) > FINISHED_KEPT:
                self._finished.popitem(last=False)

    async def _partial(self, run_id: str, projection: RunReply) -> None:
        now = time.monotonic()
        text = "\n\n".join(part for part in (projection.answer(), projection.progress()) if part)
        if not text or text == projection.sent_text:
            return
        if now - projection.last_sent < self.config.channels.stream_update_seconds:
            return
        projection.last_sent = now
        projection.sent_text = text
        projection.seq += 1
        await self._send(run_id, projection, "partial", text, msg_id=None)

    async def _final(self, event: RunEvent, projection: RunReply) -> None:
        status = (event.data or {}).get("status") if isinstance(event.data, dict) else None
        kind: str = "final"
        files: list[FileRef] = []
        if projection.error is not None or status == "error":
            kind = "error"
            text = f"Sorry, I could not finish that: {projection.error or 'the run failed'}"
        elif status in ("interrupted", "timeout"):
            kind = "error"
            text = (
                "I stopped before finishing." if status == "interrupted" else "That took too long; I stopped."
            )
        elif projection.clarification is not None:
            kind, text = "clarification", projection.clarification
        else:
            text = projection.answer(event.attempt) or "(no answer)"
            goal = (event.data or {}).get("goal") if isinstance(event.data, dict) else None
            if isinstance(goal, dict):  # goal mode: a status while it goes on, the answer once at the end
                kind, text = goal_reply(goal, text)
            user_id = f"{projection.origin.channel}:{projection.origin.user_id}"
            files = [
                FileRef(
                    name=path.rsplit("/", 1)[-1],
                    path=path,
                    object_name=output_key(user_id, projection.thread_id, output_relative(path) or ""),
                )
                for path in projection.files
            ]
        projection.seq += 1
        await self._send(event.run_id, projection, kind, text, msg_id=f"reply:{event.run_id}", files=files)
        # Only once it is out: a final whose send failed (or was given up in an outage) is still due,
        # and its `end` comes again; the thread's next final, arriving meanwhile, waits for it.
        self.finals.sent(projection.thread_id, event.run_id)

    async def _send(
        self,
        run_id: str,
        projection: RunReply,
        kind: str,
        text: str,
        *,
        msg_id: str | None,
        files: list[FileRef] | None = None,
    ) -> None:
        origin = projection.origin
        out = OutboundMessage(
            channel=origin.channel,
            chat_id=origin.chat_id,
            topic_id=origin.topic_id,
            reply_to=origin.message_id,
            thread_id=projection.thread_id,
            run_id=run_id,
            kind=kind,  # type: ignore[arg-type]
            text=text,
            seq=projection.seq,
            files=files or [],
            metadata=origin.platform,
        )
        await self.bus.publish(self.bus.subjects.chat_out(origin.channel), out, msg_id=msg_id)


def projection_consumer(
    bus: Bus, projection: ReplyProjection, partition: int, start_seq: int | None
) -> Consumer[RunEvent]:
    """One partition's chat runs' events: a run's in order, runs side by side; from `start_seq` (where
    the partition's last owner left off), or only new ones for a partition never consumed."""
    s = bus.subjects
    return Consumer(
        bus,
        stream=s.run_events_stream,
        durable=f"router-ev-{partition}",
        filter_subjects=[s.run_events_partition(partition)],
        model=RunEvent,
        handler=projection.on_event,
        # A thread's events one at a time, in stream order: its runs' finals go out in the order
        # their `end`s were stored, also when a router taking the partition over replays them.
        key=lambda event: event.thread_id,
        concurrency=32,
        max_ack_pending=512,
        # Deferred finals are deliveries too: room for FINAL_ORDER_WAIT's worth besides failures.
        max_deliver=bus.config.max_deliver + int(FINAL_ORDER_WAIT / FINAL_RETRY) + 1,
        deliver_policy=DeliverPolicy.NEW,
        spans=False,  # a span per event would bury the run's; the replies it sends carry its trace on
        start_seq=start_seq,
    )
