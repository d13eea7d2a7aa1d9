"""`Bus`: one NATS connection with JetStream, the subject registry and typed helpers.

Every component gets a `Bus`. Publishing goes through here so envelopes are
encoded one way and JetStream publishes carry `Nats-Msg-Id` for deduplication.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import nats
from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import PubAck
from nats.js.errors import NoStreamResponseError, ServiceUnavailableError
from nats.js.kv import KeyValue
from nats.js.object_store import ObjectStore
from pydantic import BaseModel

from bus import tracing
from bus.errors import BusConnectError, NoResponders, RequestTimeout
from bus.messages import decode, encode
from bus.subjects import Subjects
from config import BusConfig

log = logging.getLogger(__name__)

R = TypeVar("R", bound=BaseModel)
T = TypeVar("T")

MSG_ID = "Nats-Msg-Id"

# In a cluster, a stream electing a new leader (its node died) answers publishes with "no
# responders" for a moment; nothing was stored, so the publish is tried again (as NATS's Go
# client does by default), for about a second, before the error reaches the caller.
NO_STREAM_RETRIES = 4
NO_STREAM_RETRY_WAIT = 0.25

# What JetStream's API answers while it cannot serve a request for a moment: a timeout (the
# stream's or consumer's leader died and no other has taken over yet), 503 / no responders
# (an election under way, a server still starting).
UNAVAILABLE: tuple[type[Exception], ...] = (
    NatsTimeoutError,
    ServiceUnavailableError,
    NoRespondersError,
    NoStreamResponseError,
)
UNAVAILABLE_PATIENCE = 60.0  # seconds `Bus.while_unavailable` keeps trying


class Bus:
    """A connected NATS client plus the names and envelopes of one Antler installation."""

    def __init__(self, nc: NATS, config: BusConfig | None = None) -> None:
        self.nc = nc
        self.config = config or BusConfig()
        self.subjects = Subjects(self.config.prefix)
        self.js: JetStreamContext = nc.jetstream()
        self._kv: dict[str, KeyValue] = {}
        self._files: ObjectStore | None = None
        self._state: _ConnectionState | None = None

    @classmethod
    async def connect(
        cls,
        url: str,
        config: BusConfig | None = None,
        *,
        name: str = "antler",
        inbox_prefix: str | None = None,
    ) -> Bus:
        """Connect (reconnecting forever after the first success). Creating the streams and buckets
        is not a connection's job: `bus.provision.connect_and_provision` does both.

        Raises:
            BusConnectError: the first connection attempt failed.
        """
        config = config or BusConfig()
        state = _ConnectionState(url)
        options: dict[str, Any] = {
            "servers": [u.strip() for u in url.split(",")],
            "name": name,
            "connect_timeout": config.connect_timeout_seconds,
            "allow_reconnect": True,
            # A few tries for the first connection, so a wrong URL fails fast;
            # once connected, reconnect forever (set below).
            "max_reconnect_attempts": 3,
            "reconnect_time_wait": 0.5,
            "error_cb": state.on_error,
            "disconnected_cb": state.on_disconnected,
            "reconnected_cb": state.on_reconnected,
        }
        if config.token:
            options["token"] = config.token
        if config.user:
            options["user"] = config.user
            options["password"] = config.password
        if config.credentials:
            options["user_credentials"] = config.credentials
        if inbox_prefix:
            options["inbox_prefix"] = inbox_prefix  # a per-component user may subscribe only to its own
        try:
            nc = await nats.connect(**options)
        except Exception as exc:
            detail = state.last_error or exc
            raise BusConnectError(url, str(detail) or type(detail).__name__) from None
        nc.options["max_reconnect_attempts"] = -1
        state.connected = True
        bus = cls(nc, config)
        bus._state = state
        return bus

    @property
    def client_name(self) -> str:
        """The connection's name (`antler-<component>`), which spans say they came from."""
        options = getattr(self.nc, "options", None) or {}
        return str(options.get("name") or "")

    @property
    def url(self) -> str:
        server = self.nc.connected_url
        return f"nats://{server.netloc}" if server else ""

    async def publish(
        self,
        subject: str,
        message: BaseModel | bytes,
        *,
        msg_id: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> PubAck:
        """Publish to a JetStream stream and wait for it to be stored.

        With `msg_id`, a second publish of the same id inside the dedupe window is
        dropped by the server (the returned ack says `duplicate`). A stream that is
        electing a leader is given a moment (`NO_STREAM_RETRIES`).

        Raises:
            nats.js.errors.NoStreamResponseError: no stream took the message (none
                stores `subject`, or its leader is still being elected).
        """
        data = message if isinstance(message, bytes) else encode(message)
        hdrs = dict(headers or {})
        if msg_id is not None:
            hdrs[MSG_ID] = msg_id
        sent = None
        if tracing.ON:  # the trace goes on in whoever takes the message
            hdrs, sent = tracing.inject(hdrs, subject, self.client_name)
        try:
            for _ in range(NO_STREAM_RETRIES):
                try:
                    return await self.js.publish(subject, data, timeout=timeout, headers=hdrs or None)
                except NoStreamResponseError:
                    await asyncio.sleep(NO_STREAM_RETRY_WAIT)
            return await self.js.publish(subject, data, timeout=timeout, headers=hdrs or None)
        finally:
            if sent is not None:
                sent.end()

    async def publish_pipelined(
        self, subject: str, message: BaseModel | bytes, *, msg_id: str | None = None
    ) -> asyncio.Future[PubAck]:
        """Publish to JetStream without waiting for the store's ack; await the returned future later.

        Messages published this way keep their order (one connection); awaiting the
        futures (all of them, before anything depends on them) confirms storage.
        A future can stay unresolved for good when the server went away with the
        message: wait for it with a timeout and publish again (with `msg_id`, a
        message that did arrive is not stored twice).
        """
        data = message if isinstance(message, bytes) else encode(message)
        headers = {MSG_ID: msg_id} if msg_id is not None else None
        if tracing.ON:
            headers, sent = tracing.inject(headers, subject, self.client_name)
            if sent is not None:
                sent.end()
        return await self.js.publish_async(subject, data, headers=headers or None)

    async def publish_core(self, subject: str, message: BaseModel | bytes) -> None:
        """Fire-and-forget core NATS publish (control messages, not stored)."""
        data = message if isinstance(message, bytes) else encode(message)
        if not tracing.ON:
            await self.nc.publish(subject, data)
            return
        headers, sent = tracing.inject(None, subject, self.client_name)
        await self.nc.publish(subject, data, headers=headers)
        if sent is not None:
            sent.end()

    async def request(
        self, subject: str, message: BaseModel, reply_model: type[R], timeout: float = 10.0
    ) -> R:
        """Request/reply with typed envelopes.

        Raises:
            NoResponders: no service listens on `subject`.
            RequestTimeout: no reply within `timeout`.
        """
        headers, sent = tracing.inject(None, subject, self.client_name) if tracing.ON else (None, None)
        try:
            reply = await self.nc.request(subject, encode(message), timeout=timeout, headers=headers)
        except NoRespondersError:
            raise NoResponders(subject) from None
        except NatsTimeoutError:
            raise RequestTimeout(subject, timeout) from None
        finally:
            if sent is not None:
                sent.end()
        return decode(reply_model, reply.data)

    async def while_unavailable(
        self, what: str, call: Callable[[], Awaitable[T]], patience: float = UNAVAILABLE_PATIENCE
    ) -> T:
        """`await call()`, tried again while JetStream is briefly unavailable (`UNAVAILABLE`), for up
        to `patience` seconds; any other error at once.

        For what a component does once as it starts (create its durable consumer, open a bucket):
        one started while a cluster node is down waits for the new leader instead of failing. A
        timeout that came with a permissions violation is no outage: it is raised at once.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + patience
        wait = 0.25
        while True:
            began = time.monotonic()
            try:
                return await call()
            except UNAVAILABLE as exc:
                denied = self._state is not None and self._state.denied_since(began)
                if denied or loop.time() + wait > deadline:
                    raise
                reason = str(exc) or type(exc).__name__
                log.warning("%s: JetStream unavailable (%s); trying again", what, reason)
                await asyncio.sleep(wait)
                wait = min(wait * 2, 2.0)

    def on_reconnected(self, listener: Callable[[float], None]) -> Callable[[], None]:
        """Call `listener(outage_seconds)` after each reconnect; returns a function that stops it."""
        return self._listen(lambda state: state.listeners, listener)

    def on_disconnected(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener()` when the connection is lost (not when we close it); returns a function
        that stops it. The client goes on reconnecting meanwhile."""
        return self._listen(lambda state: state.lost_listeners, listener)

    def _listen(self, where: Callable[[_ConnectionState], list[Any]], listener: Any) -> Callable[[], None]:
        state = self._state
        if state is None:
            return lambda: None
        listeners = where(state)
        listeners.append(listener)

        def remove() -> None:
            if listener in listeners:
                listeners.remove(listener)

        return remove

    async def kv(self, bucket: str) -> KeyValue:
        """A KV bucket by full name (see `Subjects.*_bucket`); handles are cached."""
        handle = self._kv.get(bucket)
        if handle is None:
            if bucket in self.subjects.split_buckets:  # one bucket per partition behind one handle
                from bus.split_kv import SplitKV

                handle = SplitKV(self, bucket)
            else:
                handle = await self.while_unavailable(
                    f"KV bucket {bucket}", lambda: self.js.key_value(bucket)
                )
            self._kv[bucket] = handle
        return handle

    async def files(self) -> ObjectStore:
        """The `<prefix>_files` object store."""
        if self._files is None:
            name = self.subjects.files_store
            self._files = await self.while_unavailable(
                f"object store {name}", lambda: self.js.object_store(name)
            )
        return self._files

    async def close(self) -> None:
        """Drain (deliver what is pending, flush publishes) and close. Idempotent."""
        if self.nc.is_closed:
            return
        if self._state is not None:
            self._state.closing = True
        try:
            await self.nc.drain()
        except Exception:  # a connection already failing: closing is all that is left
            await self.nc.close()

    async def __aenter__(self) -> Bus:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _ConnectionState:
    """Logs connection trouble once per event, and stays quiet while we close on purpose.

    Tells listeners (`Bus.on_reconnected`) how long each outage lasted.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.connected = False
        self.closing = False
        self.last_error: Exception | None = None
        self.disconnected_at: float | None = None
        self.denied_at: float | None = None  # the last permissions violation (time.monotonic)
        self.listeners: list[Callable[[float], None]] = []
        self.lost_listeners: list[Callable[[], None]] = []
        self.told_in_outage = False  # an outage's first error is logged; its retries' are not

    def denied_since(self, moment: float) -> bool:
        return self.denied_at is not None and self.denied_at >= moment

    async def on_error(self, exc: Exception) -> None:
        # A refused login is what to tell, even if a later try of the first connection only saw the
        # server closing the socket (it sends the refusal and hangs up; the reset may be read first).
        if not (self.last_error is not None and "authorization" in str(self.last_error).lower()):
            self.last_error = exc
        if "permissions violation" in str(exc).lower():
            self.denied_at = time.monotonic()
        if self.connected and not self.closing:
            # Each reconnect attempt of an outage fails the same way, twice a second: once is news.
            if self.disconnected_at is None or not self.told_in_outage:
                self.told_in_outage = self.disconnected_at is not None
                log.warning("NATS error (%s): %s", self.url, exc)
            else:
                log.debug("NATS error (%s): %s", self.url, exc)

    async def on_disconnected(self) -> None:
        if self.disconnected_at is None:
            self.disconnected_at = time.monotonic()
        if not self.closing:
            log.warning("disconnected from NATS at %s; reconnecting", self.url)
            for listener in list(self.lost_listeners):
                try:
                    listener()
                except Exception:
                    log.exception("a disconnect listener failed")

    async def on_reconnected(self) -> None:
        outage = time.monotonic() - self.disconnected_at if self.disconnected_at is not None else 0.0
        self.disconnected_at = None
        self.told_in_outage = False
        log.info("reconnected to NATS at %s (after %.1fs)", self.url, outage)
        for listener in list(self.listeners):
            try:
                listener(outage)
            except Exception:
                log.exception("a reconnect listener failed")
