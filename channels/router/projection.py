"""Run events back as chat replies: the router's projection consumer.

For runs started from a chat (their run record's metadata has an `origin`),
each run's events, in order, become throttled partial replies while the
answer streams, then one final reply (text, presented files, a clarification
question, or a readable error) on `<prefix>.chat.out.<channel>`. A partial is
left out when more of the thread's events are already waiting in this process
(the router is behind: a burst, a partition just taken over): a run whose `end`
is among them gets its answer once, as the final. A reply is
built only from its own run's events (`run_reply.RunReply`): by the time a run's `end` is handled,
the chat's next run may already have changed the thread. The final reply is
deduplicated by run id; a router that missed some of a run's events (restarted
mid-run, or another router process took them) reads them back from the log
and delivers it once.
"""

from __future__ import annotations

import collections
import logging
import time

from nats.js.api import DeliverPolicy

from bus import Bus, Consumer, Defer, Delivery
from bus.files import output_key
from bus.layout import output_relative
from bus.messages import ChatButton, ChatOrigin, FileRef, OutboundMessage, RunEvent, RunRecord
from bus.records import RecordStore
from bus.runs import follow_run
from channels.router.commands.goal import reply_for as goal_reply
from channels.router.ordering import FINAL_ORDER_WAIT, FINISHED_KEPT, FinalsInOrder, RecentOrigins
from channels.router.run_reply import RunReply
from config import AppConfig

log = logging.getLogger(__name__)

STEERED_NOTE = "Got it: I am taking that into the answer I am working on."
# A message steered in while the run waits for an approval: the answer to it takes it along.
STEERED_WAITING_NOTE = "Got it: I will take that in once the request above is answered."
FINAL_RETRY = 1.0  # seconds before a final that waits for an earlier one is looked at again


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
        elif event.event == "approval":
            projection.approval(event.data)
        elif event.event == "steered" and isinstance(event.data, dict):
            projection.steered_into = str(event.data.get("run_id") or "") or None
            projection.steered_waiting = bool(event.data.get("waiting"))
        elif event.event == "error":
            data = event.data if isinstance(event.data, dict) else {}
            projection.error = str(data.get("message") or data.get("error") or "unknown error")

    async def on_event(self, event: RunEvent, delivery: Delivery) -> None:
        steered = self._projections.get(event.run_id)
        if steered is not None and steered.steered_into:
            pass  # a steering message's note goes out at once, not after the answer it joined
        elif event.event == "end" and self.finals.must_wait(event.thread_id, event.run_id):
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
            # More of the thread's events are already here (the run's `end`, under load its next
            # text): they are handled next, and the reply shows the newest text once, not a partial
            # the final replaces a moment later.
            if delivery is None or not await delivery.queued_behind():
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
        buttons: list[ChatButton] = []
        if projection.error is not None or status == "error":
            kind = "error"
            text = f"Sorry, I could not finish that: {projection.error or 'the run failed'}"
        elif status in ("interrupted", "timeout"):
            kind = "error"
            text = (
                "I stopped before finishing." if status == "interrupted" else "That took too long; I stopped."
            )
        elif projection.steered_into:  # its message joined the running answer, which says the rest
            kind, text = "command", STEERED_WAITING_NOTE if projection.steered_waiting else STEERED_NOTE
        elif projection.clarification is not None:
            kind, text = "clarification", projection.clarification
        elif projection.approvals:  # the run waits for a person's yes: what, and how to answer
            answer = projection.answer(event.attempt)
            kind, text = "clarification", "\n\n".join(p for p in (answer, projection.approval_text()) if p)
            buttons = projection.approval_buttons()
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
        await self._send(
            event.run_id, projection, kind, text, msg_id=f"reply:{event.run_id}", files=files, buttons=buttons
        )
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
        buttons: list[ChatButton] | None = None,
    ) -> None:
        out = OutboundMessage.answering(
            projection.origin,
            thread_id=projection.thread_id,
            run_id=run_id,
            kind=kind,
            text=text,
            seq=projection.seq,
            files=files or [],
            buttons=buttons or [],
        )
        await self.bus.publish(self.bus.subjects.chat_out(out.channel), out, msg_id=msg_id)


def projection_consumer(
    bus: Bus, projection: ReplyProjection, partition: int, stream: str, start_seq: int | None
) -> Consumer[RunEvent]:
    """One partition's chat runs' events in `stream` (its `RUN_EVENTS_<k>`, or the single
    `RUN_EVENTS` of before the split while it is there): a run's in order, runs side by side; from
    `start_seq` (where the partition's last owner left off), or only new ones for a partition never
    consumed."""
    s = bus.subjects
    return Consumer(
        bus,
        stream=stream,
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
