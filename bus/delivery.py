"""What a consumer's handler is given and may raise: the `Delivery` of its message, and the
control exceptions that decide how the message is settled (`bus.consumer` settles it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from nats.aio.msg import Msg

from bus.tasks import wait_for


class Reject(Exception):
    """Raise from a handler: the message is bad input; dead-letter it, do not retry."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class Abandon(Exception):
    """Raise from a handler: another delivery of this message owns the work now; leave it unsettled."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class Defer(Exception):
    """Raise from a handler: not yet; deliver this message again after `delay` seconds.

    Not a failure (nothing is logged as one), but the redelivery is a delivery:
    a consumer whose handler defers gives its messages `max_deliver` to spare.
    """

    def __init__(self, delay: float) -> None:
        self.delay = max(0.0, delay)
        super().__init__(f"deferred {self.delay:g}s")


class AfterEarlier(Exception):
    """Raise from a keyed consumer's handler: an earlier message of the key (stream sequence `seq`)
    has not been handled and is on its way again (lost on the way when the server went away, say).
    The message waits here, holding no slot, for that one to come and be handled first (or for an
    ack wait or so, if it went elsewhere), then is handled again: no redelivery, no delivery counted."""

    def __init__(self, seq: int) -> None:
        self.seq = seq
        super().__init__(f"after seq {seq}")


class Retry(Exception):
    """Raise from a handler: a transient failure; redeliver after `delay` seconds."""

    def __init__(self, reason: str = "retry requested", delay: float | None = None) -> None:
        self.reason = reason
        self.delay = delay
        super().__init__(reason)


@dataclass
class Delivery:
    """What a handler may want besides the payload: where and how often it came."""

    msg: Msg
    subject: str
    headers: dict[str, str]
    num_delivered: int
    stream_seq: int

    _yield: Callable[[], None] = field(default=lambda: None, repr=False)  # the consumer's act
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    # Messages of the same key handed to this process after this one, waiting for its turn.
    _behind: Callable[[], int] = field(default=lambda: 0, repr=False)

    async def queued_behind(self) -> int:
        """How many later messages of this one's key (a keyed consumer's) have already reached this
        process and wait for their turn behind it: 0 for an unkeyed consumer. They are handled right
        after it, so a handler may leave to them what only the newest state needs (a chat reply's
        progress edit, when the run's next event is already here). Messages that came in the same
        read as this one line up first (one pass of the event loop)."""
        await asyncio.sleep(0)
        return self._behind()

    async def in_progress(self) -> None:
        """Tell the server this message is still being worked on (resets ack_wait)."""
        await self.msg.in_progress()

    def yield_slot(self) -> None:
        """Stop counting this handler against the consumer's concurrency (it is only waiting).

        A handler that waits for something another message will cause (a run queued
        behind a busy thread) must not hold a slot that message needs. The slot is taken
        back by the consumer itself when the handler works again (a key's turn) or ends.
        """
        self._yield()

    async def wait_out(self, seconds: float, *, release: bool = False) -> None:
        """Wait `seconds` before going on, holding no slot (the handler is only waiting).

        If the consumer stops meanwhile, raises `Defer`: with `release` the message goes back to the
        server at once (redelivered before newer messages, in the order given back: the handler keeps
        what it waits for where the next delivery finds it); otherwise for the rest of the wait (the
        server holds it). Either way a stop does not sit out the wait.
        """
        self.yield_slot()
        loop = asyncio.get_running_loop()
        until = loop.time() + max(0.0, seconds)
        if not self.stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await wait_for(self.stopping.wait(), max(0.0, seconds))
        if self.stopping.is_set():
            raise Defer(0.0 if release else until - loop.time())
