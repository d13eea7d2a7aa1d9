"""One active copy of an adapter, the others standing by: a lease in the bus decides which.

Some platforms allow one connection per bot (Telegram's `getUpdates` answers a second poller with
409 Conflict), and an adapter's replies to one chat must come from one process (`ReplyStream` keeps
a chat's replies in order within a process). So copies of such an adapter share nothing but a
lease (`bus.leases`, key `adapter.<name>`): the holder connects to the platform and delivers
replies; the others wait, trying for the lease every third of its TTL. When the holder dies its
lease lapses after `bus.lease_seconds`, a standby takes it and starts: the platform hands it the
updates the dead one fetched but never confirmed (an update's offset moves only with the next
poll), and the replies the dead one had not acknowledged are redelivered to it; the reply
bookkeeping (KV `replies`) lets it edit the message already shown instead of posting a second one.

A holder that stalled past the TTL keeps its lease if nobody took it meanwhile (`Leases.renew`). One
that loses it (another copy holds it now, or the bus was away for two thirds of the TTL) stops
serving and stands by again (`serve_while_active`).

Platforms that take several connections per app (Slack Socket Mode, Feishu's and DingTalk's long
connections) give each event to one of them and send it again, to any, if it is not acknowledged.
Every copy of those adapters stays connected and acknowledges an event only once the bus has it;
only their replies are leased (`deliver_replies_while_active`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

from bus import Bus, Delivery, run_consumers
from bus.leases import Leases, cancel_swallowed, renew_until_lost
from bus.messages import OutboundMessage
from bus.runtime import component_ready
from bus.tasks import cancel_and_wait
from channels.delivery.consumer import reply_consumer
from channels.errors import LeaseLost

log = logging.getLogger(__name__)

ReplyHandler = Callable[[OutboundMessage, Delivery], Awaitable[None]]


@contextlib.asynccontextmanager
async def active(bus: Bus, name: str, ttl: float) -> AsyncIterator[asyncio.Event]:
    """Wait until this process holds the lease of adapter `name`, then yield an event set if it is
    lost (the caller stops its work then: `watch`); the lease is given back on exit."""
    holder = f"{name}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    leases = Leases(bus, holder, ttl)
    await leases.open()
    key = f"adapter.{name}"
    lease = await leases.claim(key)
    if lease is None:
        log.info("%s adapter: another copy is active; standing by (%s)", name, holder)
        component_ready()  # ready to take over: that is all a standby serves
    while lease is None:
        await asyncio.sleep(leases.ttl / 3)
        lease = await leases.claim(key)
        if cancel_swallowed():
            raise asyncio.CancelledError
    log.info("%s adapter: active (%s)", name, holder)
    lost = asyncio.Event()
    done = asyncio.Event()  # not a cancellation: one can be lost in a request (`cancel_swallowed`)
    renewing = asyncio.create_task(renew_until_lost(leases, lease, lost, done), name=f"{name}-lease")
    try:
        yield lost
    finally:
        done.set()
        await asyncio.gather(renewing, return_exceptions=True)
        if not lost.is_set():
            await leases.release(lease)


async def serve_while_active(
    bus: Bus, name: str, ttl: float, serve: Callable[[asyncio.Event], Awaitable[None]]
) -> None:
    """`serve(lost)` while this process holds adapter `name`'s lease; if the lease is lost (`serve`
    raises `LeaseLost`), stand by again rather than fail: the process stays a copy that can take
    over, and `antler up`, which runs every component in one process, goes on."""
    while True:
        try:
            async with active(bus, name, ttl) as lost:
                await serve(lost)
            return
        except LeaseLost as exc:
            log.warning("%s; standing by again", exc)


async def watch(lost: asyncio.Event, name: str) -> None:
    """Until the lease is lost, then raise `LeaseLost` (one of the adapter's tasks)."""
    await lost.wait()
    raise LeaseLost(f"the {name} adapter lost its lease; stopping so that only one copy is active")


async def deliver_replies_while_active(
    bus: Bus, name: str, ttl: float, new_handler: Callable[[], ReplyHandler]
) -> None:
    """Deliver adapter `name`'s replies while this copy holds its lease; stand by otherwise.

    For platforms that take several connections at once (Slack Socket Mode, Feishu's and DingTalk's
    long connections), every copy stays connected and publishes what the platform hands it; only the
    replies are leased: a chat's replies must come from one process, in order, each edit after the
    post it edits (`ReplyStream` keeps that within a process, not across two). `new_handler()` makes
    a fresh reply handler for each time this copy becomes active (`ReplyStream.deliver`): what an
    earlier turn remembered may have been changed by another copy since, and is read from KV again.
    Runs until cancelled.
    """

    async def serve(lost: asyncio.Event) -> None:
        work = [
            asyncio.create_task(
                run_consumers(reply_consumer(bus, name, new_handler())), name=f"{name}-replies"
            ),
            asyncio.create_task(watch(lost, name), name=f"{name}-lease-watch"),
        ]
        try:
            done, _ = await asyncio.wait(work, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        finally:
            await cancel_and_wait(*work)

    await serve_while_active(bus, name, ttl, serve)
