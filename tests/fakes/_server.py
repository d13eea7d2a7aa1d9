"""Serving a fake's FastAPI app on a free loopback port, for `async with`."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, Self

import uvicorn
from fastapi import FastAPI


class Flood:
    """A platform's rate limit, as they behave: once tripped, every call of that method is refused
    until the wait it announced is over (a client that comes back early is refused again).

    A limit armed with a `key` (a chat) refuses only that chat's calls, as platforms limit each
    chat; one armed without refuses every call of the method (the bot's or app's own limit)."""

    def __init__(self) -> None:
        self._next: dict[tuple[str, str | None], float] = {}
        self._until: dict[tuple[str, str | None], float] = {}

    def arm(self, method: str, seconds: float, key: str | None = None) -> None:
        """The next call of `method` (for chat `key`, if given) trips the limit: it and every such
        call for `seconds` are refused."""
        self._next[(method, key)] = seconds

    def refusal(self, method: str, key: str | None = None) -> int | None:
        """Whole seconds this call of `method` (for chat `key`) must wait (it is refused), or None."""
        now = time.monotonic()
        scopes = [(method, None)] + ([(method, key)] if key is not None else [])
        for scope in scopes:
            until = self._until.get(scope, 0.0)
            if until > now:
                return max(1, math.ceil(until - now))
        for scope in scopes:
            if scope in self._next:
                seconds = self._next.pop(scope)
                self._until[scope] = now + seconds
                return max(1, math.ceil(seconds))
        return None


class Outbox:
    """Events for the platform's connected clients, handed out as Slack, Feishu and DingTalk do when
    an app holds several connections: each event to one client (in turn here; a random one there),
    and an event its client did not acknowledge before its connection closed is sent again to
    another (the platforms resend after their acknowledgement timeout).

    Each connection runs `serve(send, client)`; `acked(client, event_id)` when its client
    acknowledges. `receivers` says which client (its `host:port`) each event went to last.
    """

    def __init__(self, changed: Callable[[], None]) -> None:
        self._queues: dict[str, asyncio.Queue[tuple[str, Any, bool] | None]] = {}  # client -> its own
        self._backlog: list[tuple[str, Any, bool] | None] = []  # for whoever connects next
        self._unacked: dict[str, dict[str, Any]] = {}  # client -> event id -> item
        self._turn = 0
        self._changed = changed
        self.receivers: dict[str, str] = {}
        self.resent: list[str] = []  # event ids sent again because their client went away

    @property
    def clients(self) -> list[str]:
        """The clients connected now."""
        return list(self._queues)

    def _next(self, to: str | None) -> asyncio.Queue[tuple[str, Any, bool] | None] | None:
        if to in self._queues:
            return self._queues[to]
        if not self._queues:
            return None
        self._turn += 1
        return list(self._queues.values())[self._turn % len(self._queues)]

    def put(self, event_id: str, item: Any, *, lasting: bool = True, to: str | None = None) -> None:
        """Send `item` to a client (`to` that one, while it is connected: a test's pick of the
        platform's random choice); unless `lasting` is False (a ping, a notice), it is sent again if
        its client goes away without acknowledging it."""
        queue = self._next(to)
        if queue is None:
            self._backlog.append((event_id, item, lasting))
        else:
            queue.put_nowait((event_id, item, lasting))

    def close_next(self) -> None:
        """The next connection in turn is closed by the platform (after what it was sent already)."""
        queue = self._next(None)
        if queue is None:
            self._backlog.append(None)
        else:
            queue.put_nowait(None)

    def acked(self, client: str, event_id: str) -> None:
        self._unacked.get(client, {}).pop(event_id, None)

    async def serve(self, send: Callable[[Any], Awaitable[None]], client: str) -> None:
        """Send this connection its events until `close_next` picks it (returns) or it is cancelled."""
        queue: asyncio.Queue[tuple[str, Any, bool] | None] = asyncio.Queue()
        for waiting in self._backlog:
            queue.put_nowait(waiting)
        self._backlog.clear()
        self._queues[client] = queue
        unacked = self._unacked.setdefault(client, {})
        try:
            while (waiting := await queue.get()) is not None:
                event_id, item, lasting = waiting
                if lasting:
                    unacked[event_id] = item
                self.receivers[event_id] = client
                self._changed()
                await send(item)
        finally:
            del self._queues[client]
            again = [(event_id, item, True) for event_id, item in self._unacked.pop(client, {}).items()]
            self.resent.extend(event_id for event_id, _, _ in again)
            while not queue.empty():  # not sent yet: to another client
                waiting = queue.get_nowait()
                if waiting is not None:
                    again.append(waiting)
            for event_id, item, lasting in again:
                self.put(event_id, item, lasting=lasting)


class LocalServer:
    """Subclasses set `self.app` and get `port` once inside `async with` (set `port` before, to
    listen on that one: a platform coming up where a stack already expects it)."""

    app: FastAPI
    # Seconds an exit waits for calls under way to be answered (0: they are cancelled at once, as a
    # test wants; a benchmark's model answers what its stack still asked for as it stopped).
    stop_grace: int = 0

    def __init__(self) -> None:
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self.port = 0
        self.calls: list[tuple[str, dict[str, Any]]] = []  # (API method, parameters), in order
        self._new_call = asyncio.Event()
        self.flood = Flood()
        self.server_errors: dict[str, int] = {}  # method -> how many more calls fail with a 5xx
        self._holds: dict[str, asyncio.Event] = {}
        self.holding: set[str] = set()  # methods whose held call is waiting now

    def hold(self, method: str) -> asyncio.Event:
        """The next call of `method` waits (as on a slow network, before the platform sees it) until
        the returned event is set."""
        gate = self._holds[method] = asyncio.Event()
        return gate

    async def held(self, method: str) -> None:
        """A call of `method` arriving: wait first if a test holds it (`hold`)."""
        gate = self._holds.pop(method, None)
        if gate is not None:
            self.holding.add(method)
            self.changed()
            try:
                await gate.wait()
            finally:
                self.holding.discard(method)

    def break_method(self, method: str, times: int) -> None:
        """The next `times` calls of `method` fail as a platform's server errors do (HTTP 502)."""
        self.server_errors[method] = times

    def broken(self, method: str) -> bool:
        """Whether this call of `method` is one of the failures `break_method` asked for (counts it)."""
        if self.server_errors.get(method, 0) > 0:
            self.server_errors[method] -= 1
            return True
        return False

    def record(self, method: str, params: dict[str, Any]) -> None:
        self.calls.append((method, params))
        self._new_call.set()

    def changed(self) -> None:
        """Something a test may be waiting for happened (an ack, a connection, a reply)."""
        self._new_call.set()

    async def wait(self, condition: Callable[[], bool], timeout: float = 20.0) -> None:
        """Until `condition()` holds, re-checked whenever a call is recorded or `changed()` is called."""
        async with asyncio.timeout(timeout):
            while not condition():
                self._new_call.clear()
                await self._new_call.wait()

    async def wait_for(self, method: str, count: int = 1, timeout: float = 20.0) -> list[dict[str, Any]]:
        """The parameters of the first `count` calls of `method`, once that many have arrived."""
        async with asyncio.timeout(timeout):
            while True:
                found = [params for name, params in self.calls if name == method]
                if len(found) >= count:
                    return found
                self._new_call.clear()
                await self._new_call.wait()

    async def __aenter__(self) -> Self:
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:  # noqa: ASYNC110 - uvicorn offers no event for this
            await asyncio.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        assert self._task is not None
        self._server.should_exit = True
        if self.stop_grace > 0:
            self._server.config.timeout_graceful_shutdown = self.stop_grace
        else:
            self._server.force_exit = True
        await self._task
