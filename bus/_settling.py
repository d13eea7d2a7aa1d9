"""How a `Consumer` settles a message its handler did not finish: again later with backoff, or into
the DLQ (stored there, told to `on_dead_letter`, then terminated), or back to the server at once
(released). A base of `bus.consumer.Consumer`, kept apart so that each module reads in one sitting."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable

from nats.aio.msg import Msg

from bus.connection import Bus
from bus.consumer_state import ConsumerStats
from bus.delivery import Retry
from bus.dlq import dead_letter
from bus.metrics import DEAD_LETTERS, dead_letter_reason

log = logging.getLogger("bus.consumer")  # the consumer's log lines, under the name they always had


def _times(count: int) -> str:
    """`once`, `2 times`: a dead letter's reason is read by people (and told to a run's chat)."""
    return "once" if count == 1 else f"{count} times"


class Settling:
    """Settling a message, for `Consumer` (which sets these attributes)."""

    bus: Bus
    stream: str
    durable: str
    stats: ConsumerStats
    max_deliver: int
    backoff: tuple[float, ...]
    on_dead_letter: Callable[[Msg, str], Awaitable[None]] | None

    @property
    def name(self) -> str:
        return f"{self.stream}/{self.durable}"

    async def _failed(self, msg: Msg, exc: Exception, delivered: int, seq: int) -> float | None:
        """Settle a message its handler failed on: handed out again after a backoff (returned, in
        seconds), or dead-lettered once it has failed `max_deliver` times (None)."""
        what = exc.reason if isinstance(exc, Retry) else f"{type(exc).__name__}: {exc}"
        self.stats.errors = [*self.stats.errors[-9:], what]
        if delivered >= self.max_deliver:
            await self._dead_letter(msg, f"failed {_times(delivered)}; last error: {what}", delivered, seq)
            return None
        delay = exc.delay if isinstance(exc, Retry) and exc.delay is not None else None
        if delay is None:
            delay = self.backoff[min(delivered - 1, len(self.backoff) - 1)]
        log.warning(
            "consumer %s: delivery %d/%d of seq %d failed (%s); retrying in %.1fs",
            self.name,
            delivered,
            self.max_deliver,
            seq,
            what,
            delay,
            exc_info=not isinstance(exc, Retry),
        )
        await msg.nak(delay=delay)
        self.stats.retried += 1
        return delay

    async def _dead_letter(self, msg: Msg, reason: str, delivered: int, seq: int) -> None:
        try:
            await dead_letter(
                self.bus,
                stream=self.stream,
                stream_seq=seq,
                subject=msg.subject,
                data=msg.data,
                headers=msg.headers,
                consumer=self.durable,
                reason=reason,
                deliveries=delivered,
            )
        except Exception:
            # Not stored in the DLQ: keep the message where it is rather than lose it.
            log.exception("consumer %s: DLQ publish failed; leaving seq %d for redelivery", self.name, seq)
            await msg.nak(delay=self.backoff[-1])
            return
        if not await self._told_dead(msg, reason, seq):
            return
        await msg.term()
        self.stats.dead_lettered += 1
        DEAD_LETTERS.labels(self.stream, self.durable, dead_letter_reason(reason)).inc()

    async def _told_dead(self, msg: Msg, reason: str, seq: int) -> bool:
        """Tell `on_dead_letter` before the message is terminated; False: it failed, and the message
        comes again (past `max_deliver`, so it is dead-lettered again, the DLQ copy deduplicated) to be
        told again. Whoever waits for the message's outcome (a run's followers) is not left waiting
        because this process died, or the bus failed, between the two. After `max_deliver` more
        deliveries it is terminated anyway."""
        if self.on_dead_letter is None:
            return True
        try:
            await self.on_dead_letter(msg, reason)
        except Exception:
            delivered = msg.metadata.num_delivered or 1
            if delivered < 2 * self.max_deliver:
                log.exception(
                    "consumer %s: on_dead_letter failed for seq %d; told again later", self.name, seq
                )
                await msg.nak(delay=self.backoff[-1])
                return False
            log.exception("consumer %s: on_dead_letter failed for seq %d, again; giving up", self.name, seq)
        return True

    async def _release(self, msg: Msg) -> None:
        with contextlib.suppress(Exception):
            await msg.nak()
        self.stats.released += 1
