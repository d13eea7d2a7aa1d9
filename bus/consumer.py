"""The consumer runtime every component uses to take work from a JetStream stream.

A `Consumer` binds a durable pull consumer (shared by every process that runs
the same component), runs up to `concurrency` handlers at once, and settles
each message by what its handler did:

- returned normally        -> ack (only now: the effect is done)
- raised `Reject(reason)`  -> dead-letter now, never retried (bad input)
- raised `Defer(delay)`    -> not yet: delivered again after `delay` (not a failure)
- raised `AfterEarlier(seq)` (keyed) -> an earlier message of its key is due first: it waits here,
                              holding no slot, until that one has come and been handled, then
                              is handled again (no redelivery)
- raised anything else     -> nak with backoff, until the last allowed
                              delivery, which is dead-lettered with the error
- payload not valid JSON / not the envelope -> dead-letter now

While a handler runs, `in_progress` heartbeats keep the server from
redelivering it. A process that dies mid-message simply never acks: the server
redelivers to another process of the same durable after `ack_wait`. The server
itself never gives up on a message (its max_deliver is unlimited), so a
message whose handlers keep dying is not stranded: the first delivery past
`max_deliver` is dead-lettered by whichever instance receives it. Whatever the
reason for a dead letter, `on_dead_letter` is told before the message is
terminated, so whoever waits for its outcome hears of it (the runner ends the run).

A handler whose message the server may have handed to another process — the
connection was down for long enough that `in_progress` heartbeats missed
`ack_wait` — is cancelled when the connection comes back, and its message is
left alone (not acked, not released): that other delivery owns it now. A
handler may also raise `Abandon` when it finds out itself. In a keyed consumer
the key's later messages wait for the ones given up to come again (`bus._turns`):
those come only after the server's ack wait, a later one published meanwhile at once.

A handler that must wait before it can go on (a platform's rate limit) waits
with `Delivery.wait_out` (`bus.delivery`): it holds no slot meanwhile, and if
the consumer stops the message goes back to the server, at once or for the
rest of the wait (nak with delay), once no pull request is open any more.

Messages come through `bus._pull.Puller`: a pull request for as many messages
as there are free slots is open whenever a slot is free, and each message is
handed to its handler the moment it arrives (never held for a fetch window).

`stop()` drains: no new pull requests; in-flight handlers finish (up to a
timeout), and whatever cannot finish is released (nak) for immediate
redelivery; messages that were already on their way when it stopped are
released last (they came after the in-flight ones).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from nats.aio.msg import Msg
from nats.errors import ConnectionClosedError
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from pydantic import BaseModel

from bus import tracing
from bus._pull import Puller
from bus._settling import Settling, _times
from bus._turns import KeyTurn, KeyTurns
from bus.capacity import Capacity
from bus.connection import Bus
from bus.consumer_state import ConsumerState, ConsumerStats
from bus.delivery import Abandon, AfterEarlier, Defer, Delivery, Reject, Retry
from bus.errors import EnvelopeError
from bus.messages import decode
from bus.metrics import CONSUMER_IN_FLIGHT
from bus.tasks import cancel_and_wait

__all__ = [
    "DEFAULT_BACKOFF",
    "Abandon",
    "AfterEarlier",
    "Consumer",
    "ConsumerState",
    "ConsumerStats",
    "Defer",
    "Delivery",
    "Handler",
    "Reject",
    "Retry",
]

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

DEFAULT_BACKOFF: tuple[float, ...] = (0.5, 2.0, 5.0, 15.0, 30.0)
# How long a pull request lives on the server. Not a latency: a message is handed on as it arrives;
# this only bounds how long a request the server lost goes unnoticed (outages also end it at once).
_FETCH_WAIT = 5.0
CAPACITY_STEP = 8  # messages asked for at a time by a consumer with a `capacity`
# A message given up in an outage comes again within an ack wait or so of the server's return; its
# key's later messages wait for it this many ack waits at most (it may have gone to another process).
# A server back from a power cut on a loaded machine took over 3 (a chat's next answer overtook it).
_HOLD_ACK_WAITS = 5


Handler = Callable[[M, Delivery], Awaitable[None]]


class Consumer(Settling, Generic[M]):
    """A durable pull consumer with bounded concurrency, retries, DLQ and graceful drain.

    Args:
        bus: the connection.
        stream: stream name (e.g. `bus.subjects.runs_stream`).
        durable: consumer name shared by every process of the component.
        filter_subjects: subjects (patterns) of the stream this consumer takes.
        model: envelope class the payload must validate as.
        handler: `async (message, delivery) -> None`.
        concurrency: most handlers running at once in this process.
        max_deliver: deliveries before the message is dead-lettered (default: bus config).
        ack_wait: seconds before an un-acked, silent message is redelivered (default: bus config).
        backoff: nak delays by delivery number; the last value repeats.
        drain_timeout: how long `stop()` lets in-flight handlers finish.
        deliver_policy: where a new durable starts (ALL for work queues; NEW for projections).
        start_seq: a new durable starts at this stream sequence (overrides `deliver_policy`).
        max_ack_pending: messages out at once across all processes of the durable (1: strict order).
        on_invalid: `async (msg, error) -> None`, told about a payload that is not a valid `model`
            before it is dead-lettered (to answer whoever waits for it); its failures are logged.
        on_dead_letter: `async (msg, reason) -> None`, told about every message this consumer
            dead-letters, for whatever reason (to answer whoever waits for it), once it is in the DLQ
            and before it is terminated: if it raises, the message comes again and it is told again
            (so it must be safe to repeat; a process racing this one may be told at the same time).
        key: `(message) -> str`; messages with the same key are handled one at a time, in the
            order this process received them (a run's events, a chat's messages), while messages
            with other keys go on concurrently (a message waiting for its key's turn holds no slot).
            A message retried after a failure comes back later.
        spans: whether each message is handled in a `process` span when tracing is on (`bus.tracing`);
            False for many small messages (a run's events): they still carry their trace on.
        capacity: a `bus.capacity.Capacity`: while a handler is busy, more messages are taken only
            while it admits them, and at most `CAPACITY_STEP` per request, so processes sharing
            the durable take a burst in turns; `concurrency` is then only a ceiling.
    """

    def __init__(
        self,
        bus: Bus,
        *,
        stream: str,
        durable: str,
        filter_subjects: Sequence[str],
        model: type[M],
        handler: Handler[M],
        concurrency: int = 16,
        max_deliver: int | None = None,
        ack_wait: float | None = None,
        backoff: Sequence[float] = DEFAULT_BACKOFF,
        drain_timeout: float = 30.0,
        deliver_policy: DeliverPolicy = DeliverPolicy.ALL,
        max_ack_pending: int | None = None,
        on_invalid: Callable[[Msg, EnvelopeError], Awaitable[None]] | None = None,
        on_dead_letter: Callable[[Msg, str], Awaitable[None]] | None = None,
        key: Callable[[M], str] | None = None,
        spans: bool = True,
        start_seq: int | None = None,
        capacity: Capacity | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.bus = bus
        self.stream = stream
        self.durable = durable
        self.filter_subjects = list(filter_subjects)
        self.model = model
        self.handler = handler
        self.concurrency = concurrency
        self.max_deliver = max_deliver or bus.config.max_deliver
        self.ack_wait = ack_wait or bus.config.ack_wait_seconds
        self.backoff = tuple(backoff) or DEFAULT_BACKOFF
        self.drain_timeout = drain_timeout
        self.deliver_policy = deliver_policy
        self.max_ack_pending = max_ack_pending or max(concurrency * 4, 64)
        self.on_invalid = on_invalid
        self.on_dead_letter = on_dead_letter
        self.key = key
        self.start_seq = start_seq
        self.capacity = capacity
        if capacity is not None:
            capacity.listen(self._wake)  # room again: ask for more, even if no handler ended
        self._turns = KeyTurns()
        self.stats = ConsumerStats()
        self._in_flight = CONSUMER_IN_FLIGHT.labels(durable)
        self.spans = spans
        self._client = bus.client_name
        self._puller: Puller | None = None
        self._inflight: set[asyncio.Task[None]] = set()
        self._arrival: dict[asyncio.Task[None], int] = {}  # in-flight handlers by arrival
        self._arrivals = 0
        self._waiting: set[asyncio.Task[None]] = set()  # in flight, but yielded their slot
        self.state = ConsumerState.NEW
        self._stopped = asyncio.Event()  # told to handlers that wait (`Delivery.wait_out`)
        self._unstarted: list[Msg] = []  # fetched as the consumer stopped
        self._stale: set[asyncio.Task[None]] = set()  # cancelled after an outage: leave their messages
        self._keyed: dict[asyncio.Task[None], tuple[str, int]] = {}  # in flight: (key, stream seq)
        self._stoppers: set[asyncio.Task[None]] = set()
        self._unlisten: Callable[[], None] = lambda: None

    async def start(self) -> None:
        """Create or update the durable, bind to it and begin fetching."""
        js = self.bus.js
        config = ConsumerConfig(
            name=self.durable,
            durable_name=self.durable,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=self.ack_wait,
            max_deliver=-1,  # we count deliveries ourselves; see the module docstring
            max_ack_pending=self.max_ack_pending,
            deliver_policy=self.deliver_policy,
        )
        if self.start_seq is not None:
            config.deliver_policy = DeliverPolicy.BY_START_SEQUENCE
            config.opt_start_seq = self.start_seq
        if len(self.filter_subjects) == 1:
            config.filter_subject = self.filter_subjects[0]
        else:
            config.filter_subjects = self.filter_subjects
        # A cluster node down as this starts: wait for the stream's new leader rather than fail.
        await self.bus.while_unavailable(
            f"consumer {self.name}", lambda: js.add_consumer(self.stream, config)
        )
        self._stopped = asyncio.Event()
        self.state = ConsumerState.RUNNING
        self._puller = Puller(
            self.bus.nc,
            f"{js._prefix}.CONSUMER.MSG.NEXT.{self.stream}.{self.durable}",
            self._arrived,
            self._free,
            _FETCH_WAIT,
            self.name,
        )
        self._unlisten = self.bus.on_reconnected(self._after_outage)
        if self.capacity is not None:
            self.capacity.start()
        await self._puller.start()
        log.info("consumer %s started (concurrency %d)", self.name, self.concurrency)

    async def stop(self, timeout: float | None = None) -> None:
        """Drain: stop fetching, let in-flight handlers finish, release the rest. Idempotent."""
        if self.state is not ConsumerState.RUNNING or self._puller is None:
            return
        self.state = ConsumerState.STOPPING
        self._unlisten()
        puller, self._puller = self._puller, None
        await puller.stop()  # no request open any more; what was on its way waits in `_unstarted`
        # Only now are waiting handlers told: a message they give back while a pull is still open
        # would come straight back to it, behind the ones given back after it.
        self._stopped.set()
        if self._inflight:
            log.info("consumer %s: waiting for %d in-flight message(s)", self.name, len(self._inflight))
            _, pending = await asyncio.wait(self._inflight, timeout=timeout or self.drain_timeout)
            # In arrival order: _process naks (releases) a cancelled message, and the server hands
            # released messages out again in the order they came back (a set's order is none).
            for task in sorted(pending, key=lambda t: self._arrival.get(t, 0)):
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
        unstarted, self._unstarted = self._unstarted, []
        for msg in unstarted:
            await self._release(msg)
        if self.capacity is not None:
            self.capacity.stop()
        self.state = ConsumerState.STOPPED
        log.info("consumer %s stopped", self.name)

    async def __aenter__(self) -> Consumer[M]:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ fetching

    def _free(self) -> int:
        free = self.concurrency - len(self._inflight) + len(self._waiting)
        if self.capacity is None or free <= 0:
            return free
        if len(self._inflight) > len(self._waiting) and not self.capacity.admits():
            return 0  # asked again when a handler ends or yields
        return min(free, CAPACITY_STEP)

    async def _arrived(self, msg: Msg) -> None:
        if self.state is not ConsumerState.RUNNING:  # released after the in-flight ones, which came before it
            self._unstarted.append(msg)
            return
        task = asyncio.create_task(self._process(msg))
        self._inflight.add(task)
        self._arrivals += 1
        self._arrival[task] = self._arrivals
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._inflight.discard(task)
        self._keyed.pop(task, None)
        self._arrival.pop(task, None)
        self._waiting.discard(task)
        self._wake()

    def _wake(self) -> None:
        if self._puller is not None:
            self._puller.slot_free.set()

    def _yield_slot(self) -> None:
        task = asyncio.current_task()
        if task is not None and task in self._inflight and task not in self._waiting:
            self._waiting.add(task)
            self._wake()

    def _take_slot(self) -> None:
        """A handler that waited for its turn works now: it counts against concurrency again."""
        task = asyncio.current_task()
        if task is not None:
            self._waiting.discard(task)

    # ------------------------------------------------------------------ settling

    async def _process(self, msg: Msg) -> None:
        meta = msg.metadata
        delivered = meta.num_delivered or 1
        seq = meta.sequence.stream if meta.sequence else 0
        self.stats.in_flight += 1
        self._in_flight.inc()
        try:
            if delivered > self.max_deliver:
                # Earlier deliveries were never settled: their processes died or hung.
                reason = (
                    f"delivered {_times(delivered - 1)} without being settled "
                    f"(the handling process died or exceeded ack_wait={self.ack_wait:g}s)"
                )
                await self._dead_letter(msg, reason, delivered - 1, seq)
                return
            try:
                payload = decode(self.model, msg.data)
            except EnvelopeError as exc:
                if self.on_invalid is not None:
                    try:
                        await self.on_invalid(msg, exc)
                    except Exception:
                        log.exception("consumer %s: on_invalid failed for seq %d", self.name, seq)
                await self._dead_letter(msg, f"bad input: {exc}", delivered, seq)
                return
            delivery = Delivery(
                msg, msg.subject, dict(msg.headers or {}), delivered, seq, self._yield_slot, self._stopped
            )
            heartbeat = asyncio.create_task(self._heartbeat(msg))
            key = self.key(payload) if self.key is not None else None
            turn = None
            has_turn = False
            try:
                while True:
                    if key is not None:
                        turn = await self._take_turn(key, seq)
                        if turn is None:  # stopping while it waited for an earlier message of its key
                            await self._release(msg)
                            return
                        has_turn = True
                        # (the turn counts its holder and those waiting for it)
                        delivery._behind = lambda turn=turn: max(0, turn.users - 1)  # type: ignore[misc]
                    try:
                        with tracing.consuming(
                            msg.headers, msg.subject, self.durable, self._client, span=self.spans
                        ):
                            await self.handler(payload, delivery)
                    except AfterEarlier as exc:
                        if turn is None:
                            raise
                        # It waits here for that one (as for one given up in an outage), then goes again.
                        self._turns.hold(turn.name, exc.seq, self.ack_wait * _HOLD_ACK_WAITS)
                        self._turns.leave(turn, has_turn)
                        turn, has_turn = None, False
                        continue
                    break
            except Reject as exc:
                await self._dead_letter(msg, f"rejected: {exc.reason}", delivered, seq)
            except Abandon as exc:
                log.warning("consumer %s: leaving seq %d to its newer delivery (%s)", self.name, seq, exc)
                self.stats.abandoned += 1
            except Defer as exc:
                await msg.nak(delay=exc.delay)
                self.stats.deferred += 1
            except asyncio.CancelledError:
                if asyncio.current_task() in self._stale:
                    self.stats.abandoned += 1
                    raise
                await self._release(msg)
                raise
            except Exception as exc:
                retry_in = await self._failed(msg, exc, delivered, seq)
                if key is not None:
                    self._hold_failed(key, seq, retry_in)
            else:
                await msg.ack()
                self.stats.acked += 1
            finally:
                heartbeat.cancel()
                if turn is not None:
                    self._turns.leave(turn, has_turn)
        except asyncio.CancelledError:
            raise
        except Exception:  # settling itself failed (connection lost): the server will redeliver
            log.exception("consumer %s: could not settle message seq %d", self.name, seq)
        finally:
            self.stats.in_flight -= 1
            self._in_flight.dec()

    def _hold_failed(self, key: str, seq: int, retry_in: float | None) -> None:
        """A keyed message its handler failed on comes again in `retry_in` seconds: its key's later
        messages wait for it (a chat's next message must not become a run before it), at most an
        `ack_wait` or so past that (it may go to another process). Dead-lettered (None): they go on."""
        if retry_in is None:
            self._turns.arrived(key, seq)  # (it was held in an earlier failure: no longer)
        else:
            self._turns.hold(key, seq, retry_in + self.ack_wait * _HOLD_ACK_WAITS)

    async def _take_turn(self, key: str, seq: int) -> KeyTurn | None:
        """The key's turn for message `seq`, its lock held; None if the consumer stopped meanwhile.

        Waiting for a turn is not work: it holds no slot, so one busy key never keeps the others
        waiting. One of its key handled before it may fail, or be found due first, while it waits for
        the lock: then it waits for that one (`_hold_failed`, `AfterEarlier`), as for one given up.
        """
        while True:
            turn = await self._turn(key, seq)
            if turn is None:
                return None
            if turn.lock.locked():
                self._yield_slot()
            await turn.lock.acquire()
            if not self._turns.must_wait(key, seq):
                self._turns.arrived(key, seq)  # (held meanwhile by a later one that found it due)
                self._take_slot()
                return turn
            self._turns.leave(turn, True)
            self._yield_slot()

    async def _turn(self, key: str, seq: int) -> KeyTurn | None:
        """Counted in for `key`'s turn (the lock is the caller's to acquire); None if the consumer
        stopped while the message waited for an earlier one of its key given up in an outage.

        No await before `enter` for a key nobody waits on: tasks reach it in the order messages
        arrived, and the lock hands turns out first come, first served.
        """
        task = asyncio.current_task()
        if task is not None:
            self._keyed[task] = (key, seq)
        if self._turns.must_wait(key, seq):
            self._yield_slot()
            if not await self._turns.wait_for_earlier(key, seq, self._stopped):
                return None
        turn = self._turns.enter(key)
        self._turns.arrived(key, seq)
        return turn

    def _after_outage(self, outage: float) -> None:
        """Back after `outage` seconds: messages whose heartbeats may have missed `ack_wait` can have
        been delivered again (to this process or another); stop handling them here."""
        if self._puller is not None:
            self._puller.lost()
        if outage < self.ack_wait / 2 or not self._inflight:
            return
        log.warning(
            "consumer %s: NATS was away %.1fs (ack_wait %gs); abandoning %d in-flight message(s) "
            "that may have been delivered again",
            self.name,
            outage,
            self.ack_wait,
            len(self._inflight),
        )
        for task in list(self._inflight):
            if task in self._keyed:  # its key's later messages wait for it to come again
                key, seq = self._keyed[task]
                self._turns.hold(key, seq, self.ack_wait * _HOLD_ACK_WAITS)
            self._stale.add(task)
            task.add_done_callback(self._stale.discard)
            stopper = asyncio.create_task(cancel_and_wait(task, every=0.1))
            self._stoppers.add(stopper)
            stopper.add_done_callback(self._stoppers.discard)

    async def _heartbeat(self, msg: Msg) -> None:
        interval = max(self.ack_wait / 3, 0.05)
        with contextlib.suppress(asyncio.CancelledError, ConnectionClosedError):
            while True:
                await asyncio.sleep(interval)
                await msg.in_progress()
