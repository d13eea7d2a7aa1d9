"""Pull requests for one durable, each message handed on the moment it arrives.

Why not nats-py's `fetch(batch, timeout)`: a fetch returns a *list*, and in one
of its paths (its first, `no_wait` request answered with a status such as
"408 Requests Pending", which happens whenever another pull request of the
same durable — another process's, or an orphan of our own last fetch — is
waiting on the server) it sends a second, lingering request and, once the
first message of that request has come, waits for the rest of the batch until
the request expires. The message it already holds waits with it: up to the
whole fetch window (nats-io/nats.py#933, #986). That was the up-to-1-s gap
between a run request being stored and the runner's handler starting.

Here a message is never held: the inbox subscription's callback hands each
one to the consumer as it arrives. At most one pull request is open at a time,
for as many messages as the consumer has free slots; it ends when the server
has delivered the whole batch or says it is over (a status on the request's
own reply subject: 408 expired, 404/409 …), and the next one is sent at once
if a slot is free. So while a slot is free a request is open and a stored
message is delivered the moment the server has it; the window only bounds how
long a request the server has lost (across an outage) goes unnoticed.

`stop()` strands nothing: it sends no more requests, then drains the inbox
subscription (UNSUB, a round trip, then the messages that were already on
their way); those are handed on too, and the consumer releases them. A request
still open on the server after the UNSUB would take the first message released
after it (the server tries it, finds nobody listening, and puts that message
back *behind* the others released meanwhile: one chat's replies would come
again out of order). The server drops requests nobody listens to when it is
asked for the consumer's info, so `stop()` asks once if a request was open.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import ConnectionClosedError

from bus.tasks import wait_for

log = logging.getLogger(__name__)

_STATUS = "Status"
_HEARTBEAT = "100"
_OVER = ("404", "408")  # no messages / request expired: a request's normal ends
_GRACE = 2.0  # a request the server has not ended this long after it expired was lost


class Puller:
    """One durable's pull loop: requests `free()` messages whenever none is open and a slot is free.

    Args:
        nc: the connection.
        next_subject: the durable's `$JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>`.
        deliver: `async (msg) -> None`, called for each message in the order they arrive; must not block.
        free: how many more messages the consumer can take now.
        window: seconds a pull request lives on the server.
        name: for logs.
    """

    def __init__(
        self,
        nc: Client,
        next_subject: str,
        deliver: Callable[[Msg], Awaitable[None]],
        free: Callable[[], int],
        window: float,
        name: str,
    ) -> None:
        self.nc = nc
        self.next_subject = next_subject
        self.info_subject = next_subject.replace(".CONSUMER.MSG.NEXT.", ".CONSUMER.INFO.", 1)
        self.deliver = deliver
        self.free = free
        self.window = window
        self.name = name
        self.slot_free = asyncio.Event()  # set by the consumer when a slot may have come free
        self._sub: Subscription | None = None
        self._inbox = ""
        self._seq = 0
        self._reply = ""  # the open request's reply subject; "" when none is open
        self._remaining = 0
        self._expires = 0.0  # monotonic time by which the server must have ended the open request
        self._ended = asyncio.Event()
        self._failed = False
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._inbox = self.nc.new_inbox()
        self._sub = await self.nc.subscribe(f"{self._inbox}.*", cb=self._on_msg)
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name=f"pull:{self.name}")

    async def stop(self) -> None:
        """No more requests; whatever the server already sent is handed on before this returns."""
        self._stopping = True
        self.slot_free.set()
        self._ended.set()
        if self._task is not None:
            await self._task
            self._task = None
        was_open = bool(self._reply)
        if self._sub is not None:
            sub, self._sub = self._sub, None
            with contextlib.suppress(Exception):
                await sub.drain()  # type: ignore[no-untyped-call]  # nats-py leaves Subscription.drain unannotated
        if was_open:  # make the server forget it before anything is released (see the module's doc)
            with contextlib.suppress(Exception):
                await self.nc.request(self.info_subject, b"", timeout=_GRACE)

    def lost(self) -> None:
        """The connection was away: the server may have forgotten the open request; send another."""
        self._close()

    # ------------------------------------------------------------------ requests

    async def _run(self) -> None:
        failures = 0
        while not self._stopping:
            if self._reply:
                deadline = self._expires - time.monotonic()
                try:
                    await wait_for(self._ended.wait(), max(deadline, 0.0))
                except TimeoutError:
                    log.warning("consumer %s: pull request lost; sending another", self.name)
                    self._close()
                continue
            if self._failed:
                failures += 1
                self._failed = False
                await asyncio.sleep(min(0.2 * 2**failures, 5.0))
                continue
            free = self.free()
            if free <= 0:
                self.slot_free.clear()
                if self.free() <= 0:
                    await self.slot_free.wait()
                continue
            self._seq += 1
            self._reply = f"{self._inbox}.{self._seq}"
            self._remaining = free
            self._expires = time.monotonic() + self.window + _GRACE
            self._ended.clear()
            request = {"batch": free, "expires": int(self.window * 1e9)}
            try:
                await self.nc.publish(self.next_subject, json.dumps(request).encode(), reply=self._reply)
                failures = 0
            except ConnectionClosedError:
                return
            except Exception as exc:  # reconnecting: try again shortly
                log.warning("consumer %s: pull request failed (%s); retrying", self.name, exc)
                self._close()
                self._failed = True

    def _close(self) -> None:
        self._reply = ""
        self._remaining = 0
        self._ended.set()

    async def _on_msg(self, msg: Msg) -> None:
        status = msg.headers.get(_STATUS) if msg.headers else None
        if status:
            if status != _HEARTBEAT and msg.subject == self._reply:
                if status not in _OVER:
                    description = msg.headers.get("Description", "") if msg.headers else ""
                    log.warning("consumer %s: pull request ended: %s %s", self.name, status, description)
                    self._failed = True
                self._close()
            return
        if self._reply:
            self._remaining -= 1
            if self._remaining <= 0:
                self._close()
        await self.deliver(msg)
